//! Faults around the controller:
//!
//! - the log directory full (a 64 KiB tmpfs filled up) or read-only: the run fails with a
//!   clear error (job status `failed`, the reason in the controller's log), the service
//!   keeps answering, and the next run succeeds once space or write access returns. These
//!   need root (mount); without root they are skipped with a loud message;
//! - a job that fills the disk of the whole `var` tree: the service's own records (a
//!   spent signature, an audit entry, the run's end) are still written, from the space
//!   reserve it gives back, and new runs are refused with a 503 saying why until there
//!   is room again;
//! - JobHttp targets that hang, reset the connection, redirect endlessly or answer with
//!   10 MB: each run ends within its `http_timeout`, with a clear log line, and the runner
//!   keeps at most 64 KiB of a body. The targets are tiny servers in this file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use svc_tests::{TestService, WAIT, job_section, proc, wait_until};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

// ----- a tmpfs for the logs ---------------------------------------------------------------

/// A tmpfs mounted by the test; unmounted (lazily, so it works even while the controller
/// still has a file open there) when dropped, also when the test fails.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir)
            .unwrap_or_else(|err| panic!("create {}: {err}", dir.display()));
        run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
                &path_arg(dir),
            ],
        );
        Tmpfs(dir.to_path_buf())
    }

    fn remount(&self, options: &str) {
        run(
            "mount",
            &["-o", &format!("remount,{options}"), &path_arg(&self.0)],
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let status = Command::new("umount").arg("-l").arg(&self.0).status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!(
                "WARNING: could not unmount the test tmpfs at {}",
                self.0.display()
            );
        }
    }
}

fn path_arg(path: &Path) -> String {
    path.display().to_string()
}

fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("run {program}: {err}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Fills the file system of `dir` with a file `filler`; returns its size.
fn fill(dir: &Path) -> u64 {
    use std::io::Write as _;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).expect("create the filler");
    let mut size = 0u64;
    let block = [0x55u8; 4096];
    while file.write_all(&block).is_ok() {
        size += block.len() as u64;
    }
    // The last partial page too.
    while file.write_all(&[0x55]).is_ok() {
        size += 1;
    }
    size
}

/// Waits until the state file of `id` shows run `counter` ended with `status`.
async fn wait_state(svc: &TestService, id: &str, counter: u64, status: &str) {
    wait_until(
        WAIT,
        &format!("state of {id}: counter {counter}, status {status}"),
        async || {
            svc.state_file(id).is_some_and(|state| {
                state.get("counter").map(String::as_str) == Some(&counter.to_string())
                    && state.get("status").map(String::as_str) == Some(status)
            })
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_or_read_only_log_directory_fails_runs_cleanly_and_recovers() {
    // It mounts a tmpfs (CI runs as root).
    if !svc_tests::running_as_root(
        "a_full_or_read_only_log_directory_fails_runs_cleanly_and_recovers",
    ) {
        return;
    }
    let builder = TestService::builder().job_file(
        "writer",
        job_section(
            "writer",
            &[
                "path = /writer",
                "log_retention = 100",
                "command = echo written-$SVC_JOB_COUNTER",
            ],
        ),
    );
    let log_root = builder.dir_base().join("var/log/svc");
    let mut svc = builder.build();
    // Declared after the service: unmounted before the service's directory is removed.
    let tmpfs = Tmpfs::mount(&log_root, "64k");
    svc.start().await;

    // 1. It works.
    svc.trigger("/writer", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("writer", 1, WAIT)
        .await
        .assert_status("success");

    // 2. Full.
    let filled = fill(&log_root);
    let response = svc.trigger("/writer", b"", &[]).await;
    response.assert_status(200);
    wait_state(&svc, "writer", 2, "failed").await;
    svc.wait_job_status("writer", "failed", WAIT).await;
    let stderr = svc.stderr();
    assert!(
        stderr.contains("No space left on device"),
        "the controller's log names the error:\n{stderr}"
    );
    // The service keeps answering, old logs included.
    assert!(svc.log_content("writer", 1).await.contains("written-1"));
    let full_log = svc.job_log("writer", 2);
    println!(
        "log directory full ({filled} bytes of filler): run 2 failed, its log {:?}",
        full_log
            .as_ref()
            .map(|log| (log.status.clone(), log.content().len()))
    );
    if let Some(log) = &full_log {
        log.assert_status("fail");
    }

    // 3. Space returns. A run refused for a full disk looks at it again at most once a
    // second (`util/space_reserve.rs`), so a trigger right after the removal may still
    // get the 503 that says why; one within the bounded wait is accepted.
    std::fs::remove_file(log_root.join("filler")).expect("remove the filler");
    wait_until(
        WAIT,
        "triggers accepted once the disk has room",
        async || {
            let again = svc.trigger("/writer", b"", &[]).await;
            assert!(
                again.status == 200 || (again.status == 503 && again.raw.contains("is full")),
                "{}\nthe service said:\n{}",
                again.raw,
                svc.stderr()
            );
            again.status == 200
        },
    )
    .await;
    let log = svc.wait_run_finished("writer", 3, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "written-3"),
        "{}",
        log.content()
    );
    svc.wait_job_status("writer", "success", WAIT).await;

    // 4. Read-only.
    tmpfs.remount("ro");
    svc.trigger("/writer", b"", &[]).await.assert_status(200);
    wait_state(&svc, "writer", 4, "failed").await;
    let stderr = svc.stderr();
    assert!(
        stderr.contains("Read-only file system"),
        "the controller's log names the error:\n{stderr}"
    );
    svc.environment().await;
    assert!(
        svc.job_log("writer", 4).is_none(),
        "no log could be created"
    );

    // 5. Writable again.
    tmpfs.remount("rw");
    svc.trigger("/writer", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("writer", 5, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "written-5"),
        "{}",
        log.content()
    );
    let status = svc.stop().await;
    assert_eq!(status.code(), Some(0), "{status:?}");
}

// ----- hostile JobHttp targets --------------------------------------------------------------

/// What a tiny server does with each connection.
#[derive(Debug, Clone, Copy)]
enum Behaviour {
    /// Reads the request and never answers.
    Hang,
    /// Reads the request, then resets the connection.
    Reset,
    /// Answers every request with a redirect to the next URL.
    RedirectForever,
    /// Answers 200 with a 10 MB body (after a pause, so the runner can be measured).
    TenMegabytes,
    /// Answers 200 with a short body.
    Small,
}

#[derive(Debug, Default)]
struct Seen {
    requests: AtomicUsize,
    body_bytes_written: AtomicU64,
}

const TEN_MB: u64 = 10 * 1024 * 1024;

/// Starts a server on a free loopback port; returns its address and what it saw.
async fn serve(behaviour: Behaviour) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let seen = Arc::new(Seen::default());
    let counters = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let counters = counters.clone();
            tokio::spawn(handle(stream, behaviour, counters));
        }
    });
    (address, seen)
}

async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

async fn handle(mut stream: TcpStream, behaviour: Behaviour, seen: Arc<Seen>) {
    loop {
        let Some(head) = read_head(&mut stream).await else {
            return;
        };
        let number = seen.requests.fetch_add(1, Ordering::SeqCst) + 1;
        match behaviour {
            Behaviour::Hang => {
                tokio::time::sleep(Duration::from_secs(600)).await;
                return;
            }
            Behaviour::Reset => {
                let _ = stream.set_zero_linger();
                return;
            }
            Behaviour::RedirectForever => {
                let answer = format!(
                    "HTTP/1.1 302 Found\r\nLocation: /loop/{number}\r\nContent-Length: 0\r\n\r\n"
                );
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
            Behaviour::Small => {
                let answer = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nsmall";
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
            Behaviour::TenMegabytes => {
                let _ = head;
                let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {TEN_MB}\r\n\r\n");
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(400)).await;
                let chunk = vec![b'z'; 64 * 1024];
                let mut written = 0;
                while written < TEN_MB {
                    if stream.write_all(&chunk).await.is_err() {
                        break;
                    }
                    written += chunk.len() as u64;
                    seen.body_bytes_written.store(written, Ordering::SeqCst);
                }
                return;
            }
        }
    }
}

fn job_http(name: &str, address: &str, path: &str) -> String {
    format!(
        "[job.http \"{name}\"]\nhttp_url = http://{address}{path}\ninterval = 1h\n\
         http_timeout = 2s\n"
    )
}

/// The finished logs of run 1 of the JobHttps `ids`, each with how long after `since` it
/// was first seen.
async fn first_runs(
    svc: &TestService,
    ids: &[&str],
    since: Instant,
) -> Vec<(svc_tests::LogFile, Duration)> {
    let mut found: Vec<Option<(svc_tests::LogFile, Duration)>> = vec![None; ids.len()];
    wait_until(
        WAIT,
        &format!("run 1 of JobHttps {ids:?} finished"),
        async || {
            for (index, id) in ids.iter().enumerate() {
                if found[index].is_none() {
                    found[index] = svc
                        .log_files("job_http", id)
                        .into_iter()
                        .find(|log| log.counter == 1 && log.status != "started")
                        .map(|log| (log, since.elapsed()));
                }
            }
            found.iter().all(Option::is_some)
        },
    )
    .await;
    found.into_iter().flatten().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_resetting_and_redirecting_targets_end_in_bounded_time() {
    let (hang, _) = serve(Behaviour::Hang).await;
    let (reset, _) = serve(Behaviour::Reset).await;
    let (redirect, redirects) = serve(Behaviour::RedirectForever).await;
    let started = Instant::now();
    let svc = TestService::builder()
        .job_http_file(
            "targets",
            [
                job_http("hang", &hang, "/hang"),
                job_http("reset", &reset, "/reset"),
                job_http("redirect", &redirect, "/loop/0"),
            ]
            .join("\n"),
        )
        .start()
        .await;

    let mut runs = first_runs(&svc, &["hang", "reset", "redirect"], started)
        .await
        .into_iter();
    let (log, took) = runs.next().expect("hang");
    let content = log.content();
    println!("hang: ended after {took:?}: {:?}", log.texts().last());
    log.assert_status("fail");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(2 + 4),
        "ended after {took:?}"
    );
    assert!(
        log.texts()
            .last()
            .is_some_and(|last| last == "=== run 1 finished: fail: timed out after 2s"),
        "{content}"
    );
    assert!(content.contains("--- request failed: "), "{content}");

    let (log, took) = runs.next().expect("reset");
    let content = log.content();
    println!("reset: ended after {took:?}: {:?}", log.texts().last());
    log.assert_status("fail");
    assert!(took < Duration::from_secs(4), "ended after {took:?}");
    let failure = log
        .texts()
        .into_iter()
        .find(|t| t.starts_with("--- request failed: "))
        .unwrap_or_else(|| panic!("a request failed line:\n{content}"));
    assert!(
        failure.contains("reset") || failure.contains("closed"),
        "the line says the connection was reset or closed: {failure}"
    );

    let (log, took) = runs.next().expect("redirect");
    let content = log.content();
    let requests = redirects.requests.load(Ordering::SeqCst);
    println!(
        "redirect loop: ended after {took:?} and {requests} requests: {:?}",
        log.texts().last()
    );
    log.assert_status("fail");
    assert!(took < Duration::from_secs(4), "ended after {took:?}");
    assert!(content.to_lowercase().contains("redirect"), "{content}");
    assert!(
        requests <= 11,
        "{requests} requests: the redirects are bounded"
    );

    for id in ["hang", "reset", "redirect"] {
        let job = &svc.environment().await["http_jobs"][id];
        assert_eq!(job["status"], "failed", "{job}");
    }
}

/// The highest `VmHWM` (KiB) of the runners of `svc` seen while `until` has not
/// returned something, polling every 2 ms; `None` when no runner was seen.
async fn runner_peak_while<T>(
    svc: &TestService,
    mut until: impl FnMut() -> Option<T>,
) -> (T, Option<u64>) {
    let socket = svc
        .dir_base()
        .join("var/run/svc/controller/runner.sock")
        .display()
        .to_string();
    let deadline = Instant::now() + WAIT;
    let mut peak = None;
    loop {
        for (pid, _) in proc::find_by_cmdline(&socket) {
            let hwm = std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|text| {
                    text.lines().find_map(|line| {
                        line.strip_prefix("VmHWM:")
                            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                    })
                });
            if let Some(hwm) = hwm {
                peak = Some(peak.unwrap_or(0).max(hwm));
            }
        }
        if let Some(value) = until() {
            return (value, peak);
        }
        assert!(
            Instant::now() < deadline,
            "the run did not end within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_mb_answer_is_cut_at_64_kib() {
    let (big, seen) = serve(Behaviour::TenMegabytes).await;
    let (small, _) = serve(Behaviour::Small).await;

    // The same runner on a small answer, for comparison.
    let reference = TestService::builder()
        .job_http_file("small", job_http("small", &small, "/small"))
        .start()
        .await;
    let (log, small_peak) = runner_peak_while(&reference, || {
        reference
            .log_files("job_http", "small")
            .into_iter()
            .find(|log| log.counter == 1 && log.status != "started")
    })
    .await;
    log.assert_status("success");
    drop(reference);

    let started = Instant::now();
    let svc = TestService::builder()
        .job_http_file("big", job_http("big", &big, "/big"))
        .start()
        .await;
    let (log, big_peak) = runner_peak_while(&svc, || {
        svc.log_files("job_http", "big")
            .into_iter()
            .find(|log| log.counter == 1 && log.status != "started")
    })
    .await;
    let took = started.elapsed();
    let content = log.content();
    let size = std::fs::metadata(&log.path).map_or(0, |m| m.len());
    let controller = svc.pid().expect("the controller runs");
    let controller_hwm = std::fs::read_to_string(format!("/proc/{controller}/status"))
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                line.strip_prefix("VmHWM:")
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
        });
    println!(
        "10 MB answer: run ended after {took:?}; the server got {} KiB of its body out \
         before the runner hung up; log {size} bytes; runner VmHWM {big_peak:?} KiB \
         (small answer: {small_peak:?} KiB); controller VmHWM {controller_hwm:?} KiB",
        seen.body_bytes_written.load(Ordering::SeqCst) / 1024
    );
    log.assert_status("success");
    assert!(took < Duration::from_secs(2 + 4), "ended after {took:?}");
    assert!(
        content.contains("--- response body cut at 65536 bytes"),
        "the log says the body was cut:\n{}",
        &content[..content.len().min(2000)]
    );
    assert!(
        content.contains("--- response body of ") && content.contains("bytes was cut"),
        "{}",
        &content[..content.len().min(2000)]
    );
    assert!(
        size < 100 * 1024,
        "the log holds at most 64 KiB of body (plus its lines), not {size} bytes"
    );
    if let (Some(big), Some(small)) = (big_peak, small_peak) {
        assert!(
            big < small + 8 * 1024,
            "the runner's peak memory {big} KiB is far above its peak on a small answer \
             ({small} KiB)"
        );
    }
    assert!(
        big_peak.is_some(),
        "the runner of the 10 MB answer was measured"
    );
}

// ----- a job that fills the disk ----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_filling_the_disk_leaves_the_services_records_written() {
    // The review's finding: a job filling the disk made other runs fail to create their
    // logs, state files go unwritten, and a signed pause get 500 (the replay store could
    // not record it).
    // It mounts a tmpfs (CI runs as root).
    if !svc_tests::running_as_root("a_job_filling_the_disk_leaves_the_services_records_written") {
        return;
    }
    let builder = TestService::builder()
        .job_file(
            "hog",
            job_section(
                "hog",
                &[
                    // Started by its timer at once: nothing signed or audited before the
                    // disk is full, so the pause's records need room of their own.
                    "interval = 24h",
                    // Fills the disk, says so (an empty file needs no room), and stays.
                    "command = head -c 200000000 /dev/zero > fill; touch full; sleep 120",
                ],
            ),
        )
        .job_file(
            "other",
            job_section("other", &["path = /other", "command = true"]),
        );
    // State, logs, working directories and the audit log on one small disk.
    let var = builder.dir_base().join("var");
    let disk = Tmpfs::mount(&var, "64m");
    let mut svc = builder.build();
    svc.start().await;
    let reserve = var.join("run/svc/space-reserve");
    let reserved = reserve.is_file();
    let work = var.join("lib/svc/job/hog");

    wait_until(WAIT, "the hog to fill the disk", async || {
        work.join("full").exists()
    })
    .await;
    // While the disk is full: a signed pause is spent (the first spent signature makes
    // the store's file), recorded and audited.
    let paused = svc.pause("other").await;
    assert_eq!(paused.code(), Some(200), "{}\n{}", paused.raw, svc.stderr());
    // The audit log's writer thread takes the entry without the answer waiting for it.
    wait_until(WAIT, "the pause in the audit log", async || {
        std::fs::read_to_string(var.join("log/svc/audit.log")).is_ok_and(|audit| {
            audit
                .lines()
                .any(|l| l.contains("\"pause\"") && l.contains("other"))
        })
    })
    .await;
    svc.resume("other").await.assert_status(200);
    // New runs are refused, saying why.
    let refused = svc.trigger("/other", b"{}", &[]).await;
    refused.assert_status(503);
    assert!(refused.message().contains("is full"), "{}", refused.raw);
    // The hog's end is recorded.
    svc.cancel("hog").await.assert_status(200);
    wait_state(&svc, "hog", 1, "failed").await;
    // Runs are allowed again once there is room.
    std::fs::remove_file(work.join("fill")).expect("remove the filler");
    wait_until(WAIT, "runs to be allowed again", async || {
        svc.trigger("/other", b"{}", &[]).await.code() == Some(200)
    })
    .await;
    svc.wait_run_finished("other", 1, WAIT)
        .await
        .assert_status("success");
    assert!(reserved, "the reserve is allocated at start");
    assert!(
        std::fs::metadata(&reserve).is_ok_and(|m| m.len() > 0),
        "the reserve is taken back"
    );
    svc.stop().await;
    drop(disk);
}
