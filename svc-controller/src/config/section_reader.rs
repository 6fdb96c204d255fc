//! The keys of one section as the section loaders read them: unknown, repeated and bare
//! keys refused, typed getters that record a problem (naming file, section, key and
//! value, secrets hidden) and give `None` for a bad value.

use std::collections::HashMap;
use std::path::Path;

use super::job_model::redact_ping_url;
use super::model::{ConfigIssue, MainConfig};
use super::syntax::{Entry, Section};
use super::values::{parse_bool, parse_interval};
use crate::time::schedule::{Schedule, Timer};
use crate::time::timezone::Zone;

/// How a key may appear in a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyKind {
    /// Once, with a value.
    Scalar,
    /// Any number of times, each with a value.
    List,
    /// Once; a bare key means true.
    Bool,
}

use KeyKind::{Bool, List};

/// Keys whose values are secrets: a problem names the key, never the value.
const SECRET_KEYS: &[&str] = &["secret", "smtp_password", "password"];

/// Keys whose values are URLs that may carry a token: a problem shows the value as
/// [`proto::redact::redact_url`] does.
const URL_SECRET_KEYS: &[&str] = &["database_url"];

/// Keys whose values are URLs that are credentials whole (a health check's URL): a
/// problem shows the value as [`redact_ping_url`] does, the same rule as the logs.
const PING_URL_KEYS: &[&str] = &["ping_url"];

pub(super) fn new_issue(
    file: &Path,
    section: Option<&str>,
    key: Option<&str>,
    value: Option<&str>,
    message: impl Into<String>,
) -> ConfigIssue {
    let secret = key.is_some_and(|key| SECRET_KEYS.contains(&key));
    let url_secret = key.is_some_and(|key| URL_SECRET_KEYS.contains(&key));
    let ping_url = key.is_some_and(|key| PING_URL_KEYS.contains(&key));
    ConfigIssue {
        file: file.to_path_buf(),
        section: section.map(str::to_string),
        key: key.map(str::to_string),
        value: value.map(|v| {
            // An empty value is no secret, and says what is wrong.
            if secret && !v.is_empty() {
                proto::redact::REDACTED.to_string()
            } else if ping_url {
                redact_ping_url(v)
            } else if url_secret {
                proto::redact::redact_url(v)
            } else {
                v.to_string()
            }
        }),
        message: message.into(),
    }
}

/// The keys of one section, checked for unknown, repeated and bare keys, with typed
/// getters that record a problem and return `None` for a bad value.
pub(super) struct Reader<'a> {
    pub(super) file: &'a Path,
    pub(super) section: &'a Section,
    values: HashMap<&'static str, Vec<&'a Entry>>,
    errors: &'a mut Vec<ConfigIssue>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(
        file: &'a Path,
        section: &'a Section,
        keys: &[(&'static str, KeyKind)],
        errors: &'a mut Vec<ConfigIssue>,
    ) -> Self {
        let mut values: HashMap<&'static str, Vec<&'a Entry>> = HashMap::new();
        for entry in &section.entries {
            let Some((key, kind)) = keys.iter().find(|(k, _)| *k == entry.key) else {
                errors.push(entry_issue(file, section, entry, "unknown key"));
                continue;
            };
            if entry.value.is_none() && *kind != Bool {
                errors.push(entry_issue(
                    file,
                    section,
                    entry,
                    "missing '=' and a value (only a boolean key may stand alone)",
                ));
                continue;
            }
            let seen = values.entry(key).or_default();
            if *kind != List {
                if let Some(first) = seen.first() {
                    let lists: Vec<&str> = keys
                        .iter()
                        .filter(|(_, kind)| *kind == List)
                        .map(|(name, _)| *name)
                        .collect();
                    let message = format!(
                        "repeated key (first set on line {}); only {} may be repeated \
                         here",
                        first.line,
                        lists.join(", ")
                    );
                    errors.push(entry_issue(file, section, entry, &message));
                    continue;
                }
            }
            seen.push(entry);
        }
        Reader {
            file,
            section,
            values,
            errors,
        }
    }

    pub(super) fn first(&self, key: &str) -> Option<&'a Entry> {
        self.values.get(key).and_then(|v| v.first().copied())
    }

    pub(super) fn has(&self, key: &str) -> bool {
        self.first(key).is_some()
    }

    pub(super) fn fail(&mut self, entry: &Entry, message: &str) {
        let issue = entry_issue(self.file, self.section, entry, message);
        self.errors.push(issue);
    }

    /// A section-level problem tied to `key` but to no single line.
    pub(super) fn fail_key(&mut self, key: &str, message: &str) {
        let issue = new_issue(
            self.file,
            Some(&self.section.header),
            Some(key),
            None,
            format!("line {}: {message}", self.section.line),
        );
        self.errors.push(issue);
    }

    /// The value, which may be empty.
    pub(super) fn text_or_empty(&self, key: &str) -> Option<String> {
        self.first(key).and_then(|e| e.value.clone())
    }

    /// A value passed through `parse`; an empty value is an error.
    pub(super) fn parsed<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let entry = self.first(key)?;
        let value = entry.value.as_deref().unwrap_or_default();
        if value.is_empty() {
            self.fail(entry, "empty value");
            return None;
        }
        match parse(value) {
            Ok(v) => Some(v),
            Err(message) => {
                self.fail(entry, &message);
                None
            }
        }
    }

    /// A non-empty string.
    pub(super) fn text(&mut self, key: &str) -> Option<String> {
        self.parsed(key, |v| Ok(v.to_string()))
    }

    /// A boolean; as in git, a bare key is true and an empty value false.
    pub(super) fn flag(&mut self, key: &str) -> Option<bool> {
        let entry = self.first(key)?;
        match entry.value.as_deref() {
            None => Some(true),
            Some("") => Some(false),
            Some(_) => self.parsed(key, parse_bool),
        }
    }

    /// Every non-empty value of a list key through `parse`, in order; empty values are
    /// left out.
    pub(super) fn non_empty_list<T>(
        &mut self,
        key: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Vec<T> {
        let entries = self.values.get(key).cloned().unwrap_or_default();
        let mut out = Vec::new();
        for entry in entries {
            let value = entry.value.as_deref().unwrap_or_default();
            if value.is_empty() {
                continue;
            }
            match parse(value) {
                Ok(v) => out.push(v),
                Err(message) => self.fail(entry, &message),
            }
        }
        out
    }

    /// Every value of a list key through `parse`, in order.
    pub(super) fn list<T>(
        &mut self,
        key: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Vec<T> {
        let entries = self.values.get(key).cloned().unwrap_or_default();
        let mut out = Vec::new();
        for entry in entries {
            let value = entry.value.as_deref().unwrap_or_default();
            if value.is_empty() {
                self.fail(entry, "empty value");
                continue;
            }
            match parse(value) {
                Ok(v) => out.push(v),
                Err(message) => self.fail(entry, &message),
            }
        }
        out
    }

    /// The names of a `notif_on_success` or `notif_on_failed` key: every value, repeated
    /// or comma-separated (upstream's files use both), blanks around each name dropped,
    /// each name once, with the line and value that named it first.
    pub(super) fn notif_names(&mut self, key: &str) -> Vec<NamedAt> {
        self.names(
            key,
            "no notif name (names of [notif \"NAME\"] sections, comma-separated or one per line)",
        )
    }

    /// The names a list key holds, repeated or comma-separated, each once; `empty` is
    /// the problem of a value that names none.
    pub(super) fn names(&mut self, key: &str, empty: &str) -> Vec<NamedAt> {
        let entries = self.values.get(key).cloned().unwrap_or_default();
        let mut out: Vec<NamedAt> = Vec::new();
        for entry in entries {
            let value = entry.value.as_deref().unwrap_or_default();
            let names: Vec<&str> = value
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .collect();
            if names.is_empty() {
                self.fail(entry, empty);
                continue;
            }
            for name in names {
                if !out.iter().any(|seen| seen.name == name) {
                    out.push(NamedAt {
                        name: name.to_string(),
                        line: entry.line,
                        value: value.to_string(),
                    });
                }
            }
        }
        out
    }

    /// `timezone` of a job, else the main section's.
    pub(super) fn zone(&mut self, main: &MainConfig) -> Zone {
        self.parsed("timezone", Zone::parse)
            .unwrap_or_else(|| main.timezone.clone())
    }

    /// `interval` and `schedule` (on the wall clock of `zone`); `schedule` wins when
    /// both are valid.
    pub(super) fn timer(&mut self, zone: &Zone) -> Option<Timer> {
        let interval = self.parsed("interval", parse_interval);
        let schedule = self.parsed("schedule", |v| {
            v.parse::<Schedule>().map_err(|e| e.to_string())
        });
        schedule
            .map(|schedule| Timer::Schedule(schedule, zone.clone()))
            .or(interval.map(Timer::Interval))
    }
}

/// A name read from a list key, with the line and whole value it was read from.
#[derive(Debug)]
pub(super) struct NamedAt {
    pub(super) name: String,
    pub(super) line: usize,
    pub(super) value: String,
}

pub(super) fn entry_issue(
    file: &Path,
    section: &Section,
    entry: &Entry,
    message: &str,
) -> ConfigIssue {
    new_issue(
        file,
        Some(&section.header),
        Some(&entry.key),
        entry.value.as_deref(),
        format!("line {}: {message}", entry.line),
    )
}
