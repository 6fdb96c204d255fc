//! Per-run resource limits of a job (see the README's job keys and docs/reliability.md):
//!
//! - `limit_nproc = N`: RLIMIT_NPROC of the commands (processes of the job's user);
//! - `limit_nofile = N`: RLIMIT_NOFILE (open files per process);
//! - `limit_as = SIZE`: RLIMIT_AS (address space per process), bytes with an optional
//!   `K`, `M` or `G` suffix (powers of 1024);
//! - `limit_memory = SIZE`: where runs have no cgroups (here: `run_cgroups = false`),
//!   RLIMIT_DATA (heap and anonymous mappings per process), same syntax; a job sets it
//!   or `limit_as`, not both (with cgroups it is the run's limit: `run_cgroups.rs`);
//! - `limit_pids = N`: without cgroups, the RLIMIT_NPROC of a job that sets no
//!   `limit_nproc`.
//!
//! Each limit is set as both the soft and the hard limit of every command (the commands
//! cannot raise it back); a job without the key keeps the limits the controller has.

use svc_tests::{TestService, WAIT, job_section};

/// Triggers `path` and returns the status and the line texts of run 1 of job `id`.
async fn output_of_run(svc: &TestService, path: &str, id: &str) -> (String, Vec<String>) {
    svc.trigger(path, b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished(id, 1, WAIT).await;
    (log.status.clone(), log.texts())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_are_set_soft_and_hard_for_the_commands() {
    let svc = TestService::builder()
        .job_file(
            "limited",
            job_section(
                "limited",
                &[
                    "path = /limited",
                    "limit_nofile = 64",
                    "limit_as = 512M",
                    "limit_nproc = 200",
                    "command = echo nofile=$(ulimit -Sn)/$(ulimit -Hn)",
                    "command = echo as=$(ulimit -Sv)/$(ulimit -Hv)",
                    // dash spells RLIMIT_NPROC `-p`.
                    "command = echo nproc=$(ulimit -Sp)/$(ulimit -Hp)",
                ],
            ),
        )
        .job_file(
            "unlimited",
            job_section(
                "unlimited",
                &["path = /unlimited", "command = echo nofile=$(ulimit -Sn)"],
            ),
        )
        .start()
        .await;
    let (status, texts) = output_of_run(&svc, "/limited", "limited").await;
    assert_eq!(status, "success", "{texts:?}");
    for line in ["nofile=64/64", "as=524288/524288", "nproc=200/200"] {
        assert!(texts.iter().any(|t| t == line), "{line} in {texts:?}");
    }
    // A job without limits keeps the controller's.
    let own = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .expect("getrlimit")
        .0;
    let (status, texts) = output_of_run(&svc, "/unlimited", "unlimited").await;
    assert_eq!(status, "success", "{texts:?}");
    let shown = if own == libc::RLIM_INFINITY {
        "unlimited".to_owned()
    } else {
        own.to_string()
    };
    assert!(
        texts.iter().any(|t| *t == format!("nofile={shown}")),
        "nofile={shown} in {texts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_nofile_stops_a_command_that_opens_too_many_files() {
    let svc = TestService::builder()
        .job_file(
            "files",
            job_section(
                "files",
                &[
                    "path = /files",
                    "limit_nofile = 16",
                    // paste opens all 30 files at once.
                    "command = for i in $(seq 30); do echo $i > f$i; done",
                    "command = paste f* > /dev/null && echo opened-all",
                ],
            ),
        )
        .start()
        .await;
    let (status, texts) = output_of_run(&svc, "/files", "files").await;
    assert_eq!(status, "fail", "{texts:?}");
    assert!(
        texts.iter().any(|t| t.contains("Too many open files")),
        "{texts:?}"
    );
    assert!(!texts.iter().any(|t| t == "opened-all"), "{texts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_nproc_stops_a_fork_bomb_of_the_jobs_user() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: RLIMIT_NPROC is per user and needs the job to run as nobody (root)");
        return;
    }
    let marker = &svc_tests::proc::marker("sleep 300.7101");
    let svc = TestService::builder()
        .job_file(
            "forks",
            job_section(
                "forks",
                &[
                    "path = /forks",
                    "user = nobody",
                    "limit_nproc = 20",
                    "timeout = 10s",
                    // 60 background sleeps; dash gives up at the first fork that fails.
                    &format!(
                        "command = i=0; while [ $i -lt 60 ]; do {marker} & i=$((i+1)); done; \
                         echo forked-all; wait"
                    ),
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/forks", b"", &[]).await.assert_status(200);
    // Count the sleeps while the run goes on.
    let mut most = 0;
    let log = svc_tests::wait_for(WAIT, "run 1 of forks finished", async || {
        most = most.max(svc_tests::proc::find_by_cmdline(marker).len());
        svc.job_log("forks", 1)
            .filter(|log| log.status != "started")
    })
    .await;
    let texts = log.texts();
    println!("at most {most} sleeps ran at once; log: {texts:?}");
    log.assert_status("fail");
    assert!(
        texts.iter().any(|t| t.to_lowercase().contains("fork")),
        "the shell says it cannot fork: {texts:?}"
    );
    assert!(!texts.iter().any(|t| t == "forked-all"), "{texts:?}");
    assert!(
        most < 20,
        "{most} sleeps of nobody ran at once under limit_nproc = 20"
    );
    assert!(svc_tests::proc::find_by_cmdline(marker).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_as_stops_a_command_that_allocates_too_much() {
    let svc = TestService::builder()
        .job_file(
            "memory",
            job_section(
                "memory",
                &[
                    "path = /memory",
                    "limit_as = 64M",
                    // dd allocates its 200 MiB block at once; it cannot within a 64 MiB
                    // address space.
                    &format!("command = {DD_200M}"),
                ],
            ),
        )
        .job_file(
            "free",
            job_section("free", &["path = /free", &format!("command = {DD_200M}")]),
        )
        .start()
        .await;
    let (status, texts) = output_of_run(&svc, "/memory", "memory").await;
    assert_eq!(status, "fail", "{texts:?}");
    assert!(
        texts.iter().any(|t| t.contains("memory exhausted")),
        "{texts:?}"
    );
    assert!(!texts.iter().any(|t| t == "allocated"), "{texts:?}");
    // The same command succeeds without the limit.
    let (status, texts) = output_of_run(&svc, "/free", "free").await;
    assert_eq!(status, "success", "{texts:?}");
    assert!(texts.iter().any(|t| t == "allocated"), "{texts:?}");
}

/// Allocates a 200 MiB buffer in one piece (dd's block), then says `allocated`.
const DD_200M: &str = "dd if=/dev/zero of=/dev/null bs=200M count=1 && echo allocated";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_memory_caps_the_heap_of_each_command_without_cgroups() {
    let svc = TestService::builder()
        .svc("run_cgroups = false")
        .job_file(
            "memory",
            job_section(
                "memory",
                &[
                    "path = /memory",
                    "limit_memory = 64M",
                    "command = echo data=$(ulimit -Sd)/$(ulimit -Hd) as=$(ulimit -Sv)",
                    &format!("command = {DD_200M}"),
                ],
            ),
        )
        .job_file(
            "free",
            job_section("free", &["path = /free", &format!("command = {DD_200M}")]),
        )
        .start()
        .await;
    let (status, texts) = output_of_run(&svc, "/memory", "memory").await;
    assert_eq!(status, "fail", "{texts:?}");
    // RLIMIT_DATA in KiB, soft and hard; the address space is left as it was.
    let own_as = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_AS)
        .expect("getrlimit")
        .0;
    let shown_as = if own_as == libc::RLIM_INFINITY {
        "unlimited".to_owned()
    } else {
        (own_as / 1024).to_string()
    };
    let line = format!("data=65536/65536 as={shown_as}");
    assert!(texts.contains(&line), "{line} in {texts:?}");
    assert!(
        texts.iter().any(|t| t.contains("memory exhausted")),
        "{texts:?}"
    );
    assert!(!texts.iter().any(|t| t == "allocated"), "{texts:?}");
    let (status, texts) = output_of_run(&svc, "/free", "free").await;
    assert_eq!(status, "success", "{texts:?}");
    assert!(texts.iter().any(|t| t == "allocated"), "{texts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_bad_limit_values_with_file_section_key_and_value() {
    let svc = TestService::builder()
        .job_file(
            "bad",
            [
                job_section("a", &["path = /a", "command = true", "limit_nofile = lots"]),
                job_section("b", &["path = /b", "command = true", "limit_as = 10X"]),
                job_section("c", &["path = /c", "command = true", "limit_nproc = 0"]),
                job_section("d", &["path = /d", "command = true", "limit_as = -1"]),
                job_section("e", &["path = /e", "command = true", "limit_memory = 1K"]),
                job_section(
                    "f",
                    &[
                        "path = /f",
                        "command = true",
                        "limit_as = 1G",
                        "limit_memory = 512M",
                    ],
                ),
            ]
            .join("\n"),
        )
        .job_http_file(
            "http",
            "[job.http \"h\"]\nhttp_url = http://127.0.0.1:1/\ninterval = 1h\nlimit_nofile = 10\n",
        )
        .build();
    let output = svc.check().await;
    let text = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(svc_tests::EX_CONFIG), "{text}");
    for (section, key, value) in [
        ("job \"a\"", "limit_nofile", "lots"),
        ("job \"b\"", "limit_as", "10X"),
        ("job \"c\"", "limit_nproc", "0"),
        ("job \"d\"", "limit_as", "-1"),
        ("job \"e\"", "limit_memory", "1K"),
        ("job \"f\"", "limit_memory", "512M"),
        // JobHttp calls are made by the runner itself: the keys are not theirs.
        ("job.http \"h\"", "limit_nofile", "10"),
    ] {
        assert!(
            text.lines()
                .any(|line| line.contains(section) && line.contains(key) && line.contains(value)),
            "a problem naming [{section}] {key} = {value}:\n{text}"
        );
    }

    // Valid values load, and the Environment shows them.
    std::fs::remove_file(svc.job_d().join("bad.conf")).expect("remove bad.conf");
    std::fs::remove_file(svc.dir_base().join("etc/svc/job_http.d/http.conf"))
        .expect("remove http.conf");
    std::fs::write(
        svc.job_d().join("good.conf"),
        job_section(
            "good",
            &[
                "path = /good",
                "command = true",
                "limit_nofile = 1024",
                "limit_nproc = 100",
                "limit_as = 2G",
            ],
        ),
    )
    .expect("write good.conf");
    std::fs::write(
        svc.job_d().join("heap.conf"),
        job_section(
            "heap",
            &["path = /heap", "command = true", "limit_memory = 256M"],
        ),
    )
    .expect("write heap.conf");
    let output = svc.check().await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let mut svc = svc;
    svc.start().await;
    let job = svc.job("good").await;
    assert_eq!(job["limit_nofile"], 1024, "{job}");
    assert_eq!(job["limit_nproc"], 100, "{job}");
    assert_eq!(job["limit_as"], 2u64 * 1024 * 1024 * 1024, "{job}");
    let job = svc.job("heap").await;
    assert_eq!(job["limit_memory"], 256u64 * 1024 * 1024, "{job}");
    assert!(job.get("limit_as").is_none(), "{job}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_pids_without_cgroups_is_the_users_process_limit() {
    let svc = TestService::builder()
        .svc("run_cgroups = false")
        .job_file(
            "pids",
            job_section(
                "pids",
                &[
                    "path = /pids",
                    "limit_pids = 300",
                    "command = echo nproc=$(ulimit -Sp)/$(ulimit -Hp)",
                ],
            ),
        )
        .job_file(
            "both",
            job_section(
                "both",
                &[
                    "path = /both",
                    "limit_pids = 300",
                    "limit_nproc = 250",
                    "command = echo nproc=$(ulimit -Sp)/$(ulimit -Hp)",
                ],
            ),
        )
        .start()
        .await;
    let (status, texts) = output_of_run(&svc, "/pids", "pids").await;
    assert_eq!(status, "success", "{texts:?}");
    assert!(texts.contains(&"nproc=300/300".to_string()), "{texts:?}");
    // A job's own limit_nproc wins.
    let (status, texts) = output_of_run(&svc, "/both", "both").await;
    assert_eq!(status, "success", "{texts:?}");
    assert!(texts.contains(&"nproc=250/250".to_string()), "{texts:?}");
    assert!(
        svc.stderr().contains("runs get no cgroups"),
        "{}",
        svc.stderr()
    );
}
