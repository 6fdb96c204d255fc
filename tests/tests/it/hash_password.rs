//! `svc-controller hash-password` at a terminal (a pseudo-terminal made by the test):
//! the password is asked twice and never echoed; from a pipe, one line is read.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::termios::{LocalFlags, tcgetattr};
use svc_tests::binaries;

const PASSWORD: &str = "correct-horse-42";
const LIMIT: Duration = Duration::from_secs(15);

/// The controller's `hash-password` with a pseudo-terminal as its controlling terminal
/// and standard streams, driven like a person: each answer is typed only once the prompt
/// is shown and the terminal's echo is off. Returns the exit status and everything the
/// terminal showed.
fn at_terminal(answers: &[&str]) -> (Option<i32>, String) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the pty"));
    let mut command = Command::new(&binaries().controller);
    command
        .arg("hash-password")
        .stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave));
    // SAFETY: between fork and exec only async-signal-safe calls: setsid, and ioctl
    // making the terminal (already standard input) the controlling one, as a login does.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("spawn hash-password");
    drop(command);
    drop(pty.slave);

    let master = std::fs::File::from(pty.master);
    let mut reader = master.try_clone().expect("dup the master");
    let (chunks_tx, chunks) = mpsc::channel::<Vec<u8>>();
    let reader_thread = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Ends with EIO once the last holder of the terminal exits.
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            if chunks_tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut shown = String::new();
    let read_until = |needle: &str, shown: &mut String| {
        let deadline = Instant::now() + LIMIT;
        while !shown.contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            match chunks.recv_timeout(left) {
                Ok(chunk) => shown.push_str(&String::from_utf8_lossy(&chunk)),
                Err(_) => panic!("the terminal never showed {needle:?}; it showed:\n{shown}"),
            }
        }
    };
    let mut writer = master.try_clone().expect("dup the master");
    let mut prompts_seen = 0;
    for (i, answer) in answers.iter().enumerate() {
        let prompt = if i == 0 {
            "Password: "
        } else {
            "Password again: "
        };
        read_until(prompt, &mut shown);
        prompts_seen += 1;
        // The prompt comes before the echo is turned off: wait for that, as a person's
        // typing would only ever come later.
        let deadline = Instant::now() + LIMIT;
        while tcgetattr(&master)
            .expect("tcgetattr")
            .local_flags
            .contains(LocalFlags::ECHO)
        {
            assert!(Instant::now() < deadline, "the echo was never turned off");
            std::thread::sleep(Duration::from_millis(5));
        }
        writer
            .write_all(format!("{answer}\n").as_bytes())
            .expect("type");
    }
    assert_eq!(prompts_seen, answers.len());
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "hash-password did not exit");
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(writer);
    drop(master);
    while let Ok(chunk) = chunks.recv_timeout(Duration::from_secs(2)) {
        shown.push_str(&String::from_utf8_lossy(&chunk));
    }
    let _ = reader_thread.join();
    (status.code(), shown)
}

#[test]
fn at_a_terminal_the_password_is_asked_twice_and_never_echoed() {
    let (status, shown) = at_terminal(&[PASSWORD, PASSWORD]);
    assert_eq!(status, Some(0), "{shown}");
    assert!(
        shown.contains("$argon2id$"),
        "the hash is printed:\n{shown}"
    );
    assert!(
        !shown.contains(PASSWORD),
        "the password never appears on the terminal:\n{shown}"
    );
}

#[test]
fn at_a_terminal_two_different_answers_are_refused() {
    let (status, shown) = at_terminal(&[PASSWORD, "something-else"]);
    assert_eq!(status, Some(1), "{shown}");
    assert!(shown.contains("differ"), "{shown}");
    assert!(!shown.contains("$argon2id$"), "{shown}");
}

#[test]
fn from_a_pipe_one_line_is_read() {
    let mut child = Command::new(&binaries().controller)
        .arg("hash-password")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hash-password");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{PASSWORD}\n").as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout.starts_with("$argon2id$"), "{stdout}");
    let hash = stdout.trim();
    assert!(
        svc_controller::security::password::verify_password(PASSWORD, hash),
        "the hash verifies the password"
    );
}
