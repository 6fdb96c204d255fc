//! Run numbers follow each other without a gap and are never used twice: a run does not
//! write its state file as it starts (its log, created durably first, records its
//! number), and a start, after a clean stop or a crash, numbers the next run after the
//! highest number on disk.

use svc_tests::{TestService, WAIT, job_section};

fn service() -> TestService {
    TestService::builder()
        .job_file(
            "count",
            job_section(
                "count",
                &["path = /count", "command = echo run $SVC_JOB_COUNTER"],
            ),
        )
        .build()
}

async fn run_once(svc: &TestService, counter: u64) {
    svc.trigger("/count", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("count", counter, WAIT)
        .await
        .assert_status("success");
}

/// The state file once the end of run `counter` is saved.
async fn state_after(
    svc: &TestService,
    counter: u64,
) -> std::collections::BTreeMap<String, String> {
    svc_tests::wait_for(WAIT, "the run's end in the state file", async || {
        svc.state_file("count").filter(|state| {
            state.get("counter").map(String::as_str) == Some(&counter.to_string())
                && state.get("status").map(String::as_str) == Some("success")
        })
    })
    .await
    .into_iter()
    .collect()
}

fn counters(svc: &TestService) -> Vec<u64> {
    svc.job_logs("count")
        .iter()
        .map(|log| log.counter)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_leaves_no_gap() {
    let mut svc = service();
    svc.start().await;
    run_once(&svc, 1).await;
    run_once(&svc, 2).await;
    let state = state_after(&svc, 2).await;
    assert!(!state.contains_key("counter_reserved"), "{state:?}");
    svc.stop().await;
    let state = svc.state_file("count").expect("state file");
    assert_eq!(state.get("counter").map(String::as_str), Some("2"));
    svc.start().await;
    run_once(&svc, 3).await;
    assert_eq!(counters(&svc), [1, 2, 3]);
}

/// A kill, then a start over a state file that an earlier release left with numbers
/// reserved up to 100: the next run is 2, not 101, and its log is its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_leaves_no_gap_and_never_reuses_a_number() {
    let mut svc = service();
    svc.start().await;
    run_once(&svc, 1).await;
    state_after(&svc, 1).await;
    svc.kill9().await;
    let path = svc.state_path("count");
    let text = std::fs::read_to_string(&path).expect("state file");
    let reserved = text.replace("counter = 1\n", "counter = 1\ncounter_reserved = 100\n");
    assert_ne!(reserved, text);
    std::fs::write(&path, reserved).expect("write the state file");

    svc.start().await;
    run_once(&svc, 2).await;
    assert_eq!(counters(&svc), [1, 2]);
    let log = svc.job_log("count", 2).expect("log of run 2");
    assert!(log.content().contains("run 2"), "{}", log.content());
}
