//! Every code host's way of signing and naming a delivery (`auth_kind` = `github`,
//! `gitlab`, `gitea` with Forgejo's headers too, `bitbucket`, `standard`), the facts the
//! command gets (`SVC_EVENT`, `SVC_DELIVERY`, `SVC_REF`, `SVC_COMMIT`), the trigger
//! rules `filter_event` and `filter_ref`, two secrets during a rotation, and the replay
//! rules of each host's delivery ID.
//!
//! Every test starts its own controller on its own temporary `dir_base`.

use svc_tests::{ApiResponse, TestService, WAIT, hmac_sha256_hex, job_section, standard_signature};

const SECRET: &str = "host-secret-1";
/// Prints the facts the run was given, one line the tests look for.
const FACTS: &str =
    "echo \"facts: event=$SVC_EVENT delivery=$SVC_DELIVERY ref=$SVC_REF commit=$SVC_COMMIT\"";
const COMMIT: &str = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c";

fn host_job(name: &str, auth_kind: &str, extra: &[&str]) -> String {
    let mut lines = vec![
        format!("path = /{name}"),
        format!("auth_kind = {auth_kind}"),
        format!("secret = {SECRET}"),
        format!("command = {FACTS}"),
    ];
    lines.extend(extra.iter().map(|line| line.to_string()));
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    job_section(name, &lines)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A push of `git_ref` sent by `host` the way that host sends it, signed with `secret`.
async fn push(
    svc: &TestService,
    host: &str,
    secret: &str,
    git_ref: &str,
    delivery: &str,
) -> ApiResponse {
    let path = format!("/{host}");
    // A host never sends the same body as a new event (each push has content of its
    // own): the delivery's name stands for that here.
    let github_body =
        format!(r#"{{"ref":"{git_ref}","after":"{COMMIT}","commits":[],"test":"{delivery}"}}"#);
    let hex = |body: &str| hmac_sha256_hex(secret, body.as_bytes());
    match host {
        "github" => {
            let signature = format!("sha256={}", hex(&github_body));
            let headers = [
                ("X-Hub-Signature-256", signature.as_str()),
                ("X-GitHub-Event", "push"),
                ("X-GitHub-Delivery", delivery),
            ];
            svc.trigger_unsigned(&path, github_body.as_bytes(), &headers)
                .await
        }
        "gitlab" => {
            let body = format!(
                r#"{{"object_kind":"push","ref":"{git_ref}","after":"{COMMIT}","checkout_sha":"{COMMIT}","test":"{delivery}"}}"#
            );
            let headers = [
                ("X-Gitlab-Token", secret),
                ("X-Gitlab-Event", "Push Hook"),
                ("X-Gitlab-Event-UUID", "uuid-not-used"),
                ("Idempotency-Key", delivery),
            ];
            svc.trigger_unsigned(&path, body.as_bytes(), &headers).await
        }
        "gitea" => {
            let signature = hex(&github_body);
            let headers = [
                ("X-Gitea-Signature", signature.as_str()),
                ("X-Gitea-Event", "push"),
                ("X-Gitea-Delivery", delivery),
                ("X-GitHub-Event", "push"),
            ];
            svc.trigger_unsigned(&path, github_body.as_bytes(), &headers)
                .await
        }
        "forgejo" => {
            let signature = hex(&github_body);
            let headers = [
                ("X-Forgejo-Signature", signature.as_str()),
                ("X-Forgejo-Event", "push"),
                ("X-Forgejo-Delivery", delivery),
            ];
            svc.trigger_unsigned(&path, github_body.as_bytes(), &headers)
                .await
        }
        "bitbucket" => {
            let name = git_ref.trim_start_matches("refs/heads/");
            let body = format!(
                r#"{{"push":{{"changes":[{{"new":{{"type":"branch","name":"{name}","target":{{"hash":"{COMMIT}"}}}}}}]}},"test":"{delivery}"}}"#
            );
            let signature = format!("sha256={}", hex(&body));
            let headers = [
                ("X-Hub-Signature", signature.as_str()),
                ("X-Event-Key", "repo:push"),
                ("X-Request-UUID", delivery),
            ];
            svc.trigger_unsigned(&path, body.as_bytes(), &headers).await
        }
        "standard" => {
            let body = br#"{"type":"build.requested","data":{}}"#;
            let timestamp = now();
            let signature = standard_signature(secret.as_bytes(), delivery, timestamp, body);
            let timestamp = timestamp.to_string();
            let headers = [
                ("webhook-id", delivery),
                ("webhook-timestamp", timestamp.as_str()),
                ("webhook-signature", signature.as_str()),
            ];
            svc.trigger_unsigned(&path, body, &headers).await
        }
        other => panic!("no such host in this test: {other}"),
    }
}

/// The facts line of run `counter` of `id`, once it finished.
async fn facts_of(svc: &TestService, id: &str, counter: u64) -> String {
    let log = svc.wait_run_finished(id, counter, WAIT).await;
    log.assert_status("success");
    let content = log.content();
    // The command's output (the log also shows the command itself, before it).
    content
        .lines()
        .filter(|line| !line.contains("$SVC_EVENT"))
        .find_map(|line| {
            line.split_once("facts: ")
                .map(|(_, facts)| facts.to_string())
        })
        .unwrap_or_else(|| panic!("no facts line in run {counter} of {id}:\n{content}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_host_signs_its_way_and_its_facts_reach_the_command() {
    let hosts = [
        ("github", "github", "event=push"),
        ("gitlab", "gitlab", "event=Push Hook"),
        ("gitea", "gitea", "event=push"),
        ("forgejo", "forgejo", "event=push"),
        ("bitbucket", "bitbucket", "event=repo:push"),
        ("standard", "standard", "event=build.requested"),
    ];
    let mut builder = TestService::builder();
    for (name, kind, _) in hosts {
        builder = builder.job_file(name, host_job(name, kind, &[]));
    }
    let svc = builder.start().await;

    for (name, _, event) in hosts {
        let delivery = format!("{name}-delivery-1");
        // Signed with another secret: refused, and nothing runs.
        let forged = push(&svc, name, "not-the-secret", "refs/heads/main", &delivery).await;
        forged.assert_status(401);
        let answer = push(&svc, name, SECRET, "refs/heads/main", &delivery).await;
        answer.assert_status(200);
        assert_eq!(answer.message(), "", "{name}: {}", answer.raw);
        let facts = facts_of(&svc, name, 1).await;
        assert!(facts.contains(event), "{name}: {facts}");
        assert!(
            facts.contains(&format!("delivery={delivery}")),
            "{name}: {facts}"
        );
        if name == "standard" {
            // Not a code host: no ref or commit is made up.
            assert!(facts.ends_with("ref= commit="), "{name}: {facts}");
        } else {
            assert!(
                facts.ends_with(&format!("ref=refs/heads/main commit={COMMIT}")),
                "{name}: {facts}"
            );
        }
        // The same delivery again (a host's redelivery of one that ran): not run again.
        let again = push(&svc, name, SECRET, "refs/heads/main", &delivery).await;
        again.assert_status(200);
        assert_eq!(
            again.message(),
            "duplicate delivery: not run again",
            "{name}"
        );
    }
    for (name, ..) in hosts {
        assert_eq!(svc.job_logs(name).len(), 1, "{name} ran once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_webhooks_refuse_a_stale_timestamp() {
    let svc = TestService::builder()
        .job_file("standard", host_job("standard", "standard", &[]))
        .start()
        .await;
    let body = br#"{"type":"x"}"#;
    let stale = now() - 600;
    let signature = standard_signature(SECRET.as_bytes(), "msg_1", stale, body);
    let stale = stale.to_string();
    let answer = svc
        .trigger_unsigned(
            "/standard",
            body,
            &[
                ("webhook-id", "msg_1"),
                ("webhook-timestamp", stale.as_str()),
                ("webhook-signature", signature.as_str()),
            ],
        )
        .await;
    answer.assert_status(401);
    assert!(answer.message().contains("5 minutes"), "{}", answer.raw);
    assert!(svc.job_logs("standard").is_empty());
}

/// A `whsec_<base64>` secret is a Standard Webhooks key: deliveries are signed with the
/// bytes it decodes to, not with its text. So is the main secret, for a `standard` job
/// without a secret of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_webhooks_sign_with_the_decoded_whsec_key() {
    use base64::Engine as _;
    const OWN: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const MAIN: &str = "whsec_c3ZjIG1haW4gc2VjcmV0IGZvciB0ZXN0cw==";
    let decoded = |secret: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(secret.trim_start_matches("whsec_"))
            .expect("base64")
    };
    let svc = TestService::builder()
        .svc(format!("secret = {MAIN}"))
        .job_file(
            "own",
            job_section(
                "own",
                &[
                    "path = /own",
                    "auth_kind = standard",
                    &format!("secret = {OWN}"),
                    "command = true",
                ],
            ),
        )
        .job_file(
            "main",
            job_section(
                "main",
                &["path = /main", "auth_kind = standard", "command = true"],
            ),
        )
        .start()
        .await;
    let body = br#"{"type":"x"}"#;
    let deliver = async |path: &str, key: &[u8], id: &str| {
        let timestamp = now();
        let signature = standard_signature(key, id, timestamp, body);
        let timestamp = timestamp.to_string();
        svc.trigger_unsigned(
            path,
            body,
            &[
                ("webhook-id", id),
                ("webhook-timestamp", timestamp.as_str()),
                ("webhook-signature", signature.as_str()),
            ],
        )
        .await
    };
    for (path, secret) in [("/own", OWN), ("/main", MAIN)] {
        deliver(path, secret.as_bytes(), "msg_text")
            .await
            .assert_status(401);
        deliver(path, &decoded(secret), "msg_key")
            .await
            .assert_status(200);
    }
    svc.wait_run_finished("own", 1, WAIT)
        .await
        .assert_status("success");
    svc.wait_run_finished("main", 1, WAIT)
        .await
        .assert_status("success");

    // Svix's spelling of the same headers, as Svix and the services built on it send.
    let key = decoded(OWN);
    let timestamp = now();
    let signature = standard_signature(&key, "msg_svix", timestamp, body);
    let timestamp = timestamp.to_string();
    let svix = [
        ("svix-id", "msg_svix"),
        ("svix-timestamp", timestamp.as_str()),
        ("svix-signature", signature.as_str()),
    ];
    svc.trigger_unsigned("/own", body, &svix)
        .await
        .assert_status(200);
    svc.wait_run_finished("own", 2, WAIT)
        .await
        .assert_status("success");
    // The same delivery again, in the other spelling: one message ID, run once.
    let again = svc
        .trigger_unsigned(
            "/own",
            body,
            &[
                ("webhook-id", "msg_svix"),
                ("webhook-timestamp", timestamp.as_str()),
                ("webhook-signature", signature.as_str()),
            ],
        )
        .await;
    again.assert_status(200);
    // Both spellings, saying different things: which was signed cannot be told.
    let mut mixed = svix.to_vec();
    mixed.push(("webhook-id", "msg_other"));
    let refused = svc.trigger_unsigned("/own", body, &mixed).await;
    refused.assert_status(401);
    assert!(refused.message().contains("svix-"), "{}", refused.raw);
    assert_eq!(
        svc.job_logs("own").len(),
        2,
        "the repeat and the mixed one ran nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_skip_what_does_not_match_and_skipped_deliveries_may_come_again() {
    let rules = ["filter_event = push", "filter_ref = refs/heads/release/*"];
    let svc = TestService::builder()
        .job_file("github", host_job("github", "github", &rules))
        .job_file(
            "gitlab",
            host_job("gitlab", "gitlab", &["filter_ref = refs/tags/**"]),
        )
        .start()
        .await;

    // Another ref: 200, data saying why, nothing runs.
    let skipped = push(&svc, "github", SECRET, "refs/heads/main", "d-1").await;
    skipped.assert_status(200);
    assert_eq!(skipped.data()["skipped"], true, "{}", skipped.raw);
    let reason = skipped.data()["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("refs/heads/main"), "{reason}");
    assert!(
        skipped.message().starts_with("delivery skipped: "),
        "{}",
        skipped.raw
    );
    // `*` stays within one segment.
    let deeper = push(&svc, "github", SECRET, "refs/heads/release/1/x", "d-2").await;
    assert_eq!(deeper.data()["skipped"], true, "{}", deeper.raw);

    // Another event.
    let body = br#"{"action":"opened"}"#;
    let signature = format!("sha256={}", hmac_sha256_hex(SECRET, body));
    let issue = svc
        .trigger_unsigned(
            "/github",
            body,
            &[
                ("X-Hub-Signature-256", signature.as_str()),
                ("X-GitHub-Event", "issues"),
                ("X-GitHub-Delivery", "d-3"),
            ],
        )
        .await;
    issue.assert_status(200);
    assert!(
        issue.data()["reason"]
            .as_str()
            .is_some_and(|r| r.contains("\"issues\" is not in filter_event")),
        "{}",
        issue.raw
    );

    // A matching push runs; the delivery skipped before may come again and run, since
    // it started nothing the first time.
    push(&svc, "github", SECRET, "refs/heads/release/1.0", "d-4")
        .await
        .assert_status(200);
    assert!(
        facts_of(&svc, "github", 1)
            .await
            .contains("ref=refs/heads/release/1.0")
    );
    let retried = push(&svc, "github", SECRET, "refs/heads/release/2.0", "d-1").await;
    retried.assert_status(200);
    assert_eq!(retried.message(), "", "{}", retried.raw);
    assert!(
        facts_of(&svc, "github", 2)
            .await
            .contains("ref=refs/heads/release/2.0")
    );

    // `**` crosses segments.
    push(&svc, "gitlab", SECRET, "refs/heads/v1", "g-1")
        .await
        .assert_status(200);
    push(&svc, "gitlab", SECRET, "refs/tags/v1/rc/2", "g-2")
        .await
        .assert_status(200);
    assert!(
        facts_of(&svc, "gitlab", 1)
            .await
            .contains("ref=refs/tags/v1/rc/2")
    );
    assert_eq!(svc.job_logs("github").len(), 2);
    assert_eq!(svc.job_logs("gitlab").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_secrets_during_a_rotation() {
    let svc = TestService::builder()
        .job_file(
            "gitea",
            host_job("gitea", "gitea", &["secret = host-secret-2"]),
        )
        .start()
        .await;
    push(&svc, "gitea", SECRET, "refs/heads/main", "r-1")
        .await
        .assert_status(200);
    facts_of(&svc, "gitea", 1).await;
    push(&svc, "gitea", "host-secret-2", "refs/heads/main", "r-2")
        .await
        .assert_status(200);
    facts_of(&svc, "gitea", 2).await;
    push(&svc, "gitea", "host-secret-3", "refs/heads/main", "r-3")
        .await
        .assert_status(401);
    assert_eq!(svc.job_logs("gitea").len(), 2);
}
