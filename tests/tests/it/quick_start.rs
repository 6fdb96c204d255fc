//! The README's quick start, as a newcomer runs it: the example configuration of the
//! repository, started by an unprivileged user (as themselves), says where its UI is,
//! runs its jobs, and shows no warning from start to a Ctrl-C; the Ctrl-C (SIGINT to the
//! terminal's process group) stops it cleanly, with exit 0 and nothing left running.

use std::io::{BufRead as _, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use svc_tests::{PORT_COLLISIONS, binaries, free_port, lost_its_port, wait_for, wait_until};

/// The unprivileged user the test runs the example as when it runs as root: `nobody`.
const NOBODY: u32 = 65_534;

/// Copies `from` into `to` recursively, files and directories.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Lines the process wrote on one of its outputs, gathered by a thread.
fn gather(output: impl std::io::Read + Send + 'static, into: Arc<Mutex<Vec<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines().map_while(Result::ok) {
            into.lock().expect("lines").push(line);
        }
    });
}

/// The example, started as the README says, and what it said.
struct Started {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// The UI's address as it printed it (`http://127.0.0.1:<port>`).
    base: String,
}

/// Starts the example in `dir` on a free port instead of the README's fixed one (where
/// it listens and where its JobHttp calls it). A port free when chosen may be taken by
/// another test's service before the example binds it: another is chosen then, at most
/// [`PORT_COLLISIONS`] times.
async fn start_on_a_free_port(dir: &Path, examples: &Path, root: bool) -> Started {
    let mut address = "127.0.0.1:31937".to_string();
    for _ in 0..=PORT_COLLISIONS {
        let chosen = format!("127.0.0.1:{}", free_port());
        for file in ["svc.conf", "job_http.d/self-check.conf"] {
            let path = examples.join("etc/svc").join(file);
            let text = std::fs::read_to_string(&path).expect("read");
            assert!(text.contains(&address), "{file}: {text}");
            std::fs::write(&path, text.replace(&address, &chosen)).expect("write");
        }
        address = chosen;
        let mut command = Command::new(&binaries().controller);
        command
            .arg("--config")
            .arg(examples.join("etc/svc/svc.conf"))
            .current_dir(dir)
            // A terminal's foreground job: a process group of its own, which Ctrl-C signals.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if root {
            command.uid(NOBODY).gid(NOBODY);
        }
        let mut child = command.spawn().expect("start svc-controller");
        let lines = Arc::new(Mutex::new(Vec::new()));
        gather(child.stdout.take().expect("stdout"), lines.clone());
        gather(child.stderr.take().expect("stderr"), lines.clone());
        let said = || lines.lock().expect("lines").join("\n");
        let base: Option<String> =
            wait_for(Duration::from_secs(30), "the UI's address", async || {
                let text = said();
                if let Some(start) = text.find("listening on http://") {
                    let start = start + "listening on ".len();
                    return Some(text[start..].split(';').next().map(str::to_string));
                }
                // Exited before it listened: the port was taken, or a real failure.
                child.try_wait().expect("wait").map(|_| None)
            })
            .await;
        match base {
            Some(base) => return Started { child, lines, base },
            None if lost_its_port(&said()) => continue,
            None => panic!("the example exited before it listened:\n{}", said()),
        }
    }
    panic!("every free port chosen was taken before the example could listen on it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_starts_without_a_warning_and_stops_cleanly_on_ctrl_c() {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let dir = tempfile::tempdir().expect("tempdir");
    let examples = dir.path().join("examples");
    // What the repository holds, not what an earlier start wrote there (`var/`).
    for part in ["etc", "public"] {
        copy_tree(
            &repository.join("examples").join(part),
            &examples.join(part),
        );
    }
    let root = nix::unistd::Uid::effective().is_root();
    if root {
        let status = Command::new("chown")
            .args(["-R", &format!("{NOBODY}:{NOBODY}")])
            .arg(dir.path())
            .status()
            .expect("chown");
        assert!(status.success());
    }
    let Started {
        mut child,
        lines,
        base,
    } = start_on_a_free_port(dir.path(), &examples, root).await;
    let said = || lines.lock().expect("lines").join("\n");
    assert!(said().contains(&format!("UI at {base}/svc")), "{}", said());
    // The interval job and the JobHttp run at once (ended before the Ctrl-C: a run
    // cancelled by a stop is a failed run, which is rightly a warning).
    wait_until(
        Duration::from_secs(30),
        "self_check's first call",
        async || said().contains("run succeeded job=\"self_check\" counter=1"),
    )
    .await;
    let client = reqwest::Client::new();
    wait_until(Duration::from_secs(30), "hello's first run", async || {
        let Ok(answer) = client
            .get(format!("{base}/svc/api/environment"))
            .send()
            .await
        else {
            return false;
        };
        let json: serde_json::Value = answer.json().await.unwrap_or_default();
        json["data"]["jobs"]["hello"]["status"] == "success"
    })
    .await;

    let group = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    killpg(group, Signal::SIGINT).expect("Ctrl-C");
    let status = wait_for(Duration::from_secs(30), "the stop", async || {
        child.try_wait().expect("wait")
    })
    .await;
    let text = said();
    assert_eq!(status.code(), Some(0), "{text}");
    assert!(text.contains("stopped"), "{text}");
    let warnings: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" WARN ") || line.contains("warning:"))
        .collect();
    assert!(
        warnings.is_empty(),
        "the quick start warned a newcomer:\n{}\n\nall it said:\n{text}",
        warnings.join("\n")
    );
}
