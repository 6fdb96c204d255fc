//! The sandbox's walk made once by the runner fork server and inherited by the runners
//! it forks (`proto/src/sandbox/walk.rs`), with the real controller and runner: a file
//! created beside the way to the protected paths after a run is readable by the very
//! next run (the server walks again once a directory on the way changed), and the
//! protected paths stay unreadable in every run made from the inherited walk.

use svc_tests::{TestService, WAIT, job_section};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_made_beside_the_way_is_readable_by_the_next_run() {
    let builder = TestService::builder();
    let base = builder.dir_base().to_path_buf();
    let fresh = base.join("fresh.txt");
    let config = base.join("etc/svc/svc.conf");
    let read_fresh = format!(
        "command = cat {} 2>&1 || echo fresh-unread-$((40 + 2))",
        fresh.display()
    );
    let read_config = format!(
        "command = head -c 0 {} 2>&1 && echo config-read-$((40 + 2)) || echo config-refused-$((40 + 2))",
        config.display()
    );
    // The log shows each command before its output: the outputs are told apart from
    // the commands by the shell's arithmetic (`-$((40 + 2))` prints `-42`).
    let svc = builder
        .job_file(
            "walker",
            job_section("walker", &["path = /walker", &read_fresh, &read_config]),
        )
        .start()
        .await;
    for counter in 1..=4u64 {
        if counter == 2 {
            // After run 1: the server's walk, made for run 1's runner, did not have it.
            std::fs::write(&fresh, "fresh-content\n").expect("write the fresh file");
        }
        svc.trigger("/walker", b"", &[]).await.assert_status(200);
        let log = svc.wait_run_finished("walker", counter, WAIT).await;
        let text = log.content();
        assert_eq!(log.status, "success", "run {counter}: {text}");
        assert!(text.contains("config-refused-42"), "run {counter}: {text}");
        assert!(!text.contains("config-read-42"), "run {counter}: {text}");
        match counter {
            1 => assert!(text.contains("fresh-unread-42"), "run {counter}: {text}"),
            // Run 2 may have a runner started ahead, before the file was made: its
            // sandbox is a snapshot of that time, as documented. The runners of runs 3
            // and 4 were forked after it was made.
            2 => {}
            _ => assert!(
                text.contains("fresh-content"),
                "run {counter} did not read the file made beside the way: {text}"
            ),
        }
    }
}
