//! End-to-end tests of the web UI in headless Chromium.
//!
//! The test starts the real service (a main secret, an interval job, a webhook job that
//! prints five lines slowly, a long job, a long job with `on_busy = skip`, a patchhost
//! job and a JobHttp) and runs the
//! playwright-core scenarios of `tests/browser/ui.mjs` against it, in phases: between
//! phases the test itself checks, with the harness's own signing, what the UI did
//! (a trigger of the job the UI paused gets 412; after the UI resumed it, 200).
//! The scenarios also take `dashboard.png` and `log-viewer.png`, and each page at 390 and
//! 1280 px (`<page>-<width>.png`): into `<target>/screenshots/`, or, only when
//! `SVC_UPDATE_SCREENSHOTS=1` is set (as `docs/screenshots/update` does), into
//! `docs/screenshots/`. A test run never rewrites a tracked file. Each test notes when it
//! began and checks that every screenshot it expects was modified after that: a file left
//! by an earlier run, in either folder, does not pass for this run's.
//! A third service runs the run history, live update, layout and chart scenarios.
//! A second service, with a `user.conf`, runs the login scenario.
//! Two nodes of a cluster on a real PostgreSQL (`svc_tests::postgres`), whose
//! definitions of one job differ, run the cluster scenario.
//!
//! Prerequisites (checked first; a missing one fails with the command that installs it):
//!
//! ```sh
//! apt-get update && apt-get install -y chromium     # /usr/bin/chromium
//! (cd tests/browser && npm ci)                      # playwright-core; no browser download
//! ```

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use svc_tests::web::write_user_conf;
use svc_tests::{TestService, WAIT, hmac_sha256_hex, job_section};

/// Browser binary the scenarios drive.
const CHROMIUM: &str = "/usr/bin/chromium";
/// Limit of one scenario with its browser context (ui.mjs bounds the scenario itself at
/// 90 s); a phase gets this per scenario plus the browser's start. A bound against a
/// hang: a scenario takes 1 to 5 s on an idle machine, and the tests run beside others.
const SCENARIO_LIMIT: Duration = Duration::from_secs(120);
const SETUP: &str = "apt-get update && apt-get install -y chromium nodejs npm && \
                     (cd tests/browser && npm ci)";

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("browser")
}

/// Where the scenarios put their screenshots: see the module documentation.
fn screenshots_dir(_service: &TestService) -> PathBuf {
    if std::env::var("SVC_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        return Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots");
    }
    // `<target>/screenshots`: kept after the run for a look, never a tracked file.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")))
        .join("screenshots");
    std::fs::create_dir_all(&dir).expect("create the screenshots directory");
    dir
}

/// Panics with the setup command unless node, playwright-core and Chromium are there.
fn require_prerequisites(need_browser: bool) {
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    assert!(
        node,
        "the browser tests need Node.js (`node` on PATH); set up with: {SETUP}"
    );
    if !need_browser {
        return;
    }
    assert!(
        browser_dir()
            .join("node_modules/playwright-core/package.json")
            .is_file(),
        "tests/browser/node_modules is missing playwright-core; set up with: {SETUP}"
    );
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing (Debian's chromium package); set up with: {SETUP}"
    );
}

/// Runs `node <args>` in tests/browser, bounded by `limit`; panics with its output
/// unless it exits 0. Its output is collected as it comes, so a run that overstays its
/// limit still says which scenarios passed and how long each took.
async fn node(args: &[&str], envs: &[(&str, String)], limit: Duration) -> String {
    let mut command = tokio::process::Command::new("node");
    command
        .args(args)
        .current_dir(browser_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (key, value) in envs {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("spawn node");
    let stdout = Collected::start(child.stdout.take().expect("node's stdout"));
    let stderr = Collected::start(child.stderr.take().expect("node's stderr"));
    let status = tokio::time::timeout(limit, child.wait()).await;
    if status.is_err() {
        child.kill().await.expect("kill node");
    }
    let (stdout, stderr) = (stdout.text().await, stderr.text().await);
    println!("node {args:?}:\n{stdout}{stderr}");
    let status = match status {
        Ok(status) => status.expect("wait for node"),
        Err(_) => panic!("node {args:?} did not finish within {limit:?}:\n{stdout}\n{stderr}"),
    };
    assert!(
        status.success(),
        "node {args:?} failed ({status}):\n{stdout}\n{stderr}"
    );
    stdout
}

/// The text of a pipe, gathered by a task of its own as it comes.
struct Collected {
    bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Collected {
    fn start(mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Collected {
        let bytes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = bytes.clone();
        let reader = tokio::spawn(async move {
            use tokio::io::AsyncReadExt as _;
            let mut chunk = [0u8; 8192];
            // A read error ends the text early; what came before it is still shown.
            while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
                sink.lock()
                    .expect("output lock")
                    .extend_from_slice(&chunk[..n]);
            }
        });
        Collected { bytes, reader }
    }

    /// What came until the pipe closed, or until `WAIT` passed: a process the dead one
    /// left behind may hold the pipe open.
    async fn text(self) -> String {
        let _ = tokio::time::timeout(WAIT, self.reader).await;
        String::from_utf8_lossy(&self.bytes.lock().expect("output lock")).into_owned()
    }
}

/// One browser at a time: the tests of this file would otherwise start two Chromiums.
static BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs UI scenarios against `service`.
async fn scenarios(service: &TestService, names: &[&str]) {
    scenarios_with(service, names, &[]).await;
}

/// Runs UI scenarios against `service` with more environment variables for ui.mjs.
async fn scenarios_with(service: &TestService, names: &[&str], extra: &[(&str, String)]) {
    let mut args = vec!["ui.mjs"];
    args.extend_from_slice(names);
    let mut envs = vec![
        ("SVC_BASE_URL", service.base_url()),
        ("SVC_SECRET", service.secret()),
        ("SVC_NAME", "browser-test".to_string()),
        (
            "SVC_SCREENSHOTS",
            screenshots_dir(service).to_string_lossy().into_owned(),
        ),
        ("SVC_CHROMIUM", CHROMIUM.to_string()),
    ];
    envs.extend(extra.iter().cloned());
    let limit = SCENARIO_LIMIT * u32::try_from(names.len()).unwrap_or(1) + WAIT;
    let out = node(&args, &envs, limit).await;
    for name in names {
        assert!(
            out.contains(&format!("ok - {name} (")),
            "scenario {name} did not pass:\n{out}"
        );
    }
}

/// A directory the `build` job's run waits in before its last line: the file `open` in
/// it lets one run end (the run removes it). The run scenario opens it once it has seen
/// the first line shown alone, so that "line 5 is not there yet" holds whatever the
/// machine's speed; the test opens it for the runs it starts itself.
struct Gate {
    dir: tempfile::TempDir,
}

impl Gate {
    fn new() -> Gate {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("gate dir");
        // The job may run as an unprivileged user, which removes the file.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod gate dir");
        Gate { dir }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("open")
    }

    fn open(&self) {
        std::fs::write(self.file(), b"").expect("open the gate");
    }

    /// The `build` job's command: five lines half a second apart, the last once the gate
    /// is open (at most 60 s later: the run then goes on without it). The command's text
    /// has no "line 5" of its own, which its log shows.
    fn command(&self) -> String {
        let file = self.file();
        let file = file.display();
        format!(
            "for i in 1 2 3 4 5; do if [ $i = 5 ]; then n=0; \
             while [ ! -e {file} ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done; \
             rm -f {file}; fi; echo line $i; sleep 0.5; done"
        )
    }
}

/// `start_service`'s JobHttp `stall` calls this address, where a listener takes the
/// connection and never answers: the call goes on until it is cancelled. Its timeout is
/// an hour so that a slow machine reaching the cancel step late still finds it running.
async fn start_service(gate: &Gate, silent: std::net::SocketAddr) -> TestService {
    let build = format!("command = {}", gate.command());
    let jobs = [
        job_section(
            "tick",
            &[
                "description = <p>Says <b>tick</b> every hour.</p>",
                "interval = 1h",
                "command = echo tick",
            ],
        ),
        job_section(
            "build",
            &["description = Builds on a push.", "path = /build", &build],
        ),
        job_section("long", &["path = /long", "command = sleep 30"]),
        job_section(
            "solo",
            &["path = /solo", "on_busy = skip", "command = sleep 30"],
        ),
        job_section(
            "patch",
            &["path = /patch", "auth_kind = patchhost", "command = true"],
        ),
    ]
    .join("\n");
    TestService::builder()
        .svc("name = browser-test")
        .job_file("jobs", jobs)
        .job_http_file(
            "ping",
            "[job.http \"ping\"]\n\
             interval = 1h\n\
             http_url = http://127.0.0.1:9/hook\n\
             http_method = POST\n\
             http_request_type = json\n\
             http_header = Authorization: Bearer very-secret-token\n\
             http_header = X-Trace: visible-value\n",
        )
        .job_http_file(
            "stall",
            format!(
                "[job.http \"stall\"]\ninterval = 1h\nhttp_url = http://{silent}/\n\
                 http_timeout = 1h\n"
            ),
        )
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn web_ui_end_to_end_in_chromium() {
    require_prerequisites(true);
    let _browser = BROWSER.lock().await;
    let began = SystemTime::now();
    let gate = Gate::new();
    // Connections queue here unanswered (nothing accepts them) until the test ends.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let service = start_service(&gate, silent.local_addr().expect("address")).await;
    service.wait_job_status("tick", "success", WAIT).await;

    scenarios_with(
        &service,
        &[
            "dashboard",
            "run-now-everywhere",
            "jobhttp",
            "jobhttp-cancel",
            "wrong-secret",
            "run",
            "pause",
            "busy-skip",
        ],
        &[("SVC_RUN_GATE", gate.file().display().to_string())],
    )
    .await;
    // The UI's second run now of `solo` started nothing: one run, the one it cancelled.
    service
        .wait_run_finished("solo", 1, WAIT)
        .await
        .assert_status("fail");
    assert_eq!(service.job_logs("solo").len(), 1);
    // The run the UI started ended as success, with all its lines.
    let log = service.wait_run_finished("build", 1, WAIT).await;
    log.assert_status("success");
    assert!(log.content().contains("line 5"), "{}", log.content());
    // The UI paused `build`: a trigger signed by the test gets 412.
    let body = br#"{"from":"test"}"#;
    let signature = hmac_sha256_hex(service.secret(), body);
    service
        .trigger("/build", body, &[("x-svc-sign", signature.as_str())])
        .await
        .assert_status(412);
    assert_eq!(service.job_status("build").await, "paused");

    scenarios(&service, &["resume", "cancel"]).await;
    // Resumed: triggers run again.
    gate.open();
    service
        .trigger("/build", body, &[("x-svc-sign", signature.as_str())])
        .await
        .assert_status(200);
    service.wait_run_finished("build", 2, WAIT).await;
    // Cancelled through the UI: the long run failed and says so.
    let long = service.wait_run_finished("long", 1, WAIT).await;
    long.assert_status("fail");
    assert!(
        long.content().to_lowercase().contains("cancel"),
        "{}",
        long.content()
    );
    let dir = screenshots_dir(&service);
    for name in ["dashboard.png", "log-viewer.png"] {
        assert_screenshot(&dir.join(name), began, 10_000);
    }
}

/// A service whose `user.conf` names `LOGIN_USER`. The harness's `start` waits for the
/// Environment to answer 200, which needs a session here, so this waits for the session
/// endpoint's 401 instead.
async fn start_service_with_login() -> TestService {
    let builder = TestService::builder().svc("name = browser-test").job_file(
        "jobs",
        job_section("tick", &["interval = 1h", "command = echo tick"]),
    );
    let hash = svc_controller::security::password::hash_password(LOGIN_PASSWORD)
        .expect("hash the password");
    write_user_conf(
        builder.dir_base(),
        &format!("[user \"{LOGIN_USER}\"]\npassword = {hash}\n"),
        0o600,
    );
    let mut service = builder.build();
    service.start_answering("/svc/api/session", 401).await;
    service
}

/// Two cluster nodes on one real PostgreSQL whose definitions of `shared` differ: the
/// dashboard's Cluster panel and the warnings on the job, at 390 and 1280 px.
#[tokio::test(flavor = "multi_thread")]
async fn cluster_drift_in_chromium() {
    require_prerequisites(true);
    let _browser = BROWSER.lock().await;
    let began = SystemTime::now();
    let pg = tokio::task::spawn_blocking(svc_tests::postgres::PostgresServer::launch)
        .await
        .expect("launch PostgreSQL");
    let url = pg.create_database("svc_browser");
    let node = |name: &str| {
        TestService::builder()
            .svc("name = browser-test")
            .svc("database_url = $SVC_TEST_DATABASE_URL")
            .svc(format!("node_name = {name}"))
            .env("SVC_TEST_DATABASE_URL", &url)
    };
    let a = node("drift-a")
        .job_file(
            "shared",
            job_section("shared", &["interval = 1h", "command = true"]),
        )
        .job_file(
            "mine",
            job_section("mine", &["interval = 1h", "command = true"]),
        )
        .start()
        .await;
    let _b = node("drift-b")
        .job_file(
            "shared",
            job_section("shared", &["interval = 1h", "command = false"]),
        )
        .job_file(
            "only-b",
            job_section("only-b", &["interval = 1h", "command = true"]),
        )
        .start()
        .await;
    scenarios(&a, &["cluster"]).await;
    let dir = screenshots_dir(&a);
    for name in [
        "cluster-390.png",
        "cluster-1280.png",
        "cluster-job-390.png",
        "cluster-job-1280.png",
    ] {
        assert_screenshot(&dir.join(name), began, 10_000);
    }
}

const LOGIN_USER: &str = "ann";
const LOGIN_PASSWORD: &str = "a long browser test password";

#[tokio::test(flavor = "multi_thread")]
async fn login_in_chromium() {
    require_prerequisites(true);
    let _browser = BROWSER.lock().await;
    let service = start_service_with_login().await;
    scenarios_with(
        &service,
        &["login"],
        &[
            ("SVC_USER", LOGIN_USER.to_string()),
            ("SVC_PASSWORD", LOGIN_PASSWORD.to_string()),
        ],
    )
    .await;
    // The UI's logout ended the session: nothing is open without one.
    let answer = service.get("/svc/api/environment").await;
    answer.assert_status(401);
    assert_eq!(answer.message(), "login required");
}

/// The role scenarios' accounts: a viewer, an operator and an admin, one password.
const ROLE_USERS: [(&str, &str); 3] = [("vera", "viewer"), ("otto", "operator"), ("ada", "admin")];

/// A service whose `user.conf` has [`ROLE_USERS`] (all with `LOGIN_PASSWORD`): the
/// role scenarios log in as each and check what each may and may not do.
#[tokio::test(flavor = "multi_thread")]
async fn roles_in_chromium() {
    require_prerequisites(true);
    let _browser = BROWSER.lock().await;
    let began = SystemTime::now();
    let builder = TestService::builder()
        .svc("name = browser-test")
        .job_file(
            "jobs",
            job_section("tick", &["schedule = 0 0 1 1 *", "command = echo tick"]),
        )
        .job_http_file(
            "ping",
            "[job.http \"ping\"]\nschedule = 0 0 1 1 *\nhttp_url = http://127.0.0.1:9/\n",
        );
    let hash = svc_controller::security::password::hash_password(LOGIN_PASSWORD)
        .expect("hash the password");
    let users: String = ROLE_USERS
        .iter()
        .map(|(name, role)| format!("[user \"{name}\"]\npassword = {hash}\nrole = {role}\n"))
        .collect();
    write_user_conf(builder.dir_base(), &users, 0o600);
    let mut service = builder.build();
    service.start_answering("/svc/api/session", 401).await;
    let accounts = [
        ("SVC_VIEWER", ROLE_USERS[0].0.to_string()),
        ("SVC_OPERATOR", ROLE_USERS[1].0.to_string()),
        ("SVC_ADMIN", ROLE_USERS[2].0.to_string()),
        ("SVC_PASSWORD", LOGIN_PASSWORD.to_string()),
    ];
    scenarios_with(&service, &["viewer", "operator", "admin"], &accounts).await;
    // What the UI did, seen from outside: the operator's run ended, and the audit log
    // has the operator's actions and the admin's reload, made with their sessions, and
    // the pause the viewer sent from the page, refused.
    service
        .wait_run_finished("tick", 1, WAIT)
        .await
        .assert_status("success");
    let audit = std::fs::read_to_string(service.dir_base().join("var/log/svc/audit.log"))
        .expect("audit.log");
    for needle in [
        r#"{"kind":"account","name":"otto"},"action":"pause""#,
        r#"{"kind":"account","name":"otto"},"action":"run_now""#,
        r#"{"kind":"account","name":"ada"},"action":"reload""#,
    ] {
        assert!(audit.contains(needle), "{needle} not in:\n{audit}");
    }
    let vera_pauses: Vec<serde_json::Value> = audit
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}")))
        .filter(|entry: &serde_json::Value| {
            entry["actor"] == serde_json::json!({"kind": "account", "name": "vera"})
                && entry["action"] == "pause"
        })
        .collect();
    assert_eq!(vera_pauses.len(), 1, "one pause by vera in:\n{audit}");
    let refused = &vera_pauses[0];
    assert_eq!(
        refused["job"],
        serde_json::json!({"kind": "job_exec", "id": "tick"})
    );
    assert_eq!(refused["result"], "refused", "{refused}");
    assert_eq!(refused["status"], 403, "{refused}");
    assert_eq!(
        refused["reason"], "the role viewer may not pause jobs: it needs operator or admin",
        "{refused}"
    );
    let dir = screenshots_dir(&service);
    for page in ["viewer-job", "audit"] {
        for width in [390, 1280] {
            assert_screenshot(&dir.join(format!("{page}-{width}.png")), began, 5_000);
        }
    }
}

#[tokio::test]
async fn hmac_js_passes_the_fips_and_rfc_4231_vectors() {
    require_prerequisites(false);
    let out = node(&["--test", "hmac.test.mjs"], &[], Duration::from_secs(60)).await;
    assert!(out.contains("# fail 0"), "{out}");
}

/// A service for the history, live update, layout and chart scenarios: `flaky` runs as
/// its webhook body says (`ok`, `fail`, `slow`, with a 2 s time limit), `quick`
/// succeeds, `nightly` is due every 6 hours by its schedule (the timeline's cron lane).
async fn start_history_service() -> TestService {
    let jobs = [
        job_section("tick", &["interval = 1h", "command = echo tick"]),
        job_section("quick", &["path = /quick", "command = echo quick"]),
        job_section("nightly", &["schedule = 0 */6 * * *", "command = true"]),
        job_section(
            "flaky",
            &[
                "description = Succeeds, fails or hangs, as its webhook says.",
                "path = /flaky",
                "secret = flaky-secret",
                "timeout = 2s",
                // No `;`: it would begin a comment.
                "command = grep -q ok $SVC_REQUEST_BODY && exit 0 || grep -q fail $SVC_REQUEST_BODY \
                 && echo failing >&2 && exit 3 || sleep 30",
            ],
        ),
    ]
    .join("\n");
    TestService::builder()
        .svc("name = browser-test")
        .job_file("jobs", jobs)
        .start()
        .await
}

/// Triggers `flaky` with `mode` as its body.
async fn flaky(service: &TestService, mode: &str) {
    let body = format!("{mode}\n");
    let signature = hmac_sha256_hex("flaky-secret", body.as_bytes());
    service
        .trigger(
            "/flaky",
            body.as_bytes(),
            &[("x-svc-sign", signature.as_str())],
        )
        .await
        .assert_status(200);
}

#[tokio::test(flavor = "multi_thread")]
async fn history_live_updates_and_layout_in_chromium() {
    require_prerequisites(true);
    let _browser = BROWSER.lock().await;
    let began = SystemTime::now();
    let service = start_history_service().await;
    service.wait_job_status("tick", "success", WAIT).await;
    // Four runs of `flaky`, each ending its own way.
    flaky(&service, "ok").await;
    service.wait_run_finished("flaky", 1, WAIT).await;
    flaky(&service, "fail").await;
    service.wait_run_finished("flaky", 2, WAIT).await;
    flaky(&service, "slow").await;
    service.wait_run_finished("flaky", 3, WAIT).await;
    flaky(&service, "slow").await;
    service.wait_run_started("flaky", 4, WAIT).await;
    service.cancel("flaky").await.assert_status(200);
    service.wait_run_finished("flaky", 4, WAIT).await;
    let runs = service.runs("job_exec", "flaky", "").await;
    let statuses: Vec<&str> = runs
        .data()
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|run| run["status"].as_str())
        .collect();
    assert_eq!(statuses, ["canceled", "timeout", "fail", "success"]);

    scenarios(&service, &["history", "live", "layout", "charts"]).await;
    let dir = screenshots_dir(&service);
    for page in [
        "dashboard",
        "job",
        "docs",
        "job-chart",
        "dashboard-timeline",
    ] {
        for width in [390, 1280] {
            assert_screenshot(&dir.join(format!("{page}-{width}.png")), began, 5_000);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn login_page_layout_in_chromium() {
    require_prerequisites(true);
    let _browser = BROWSER.lock().await;
    let began = SystemTime::now();
    let service = start_service_with_login().await;
    scenarios(&service, &["login-layout"]).await;
    let dir = screenshots_dir(&service);
    for width in [390, 1280] {
        assert_screenshot(&dir.join(format!("login-{width}.png")), began, 5_000);
    }
}

/// Panics unless `path` is a PNG of a rendered page (more than `min_bytes`) written by
/// this run: modified after `began`, when the test began. The screenshot folders keep
/// the files of earlier runs (and `docs/screenshots/` holds tracked ones, never removed
/// by a test), so the file being there proves nothing by itself.
fn assert_screenshot(path: &Path, began: SystemTime, min_bytes: usize) {
    let modified = std::fs::metadata(path)
        .and_then(|meta| meta.modified())
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    assert!(
        modified > began,
        "{} was not written by this run: modified {:?}, the test began {:?}",
        path.display(),
        chrono::DateTime::<chrono::Utc>::from(modified),
        chrono::DateTime::<chrono::Utc>::from(began)
    );
    let bytes = std::fs::read(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    assert!(bytes.starts_with(b"\x89PNG"), "{} is a PNG", path.display());
    // A blank page compresses to a few hundred bytes; a rendered one does not.
    assert!(
        bytes.len() > min_bytes,
        "{} holds only {} bytes",
        path.display(),
        bytes.len()
    );
}
