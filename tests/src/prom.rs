//! Reading `/svc/api/metrics` with a real Prometheus exposition parser, and finding the
//! Prometheus tools the monitoring files are checked with.
//!
//! The parser is the OpenMetrics parser of the Prometheus project's Python client
//! (`prometheus_client.openmetrics.parser`, Debian's `python3-prometheus-client`): it
//! is the reference implementation of the format the controller answers in, and it is
//! strict (types, units, the `_total` suffix of counters, escaping, `# EOF`), so a
//! malformed exposition fails the test instead of being read leniently. A Rust crate
//! would have added dependencies to the workspace for a laxer check. `tests/setup`
//! installs the package, and Debian's `prometheus` package for `promtool`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// How to get the tools, said in every failure that comes from their absence.
const INSTALL: &str = "run tests/setup (as root when a package is missing), or: \
                       sudo apt-get install -y python3-prometheus-client prometheus";

/// Parses the text with the OpenMetrics parser and prints every family as JSON.
const PARSE_SCRIPT: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    out.append({
        "name": family.name,
        "type": family.type,
        "help": family.documentation,
        "unit": family.unit,
        "samples": [
            {"name": s.name, "labels": s.labels, "value": s.value}
            for s in family.samples
        ],
    })
json.dump(out, sys.stdout)
"#;

/// One sample of a family.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The sample's name (for a counter, with `_total`; for a histogram, with
    /// `_bucket`, `_count` or `_sum`).
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// One metric family as the parser read it.
#[derive(Debug, Clone)]
pub struct Family {
    /// The family's name (without `_total` for a counter).
    pub name: String,
    /// `counter`, `gauge`, `histogram`, …
    pub kind: String,
    pub help: String,
    pub unit: String,
    pub samples: Vec<Sample>,
}

/// A parsed exposition.
#[derive(Debug, Clone)]
pub struct Exposition {
    pub families: Vec<Family>,
}

impl Exposition {
    /// The family named `name`, if the exposition has it.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|family| family.name == name)
    }

    /// Every sample named `name` whose labels include all of `labels`.
    pub fn samples<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.families
            .iter()
            .flat_map(|family| family.samples.iter())
            .filter(move |sample| {
                sample.name == name
                    && labels.iter().all(|(key, value)| {
                        sample.labels.get(*key).map(String::as_str) == Some(*value)
                    })
            })
    }

    /// The value of the one sample named `name` with exactly the labels `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples(name, labels)
            .find(|sample| sample.labels.len() == labels.len())
            .map(|sample| sample.value)
    }

    /// Every sample name in the exposition (what a PromQL expression can select).
    pub fn sample_names(&self) -> std::collections::BTreeSet<String> {
        self.families
            .iter()
            .flat_map(|family| family.samples.iter().map(|sample| sample.name.clone()))
            .collect()
    }
}

/// A Python interpreter that has `prometheus_client`: the one on `PATH` first, then the
/// system's (a `PATH` may lead to another installation first, without Debian's modules).
fn python_with_prometheus_client() -> Result<PathBuf, String> {
    for python in ["python3", "/usr/bin/python3"] {
        let found = Command::new(python)
            .args(["-c", "import prometheus_client.openmetrics.parser"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if found {
            return Ok(PathBuf::from(python));
        }
    }
    Err(format!(
        "no python3 with the prometheus_client module, which parses the metrics: {INSTALL}"
    ))
}

/// Parses `text` (OpenMetrics) with the Prometheus client's parser; panics with the
/// parser's message when the text is not valid, or with how to install the parser.
pub fn parse_openmetrics(text: &str) -> Exposition {
    let python = python_with_prometheus_client().unwrap_or_else(|err| panic!("{err}"));
    let mut child = Command::new(&python)
        .args(["-c", PARSE_SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("start {}: {err}", python.display()));
    {
        let mut stdin = child.stdin.take().expect("the child's stdin is piped");
        stdin
            .write_all(text.as_bytes())
            .unwrap_or_else(|err| panic!("write the metrics to the parser: {err}"));
    }
    let output = child
        .wait_with_output()
        .unwrap_or_else(|err| panic!("wait for the parser: {err}"));
    assert!(
        output.status.success(),
        "the OpenMetrics parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    let parsed: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("the parser's JSON: {err}"));
    let families = parsed
        .as_array()
        .expect("the parser prints a list")
        .iter()
        .map(|family| Family {
            name: string(&family["name"]),
            kind: string(&family["type"]),
            help: string(&family["help"]),
            unit: string(&family["unit"]),
            samples: family["samples"]
                .as_array()
                .expect("samples are a list")
                .iter()
                .map(|sample| Sample {
                    name: string(&sample["name"]),
                    labels: sample["labels"]
                        .as_object()
                        .expect("labels are an object")
                        .iter()
                        .map(|(key, value)| (key.clone(), string(value)))
                        .collect(),
                    value: sample["value"]
                        .as_f64()
                        .expect("a sample's value is a number"),
                })
                .collect(),
        })
        .collect();
    Exposition { families }
}

fn string(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// `promtool`, Prometheus's checker of rule files: the one on `PATH`, else the one
/// `tests/setup` unpacked from Debian's `prometheus` package into `tests/.tools/bin`;
/// an error saying how to get it when neither is there.
pub fn promtool() -> Result<PathBuf, String> {
    let unpacked = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/promtool");
    for candidate in [PathBuf::from("promtool"), unpacked] {
        let works = Command::new(&candidate)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if works {
            return Ok(candidate);
        }
    }
    Err(format!(
        "promtool not found, which checks the alert rules: {INSTALL}"
    ))
}
