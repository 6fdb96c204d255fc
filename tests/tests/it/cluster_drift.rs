//! Job definitions that differ between the nodes of a cluster, with a real PostgreSQL
//! (`svc_tests::postgres`) and two real controllers: `--check` names the job and the
//! other node and still exits 0 (a warning), `GET /svc/api/cluster` lists the drift,
//! and once the second node's file is fixed and it reloads (SIGHUP) the drift is gone
//! from both. Single-node mode answers that cluster mode is off.

use std::time::Duration;

use serde_json::Value;
use svc_tests::postgres::PostgresServer;
use svc_tests::{TestService, job_section, output_text, wait_for};

/// How long a change of one node takes to show on the other: a reload and one read.
const SETTLE: Duration = Duration::from_secs(30);

fn shared_job(command: &str) -> String {
    let command = format!("command = {command}");
    job_section("shared", &["interval = 1h", command.as_str()])
}

fn node(url: &str, name: &str) -> svc_tests::TestServiceBuilder {
    TestService::builder()
        .svc("database_url = $SVC_TEST_DATABASE_URL")
        .svc(format!("node_name = {name}"))
        .env("SVC_TEST_DATABASE_URL", url)
}

/// `data` of `GET /svc/api/cluster`, which must answer 200.
async fn cluster(svc: &TestService) -> Value {
    let answer = svc.get("/svc/api/cluster").await;
    answer.assert_status(200);
    answer.data().clone()
}

/// The `(kind, id)` of each entry of `list`.
fn jobs_of(list: &Value) -> Vec<(String, String)> {
    list.as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|entry| {
                    (
                        entry["kind"].as_str().unwrap_or_default().to_string(),
                        entry["id"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn job(id: &str) -> (String, String) {
    ("job".to_string(), id.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn differing_definitions_are_named_then_gone_after_a_reload() {
    tokio::task::spawn_blocking(svc_tests::binaries)
        .await
        .expect("build the binaries under test");
    let pg = tokio::task::spawn_blocking(PostgresServer::launch)
        .await
        .expect("launch PostgreSQL");
    let url = pg.create_database("svc_drift");
    let a = node(&url, "drift-a")
        .job_file("shared", shared_job("true"))
        .job_file(
            "mine",
            job_section("mine", &["interval = 1h", "command = true"]),
        )
        .start()
        .await;
    // `shared` runs something else on b, and b has a job a does not.
    let mut b = node(&url, "drift-b")
        .job_file("shared", shared_job("false"))
        .job_file(
            "only-b",
            job_section("only-b", &["interval = 1h", "command = true"]),
        )
        .start()
        .await;

    // --check of a's configuration: a warning naming the job and the other node, status 0.
    let output = a.check().await;
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    for expected in [
        "reachable, schema current",
        "job definitions compared with 1 other live node(s) (drift-b): 1 differ, 1 defined \
         only elsewhere",
        "warning: cluster: job shared: defined differently on drift-b",
        "warning: cluster: job only-b: defined on drift-b but not in this configuration",
        "the exit status stays 0",
    ] {
        assert!(text.contains(expected), "{expected:?} in {text}");
    }
    assert!(!text.contains("job mine"), "{text}");

    // The API of a lists the drift: both hashes, which node holds which, a's own.
    let data = cluster(&a).await;
    assert_eq!(data["enabled"], true, "{data}");
    assert_eq!(data["node"], "drift-a", "{data}");
    let nodes: Vec<(&str, bool)> = data["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| (n["name"].as_str().unwrap_or(""), n["live"] == true))
        .collect();
    assert_eq!(nodes, [("drift-a", true), ("drift-b", true)], "{data}");
    assert_eq!(jobs_of(&data["differ"]), [job("shared")], "{data}");
    assert_eq!(data["differ_total"], 1, "{data}");
    let shared = &data["differ"][0];
    let defs = shared["definitions"].as_array().expect("definitions");
    assert_eq!(defs.len(), 2, "{data}");
    let holder = |name: &str| {
        defs.iter()
            .find(|d| {
                d["nodes"]
                    .as_array()
                    .is_some_and(|n| n.iter().any(|n| n == name))
            })
            .and_then(|d| d["hash"].as_str())
            .unwrap_or_else(|| panic!("{name} holds a hash in {data}"))
            .to_string()
    };
    let (hash_a, hash_b) = (holder("drift-a"), holder("drift-b"));
    assert_ne!(hash_a, hash_b);
    assert_eq!(shared["here"], hash_a.as_str(), "{data}");
    assert_eq!(jobs_of(&data["missing_here"]), [job("only-b")], "{data}");
    // b sees the same drift from its side.
    let data_b = cluster(&b).await;
    assert_eq!(jobs_of(&data_b["differ"]), [job("shared")], "{data_b}");
    assert_eq!(data_b["differ"][0]["here"], hash_b.as_str(), "{data_b}");
    assert_eq!(jobs_of(&data_b["missing_here"]), [job("mine")], "{data_b}");

    // b's file fixed, `only-b` removed, and b reloaded: no drift left on either side.
    std::fs::write(b.job_d().join("shared.conf"), shared_job("true")).expect("fix b's job");
    std::fs::remove_file(b.job_d().join("only-b.conf")).expect("remove only-b");
    b.sighup();
    let settled = wait_for(SETTLE, "the drift gone from a's answer", async || {
        let data = a.try_get("/svc/api/cluster").await.ok()?;
        let data = data.data().clone();
        (data["differ_total"] == 0 && data["missing_here_total"] == 0).then_some(data)
    })
    .await;
    assert_eq!(jobs_of(&settled["differ"]), Vec::<(String, String)>::new());
    let data_b = cluster(&b).await;
    assert_eq!(data_b["differ_total"], 0, "{data_b}");
    assert_eq!(jobs_of(&data_b["missing_here"]), [job("mine")], "{data_b}");
    let log_b = format!("{}{}", b.stdout(), b.stderr());
    assert!(
        log_b.contains("reloaded job definitions recorded in the cluster"),
        "{log_b}"
    );

    let output = a.check().await;
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("job definitions agree with 1 other live node(s) (drift-b)"),
        "{text}"
    );
    assert!(!text.contains("warning: cluster:"), "{text}");

    let status = b.stop().await;
    assert_eq!(status.code(), Some(0));
    drop(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_says_cluster_mode_is_off() {
    let svc = TestService::builder()
        .job_file("a", job_section("a", &["interval = 1h", "command = true"]))
        .start()
        .await;
    let answer = svc.get("/svc/api/cluster").await;
    answer.assert_status(200);
    assert_eq!(answer.data()["enabled"], false);
    assert!(
        answer.message().contains("cluster mode is off"),
        "{}",
        answer.message()
    );
}
