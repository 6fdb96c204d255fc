//! Descriptors the controller inherits do not reach the jobs: whoever starts the
//! service (a shell, a supervisor, a deployment tool) may leave descriptors open without
//! close-on-exec, and before, every command of every job got them (a log file, a socket
//! of the supervisor's) whatever user it ran as. The runner now marks every descriptor
//! above the standard streams close-on-exec before it executes a command.

use svc_tests::{TestService, WAIT, job_section, parse_log_lines};

/// The descriptor number the controller is started with, on top of its streams.
const INHERITED: u32 = 9;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_inherited_by_the_controller_is_closed_for_jobs() {
    let builder = TestService::builder().job_file(
        "fds",
        job_section(
            "fds",
            &[
                "path = /fds",
                &format!(
                    "command = if [ -e /proc/$$/fd/{INHERITED} ]; then echo fd-leaked; \
                     else echo fd-closed; fi; for f in /proc/$$/fd/*; do readlink $f; done \
                     | grep -v -e '^pipe:' -e '^/dev/null$' -e '/fd$' | tr '\\n' ' '; \
                     echo others-end"
                ),
            ],
        ),
    );
    // Opened by the shell that then becomes the controller: a redirection on `exec`
    // stays open, without close-on-exec, in the program it runs.
    let file = builder.dir_base().join("inherited.txt");
    std::fs::write(&file, "a file of whoever started the service\n").expect("write the file");
    let script = format!("exec \"$@\" {INHERITED}<'{}'", file.display());
    let mut svc = builder.wrapper(&["sh", "-c", &script, "sh"]).build();
    svc.start().await;
    // The set-up holds: the controller has the descriptor.
    let pid = svc.pid().expect("the controller's pid");
    let held = std::fs::read_link(format!("/proc/{pid}/fd/{INHERITED}"))
        .expect("the controller holds the inherited descriptor");
    assert_eq!(held, file);

    svc.trigger("/fds", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("fds", 1, WAIT)
        .await
        .assert_status("success");
    let content = svc.log_content("fds", 1).await;
    let texts: Vec<String> = parse_log_lines(&content)
        .into_iter()
        .map(|line| line.text.trim().to_string())
        .collect();
    assert!(texts.iter().any(|t| t == "fd-closed"), "{content}");
    // The command has its standard streams and nothing else: every descriptor of its
    // shell is /dev/null or a pipe (its output to the runner, and the shell's own pipes
    // and their saved copies, which come and go with its pipelines), or the directory
    // the listing reads.
    assert!(texts.iter().any(|t| t == "others-end"), "{content}");
}
