//! The start of a service with a `database_url`, against a real PostgreSQL
//! (`svc_tests::postgres`): the node applies the schema, registers, records its job
//! definitions, names in its log those another live node defines differently, and
//! serves; an unreachable database ends the start within its bound; a live node's name
//! is refused to another process. The password is never shown.

use std::time::{Duration, Instant};

use svc_controller::cluster::{ClusterStore, JobDef, JobKey, JobKind, StoreOptions};
use svc_tests::postgres::PostgresServer;
use svc_tests::{TestService, job_section};

/// A password the server does not ask for (its local connections are trusted), which no
/// output may show.
const PASSWORD: &str = "pw-never-shown-5c1e";

fn with_password(url: &str) -> String {
    url.replacen("@127.0.0.1", &format!(":{PASSWORD}@127.0.0.1"), 1)
}

/// Builds the binaries under test (once per process) off the async runtime, so that no
/// measured or bounded time includes the build.
async fn build_binaries() {
    tokio::task::spawn_blocking(svc_tests::binaries)
        .await
        .expect("build the binaries under test");
}

fn def(id: &str, hash: &str) -> JobDef {
    JobDef {
        job: JobKey::new(JobKind::Job, id),
        hash: hash.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joins_names_differing_definitions_and_serves() {
    // Built first: a build inside `svc.start()` could outlast `other-node`'s liveness
    // window (30 s since it registered), and `other-node` would no longer count as live.
    build_binaries().await;
    let pg = tokio::task::spawn_blocking(PostgresServer::launch)
        .await
        .expect("launch PostgreSQL");
    let url = pg.create_database("svc_start");
    // Another live node, which defines `shared` otherwise and has a job of its own.
    let other = ClusterStore::new(&url, &StoreOptions::default()).expect("store");
    other.migrate().await.expect("migrate");
    other
        .register_node("other-node", 1)
        .await
        .expect("register");
    other
        .sync_job_defs(
            "other-node",
            &[def("shared", "not-the-same"), def("elsewhere", "h")],
        )
        .await
        .expect("sync");

    let mut svc = TestService::builder()
        .svc("database_url = $SVC_TEST_DATABASE_URL")
        .svc("node_name = start-node")
        .env("SVC_TEST_DATABASE_URL", &with_password(&url))
        .job_file(
            "shared",
            job_section("shared", &["interval = 1h", "command = true"]),
        )
        .job_file(
            "mine",
            job_section("mine", &["interval = 1h", "command = true"]),
        )
        .build();
    svc.start().await;
    // It serves: a run now goes through the cluster's queue and runs here.
    svc.run_now("mine").await.assert_status(200);
    svc.wait_run_finished("mine", 1, Duration::from_secs(30))
        .await;
    let status = svc.stop().await;
    let text = format!("{}{}", svc.stdout(), svc.stderr());
    assert_eq!(status.code(), Some(0), "{text}");
    for expected in [
        "joined the cluster",
        "job definitions differ from other live nodes of the cluster: job shared (on \
         other-node)",
        "jobs other live nodes of the cluster define and this node does not: job elsewhere",
    ] {
        assert!(text.contains(expected), "{expected:?} in {text}");
    }
    assert!(!text.contains(PASSWORD), "{text}");

    // The node is registered and its definitions recorded, `mine`'s included.
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT id, node FROM svc_job_defs ORDER BY id, node")
            .fetch_all(other.pool())
            .await
            .expect("definitions");
    let rows: Vec<(&str, &str)> = rows.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(
        rows,
        [
            ("elsewhere", "other-node"),
            ("mine", "start-node"),
            ("shared", "other-node"),
            ("shared", "start-node"),
        ]
    );
    let nodes: i64 = sqlx::query_scalar("SELECT count(*) FROM svc_nodes WHERE name = 'start-node'")
        .fetch_one(other.pool())
        .await
        .expect("nodes");
    assert_eq!(nodes, 1);
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_ends_the_start_within_its_bound() {
    // Built first, so that the time measured is the controller's own, not a build's.
    build_binaries().await;
    // Nothing listens on port 1.
    let mut svc = TestService::builder()
        .svc(format!(
            "database_url = postgres://svc:{PASSWORD}@127.0.0.1:1/svc"
        ))
        .svc("node_name = lonely-node")
        .build();
    let started = Instant::now();
    svc.spawn();
    let status = svc
        .wait_exit(Duration::from_secs(60))
        .await
        .expect("the controller gives up");
    let took = started.elapsed();
    let text = format!("{}{}", svc.stdout(), svc.stderr());
    // A failure the service manager restarts on (the database may come back), not a
    // configuration error.
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "error: database_url (postgres://svc:[redacted]@127.0.0.1:1/svc): the cluster \
             database is not reachable (tried for 30 s)"
        ),
        "{text}"
    );
    assert!(text.contains("not reachable yet; trying again"), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");
    // The 30 s bound, one attempt's own bound and the start of the process.
    assert!(
        took >= Duration::from_secs(29) && took < Duration::from_secs(45),
        "gave up after {took:?}"
    );
}

/// A second process started with a live node's `node_name` is refused at join, naming the
/// node and its last heartbeat, and changes nothing of the other's; the node's own
/// restart (same machine and state directory) joins at once, within the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_nodes_name_is_refused_to_another_process_but_not_to_its_restart() {
    build_binaries().await;
    let pg = tokio::task::spawn_blocking(PostgresServer::launch)
        .await
        .expect("launch PostgreSQL");
    let url = pg.create_database("svc_twins");
    let builder = || {
        TestService::builder()
            .svc("database_url = $SVC_TEST_DATABASE_URL")
            .svc("node_name = twin")
            .env("SVC_TEST_DATABASE_URL", &url)
            .job_file(
                "mine",
                job_section("mine", &["interval = 1h", "command = true"]),
            )
    };
    let mut first = builder().build();
    first.start().await;

    // Another process (its own dir_base) with the same name.
    let mut second = builder().build();
    second.spawn();
    let status = second
        .wait_exit(Duration::from_secs(60))
        .await
        .expect("the namesake gives up");
    let text = format!("{}{}", second.stdout(), second.stderr());
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains("node_name \"twin\" is in use by another live node (last heartbeat 20"),
        "{text}"
    );
    assert!(text.contains("give each node its own node_name"), "{text}");

    // The first node still serves, its registration untouched.
    first.run_now("mine").await.assert_status(200);
    first
        .wait_run_finished("mine", 1, Duration::from_secs(30))
        .await;

    // Killed and restarted at once (well within the 30 s lease): the same node.
    first.kill9().await;
    first.start().await;
    first.run_now("mine").await.assert_status(200);
    first
        .wait_run_finished("mine", 2, Duration::from_secs(30))
        .await;
    assert_eq!(first.stop().await.code(), Some(0));
}
