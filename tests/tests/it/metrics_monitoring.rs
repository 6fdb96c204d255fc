//! The shipped monitoring files (Grafana dashboard, Prometheus alert rules) pass
//! Prometheus's own checks (`promtool`); that they use only series the controller exports
//! is checked against a scrape in `metrics_series.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use svc_tests::prom::promtool;

/// The shipped monitoring files' sources.
fn monitoring_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/monitoring")
}

/// The text of the shipped monitoring file `name`.
pub(crate) fn read_monitoring_file(name: &str) -> String {
    let path = monitoring_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("read {}: {err}", path.display()))
}

/// Every `svc_…` series name in `text` (PromQL in a dashboard or rule file).
pub(crate) fn series_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("svc_") {
        // Only a whole identifier: `svc_` not preceded by a word character.
        let preceded = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !preceded {
            names.insert(name.clone());
        }
        rest = &rest[at + name.len()..];
    }
    names
}

/// Runs `promtool` with `args` in the monitoring directory; panics with its output when
/// it fails, or with how to install it when it is missing.
fn run_promtool(args: &[&str]) {
    let promtool = promtool().unwrap_or_else(|err| panic!("{err}"));
    let output = Command::new(&promtool)
        .args(args)
        .current_dir(monitoring_dir())
        .output()
        .unwrap_or_else(|err| panic!("run promtool {args:?}: {err}"));
    assert!(
        output.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The alert rules pass `promtool check rules`, and their unit tests (input series,
/// expected alerts) pass `promtool test rules`.
#[test]
fn alert_rules_pass_promtool() {
    run_promtool(&["check", "rules", "prometheus-alerts.yml"]);
    run_promtool(&["test", "rules", "prometheus-alerts.test.yml"]);
}

/// The dashboard is JSON Grafana can import: a datasource variable that every panel and
/// query uses, a job selector, and panels whose every query is valid PromQL (checked
/// by `promtool`, as recording rules, with the template variables filled in).
#[test]
fn dashboard_is_valid_and_its_queries_parse() {
    let text = read_monitoring_file("grafana-dashboard.json");
    let dashboard: Value =
        serde_json::from_str(&text).unwrap_or_else(|err| panic!("the dashboard's JSON: {err}"));
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating variables");
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variable {name}"))
    };
    assert_eq!(variable("datasource")["type"], "datasource");
    assert_eq!(variable("datasource")["query"], "prometheus");
    assert_eq!(variable("job_id")["type"], "query");
    assert_eq!(variable("job_id")["multi"], true);

    let datasource = serde_json::json!({"type": "prometheus", "uid": "${datasource}"});
    let mut exprs = Vec::new();
    let mut titles = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().unwrap_or_default().to_owned();
        assert_eq!(panel["datasource"], datasource, "panel {title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title} has queries");
        for target in targets {
            assert_eq!(target["datasource"], datasource, "a query of {title}");
            let expr = target["expr"].as_str().expect("a query's expr");
            exprs.push(expr.to_owned());
        }
        titles.insert(title);
    }
    for wanted in [
        "Runs by status",
        "Failure rate",
        "Last success age",
        "Last run duration",
        "Queue and run slots",
        "Refused and dropped triggers",
    ] {
        assert!(titles.contains(wanted), "no panel {wanted:?} in {titles:?}");
    }

    // Each query as a recording rule: promtool parses it as Prometheus would.
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(n, expr)| {
            let expr = expr
                .replace("$__rate_interval", "5m")
                .replace("$instance", ".*")
                .replace("$job_id", ".*");
            serde_json::json!({"record": format!("dashboard:query_{n}"), "expr": expr})
        })
        .collect();
    let file = serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]});
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("dashboard-queries.yml");
    // JSON is YAML: promtool reads it as a rule file.
    std::fs::write(&path, file.to_string()).expect("write the queries");
    let path = path.to_str().expect("a UTF-8 temporary path");
    run_promtool(&["check", "rules", path]);
}
