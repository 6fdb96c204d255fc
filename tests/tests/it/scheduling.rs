//! Schedules as operators see them: cron expressions in a job's time zone through
//! `svc-controller next-runs` (daylight-saving changes marked), the next slots `--check`
//! shows, the explanation of a bad expression, and the Environment's `timezone`.

use std::path::Path;
use std::process::Command;

use svc_tests::{EX_CONFIG, TestService, binaries, job_section};

fn run(config: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(&binaries().controller)
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("run svc-controller");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn tree() -> TestService {
    TestService::builder()
        .svc("timezone = America/New_York")
        .job_file(
            "backup",
            job_section(
                "backup",
                &[
                    "schedule = 30 2 * * *",
                    "timezone = Europe/Berlin",
                    "command = true",
                ],
            ),
        )
        .job_file(
            "report",
            job_section("report", &["schedule = 0 9 * * MON-FRI", "command = true"]),
        )
        .job_file(
            "hook",
            job_section("hook", &["path = /hook", "command = true"]),
        )
        // A JobHttp with a Job's ID: `--job report` names both.
        .job_http_file(
            "report",
            "[job.http \"report\"]\ninterval = 1h\nhttp_url = http://127.0.0.1:9/report\n",
        )
        .build()
}

#[test]
fn next_runs_prints_each_slot_in_the_zone_and_in_utc() {
    let svc = tree();
    let (code, out, err) = run(
        svc.config_path(),
        &[
            "next-runs",
            "--job",
            "BACKUP",
            "--count",
            "3",
            "--from",
            "2026-03-28T00:00:00Z",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "2026-03-28T02:30:00+01:00  2026-03-28T01:30:00Z",
            // 02:30 does not exist in Berlin that night: the end of the gap.
            "2026-03-29T03:00:00+02:00  2026-03-29T01:00:00Z  \
             (daylight-saving change: +01:00 -> +02:00)",
            "2026-03-30T02:30:00+02:00  2026-03-30T00:30:00Z",
        ],
        "{out}"
    );
    // Every job, each after its header; the main section's zone for a job without one.
    let (code, all, err) = run(
        svc.config_path(),
        &[
            "next-runs",
            "--count",
            "1",
            "--from",
            "2026-07-03T00:00:00Z",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        all.contains("# job backup: 30 2 * * * (Europe/Berlin)\n"),
        "{all}"
    );
    assert!(
        all.contains(
            "# job report: 0 9 * * MON-FRI (America/New_York)\n\
                      2026-07-03T09:00:00-04:00  2026-07-03T13:00:00Z\n"
        ),
        "{all}"
    );
    assert!(all.contains("# job hook: no timer"), "{all}");
    // One job without a timer says so rather than print nothing.
    let (code, out, err) = run(svc.config_path(), &["next-runs", "--job", "hook"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "# job hook: no timer (runs when started by hand or by a webhook)\n"
    );
    // A Job and a JobHttp sharing the ID: each under its header, so neither is taken for
    // the other; the interval counts whole hours from --from.
    let (code, out, err) = run(
        svc.config_path(),
        &[
            "next-runs",
            "--job",
            "report",
            "--count",
            "1",
            "--from",
            "2026-07-03T00:00:00Z",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "# job report: 0 9 * * MON-FRI (America/New_York)",
            "2026-07-03T09:00:00-04:00  2026-07-03T13:00:00Z",
            "# job_http report: every 1h",
            "2026-07-02T21:00:00-04:00  2026-07-03T01:00:00Z",
        ],
        "{out}"
    );
    // Errors.
    let (code, _, err) = run(svc.config_path(), &["next-runs", "--job", "nope"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no job or http job has the ID \"nope\""),
        "{err}"
    );
    let (code, _, err) = run(svc.config_path(), &["next-runs", "--from", "yesterday"]);
    assert_eq!(code, 2);
    assert!(err.contains("RFC 3339"), "{err}");
}

#[test]
fn check_shows_the_next_slots_and_explains_a_bad_expression() {
    let svc = tree();
    let (code, out, err) = run(svc.config_path(), &["--check"]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains("job backup: 30 2 * * * (Europe/Berlin): next "))
        .unwrap_or_else(|| panic!("no slots for backup in:\n{out}"));
    assert_eq!(line.matches(", ").count(), 2, "three slots: {line}");

    let bad = TestService::builder()
        .job_file(
            "bad",
            job_section(
                "bad",
                &[
                    "schedule = 0 25 * * *",
                    "timezone = Mars/Olympus",
                    "command = true",
                ],
            ),
        )
        .build();
    let (code, out, err) = run(bad.config_path(), &["--check"]);
    assert_eq!(code, EX_CONFIG, "{out}");
    assert!(
        err.contains("schedule = \"0 25 * * *\": line")
            && err.contains("cron field 2 (hour) is invalid: \"25\""),
        "{err}"
    );
    assert!(
        err.contains("timezone = \"Mars/Olympus\"") && err.contains("unknown time zone"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_shows_each_jobs_zone() {
    let mut svc = tree();
    svc.start().await;
    let env = svc.get("/svc/api/environment").await;
    env.assert_status(200);
    let jobs = &env.data()["jobs"];
    assert_eq!(jobs["backup"]["timezone"], "Europe/Berlin");
    assert_eq!(jobs["backup"]["schedule"], "30 2 * * *");
    assert_eq!(jobs["report"]["timezone"], "America/New_York");
    assert_eq!(jobs["hook"]["timezone"], "America/New_York");
    let next = jobs["backup"]["next_run"].as_str().unwrap_or_default();
    let next = chrono::DateTime::parse_from_rfc3339(next).expect("next_run is RFC 3339");
    assert!(next > chrono::Utc::now(), "{next}");
}

/// A reader that stops early (`| head`) ends the tool as it ends any Unix tool, by
/// SIGPIPE, without a panic on standard error.
#[test]
fn next_runs_ends_quietly_when_its_reader_stops() {
    use std::io::{BufRead as _, BufReader, Read as _};
    use std::os::unix::process::ExitStatusExt as _;
    let svc = tree();
    let mut child = Command::new(&binaries().controller)
        .arg("--config")
        .arg(svc.config_path())
        .args(["next-runs", "--count", "20000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run svc-controller");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("a first line");
    // The pipe is closed here, long before the megabytes of 20,000 slots a job are
    // written (far more than a pipe holds).
    assert!(first.starts_with("# job"), "{first}");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
