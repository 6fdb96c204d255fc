//! What each run used: the CPU time and peak memory of a run of commands are measured
//! (from the reaped processes' resource usage) and kept in the run history
//! (`GET /svc/api/job_exec/runs`, field `usage`) and in the metrics; a JobHttp call,
//! which runs no process, has none. The service here gives runs no cgroups
//! (`run_cgroups = false`), so that the reaped processes' usage is what is tested on
//! every host; `run_cgroups.rs` tests the usage read from a run's cgroup.
//!
//! The workloads are known in CPU time, not in wall time, so that a loaded machine does
//! not change what is recorded: the burner loops until the kernel has charged it half a
//! second of CPU (its own `/proc/<pid>/stat`), and the allocator holds 64 MiB in one
//! process (`tail` keeps the whole last line of its input, and `/dev/zero` has none).

use serde_json::Value;
use svc_tests::prom::parse_openmetrics;
use svc_tests::{TestService, WAIT, fresh_epoch, job_section, wait_for};

/// CPU ticks (USER_HZ, 100 a second on Linux) the burner spends before it stops.
const BURN_TICKS: u64 = 50;
/// Bytes the allocator holds at once.
const HOLD_BYTES: u64 = 64 << 20;

/// A shell loop that ends once the kernel has charged its shell `BURN_TICKS`.
fn burner() -> String {
    format!(
        "t=0; while [ $t -lt {BURN_TICKS} ]; do i=0; \
         while [ $i -lt 300 ]; do i=$((i+1)); done; \
         read -r _ _ _ _ _ _ _ _ _ _ _ _ _ u s _ < /proc/$$/stat; t=$((u+s)); done"
    )
}

fn service() -> TestService {
    let burn = format!("command = {}", burner());
    // The burner runs in an orphan (its subshell exits at once), which the run's init
    // reaps, not the runner; the command only waits, asleep, for the file it leaves.
    let orphan = format!(
        "command = (sh -c '{}; touch \"$TMPDIR/burnt\"' &); \
         while [ ! -e \"$TMPDIR/burnt\" ]; do sleep 0.05; done",
        burner()
    );
    let hold = format!("command = head -c {HOLD_BYTES} /dev/zero | tail -n 1 | wc -c");
    TestService::builder()
        .svc("run_cgroups = false")
        .job_file("burn", job_section("burn", &["path = /burn", &burn]))
        .job_file("hold", job_section("hold", &["path = /hold", &hold]))
        .job_file(
            "orphan",
            job_section("orphan", &["path = /orphan", &orphan]),
        )
        .job_http_file(
            "call",
            "[job.http \"call\"]\nhttp_url = /svc/api/nothing-here\n",
        )
        .build()
}

/// The newest run in the history of `id` (`kind`: `job_exec` or `job_http`), once run
/// 1 is there.
async fn first_run(svc: &TestService, kind: &str, id: &str) -> Value {
    wait_for(WAIT, &format!("run 1 of {id} in its history"), async || {
        let answer = svc.runs(kind, id, "").await;
        answer.assert_status(200);
        answer.data().as_array()?.first().cloned()
    })
    .await
}

fn number(run: &Value, field: &str) -> u64 {
    run["usage"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("no usage.{field} in {run}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_time_and_peak_memory_of_known_workloads_are_recorded() {
    let mut svc = service();
    svc.start().await;
    for path in ["/burn", "/hold", "/orphan"] {
        svc.trigger(path, b"", &[]).await.assert_status(200);
    }
    svc.job_http_trigger(&format!("id=call&_svc_epoch={}", fresh_epoch()))
        .await
        .assert_status(200);

    let burn = first_run(&svc, "job_exec", "burn").await;
    assert_eq!(burn["status"], "success", "{burn}");
    assert_eq!(burn["usage"]["measured_by"], "rusage", "{burn}");
    let cpu_ms = number(&burn, "cpu_user_ms") + number(&burn, "cpu_system_ms");
    // At least what the burner saw charged (ticks are whole 10 ms, the usage counts
    // finer); at most that plus its last round of the loop, its start and its exit,
    // which take milliseconds of CPU however loaded the machine is.
    let least = BURN_TICKS * 10;
    assert!(
        (least - 10..=least * 3 / 2).contains(&cpu_ms),
        "{cpu_ms} ms of CPU recorded for a {least} ms burner: {burn}"
    );
    // A burner of CPU, not of memory: a few MiB at most.
    assert!(number(&burn, "peak_memory_bytes") < 32 << 20, "{burn}");

    // The orphan's CPU time counts too: the runner reaps the run's init before it
    // measures.
    let orphan = first_run(&svc, "job_exec", "orphan").await;
    assert_eq!(orphan["status"], "success", "{orphan}");
    let orphan_ms = number(&orphan, "cpu_user_ms") + number(&orphan, "cpu_system_ms");
    assert!(
        (least - 10..=least * 2).contains(&orphan_ms),
        "{orphan_ms} ms of CPU recorded for a {least} ms orphan: {orphan}"
    );

    let hold = first_run(&svc, "job_exec", "hold").await;
    assert_eq!(hold["status"], "success", "{hold}");
    let peak = number(&hold, "peak_memory_bytes");
    assert!(
        (HOLD_BYTES..=HOLD_BYTES * 5 / 2).contains(&peak),
        "{peak} bytes of peak memory recorded for {HOLD_BYTES} held: {hold}"
    );

    let call = first_run(&svc, "job_http", "call").await;
    assert_eq!(call["http_status"], 404, "{call}");
    assert!(
        call.get("usage").is_none(),
        "a JobHttp call has no usage: {call}"
    );

    // The metrics add the CPU time per job and keep the last peak.
    let scrape = svc.get("/svc/api/metrics").await;
    assert_eq!(scrape.status, 200, "{}", scrape.raw);
    let text = scrape.raw;
    let metrics = parse_openmetrics(&text);
    let cpu = |mode| {
        metrics
            .value(
                "svc_job_cpu_seconds_total",
                &[("kind", "job"), ("job_id", "burn"), ("mode", mode)],
            )
            .unwrap_or_else(|| panic!("no {mode} CPU of burn in:\n{text}"))
    };
    let seconds = cpu("user") + cpu("system");
    assert!(
        (seconds - cpu_ms as f64 / 1000.0).abs() < 0.002,
        "{seconds} s in the metrics, {cpu_ms} ms in the history"
    );
    assert_eq!(
        metrics.value(
            "svc_job_last_run_peak_memory_bytes",
            &[("kind", "job"), ("job_id", "hold")],
        ),
        Some(peak as f64),
        "{text}"
    );
    assert!(
        metrics
            .value(
                "svc_job_cpu_seconds_total",
                &[("kind", "job_http"), ("job_id", "call"), ("mode", "user")],
            )
            .is_none(),
        "{text}"
    );
}
