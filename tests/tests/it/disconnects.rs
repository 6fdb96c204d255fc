//! Clients that close the connection right after sending a signed action, before reading
//! the answer: the action is done to its end all the same (its effect, its spent
//! signature and its audit entry), never half of it.

use serde_json::Value;
use svc_tests::{TestService, WAIT, fresh_epoch, hmac_sha256_hex, job_section, wait_for};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

/// Sends `POST path` with `body` and `headers` over a connection of its own, and closes
/// the connection as soon as the request is written, reading nothing.
async fn post_and_leave(svc: &TestService, path: &str, body: &str, headers: &[(&str, &str)]) {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
        svc.listen_address(),
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut stream = TcpStream::connect(svc.listen_address())
        .await
        .expect("connect");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    drop(stream);
}

/// A Job action (`pause`, `resume`, `trigger`, `cancel`) for `id`, signed with the main
/// secret, sent by a client that leaves at once. Returns the signed body.
async fn act_and_leave(svc: &TestService, action: &str, id: &str) -> String {
    let body = format!("_svc_epoch={}&id={id}", fresh_epoch());
    let signature = hmac_sha256_hex(svc.secret(), &body);
    let headers = [
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("X-Svc-Sign", signature.as_str()),
    ];
    post_and_leave(svc, &format!("/svc/api/job_exec/{action}"), &body, &headers).await;
    body
}

/// The audit log's complete lines, oldest first.
fn audit(svc: &TestService) -> Vec<Value> {
    let path = svc.dir_base().join("var/log/svc/audit.log");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_inclusive('\n')
        .filter(|line| line.ends_with('\n'))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}")))
        .collect()
}

/// Waits for the audit log's entry number `n` (from 1), and returns it.
async fn audit_entry(svc: &TestService, n: usize, what: &str) -> Value {
    wait_for(WAIT, what, async || audit(svc).get(n - 1).cloned()).await
}

/// The value of `key` in job `id`'s state file.
fn state_value(svc: &TestService, id: &str, key: &str) -> Option<String> {
    svc.state_file(id).and_then(|state| state.get(key).cloned())
}

/// 50 pauses and resumes, each from a client that closes the connection right after
/// writing it: each is done (the state file says so) and audited, in order, and each
/// signature is spent (sent again, it is a replay).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pauses_and_resumes_whose_client_leaves_at_once_are_done_and_audited() {
    let svc = TestService::builder()
        .job_file(
            "jobs",
            job_section("hello", &["schedule = 0 0 1 1 *", "command = echo hello"]),
        )
        .start()
        .await;
    let mut sent = Vec::new();
    for n in 1..=50 {
        let (action, paused) = match n % 2 {
            1 => ("pause", "true"),
            _ => ("resume", "false"),
        };
        let body = act_and_leave(&svc, action, "hello").await;
        let entry = audit_entry(&svc, n, &format!("action {n}'s audit entry")).await;
        assert_eq!(entry["action"], action, "{entry}");
        assert_eq!(entry["actor"]["kind"], "signed", "{entry}");
        assert_eq!(entry["job"]["id"], "hello", "{entry}");
        assert_eq!(
            (&entry["result"], &entry["status"]),
            (&"ok".into(), &200.into()),
            "{entry}"
        );
        // Recorded after it was saved.
        assert_eq!(
            state_value(&svc, "hello", "paused").as_deref(),
            Some(paused),
            "action {n}"
        );
        sent.push((action, body));
    }
    for (action, body) in &sent {
        let signature = hmac_sha256_hex(svc.secret(), body);
        let again = svc
            .post(
                &format!("/svc/api/job_exec/{action}"),
                body.as_bytes(),
                &[
                    ("content-type", "application/x-www-form-urlencoded"),
                    ("x-svc-sign", signature.as_str()),
                ],
            )
            .await;
        again.assert_status(401);
        assert!(again.message().contains("replay"), "{}", again.raw);
    }
    assert_eq!(
        audit(&svc).len(),
        50,
        "one entry per action, replays counted instead"
    );
    assert_eq!(svc.job_status("hello").await, "");
}

/// The audit log's entries of `action`, oldest first.
fn audited(svc: &TestService, action: &str) -> Vec<Value> {
    audit(svc)
        .into_iter()
        .filter(|entry| entry["action"] == action)
        .collect()
}

/// Waits for the `n`th audit entry of `action` (from 1) and checks that it was done for
/// job `id` by `actor` (a kind of actor).
async fn audited_ok(svc: &TestService, action: &str, n: usize, id: &str, actor: &str) {
    let what = format!("{action} {n} in the audit log");
    let entry = wait_for(WAIT, &what, async || {
        audited(svc, action).get(n - 1).cloned()
    })
    .await;
    assert_eq!(entry["job"]["id"], id, "{entry}");
    assert_eq!(entry["actor"]["kind"], actor, "{entry}");
    assert_eq!(entry["result"], "ok", "{entry}");
}

/// Runs now and cancels, each from a client that closes the connection right after
/// writing it: each run starts and is cancelled, and each action is audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_now_and_cancels_whose_client_leaves_at_once_are_done_and_audited() {
    let svc = TestService::builder()
        .job_file(
            "jobs",
            job_section(
                "hold",
                &["path = /hold", "timeout = 60s", "command = sleep 60"],
            ),
        )
        .start()
        .await;
    for round in 1..=5 {
        act_and_leave(&svc, "trigger", "hold").await;
        svc.wait_run_started("hold", round, WAIT).await;
        audited_ok(&svc, "run_now", round as usize, "hold", "signed").await;
        act_and_leave(&svc, "cancel", "hold").await;
        let log = svc.wait_run_finished("hold", round, WAIT).await;
        log.assert_status("fail");
        audited_ok(&svc, "cancel", round as usize, "hold", "signed").await;
    }
    let counters: Vec<u64> = svc.job_logs("hold").iter().map(|log| log.counter).collect();
    assert_eq!(counters, [1, 2, 3, 4, 5], "one run per run now");
    assert_eq!(audit(&svc).len(), 10, "one entry per action");
}

/// `max_job_running = 1`: a delivery for a job that waits for the permit, from a client
/// that closes the connection right after writing it, is accepted (saved in the job's
/// state file and audited) and runs once when the permit is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_whose_client_leaves_at_once_waits_for_the_permit_and_runs() {
    let builder = TestService::builder().svc("max_job_running = 1");
    let go = builder.dir_base().join("go");
    let hold = job_section(
        "hold",
        &[
            "path = /hold",
            "timeout = 60s",
            &format!(
                "command = while [ ! -e {} ]; do sleep 0.05; done",
                go.display()
            ),
        ],
    );
    let hook = job_section(
        "hook",
        &[
            "path = /hook",
            "command = echo body $(cat \"$SVC_REQUEST_BODY\")",
        ],
    );
    let svc = builder
        .job_file("jobs", format!("{hold}\n{hook}"))
        .start()
        .await;
    svc.trigger("/hold", b"", &[]).await.assert_status(200);
    svc.wait_run_started("hold", 1, WAIT).await;

    let signature = hmac_sha256_hex(svc.secret(), "delivered");
    let headers = [("X-Svc-Sign", signature.as_str())];
    post_and_leave(&svc, "/svc/api/job/run/hook", "delivered", &headers).await;
    audited_ok(&svc, "trigger", 2, "hook", "webhook").await;
    let queued = state_value(&svc, "hook", "queued");
    assert_eq!(queued.as_deref(), Some("webhook"), "saved while it waits");
    assert!(svc.job_log("hook", 1).is_none(), "it waits for the permit");

    std::fs::write(&go, b"").expect("release the holding run");
    let log = svc.wait_run_finished("hook", 1, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "body delivered"),
        "{}",
        log.content()
    );
    let counters: Vec<u64> = svc.job_logs("hook").iter().map(|log| log.counter).collect();
    assert_eq!(counters, [1], "it ran once");
}
