//! `svc-controller --check` with a `database_url` (cluster mode's keys), against a real
//! PostgreSQL (`svc_tests::postgres`): the schema reported as to be applied, then current;
//! an unreachable database named by its key within a bounded time; the password never
//! shown. The start of a service with a `database_url` is `cluster_start.rs`'s.

use std::time::{Duration, Instant};

use svc_controller::cluster::{ClusterStore, StoreOptions};
use svc_tests::postgres::PostgresServer;
use svc_tests::{EX_CONFIG, TestService, job_section, output_text};

/// A password the server does not ask for (its local connections are trusted), which no
/// output may show.
const PASSWORD: &str = "pw-never-shown-7f3a";

/// `url` with [`PASSWORD`] added to its user part.
fn with_password(url: &str) -> String {
    url.replacen("@127.0.0.1", &format!(":{PASSWORD}@127.0.0.1"), 1)
}

fn service(env_url: &str) -> TestService {
    TestService::builder()
        .svc("database_url = $SVC_TEST_DATABASE_URL")
        .svc("node_name = check-node")
        .env("SVC_TEST_DATABASE_URL", env_url)
        .job_file("a", job_section("a", &["interval = 1h", "command = true"]))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_the_schema_then_an_unreachable_database() {
    let mut pg = tokio::task::spawn_blocking(PostgresServer::launch)
        .await
        .expect("launch PostgreSQL");
    let url = pg.create_database("svc_check");
    let svc = service(&with_password(&url));

    let output = svc.check().await;
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains(
            "node check-node on $SVC_TEST_DATABASE_URL: reachable, 6 schema migration(s) to apply"
        ),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");

    let store = ClusterStore::new(&url, &StoreOptions::default()).expect("store");
    store.migrate().await.expect("migrate");
    store.close().await;
    let output = svc.check().await;
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("reachable, schema current"), "{text}");

    tokio::task::spawn_blocking(move || {
        pg.stop();
        pg
    })
    .await
    .expect("stop PostgreSQL");
    let started = Instant::now();
    let output = svc.check().await;
    let took = started.elapsed();
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(EX_CONFIG), "{text}");
    assert!(
        text.lines().any(
            |line| line.starts_with("error: database_url ($SVC_TEST_DATABASE_URL)")
                && line.contains("unreachable")
        ),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");
    // The 5 s bound of reaching the server (a stopped one refuses at once), plus the
    // start of the process.
    assert!(took < Duration::from_secs(15), "--check took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_written_in_the_file_is_shown_redacted() {
    // Nothing listens on port 1: the check fails at once, naming the key and the host.
    let svc = TestService::builder()
        .svc(format!(
            "database_url = postgres://svc:{PASSWORD}@127.0.0.1:1/svc"
        ))
        .svc("node_name = check-node")
        .build();
    let output = svc.check().await;
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(EX_CONFIG), "{text}");
    assert!(
        text.contains("error: database_url (postgres://svc:[redacted]@127.0.0.1:1/svc)"),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");
}
