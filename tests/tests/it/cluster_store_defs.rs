//! The cluster store's job definitions against a real PostgreSQL (a throwaway server per
//! test, see `svc_tests::postgres`): each node's definitions recorded and compared with
//! the live nodes' (10,000 jobs included), and compared and overviewed without writing,
//! for `--check` and the API.
//!
//! Each "node" is a `ClusterStore` with its own pool, as separate controllers would have.

use svc_controller::cluster::{ClusterError, ClusterStore, JobDef, JobKey, JobKind};
use svc_tests::postgres::PostgresServer;

use crate::cluster_store_common::{NODES, count, def, job, nodes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_nodes_definitions_are_recorded_and_compared_with_the_live_nodes() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("defs")).await;
    let (a, b, c) = (&stores[0], &stores[1], &stores[2]);
    // A node must register before it records its definitions.
    assert!(matches!(
        c.sync_job_defs(NODES[2], &[def(JobKind::Job, "x", "h1")])
            .await,
        Err(ClusterError::UnknownNode(_))
    ));
    assert_eq!(count(c, "SELECT count(*) FROM svc_jobs").await, 0);
    a.register_node(NODES[0], 2).await.expect("register a");
    b.register_node(NODES[1], 2).await.expect("register b");

    let on_a = [
        def(JobKind::Job, "build", "h1"),
        def(JobKind::Job, "deploy", "h1"),
        def(JobKind::Http, "ping", "h1"),
    ];
    let drift = a.sync_job_defs(NODES[0], &on_a).await.expect("sync a");
    assert!(drift.is_empty(), "{drift:?}");
    // b defines deploy differently, lacks ping and has a job of its own.
    let on_b = [
        def(JobKind::Job, "build", "h1"),
        def(JobKind::Job, "deploy", "h2"),
        def(JobKind::Job, "report", "h1"),
    ];
    let drift = b.sync_job_defs(NODES[1], &on_b).await.expect("sync b");
    assert_eq!(
        drift.differ,
        vec![(job("deploy"), vec![NODES[0].to_string()])]
    );
    assert_eq!(drift.missing_here, vec![JobKey::new(JobKind::Http, "ping")]);
    let drift = a
        .sync_job_defs(NODES[0], &on_a)
        .await
        .expect("sync a again");
    assert_eq!(
        drift.differ,
        vec![(job("deploy"), vec![NODES[1].to_string()])]
    );
    assert_eq!(drift.missing_here, vec![job("report")]);
    // Every job of either node has its row, and each node's hash of each of its jobs.
    assert_eq!(count(a, "SELECT count(*) FROM svc_jobs").await, 4);
    assert_eq!(count(a, "SELECT count(*) FROM svc_job_defs").await, 6);

    // A job a no longer defines loses a's row (not the job's: b may still run it).
    a.sync_job_defs(NODES[0], &on_a[..2]).await.expect("sync a");
    assert_eq!(
        count(a, "SELECT count(*) FROM svc_job_defs WHERE node = 'node-a'").await,
        2
    );
    assert_eq!(count(a, "SELECT count(*) FROM svc_jobs").await, 4);

    // Once b's heartbeat is older than a lease, b no longer counts.
    sqlx::query("UPDATE svc_nodes SET heartbeat_at = now() - interval '1 hour' WHERE name = $1")
        .bind(NODES[1])
        .execute(a.pool())
        .await
        .expect("age b");
    let drift = a.sync_job_defs(NODES[0], &on_a).await.expect("sync a");
    assert!(drift.is_empty(), "{drift:?}");

    // Ten thousand jobs in one transaction, twice (insert, then update), and the same
    // definitions on another live node: no drift.
    b.heartbeat(NODES[1]).await.expect("b is back");
    let many: Vec<JobDef> = (0..10_000)
        .map(|i| def(JobKind::Job, &format!("job-{i}"), "same"))
        .collect();
    let started = std::time::Instant::now();
    let mut drift = Default::default();
    for (store, node) in [(a, NODES[0]), (b, NODES[1]), (a, NODES[0])] {
        drift = store.sync_job_defs(node, &many).await.expect("sync many");
        assert!(drift.differ.is_empty(), "{:?}", drift.differ.first());
    }
    // The first two syncs saw the other node's older jobs as missing; the last, none.
    assert!(drift.is_empty(), "{:?}", drift.missing_here.first());
    // How long is shown, never asserted: it depends on the machine.
    eprintln!("three syncs of 10,000 jobs took {:?}", started.elapsed());
    assert_eq!(count(a, "SELECT count(*) FROM svc_job_defs").await, 20_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definitions_are_compared_and_overviewed_without_writing() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("drift_reads")).await;
    let (a, b, c) = (&stores[0], &stores[1], &stores[2]);
    record_two_live_nodes_and_a_gone_one(a, b, c).await;
    let before = count(a, "SELECT count(*) FROM svc_job_defs").await;
    compare_with_the_other_live_nodes(a).await;
    overview_as_a_live_and_a_gone_node_see_it(a, c).await;

    // Nothing was written.
    assert_eq!(count(a, "SELECT count(*) FROM svc_job_defs").await, before);
    assert_eq!(
        count(
            a,
            "SELECT count(*) FROM svc_nodes WHERE name = 'never-started'"
        )
        .await,
        0
    );
}

/// a defines build and deploy; b the same build, deploy otherwise, and ping; c is gone
/// (no heartbeat within a lease): its definitions count nowhere.
async fn record_two_live_nodes_and_a_gone_one(
    a: &ClusterStore,
    b: &ClusterStore,
    c: &ClusterStore,
) {
    for (store, node) in [(a, NODES[0]), (b, NODES[1]), (c, NODES[2])] {
        store.register_node(node, 3).await.expect("register");
    }
    let on_a = [
        def(JobKind::Job, "build", "h1"),
        def(JobKind::Job, "deploy", "h1"),
    ];
    a.sync_job_defs(NODES[0], &on_a).await.expect("sync a");
    b.sync_job_defs(
        NODES[1],
        &[
            def(JobKind::Job, "build", "h1"),
            def(JobKind::Job, "deploy", "h2"),
            def(JobKind::Http, "ping", "h1"),
        ],
    )
    .await
    .expect("sync b");
    c.sync_job_defs(
        NODES[2],
        &[
            def(JobKind::Job, "build", "h9"),
            def(JobKind::Job, "only-c", "h1"),
        ],
    )
    .await
    .expect("sync c");
    sqlx::query("UPDATE svc_nodes SET heartbeat_at = now() - interval '1 hour' WHERE name = $1")
        .bind(NODES[2])
        .execute(a.pool())
        .await
        .expect("age c");
}

/// a's files now define build otherwise and deploy as b does: compared with b alone (a's
/// own recorded rows are left out), duplicates taken once. A node that never started is
/// compared with every live node, a included.
async fn compare_with_the_other_live_nodes(a: &ClusterStore) {
    let files = [
        def(JobKind::Job, "build", "h3"),
        def(JobKind::Job, "build", "h3"),
        def(JobKind::Job, "deploy", "h2"),
    ];
    let comparison = a.compare_job_defs(NODES[0], &files).await.expect("compare");
    assert_eq!(comparison.live_nodes, vec![NODES[1].to_string()]);
    assert_eq!(
        comparison.differ,
        vec![(job("build"), vec![NODES[1].to_string()])]
    );
    assert_eq!(
        comparison.missing_here,
        vec![(
            JobKey::new(JobKind::Http, "ping"),
            vec![NODES[1].to_string()]
        )]
    );
    let fresh = a
        .compare_job_defs("never-started", &files)
        .await
        .expect("compare a fresh node");
    assert_eq!(
        fresh.live_nodes,
        vec![NODES[0].to_string(), NODES[1].to_string()]
    );
    assert_eq!(
        fresh.differ,
        vec![
            (
                job("build"),
                vec![NODES[0].to_string(), NODES[1].to_string()]
            ),
            (job("deploy"), vec![NODES[0].to_string()]),
        ]
    );
}

/// The overview as a sees it: every node, deploy differing between a and b (c's build
/// does not count), ping defined only on b. The gone c still sees its own definitions
/// against the live ones; the lists are cut at the limit, the totals count the rest.
async fn overview_as_a_live_and_a_gone_node_see_it(a: &ClusterStore, c: &ClusterStore) {
    let overview = a.overview(NODES[0], 1000).await.expect("overview");
    let nodes: Vec<(&str, bool, u32)> = overview
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.live, n.max_job_running))
        .collect();
    assert_eq!(
        nodes,
        [
            (NODES[0], true, 3),
            (NODES[1], true, 3),
            (NODES[2], false, 3)
        ]
    );
    assert_eq!(overview.differ_total, 1);
    let deploy = &overview.differ[0];
    assert_eq!(deploy.job, job("deploy"));
    assert_eq!(deploy.hash_of(NODES[0]), Some("h1"));
    assert_eq!(deploy.hash_of(NODES[1]), Some("h2"));
    assert_eq!(deploy.defs.len(), 2);
    assert_eq!(
        overview.missing_here,
        vec![(
            JobKey::new(JobKind::Http, "ping"),
            vec![NODES[1].to_string()]
        )]
    );
    assert_eq!(overview.missing_here_total, 1);
    let from_c = c.overview(NODES[2], 1000).await.expect("overview of c");
    let jobs: Vec<&JobKey> = from_c.differ.iter().map(|d| &d.job).collect();
    assert_eq!(jobs, [&job("build"), &job("deploy")]);
    let cut = c.overview(NODES[2], 1).await.expect("cut overview");
    assert_eq!(cut.differ.len(), 1);
    assert_eq!(cut.differ_total, 2);
    assert_eq!(cut.missing_here.len(), 1);
    assert_eq!(cut.missing_here_total, 2);
}
