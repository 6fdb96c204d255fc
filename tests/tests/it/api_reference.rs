//! Keeps `docs/api.md` true: every ```` ```http ```` example of the page is sent, in
//! document order, to a service running the page's example configuration, and the answer
//! must have the status written after the next ```` ```json <status> ```` block and every
//! member of that JSON, with the same JSON type (objects recursively, arrays by their
//! first element). `code` and `message` must be equal; so must the members whose values
//! do not change from run to run (see [`STABLE_KEYS`]). Times, paths, addresses,
//! versions and log contents are not compared.

use std::time::Duration;

use serde_json::Value;
use svc_tests::{TestService, WAIT, hmac_sha256_hex, job_section};

/// The main secret of the page's example configuration.
const SECRET: &str = "s3cret";

/// Members whose documented value must be the value served (they are fixed by the
/// example configuration and the order of the examples, unlike times or addresses).
const STABLE_KEYS: &[&str] = &[
    "code",
    "message",
    "id",
    "job_id",
    "name",
    "status",
    "counter",
    "path",
    "interval",
    "auth_kind",
    "header_sign",
    "commands",
    "log_retention",
    "timeout",
    "max_job_running",
    "http_timeout",
    "http_method",
    "http_request_type",
    "http_headers",
    "http_insecure",
];

/// One example of the page: the request and the documented answer.
#[derive(Debug)]
struct Example {
    /// Line of the ```` ```http ```` fence in `docs/api.md`, for messages.
    line: usize,
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: String,
    status: u16,
    answer: Value,
}

/// A fenced block of the page.
#[derive(Debug)]
struct Block {
    line: usize,
    info: String,
    text: String,
}

fn fenced_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (index, line) in markdown.lines().enumerate() {
        match open.as_mut() {
            None => {
                if let Some(info) = line.trim_start().strip_prefix("```") {
                    open = Some(Block {
                        line: index + 1,
                        info: info.trim().to_owned(),
                        text: String::new(),
                    });
                }
            }
            Some(block) => {
                if line.trim() == "```" {
                    blocks.extend(open.take());
                } else {
                    block.text.push_str(line);
                    block.text.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "docs/api.md has an unclosed code block");
    blocks
}

/// Every ```` ```http ```` block with the next ```` ```json <status> ```` block after it.
fn examples(markdown: &str) -> Vec<Example> {
    let blocks = fenced_blocks(markdown);
    let mut examples = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        if block.info != "http" {
            continue;
        }
        let answer = blocks[index + 1..]
            .iter()
            .take_while(|next| next.info != "http")
            .find_map(|next| {
                let status = next
                    .info
                    .strip_prefix("json ")?
                    .trim()
                    .parse::<u16>()
                    .ok()?;
                Some((next, status))
            })
            .unwrap_or_else(|| {
                panic!(
                    "docs/api.md line {}: the http example has no ```json <status> answer \
                     before the next example",
                    block.line
                )
            });
        let (answer_block, status) = answer;
        let answer: Value = serde_json::from_str(&answer_block.text).unwrap_or_else(|err| {
            panic!(
                "docs/api.md line {}: the documented answer is not JSON: {err}",
                answer_block.line
            )
        });

        let mut lines = block.text.lines();
        let request_line = lines.next().unwrap_or_default();
        let (method, target) = request_line.split_once(' ').unwrap_or_else(|| {
            panic!(
                "docs/api.md line {}: bad request line {request_line:?}",
                block.line
            )
        });
        let mut headers = Vec::new();
        for line in lines.by_ref() {
            if line.trim().is_empty() {
                break;
            }
            let (name, value) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("docs/api.md line {}: bad header {line:?}", block.line));
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        let body = lines.collect::<Vec<_>>().join("\n").trim_end().to_owned();
        examples.push(Example {
            line: block.line,
            method: method.trim().to_owned(),
            target: target.trim().to_owned(),
            headers,
            body,
            status,
            answer,
        });
    }
    examples
}

/// What `<signature>` stands for in a request to `target` with `body`.
fn signature_for(target: &str, body: &str) -> String {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path.starts_with("/svc/api/job_http/") {
        // Endpoints 7 and 8: the raw query string.
        hmac_sha256_hex(SECRET, query)
    } else {
        // Endpoints 2 and 3 (and cancel): the form body; endpoint 9: the raw body.
        hmac_sha256_hex(SECRET, body)
    }
}

/// Checks that `got` has every member of `documented` with the same JSON type (and the
/// same value for [`STABLE_KEYS`]); describes each difference in `problems`.
fn compare(documented: &Value, got: &Value, at: &str, key: &str, problems: &mut Vec<String>) {
    if STABLE_KEYS.contains(&key) && documented != got {
        problems.push(format!("{at}: documented {documented}, served {got}"));
        return;
    }
    match (documented, got) {
        (Value::Object(want), Value::Object(have)) => {
            for (name, value) in want {
                match have.get(name) {
                    Some(served) => compare(value, served, &format!("{at}.{name}"), name, problems),
                    None => problems.push(format!("{at}.{name}: missing in the answer")),
                }
            }
        }
        (Value::Array(want), Value::Array(have)) => {
            if let (Some(first), Some(served)) = (want.first(), have.first()) {
                compare(first, served, &format!("{at}[0]"), "", problems);
            }
        }
        (Value::Null, Value::Null)
        | (Value::Bool(_), Value::Bool(_))
        | (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_)) => {}
        _ => problems.push(format!(
            "{at}: documented {documented} ({}), served {got} ({})",
            type_name(documented),
            type_name(got)
        )),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The service of the page's "Example configuration used by this page".
async fn example_service() -> TestService {
    let builder = TestService::builder().svc(format!("secret = {SECRET}"));
    let jobs = [
        job_section("hello", &["interval = 1h", "command = echo hello"]),
        job_section("deploy", &["path = /deploy", "command = echo deployed"]),
    ]
    .join("\n");
    // The JobHttp calls the service itself, and the harness picks the port: build the
    // tree, then add the JobHttp file with the address (read when the controller starts).
    let mut svc = builder.job_file("jobs", jobs).build();
    let ping = format!(
        "[job.http \"ping\"]\n\
         interval = 1h\n\
         http_url = http://{}/svc/api/environment\n\
         http_header = Authorization: Bearer x\n",
        svc.listen_address()
    );
    std::fs::write(svc.dir_base().join("etc/svc/job_http.d/ping.conf"), ping)
        .expect("write job_http.d/ping.conf");
    svc.start().await;
    svc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_of_the_api_reference_is_what_the_service_answers() {
    let doc_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md");
    let markdown = std::fs::read_to_string(doc_path).expect("read docs/api.md");
    let examples = examples(&markdown);
    assert!(
        examples.len() >= 15,
        "docs/api.md has only {} examples; the parser lost some",
        examples.len()
    );

    let svc = example_service().await;
    svc.wait_run_finished("hello", 1, WAIT)
        .await
        .assert_status("success");
    svc_tests::wait_for(WAIT, "run 1 of JobHttp ping finished", async || {
        svc.log_files("job_http", "ping")
            .into_iter()
            .find(|log| log.counter == 1 && log.status != "started")
    })
    .await
    .assert_status("success");
    // The finished runs show in the Environment (status and log list) too.
    svc_tests::wait_until(WAIT, "hello and ping show their first run", async || {
        let Ok(env) = svc.try_environment().await else {
            return false;
        };
        env["jobs"]["hello"]["status"] == "success"
            && env["http_jobs"]["ping"]["status"] == "success"
    })
    .await;

    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("build the HTTP client");
    let mut failures = Vec::new();
    for example in &examples {
        let epoch = chrono::Utc::now().timestamp().to_string();
        let body = example.body.replace("<epoch>", &epoch);
        let target = example.target.replace("<epoch>", &epoch);
        let method = reqwest::Method::from_bytes(example.method.as_bytes())
            .unwrap_or_else(|err| panic!("line {}: method: {err}", example.line));
        let mut request = client
            .request(method, format!("{}{target}", svc.base_url()))
            .body(body.clone());
        for (name, value) in &example.headers {
            let value = if value == "<signature>" {
                signature_for(&target, &body)
            } else {
                value.clone()
            };
            request = request.header(name.as_str(), value);
        }
        let response = request.send().await.unwrap_or_else(|err| {
            panic!("line {}: {} {target}: {err}", example.line, example.method)
        });
        let status = response.status().as_u16();
        let raw = response.text().await.unwrap_or_default();
        let got: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
        let mut problems = Vec::new();
        if status != example.status {
            problems.push(format!(
                "HTTP status {status}, documented {}",
                example.status
            ));
        }
        compare(&example.answer, &got, "answer", "", &mut problems);
        if !problems.is_empty() {
            failures.push(format!(
                "docs/api.md line {}: {} {target}\n  {}\n  served: {raw}",
                example.line,
                example.method,
                problems.join("\n  ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} examples of docs/api.md differ from the service:\n{}",
        failures.len(),
        examples.len(),
        failures.join("\n")
    );
}

#[test]
fn the_parser_finds_requests_and_answers() {
    let page = "text\n```json\n{\"code\": 200}\n```\n\
                ```http\nPOST /x?id=a\nX-Svc-Sign: <signature>\n\n_svc_epoch=<epoch>&id=a\n```\n\
                prose\n```json 404\n{\"code\": 404, \"message\": \"m\", \"data\": null}\n```\n\
                ```http\nGET /y\n```\n```json 200\n{\"data\": [1]}\n```\n";
    let found = examples(page);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].method, "POST");
    assert_eq!(found[0].target, "/x?id=a");
    assert_eq!(
        found[0].headers,
        vec![("X-Svc-Sign".to_owned(), "<signature>".to_owned())]
    );
    assert_eq!(found[0].body, "_svc_epoch=<epoch>&id=a");
    assert_eq!(found[0].status, 404);
    assert_eq!(found[1].target, "/y");
    assert_eq!(found[1].body, "");
    assert_eq!(found[1].status, 200);

    let mut problems = Vec::new();
    compare(
        &serde_json::json!({"code": 200, "data": {"a": [{"b": 1}], "time": "x"}}),
        &serde_json::json!({"code": 200, "data": {"a": [{"b": "1"}], "time": "y", "more": 1}}),
        "answer",
        "",
        &mut problems,
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("answer.data.a[0].b"), "{problems:?}");
}
