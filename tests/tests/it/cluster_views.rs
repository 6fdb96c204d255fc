//! What every node of a cluster shows, whichever node did the work: two real controllers
//! on one real PostgreSQL (`svc_tests::postgres`). A run made by one node is in the other
//! node's run history (naming the node), its log reads the same from both, a running
//! log streams from the node that does not run it, the other node's dashboard shows the
//! run going on and then its result, `log_retention` holds in the shared table, and an
//! action on one node is in the other node's audit log.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use svc_controller::cluster::{ClusterStore, StoreOptions};
use svc_tests::postgres::PostgresServer;
use svc_tests::sink::Sink;
use svc_tests::sse::SseStream;
use svc_tests::{TestService, hmac_sha256_hex, job_section, wait_for, wait_until};

const SECRET: &str = "cluster-views-secret";
const WAIT: Duration = Duration::from_secs(30);

fn job(name: &str, work: &Path, commands: &[&str], extra: &[&str]) -> String {
    let dir = format!("dir_work = {}", work.display());
    let path = format!("path = /{name}");
    let secret = format!("secret = {SECRET}");
    let commands: Vec<String> = commands.iter().map(|c| format!("command = {c}")).collect();
    let mut lines = vec![dir.as_str(), path.as_str(), secret.as_str()];
    lines.extend(commands.iter().map(String::as_str));
    lines.extend(extra);
    job_section(name, &lines)
}

async fn start_nodes(url: &str, jobs: &[(&str, String)], hook: &str) -> Vec<TestService> {
    let mut nodes = Vec::new();
    for n in 0..2 {
        let mut builder = TestService::builder()
            .svc("database_url = $SVC_TEST_DATABASE_URL")
            .svc(format!("node_name = node-{n}"))
            .env("SVC_TEST_DATABASE_URL", url)
            .job_http_file(
                "call",
                format!(
                    "[job.http \"call\"]\nhttp_url = {hook}\nhttp_method = POST\n\
                     http_request_type = json\n"
                ),
            );
        for (name, text) in jobs {
            builder = builder.job_file(name, text.clone());
        }
        nodes.push(builder.start().await);
    }
    nodes
}

/// Sends a signed trigger of `job` to `node`; answers the HTTP status.
async fn trigger(node: &TestService, job: &str, body: &str) -> u16 {
    let signature = hmac_sha256_hex(SECRET, body);
    node.trigger(
        &format!("/{job}"),
        body.as_bytes(),
        &[("x-svc-sign", signature.as_str())],
    )
    .await
    .status
}

/// The node (index) that ran `job`'s run `counter`, once it is in the state wanted.
async fn run_node(store: &ClusterStore, job: &str, counter: i64, state: &str) -> usize {
    let node: String = wait_for(WAIT, "the run in the shared table", async || {
        sqlx::query_scalar(
            "SELECT node FROM svc_runs WHERE id = $1 AND counter = $2 AND state = $3",
        )
        .bind(job)
        .bind(counter)
        .bind(state)
        .fetch_optional(store.pool())
        .await
        .expect("select")
    })
    .await;
    match node.as_str() {
        "node-0" => 0,
        "node-1" => 1,
        other => panic!("unknown node {other}"),
    }
}

fn decode(content: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(content.as_str().expect("base64 text"))
        .expect("base64")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_shows_every_run_its_log_and_the_audit() {
    let pg = tokio::task::spawn_blocking(PostgresServer::launch)
        .await
        .expect("launch PostgreSQL");
    let url = pg.create_database("svc_views");
    let work = tempfile::tempdir().expect("work dir");
    std::fs::set_permissions(
        work.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod");
    let jobs = [
        (
            "talk",
            job(
                "talk",
                work.path(),
                &["echo hello from $SVC_JOB_COUNTER", "echo to-stderr >&2"],
                &["log_retention = 2"],
            ),
        ),
        (
            "follow",
            job(
                "follow",
                work.path(),
                &[
                    "echo first",
                    "while [ ! -e go ]; do sleep 0.05; done",
                    "echo second",
                ],
                &[],
            ),
        ),
    ];
    let sink = Sink::start(0).await;
    let mut nodes = start_nodes(&url, &jobs, &sink.url("/hook")).await;
    let store = ClusterStore::new(&url, &StoreOptions::default()).expect("store");

    a_run_is_in_the_other_nodes_history_and_reads_the_same(&nodes, &store).await;
    log_retention_holds_in_the_shared_table(&nodes, &store).await;
    a_running_log_streams_from_the_other_node(&nodes, &store, work.path()).await;
    a_job_https_recent_lines_are_the_clusters(&nodes, &store, &sink).await;
    an_action_is_in_the_other_nodes_audit_log(&nodes, &store).await;

    for node in &mut nodes {
        node.stop().await;
    }
    store.close().await;
}

/// A run, wherever it ran, is in the other node's history and its log reads the same
/// from both nodes; the other node's dashboard shows the job's result, as if it had run
/// it; no such run is 404 there.
async fn a_run_is_in_the_other_nodes_history_and_reads_the_same(
    nodes: &[TestService],
    store: &ClusterStore,
) {
    assert_eq!(trigger(&nodes[0], "talk", "one").await, 200);
    let runner = run_node(store, "talk", 1, "done").await;
    let other = 1 - runner;
    let runs = nodes[other].runs("job_exec", "talk", "").await;
    runs.assert_status(200);
    let run = &runs.data()[0];
    assert_eq!(run["counter"], 1, "{}", runs.raw);
    assert_eq!(run["status"], "success", "{}", runs.raw);
    assert_eq!(run["node"], format!("node-{runner}"), "{}", runs.raw);
    assert_eq!(run["log"], true, "{}", runs.raw);
    assert_eq!(run["trigger"], "webhook", "{}", runs.raw);
    assert!(
        run["duration_ms"].is_u64() && run["ended_at"].is_string(),
        "{}",
        runs.raw
    );
    let here = nodes[runner].log("talk", 1).await;
    let there = nodes[other].log("talk", 1).await;
    here.assert_status(200);
    there.assert_status(200);
    let text = decode(&there.data()["content"]);
    assert_eq!(
        decode(&here.data()["content"]),
        text,
        "the same log on both nodes"
    );
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("hello from 1"), "{text}");
    assert!(text.contains("2> to-stderr"), "{text}");
    assert_eq!(there.data()["name"], "talk.1.success");
    assert_eq!(there.data()["status"], "success");
    wait_until(WAIT, "the other node to show talk's result", async || {
        nodes[other].job_status("talk").await == "success"
    })
    .await;
    nodes[other].log("talk", 99).await.assert_status(404);
}

/// `log_retention = 2` holds in the shared table: after three runs the first run's log
/// is gone from it, while the run stays in the history.
async fn log_retention_holds_in_the_shared_table(nodes: &[TestService], store: &ClusterStore) {
    for (n, body) in [(2, "two"), (3, "three")] {
        assert_eq!(trigger(&nodes[n % 2], "talk", body).await, 200);
        run_node(store, "talk", n as i64, "done").await;
    }
    // The end is recorded before the old logs are trimmed: wait for the trim (bounded).
    let wanted = vec![(3, true), (2, true), (1, false)];
    wait_until(
        WAIT,
        "the history with the first run's log trimmed",
        async || {
            let runs = nodes[0].runs("job_exec", "talk", "").await;
            let logs: Vec<(u64, bool)> = runs
                .data()
                .as_array()
                .expect("runs")
                .iter()
                .map(|run| {
                    (
                        run["counter"].as_u64().expect("counter"),
                        run["log"] == true,
                    )
                })
                .collect();
            logs == wanted
        },
    )
    .await;
    let chunks: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT run_id) FROM svc_log_chunks JOIN svc_runs USING (run_id)
         WHERE id = 'talk'",
    )
    .fetch_one(store.pool())
    .await
    .expect("count");
    assert_eq!(chunks, 2);
}

/// A running log streams from the node that does not run it, to its end, with the same
/// bytes as the runner's log; the other node shows it as the job's running run (which
/// the UI streams), then its result. The run waits for the file `go` in `work` until its
/// first line came through.
async fn a_running_log_streams_from_the_other_node(
    nodes: &[TestService],
    store: &ClusterStore,
    work: &Path,
) {
    assert_eq!(trigger(&nodes[1], "follow", "f").await, 200);
    let runner = run_node(store, "follow", 1, "running").await;
    let other = 1 - runner;
    let url = format!(
        "{}/svc/api/job_exec/log/stream?id=follow&counter=1",
        nodes[other].base_url()
    );
    wait_until(WAIT, "the other node to show follow running", async || {
        let job = nodes[other].job("follow").await;
        job["status"] == "started"
            && job["logs"].as_array().is_some_and(|logs| {
                logs.iter()
                    .any(|log| log["counter"] == 1 && log["status"] == "started")
            })
    })
    .await;
    let mut stream = SseStream::open(&url, &[]).await.expect("open the stream");
    let mut streamed = Vec::new();
    let mut ended = None;
    let deadline = std::time::Instant::now() + WAIT;
    let mut released = false;
    while ended.is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the stream did not end"
        );
        let Some(event) = stream.next(WAIT).await.expect("read the stream") else {
            panic!("the stream closed before its end event");
        };
        match event.name.as_str() {
            "meta" => assert_eq!(event.json()["counter"], 1),
            "chunk" => {
                let data = event.json();
                assert_eq!(data["offset"].as_u64(), Some(streamed.len() as u64));
                streamed.extend(decode(&data["content"]));
            }
            "end" => ended = Some(event.json()),
            other => panic!("unexpected event {other}: {}", event.data),
        }
        // Once the first line came through, while the run still waits: let it end.
        if !released && String::from_utf8_lossy(&streamed).contains("first") {
            assert!(
                !String::from_utf8_lossy(&streamed).contains("second"),
                "the run went on before it was let"
            );
            std::fs::write(work.join("go"), b"").expect("let the run end");
            released = true;
        }
    }
    assert!(released, "the first line was never streamed");
    let ended = ended.expect("end");
    assert_eq!(ended["status"], "success");
    assert_eq!(ended["name"], "follow.1.success");
    let whole = nodes[runner].log("follow", 1).await;
    assert_eq!(decode(&whole.data()["content"]), streamed);
    wait_until(WAIT, "the other node to show follow's result", async || {
        let job = nodes[other].job("follow").await;
        job["status"] == "success"
            && !job["logs"]
                .as_array()
                .is_some_and(|logs| logs.iter().any(|log| log["status"] == "started"))
    })
    .await;
}

/// A JobHttp's recent log lines (endpoint 6) are the cluster's: the same on both nodes,
/// whichever made the call.
async fn a_job_https_recent_lines_are_the_clusters(
    nodes: &[TestService],
    store: &ClusterStore,
    sink: &Sink,
) {
    let query = format!("id=call&_svc_epoch={}", svc_tests::fresh_epoch());
    nodes[0].job_http_trigger(&query).await.assert_status(200);
    sink.wait_requests(1).await;
    let store_done = async || {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM svc_runs WHERE id = 'call' AND state = 'done'",
        )
        .fetch_one(store.pool())
        .await
        .expect("count")
            == 1
    };
    wait_until(WAIT, "the JobHttp call to be recorded", store_done).await;
    let mut lines = Vec::new();
    for node in nodes {
        let answer = node.get("/svc/api/job_http/logs?id=call").await;
        answer.assert_status(200);
        lines.push(answer.data().clone());
    }
    assert_eq!(lines[0], lines[1], "the same recent lines on both nodes");
    let text = lines[0].to_string();
    assert!(text.contains("/hook") && text.contains("200"), "{text}");
}

/// An action on one node is in the other node's audit log, with the node's name (node 0
/// copies its entries as they are written: node 1 sees them shortly after); so is every
/// trigger accepted by either node, each once, numbered by the database, newest first.
async fn an_action_is_in_the_other_nodes_audit_log(nodes: &[TestService], store: &ClusterStore) {
    nodes[0].pause("talk").await.assert_status(200);
    let pause: Value = wait_for(WAIT, "node 0's pause in node 1's audit page", async || {
        let audit = nodes[1].get("/svc/api/audit").await;
        audit.assert_status(200);
        audit.data()["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .find(|entry| entry["action"] == "pause")
            .cloned()
    })
    .await;
    assert_eq!(pause["node"], "node-0", "{pause}");
    assert_eq!(pause["job"]["id"], "talk", "{pause}");
    assert!(pause["seq"].as_u64().is_some_and(|seq| seq > 0), "{pause}");
    let audit = nodes[1].get("/svc/api/audit?limit=100").await;
    let entries = audit.data()["entries"].as_array().expect("entries").clone();
    let triggers: Vec<&Value> = entries
        .iter()
        .filter(|e| e["action"] == "trigger")
        .collect();
    assert_eq!(triggers.len(), 4, "{}", audit.raw);
    let seqs: Vec<u64> = entries.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] > w[1]),
        "newest first: {seqs:?}"
    );
    let in_table: i64 =
        sqlx::query_scalar("SELECT count(*) FROM svc_audit WHERE entry->>'action' = 'pause'")
            .fetch_one(store.pool())
            .await
            .expect("count");
    assert_eq!(in_table, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_node_died_stops_showing_as_running_elsewhere() {
    let pg = tokio::task::spawn_blocking(PostgresServer::launch)
        .await
        .expect("launch PostgreSQL");
    let url = pg.create_database("svc_views_reaped");
    let work = tempfile::tempdir().expect("work dir");
    let jobs = [("hold", job("hold", work.path(), &["sleep 600"], &[]))];
    let sink = Sink::start(0).await;
    let mut nodes = start_nodes(&url, &jobs, &sink.url("/hook")).await;
    let store = ClusterStore::new(&url, &StoreOptions::default()).expect("store");
    assert_eq!(trigger(&nodes[0], "hold", "h").await, 200);
    let runner = run_node(&store, "hold", 1, "running").await;
    let other = 1 - runner;
    wait_until(WAIT, "the other node to show hold running", async || {
        nodes[other].job_status("hold").await == "started"
    })
    .await;
    // The runner dies: no end is ever signalled. Once the run is reaped (its lease is
    // 30 s), the other node reads it back and shows how it ended.
    nodes[runner].kill9().await;
    wait_until(
        Duration::from_secs(90),
        "the other node to show the reaped run as ended",
        async || {
            let job = nodes[other].job("hold").await;
            job["status"] == "failed"
                && !job["logs"]
                    .as_array()
                    .is_some_and(|logs| logs.iter().any(|log| log["status"] == "started"))
        },
    )
    .await;
    let status: String =
        sqlx::query_scalar("SELECT status FROM svc_runs WHERE id = 'hold' AND counter = 1")
            .fetch_one(store.pool())
            .await
            .expect("status");
    assert_eq!(status, "interrupted");
    nodes[other].stop().await;
    store.close().await;
}
