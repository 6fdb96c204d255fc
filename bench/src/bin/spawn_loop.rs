//! Spawn baselines: how fast this machine starts short commands, with nothing else going on.
//!
//! - `spawn-loop loop <seconds>`: spawns `/bin/sh -c /bin/true` back to back (each one
//!   waited for) for `<seconds>` and prints `{"spawns":N,"seconds":S,"per_sec":R}`.
//! - `spawn-loop latency <count> <file>`: `<count>` times, notes the wall clock, spawns
//!   `/bin/sh -c 'date +%s.%N >> <file>'`, waits for it, and takes the time written minus
//!   the time noted; 20 ms pause between two. Prints `{"latencies_ms":[...]}`. The
//!   baseline of svc's trigger-to-command-start latency.
//! - `spawn-loop burst <count> <rounds> <file>`: at each of `<rounds>` whole seconds,
//!   spawns `<count>` commands `/bin/sh -c 'echo b<i> $(date +%s.%N) >> <file>'` at once
//!   (not waiting in between), then waits for them all. The baseline of svc's timer
//!   precision with `<count>` jobs due at the same second.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn sh(script: &str) -> Command {
    let mut command = Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    command
}

fn die(message: String) -> ! {
    eprintln!("spawn-loop: {message}");
    std::process::exit(1);
}

fn arg<T: std::str::FromStr>(args: &[String], index: usize, what: &str) -> T {
    args.get(index)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| die(format!("missing or invalid {what}")))
}

fn spawn_loop(seconds: f64) {
    let limit = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut spawns: u64 = 0;
    while start.elapsed() < limit {
        let status = sh("/bin/true")
            .status()
            .unwrap_or_else(|err| die(format!("cannot spawn /bin/sh: {err}")));
        if !status.success() {
            die(format!("/bin/sh -c /bin/true ended with {status}"));
        }
        spawns += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{{\"spawns\":{spawns},\"seconds\":{elapsed:.3},\"per_sec\":{:.1}}}",
        spawns as f64 / elapsed
    );
}

fn last_line_value(file: &str) -> f64 {
    let text = std::fs::read_to_string(file).unwrap_or_else(|err| die(format!("read {file}: {err}")));
    text.lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| die(format!("{file}: no timestamp on the last line")))
}

fn latency(count: usize, file: &str) {
    let script = format!("date +%s.%N >> '{file}'");
    let mut latencies = Vec::with_capacity(count);
    for _ in 0..count {
        let sent = now_secs();
        let status = sh(&script)
            .status()
            .unwrap_or_else(|err| die(format!("cannot spawn /bin/sh: {err}")));
        if !status.success() {
            die(format!("the date command ended with {status}"));
        }
        latencies.push(format!("{:.3}", (last_line_value(file) - sent) * 1000.0));
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("{{\"latencies_ms\":[{}]}}", latencies.join(","));
}

fn burst(count: usize, rounds: usize, file: &str) {
    for _ in 0..rounds {
        // Sleep to the next whole second (at least 0.2 s away).
        let now = now_secs();
        let due = (now + 0.2).floor() + 1.0;
        std::thread::sleep(Duration::from_secs_f64(due - now));
        let children: Vec<_> = (0..count)
            .map(|i| {
                sh(&format!("echo b{i} $(date +%s.%N) >> '{file}'"))
                    .spawn()
                    .unwrap_or_else(|err| die(format!("cannot spawn /bin/sh: {err}")))
            })
            .collect();
        for mut child in children {
            let _ = child.wait();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("loop") => spawn_loop(arg(&args, 1, "seconds")),
        Some("latency") => latency(arg(&args, 1, "count"), &arg::<String>(&args, 2, "file")),
        Some("burst") => burst(
            arg(&args, 1, "count"),
            arg(&args, 2, "rounds"),
            &arg::<String>(&args, 3, "file"),
        ),
        _ => die("usage: spawn-loop loop <seconds> | latency <count> <file> | burst <count> <rounds> <file>".into()),
    }
}
