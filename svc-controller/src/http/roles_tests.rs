//! Roles through the router in-process: each role of `user.conf` may do what it grants
//! and is refused the rest with what it would need; the CSRF token guards every action
//! of a session; a signature still acts beside a session; a logout ends the session.
//! Over the engine's fake executor: no process, no socket, no real time.

use super::app_testkit::{Answer, Session, TestApp};

/// bcrypt of `password` at cost 4 (fast to check).
const HASH: &str = "$2a$04$UuTkLRZZ6QofpDOlMz32MuuxEHA43WOemOYHPz6.SjsVsyO1tDU96";
const PASSWORD: &str = "password";

/// A timer job that is not due while the test runs, and a JobHttp whose calls fail at
/// once (nothing listens on port 9).
const JOBS: &str = "[job \"hello\"]\nschedule = 0 0 1 1 *\ncommand = echo hello\n\n\
                    [job.http \"ping\"]\nschedule = 0 0 1 1 *\nhttp_url = http://127.0.0.1:9/\n";

/// `vera` (viewer by default), `otto` (operator), `ada` (admin).
fn users() -> String {
    format!(
        "[user \"vera\"]\npassword = {HASH}\n\n\
         [user \"otto\"]\npassword = {HASH}\nrole = operator\n\n\
         [user \"ada\"]\npassword = {HASH}\nrole = admin\n"
    )
}

/// A Job action as `session`, with its CSRF token.
async fn act(app: &TestApp, session: &Session, action: &str, id: &str) -> Answer {
    app.post_as(
        session,
        &format!("/svc/api/job_exec/{action}"),
        &format!("id={id}"),
    )
    .await
}

/// The status of Job (`jobs`) or JobHttp (`http_jobs`) `id` in the Environment, as
/// `session` reads it.
async fn status(app: &TestApp, session: &Session, list: &str, id: &str) -> String {
    let env = app.get_as(session, "/svc/api/environment").await;
    let data = &env.wrapper(200)["data"];
    let job = data[list]
        .as_object()
        .and_then(|jobs| jobs.values().find(|job| job["id"] == id))
        .unwrap_or_else(|| panic!("no {id} in {}", env.text()));
    job["status"].as_str().unwrap_or_default().to_string()
}

/// The three users, logged in, each with the role the session says.
async fn sessions(app: &TestApp) -> [Session; 3] {
    let vera = app.login("vera", PASSWORD).await;
    let otto = app.login("otto", PASSWORD).await;
    let ada = app.login("ada", PASSWORD).await;
    for (session, role) in [(&vera, "viewer"), (&otto, "operator"), (&ada, "admin")] {
        let answer = app.get_as(session, "/svc/api/session").await;
        assert_eq!(answer.wrapper(200)["data"]["role"], role);
        assert_eq!(answer.header("cache-control"), Some("no-store"));
        assert_eq!(session.csrf.len(), 64);
    }
    assert_ne!(vera.csrf, otto.csrf);
    [vera, otto, ada]
}

/// A viewer reads, and is refused every action with what it would need.
async fn a_viewer_only_reads(app: &TestApp, vera: &Session) {
    for action in ["pause", "resume", "cancel", "trigger"] {
        let answer = act(app, vera, action, "hello").await;
        answer.wrapper(403);
        let message = answer.message();
        assert!(
            message.starts_with("the role viewer may not ")
                && message.ends_with("it needs operator or admin"),
            "{message}"
        );
    }
    app.post_as(vera, "/svc/api/job_http/pause?id=ping", "")
        .await
        .wrapper(403);
    // Never run, never paused: an empty status.
    assert_eq!(status(app, vera, "jobs", "hello").await, "");
    assert_eq!(status(app, vera, "http_jobs", "ping").await, "");
}

/// An operator pauses, resumes, runs and cancels Jobs, and runs, pauses and resumes
/// JobHttps, but may not reload or read the audit log.
async fn an_operator_acts_on_jobs(app: &mut TestApp, otto: &Session) {
    act(app, otto, "pause", "hello").await.wrapper(200);
    assert_eq!(status(app, otto, "jobs", "hello").await, "paused");
    act(app, otto, "resume", "hello").await.wrapper(200);
    assert_ne!(status(app, otto, "jobs", "hello").await, "paused");
    act(app, otto, "trigger", "hello").await.wrapper(200);
    let run = app.harness.runs.next().await;
    assert_eq!(run.id(), ("hello", 1));
    run.finish(true, "ok");
    // Nothing running once it ended: 200 and nothing changes, as with a signature.
    crate::engine::testkit::settle().await;
    act(app, otto, "cancel", "hello").await.wrapper(200);
    // Run now of a JobHttp: the call is made.
    app.post_as(otto, "/svc/api/job_http/trigger?id=ping", "")
        .await
        .wrapper(200);
    let call = app.harness.runs.next().await;
    assert_eq!(call.id(), ("ping", 1));
    call.finish(false, "connection refused");
    crate::engine::testkit::settle().await;
    app.post_as(otto, "/svc/api/job_http/pause?id=ping", "")
        .await
        .wrapper(200);
    assert_eq!(status(app, otto, "http_jobs", "ping").await, "paused");
    app.post_as(otto, "/svc/api/job_http/resume?id=ping", "")
        .await
        .wrapper(200);
    assert_ne!(status(app, otto, "http_jobs", "ping").await, "paused");
    let refused = app.post_as(otto, "/svc/api/reload", "").await;
    refused.wrapper(403);
    assert_eq!(
        refused.message(),
        "the role operator may not reload the configuration: it needs admin"
    );
    let refused = app.get_as(otto, "/svc/api/audit").await;
    refused.wrapper(403);
    assert!(
        refused.message().contains("read the audit log"),
        "{}",
        refused.text()
    );
}

/// Without the session's own CSRF token (none, a wrong one, another session's) an
/// action is 403 and changes nothing; with neither a session nor a signature it is 401.
async fn every_action_needs_its_csrf_token(app: &TestApp, otto: &Session, ada: &Session) {
    for csrf in [None, Some("0".repeat(64)), Some(ada.csrf.clone())] {
        let answer = app
            .as_user(
                "POST",
                "/svc/api/job_exec/pause",
                Some(&otto.cookie),
                csrf.as_deref(),
                "id=hello",
            )
            .await;
        answer.wrapper(403);
        assert!(answer.message().contains("X-Svc-Csrf"), "{}", answer.text());
    }
    assert_ne!(status(app, otto, "jobs", "hello").await, "paused");
    app.as_user("POST", "/svc/api/job_exec/pause", None, None, "id=hello")
        .await
        .wrapper(401);
}

#[tokio::test]
async fn each_role_may_do_what_it_grants_and_is_refused_the_rest() {
    let mut app = TestApp::with_users("", JOBS, &users());
    let [vera, otto, ada] = sessions(&app).await;
    a_viewer_only_reads(&app, &vera).await;
    an_operator_acts_on_jobs(&mut app, &otto).await;

    // An admin does all of that, and reads the audit log.
    act(&app, &ada, "pause", "hello").await.wrapper(200);
    assert_eq!(status(&app, &ada, "jobs", "hello").await, "paused");
    act(&app, &ada, "resume", "hello").await.wrapper(200);
    app.get_as(&ada, "/svc/api/audit").await.wrapper(200);

    every_action_needs_its_csrf_token(&app, &otto, &ada).await;

    // The signed path is unchanged, with a session cookie beside it or not.
    let pause = format!("_svc_epoch={}&id=hello", super::app_testkit::fresh_epoch());
    app.post_form(
        "/svc/api/job_exec/pause",
        &pause,
        Some(&super::app_testkit::sign(&pause)),
    )
    .await
    .wrapper(200);
    assert_eq!(status(&app, &vera, "jobs", "hello").await, "paused");
    let resume = format!("_svc_epoch={}&id=hello", super::app_testkit::fresh_epoch());
    let signature = super::app_testkit::sign(&resume);
    app.send(
        "POST",
        "/svc/api/job_exec/resume",
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("cookie", &vera.cookie),
            ("x-svc-sign", &signature),
        ],
        resume,
    )
    .await
    .wrapper(200);
    assert_ne!(status(&app, &vera, "jobs", "hello").await, "paused");

    // After a logout the cookie acts no more.
    app.as_user("POST", "/svc/api/logout", Some(&otto.cookie), None, "")
        .await
        .wrapper(200);
    act(&app, &otto, "pause", "hello").await.wrapper(401);
}
