//! Webhooks (endpoint 9): the three `auth_kind`s, replay protection of codehost delivery
//! IDs and patchhost nonces (across a restart), the refusals (401, 404, 412, 429), what
//! the command sees of the request, and that the answer does not wait for the run.
//!
//! Every test starts its own controller on its own temporary `dir_base`.

use std::time::{Duration, Instant};

use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey};
use svc_tests::{ApiResponse, TestService, WAIT, hmac_sha1_hex, hmac_sha256_hex, job_section};

/// GitHub's documented example: secret, body and `X-Hub-Signature-256`.
const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const GITHUB_BODY: &[u8] = b"Hello, World!";
const GITHUB_SIGNATURE: &str =
    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A codehost job `name` on path `/<name>` with GitHub's example secret.
fn codehost_job(name: &str, command: &str) -> String {
    job_section(
        name,
        &[
            &format!("path = /{name}"),
            "auth_kind = codehost",
            &format!("secret = {GITHUB_SECRET}"),
            &format!("command = {command}"),
        ],
    )
}

/// Posts `body` to `/<path>` signed the GitHub way (`X-Hub-Signature-256`), with the
/// delivery ID `delivery` when given.
async fn github_delivery(
    svc: &TestService,
    path: &str,
    body: &[u8],
    delivery: Option<&str>,
) -> ApiResponse {
    let signature = format!("sha256={}", hmac_sha256_hex(GITHUB_SECRET, body));
    let mut headers = vec![
        ("X-Hub-Signature-256", signature.as_str()),
        ("X-GitHub-Event", "push"),
    ];
    if let Some(delivery) = delivery {
        headers.push(("X-GitHub-Delivery", delivery));
    }
    svc.trigger_unsigned(path, body, &headers).await
}

/// Counters of the runs of `id` that have a log on disk.
fn run_counters(svc: &TestService, id: &str) -> Vec<u64> {
    let mut counters: Vec<u64> = svc.job_logs(id).iter().map(|f| f.counter).collect();
    counters.dedup();
    counters
}

/// Waits until `id` has exactly the runs `1..=n` finished and the job is at rest (nothing
/// queued: without a timer no further run can follow), and checks that none did.
async fn assert_runs_exactly(svc: &TestService, id: &str, n: u64) {
    for counter in 1..=n {
        svc.wait_run_finished(id, counter, WAIT)
            .await
            .assert_status("success");
    }
    svc_tests::ticks::wait_at_rest(svc, id, n, WAIT).await;
    let expected: Vec<u64> = (1..=n).collect();
    assert_eq!(run_counters(svc, id), expected, "runs of job {id}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codehost_documented_check_value_runs_and_a_tampered_body_is_refused() {
    let svc = TestService::builder()
        .job_file(
            "gh",
            codehost_job("gh", r#"echo "event=$SVC_EVENT"; cat "$SVC_REQUEST_BODY""#),
        )
        .start()
        .await;
    assert_eq!(
        format!("sha256={}", hmac_sha256_hex(GITHUB_SECRET, GITHUB_BODY)),
        GITHUB_SIGNATURE
    );

    let response = svc
        .trigger_unsigned(
            "/gh",
            GITHUB_BODY,
            &[
                ("X-Hub-Signature-256", GITHUB_SIGNATURE),
                ("X-GitHub-Event", "push"),
            ],
        )
        .await;
    response.assert_status(200);
    assert!(
        response.data().is_object(),
        "data is the Job: {}",
        response.raw
    );

    // The command saw the event name and the body file.
    let log = svc.wait_run_finished("gh", 1, WAIT).await;
    log.assert_status("success");
    let texts = log.texts();
    assert!(
        texts.iter().any(|t| t == "event=push"),
        "SVC_EVENT reaches the command: {texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.contains("Hello, World!")),
        "the body file reaches the command: {texts:?}"
    );

    // Same header, tampered body: 401, and the answer shows no signature.
    let tampered = b"Hello, World?";
    let response = svc
        .trigger_unsigned(
            "/gh",
            tampered,
            &[("X-Hub-Signature-256", GITHUB_SIGNATURE)],
        )
        .await;
    response.assert_status(401);
    let expected = hmac_sha256_hex(GITHUB_SECRET, tampered);
    assert!(!response.raw.contains(&expected), "{}", response.raw);
    assert!(
        !response.raw.contains(&GITHUB_SIGNATURE[7..]),
        "{}",
        response.raw
    );
    assert!(!response.raw.contains(GITHUB_SECRET), "{}", response.raw);

    // No signature at all: 401.
    svc.trigger_unsigned("/gh", GITHUB_BODY, &[])
        .await
        .assert_status(401);
    assert_runs_exactly(&svc, "gh", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codehost_legacy_sha1_signature_is_accepted() {
    let svc = TestService::builder()
        .job_file("legacy", codehost_job("legacy", "echo legacy-ran"))
        .start()
        .await;
    let body = br#"{"zen":"Keep it logically awesome."}"#;
    let sha1 = format!("sha1={}", hmac_sha1_hex(GITHUB_SECRET, body));
    svc.trigger_unsigned("/legacy", body, &[("X-Hub-Signature", &sha1)])
        .await
        .assert_status(200);
    let log = svc.wait_run_finished("legacy", 1, WAIT).await;
    log.assert_status("success");
    assert!(log.texts().iter().any(|t| t == "legacy-ran"));

    // A SHA-1 signature of another body is refused.
    svc.trigger_unsigned("/legacy", b"{}", &[("X-Hub-Signature", &sha1)])
        .await
        .assert_status(401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codehost_repeated_delivery_runs_once() {
    let svc = TestService::builder()
        .job_file("dedup", codehost_job("dedup", "true"))
        .start()
        .await;
    let id = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

    // Two concurrent deliveries with one ID: both answered 200, exactly one runs.
    let (a, b) = tokio::join!(
        github_delivery(&svc, "/dedup", b"{}", Some(id)),
        github_delivery(&svc, "/dedup", b"{}", Some(id)),
    );
    a.assert_status(200);
    b.assert_status(200);
    let duplicates = [&a, &b]
        .iter()
        .filter(|r| r.message() == "duplicate delivery: not run again")
        .count();
    assert_eq!(duplicates, 1, "{} / {}", a.raw, b.raw);

    // A later redelivery of the same ID: 200 with the Job, not run.
    svc.wait_run_finished("dedup", 1, WAIT).await;
    let again = github_delivery(&svc, "/dedup", b"{}", Some(id)).await;
    again.assert_status(200);
    assert_eq!(again.message(), "duplicate delivery: not run again");
    assert!(again.data().is_object(), "data is the Job: {}", again.raw);

    // The review's finding: the same captured body under a new delivery ID, or none,
    // ran again (the ID is not signed). It is known by its body too now.
    for other_id in [Some("another-delivery"), None] {
        let replay = github_delivery(&svc, "/dedup", b"{}", other_id).await;
        replay.assert_status(401);
        assert!(replay.message().starts_with("replay:"), "{}", replay.raw);
    }
    // A new event (another body) runs, with an ID or without one, once.
    github_delivery(&svc, "/dedup", b"{\"n\":2}", Some("another-delivery"))
        .await
        .assert_status(200);
    svc.wait_run_finished("dedup", 2, WAIT).await;
    github_delivery(&svc, "/dedup", b"{\"n\":3}", None)
        .await
        .assert_status(200);
    svc.wait_run_finished("dedup", 3, WAIT).await;
    github_delivery(&svc, "/dedup", b"{\"n\":3}", None)
        .await
        .assert_status(401);
    assert_runs_exactly(&svc, "dedup", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_delivery_is_not_remembered_paused_is_412() {
    let svc = TestService::builder()
        .job_file("pausable", codehost_job("pausable", "true"))
        .start()
        .await;
    svc.pause("pausable").await.assert_status(200);
    let refused = github_delivery(&svc, "/pausable", b"{}", Some("d-1")).await;
    refused.assert_status(412);
    svc.resume("pausable").await.assert_status(200);
    // The retry of the refused delivery runs.
    let retry = github_delivery(&svc, "/pausable", b"{}", Some("d-1")).await;
    retry.assert_status(200);
    assert_eq!(retry.message(), "", "{}", retry.raw);
    assert_runs_exactly(&svc, "pausable", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_job_with_a_queued_trigger_answers_429() {
    let svc = TestService::builder()
        .job_file("busy", codehost_job("busy", "sleep 2"))
        .start()
        .await;
    // Each delivery has a body of its own, as a host's do.
    github_delivery(&svc, "/busy", b"{\"n\":1}", Some("one"))
        .await
        .assert_status(200);
    svc.wait_run_started("busy", 1, WAIT).await;
    github_delivery(&svc, "/busy", b"{\"n\":2}", Some("two"))
        .await
        .assert_status(200);
    github_delivery(&svc, "/busy", b"{\"n\":3}", Some("three"))
        .await
        .assert_status(429);
    // Once the queued run has begun the queue is free again, and the delivery refused
    // with 429 was forgotten (its ID and its body): its retry is accepted and queued.
    // Begun as the API shows it: run 2's log is on disk as soon as it is created, but
    // until its directory is synced the queued trigger's only durable record is the
    // state file's queue slot, so the slot stays taken (429) for that moment; the job
    // shows `started` again once it is free.
    svc.wait_run_started("busy", 2, WAIT).await;
    svc.wait_job_status("busy", "started", WAIT).await;
    let retry = github_delivery(&svc, "/busy", b"{\"n\":3}", Some("three")).await;
    retry.assert_status(200);
    assert_eq!(retry.message(), "", "{}", retry.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patchhost_signature_and_nonce_replay_across_a_restart() {
    // A key pair made for this test: the service knows only the public half.
    let key = SigningKey::from_bytes(&rand::random::<[u8; 32]>());
    let public_key = b64(key.verifying_key().as_bytes());
    let body: &[u8] = br#"{"event":"job.created"}"#;
    let nonce = "3f1c9a7e-test-nonce";
    let mut message = body.to_vec();
    message.extend_from_slice(nonce.as_bytes());
    let signature = b64(&key.sign(&message).to_bytes());
    let mut svc = TestService::builder()
        .job_file(
            "patch",
            job_section(
                "patch",
                &[
                    "path = /patch",
                    "auth_kind = patchhost",
                    &format!("public_key = {public_key}"),
                    "command = echo patch-ran",
                ],
            ),
        )
        .start()
        .await;
    let signed = [
        ("X-Payload-Signature", signature.as_str()),
        ("X-Payload-Nonce", nonce),
    ];

    // Refusals first: they must not use up the nonce.
    svc.trigger_unsigned("/patch", b"tampered", &signed)
        .await
        .assert_status(401);
    svc.trigger_unsigned(
        "/patch",
        body,
        &[
            ("X-Payload-Signature", signature.as_str()),
            ("X-Payload-Nonce", "s"),
        ],
    )
    .await
    .assert_status(401);
    svc.trigger_unsigned("/patch", body, &[("X-Payload-Nonce", nonce)])
        .await
        .assert_status(401);
    svc.trigger_unsigned(
        "/patch",
        body,
        &[("X-Payload-Signature", signature.as_str())],
    )
    .await
    .assert_status(401);
    svc.trigger_unsigned(
        "/patch",
        body,
        &[
            ("X-Payload-Signature", "not base64!"),
            ("X-Payload-Nonce", nonce),
        ],
    )
    .await
    .assert_status(401);

    // The signed delivery runs.
    svc.trigger_unsigned("/patch", body, &signed)
        .await
        .assert_status(200);
    let log = svc.wait_run_finished("patch", 1, WAIT).await;
    log.assert_status("success");
    assert!(log.texts().iter().any(|t| t == "patch-ran"));

    // The same nonce again: 401, before and after a restart.
    let replay = svc.trigger_unsigned("/patch", body, &signed).await;
    replay.assert_status(401);
    assert_eq!(replay.message(), "nonce already used");
    svc.restart().await;
    let replay = svc.trigger_unsigned("/patch", body, &signed).await;
    replay.assert_status(401);
    assert_eq!(replay.message(), "nonce already used");
    // Bytes moved from the nonce to the end of the body: the signature covers body then
    // nonce, so it still verifies, and it is the same delivery.
    let shifted_body = [body, &nonce.as_bytes()[..4]].concat();
    let shifted = svc
        .trigger_unsigned(
            "/patch",
            &shifted_body,
            &[
                ("X-Payload-Signature", signature.as_str()),
                ("X-Payload-Nonce", &nonce[4..]),
            ],
        )
        .await;
    shifted.assert_status(401);
    assert_eq!(shifted.message(), "nonce already used");
    assert_runs_exactly(&svc, "patch", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hmac_sha256_prefix_custom_header_missing_signature_and_unknown_path() {
    let svc = TestService::builder()
        .job_file(
            "plain",
            job_section(
                "plain",
                &["path = /plain", "secret = plain-secret", "command = true"],
            ),
        )
        .job_file(
            "custom",
            job_section(
                "custom",
                &[
                    "path = /hooks/custom",
                    "secret = custom-secret",
                    "header_sign = X-My-Signature",
                    "command = true",
                ],
            ),
        )
        .start()
        .await;
    let body = b"payload";
    let plain = hmac_sha256_hex("plain-secret", body);
    let custom = hmac_sha256_hex("custom-secret", body);

    // `sha256=` prefix and bare hex.
    svc.trigger_unsigned(
        "/plain",
        body,
        &[("X-Svc-Sign", &format!("sha256={plain}"))],
    )
    .await
    .assert_status(200);
    svc.wait_run_finished("plain", 1, WAIT).await;
    svc.trigger_unsigned("/plain", body, &[("X-Svc-Sign", &plain)])
        .await
        .assert_status(200);
    svc.wait_run_finished("plain", 2, WAIT).await;
    // Missing, wrong, or signed with the main secret instead of the job's: 401.
    svc.trigger_unsigned("/plain", body, &[])
        .await
        .assert_status(401);
    svc.trigger_unsigned("/plain", body, &[("X-Svc-Sign", &custom)])
        .await
        .assert_status(401);
    svc.trigger("/plain", body, &[]).await.assert_status(401);

    // The custom header, name matched case-insensitively; x-svc-sign is not read.
    svc.trigger_unsigned(
        "/hooks/custom",
        body,
        &[("x-my-signature", &format!("sha256={custom}"))],
    )
    .await
    .assert_status(200);
    svc.trigger_unsigned("/hooks/custom", body, &[("X-Svc-Sign", &custom)])
        .await
        .assert_status(401);

    // Unknown path: 404, in the wrapper.
    let unknown = svc.trigger_unsigned("/nothing-here", body, &[]).await;
    unknown.assert_status(404);
    assert_runs_exactly(&svc, "plain", 2).await;
    assert_runs_exactly(&svc, "custom", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_answers_before_the_run_ends() {
    let svc = TestService::builder()
        .job_file(
            "slow",
            job_section("slow", &["path = /slow", "command = sleep 5"]),
        )
        .start()
        .await;
    // Warm the connection so that the measure is the handler's, not the TCP set-up's.
    svc.trigger_unsigned("/warm-up", b"", &[])
        .await
        .assert_status(404);

    // The command sleeps 5 s; the answer must not wait for it. The fastest of a few
    // answers shows what the handler costs (a few milliseconds); every one of them stays
    // far below the run, even on a loaded test machine.
    let started = Instant::now();
    let mut fastest = Duration::MAX;
    for attempt in 0..5 {
        let sent = Instant::now();
        let response = svc
            .trigger("/slow", format!("{attempt}").as_bytes(), &[])
            .await;
        let elapsed = sent.elapsed();
        // The first starts the run, the second is queued, the rest find the queue full.
        response.assert_status(if attempt < 2 { 200 } else { 429 });
        assert!(
            elapsed < Duration::from_secs(1),
            "trigger {attempt} took {elapsed:?}"
        );
        fastest = fastest.min(elapsed);
    }
    eprintln!("fastest trigger answer: {fastest:?}");
    assert!(
        fastest < Duration::from_millis(100),
        "the fastest trigger answer took {fastest:?}"
    );
    // The run is still going on after the answer.
    svc.wait_run_started("slow", 1, WAIT).await;
    svc.wait_job_status("slow", "started", WAIT).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the run cannot have ended yet"
    );
    assert_eq!(svc.job_logs("slow")[0].status, "started");
}
