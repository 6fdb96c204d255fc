//! Run counters are reserved in blocks: a run within the reservation starts without a
//! state write, a clean stop gives the unused counters back (no gap), and a crash skips
//! them (a counter is never used twice).

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_gives_reserved_counters_back() {
    let mut svc = service();
    svc.start().await;
    run_once(&svc, 1).await;
    run_once(&svc, 2).await;
    let state = state_after(&svc, 2).await;
    assert_eq!(
        state.get("counter_reserved").map(String::as_str),
        Some("100"),
        "{state:?}"
    );
    svc.stop().await;
    let state = svc.state_file("count").expect("state file");
    assert_eq!(state.get("counter").map(String::as_str), Some("2"));
    assert!(!state.contains_key("counter_reserved"), "{state:?}");
    svc.start().await;
    run_once(&svc, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_skips_the_reserved_counters_and_never_reuses_one() {
    let mut svc = service();
    svc.start().await;
    run_once(&svc, 1).await;
    state_after(&svc, 1).await;
    svc.kill9().await;
    svc.start().await;
    // Counters 2 to 100 may have been handed out before the crash: the next run is 101.
    run_once(&svc, 101).await;
    let counters: Vec<u64> = svc
        .job_logs("count")
        .iter()
        .map(|log| log.counter)
        .collect();
    assert_eq!(counters, vec![1, 101]);
    let log = svc.job_log("count", 101).expect("log of run 101");
    assert!(log.content().contains("run 101"), "{}", log.content());
}
