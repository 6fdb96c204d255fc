//! The git-config style line syntax of the configuration files.
//!
//! - `[svc]`, `[job "NAME"]`, `[job.http "NAME"]`, the legacy `[hook "NAME"]` and (in
//!   `user.conf`) `[user "NAME"]` start sections; the section word is case-insensitive, the quoted NAME is kept exactly.
//! - `key = value`: the key is case-insensitive (returned lower-cased), the value is
//!   everything after the first `=`, trimmed, kept literally (no quotes, no escapes, no
//!   inline comments).
//! - A bare `key` (no `=`) is returned with no value; the caller accepts it only for
//!   booleans, where it means true.
//! - A line whose first non-blank character is `#` or `;` is a comment.
//!
//! rust-ini was not used: it reads `:` as a separator, merges a bare key into the next
//! line's key, takes an indented comment for a key and reports no line numbers.

/// The kind of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SectionKind {
    /// `[svc]`.
    Main,
    /// `[job "NAME"]`.
    Job,
    /// Legacy `[hook "NAME"]`, loaded as a job.
    Hook,
    /// `[job.http "NAME"]`.
    JobHttp,
    /// `[user "NAME"]`, only valid in `user.conf`.
    User,
}

/// One section and its entries in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Section {
    /// Header text as written between the brackets, trimmed, e.g. `job "backup"`.
    pub header: String,
    pub kind: SectionKind,
    /// The quoted name; empty for `[svc]`.
    pub name: String,
    /// 1-based line of the header.
    pub line: usize,
    pub entries: Vec<Entry>,
}

/// One `key = value` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// Lower-cased key.
    pub key: String,
    /// Trimmed value; `None` for a bare key.
    pub value: Option<String>,
    /// 1-based line.
    pub line: usize,
}

/// A line that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SyntaxError {
    pub line: usize,
    /// Header of the enclosing (or offending) section.
    pub section: Option<String>,
    pub key: Option<String>,
    pub value: Option<String>,
    pub message: String,
}

/// Splits `text` into sections. Keeps going after errors; the entries of a section whose
/// header is invalid are skipped without further errors.
pub(super) fn parse(text: &str) -> (Vec<Section>, Vec<SyntaxError>) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut sections: Vec<Section> = Vec::new();
    let mut errors = Vec::new();
    // false after an invalid header: its entries are ignored.
    let mut in_valid_section = false;
    let mut current_header: Option<String> = None;

    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if trimmed.starts_with('[') {
            match parse_header(trimmed) {
                Ok((header, kind, name)) => {
                    current_header = Some(header.clone());
                    in_valid_section = true;
                    sections.push(Section {
                        header,
                        kind,
                        name,
                        line,
                        entries: Vec::new(),
                    });
                }
                Err((header, message)) => {
                    current_header = Some(header.clone());
                    in_valid_section = false;
                    errors.push(SyntaxError {
                        line,
                        section: Some(header),
                        key: None,
                        value: None,
                        message: format!("line {line}: {message}"),
                    });
                }
            }
            continue;
        }

        let (raw_key, value) = match trimmed.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (trimmed, None),
        };
        if let Err(message) = check_key_name(raw_key) {
            if current_header.is_none() || in_valid_section {
                errors.push(SyntaxError {
                    line,
                    section: current_header.clone(),
                    key: Some(raw_key.to_string()),
                    value,
                    message: format!("line {line}: {message}"),
                });
            }
            continue;
        }
        let key = raw_key.to_ascii_lowercase();
        match sections.last_mut() {
            Some(section) if in_valid_section => section.entries.push(Entry { key, value, line }),
            Some(_) => {}
            None if current_header.is_some() => {}
            None => errors.push(SyntaxError {
                line,
                section: None,
                key: Some(key),
                value,
                message: format!("line {line}: key outside a section"),
            }),
        }
    }
    (sections, errors)
}

/// Parses a trimmed `[...]` line into (header, kind, name), or (header, message).
fn parse_header(line: &str) -> Result<(String, SectionKind, String), (String, String)> {
    let Some(inner) = line.strip_prefix('[').and_then(|s| s.strip_suffix(']')) else {
        let header = line.trim_start_matches('[').trim().to_string();
        return Err((
            header,
            "a section header must end with ']' (comments only on their own line)".into(),
        ));
    };
    let header = inner.trim().to_string();
    let expected =
        "expected [svc], [job \"NAME\"], [job.http \"NAME\"] or, in user.conf, [user \"NAME\"]";
    match header.split_once('"') {
        None => {
            let word = header.to_ascii_lowercase();
            match word.as_str() {
                "svc" => Ok((header, SectionKind::Main, String::new())),
                "job" | "job.http" | "hook" | "user" => {
                    let message =
                        format!("section [{header}] needs a quoted name: [{word} \"NAME\"]");
                    Err((header, message))
                }
                _ => {
                    let message = format!("unknown section [{header}]; {expected}");
                    Err((header, message))
                }
            }
        }
        Some((word, rest)) => {
            let word = word.trim().to_ascii_lowercase();
            let kind = match word.as_str() {
                "job" => SectionKind::Job,
                "job.http" => SectionKind::JobHttp,
                "hook" => SectionKind::Hook,
                "user" => SectionKind::User,
                _ => {
                    let message = format!("unknown section [{header}]; {expected}");
                    return Err((header, message));
                }
            };
            let Some(name) = rest.strip_suffix('"') else {
                let message = format!("section [{header}]: the name must end with '\"'");
                return Err((header, message));
            };
            if name.trim().is_empty() {
                let message = format!("section [{header}]: empty name");
                return Err((header, message));
            }
            let name = name.to_string();
            Ok((header, kind, name))
        }
    }
}

/// A key is a letter followed by letters, digits, `_` or `-`.
fn check_key_name(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("missing key before '='".into());
    }
    let mut chars = key.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(format!(
            "invalid key {key:?} (a key is a letter followed by letters, digits, '_' or '-'; \
             a value needs 'key = value')"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_keys_and_values() {
        let text = "\u{feff}# comment\n  ; indented comment\n[svc]\nName = x\n\
                    [JOB \"My Job\"]\ncommand = cd /srv && make; make install # not a comment\n\
                    command=  two  \nis_development\n\t[job.http \"h\"]\r\nhttp_header = A: b\r\n\
                    [hook \"old\"]\nempty =\n[User \"ann\"]\npassword = $2b$x\n";
        let (sections, errors) = parse(text);
        assert_eq!(errors, vec![]);
        assert_eq!(sections.len(), 5);
        assert_eq!(sections[0].kind, SectionKind::Main);
        assert_eq!(sections[0].entries[0].key, "name");
        assert_eq!(sections[0].entries[0].value.as_deref(), Some("x"));
        assert_eq!(sections[1].kind, SectionKind::Job);
        assert_eq!(sections[1].header, "JOB \"My Job\"");
        assert_eq!(sections[1].name, "My Job");
        assert_eq!(
            sections[1].entries[0].value.as_deref(),
            Some("cd /srv && make; make install # not a comment")
        );
        assert_eq!(sections[1].entries[1].value.as_deref(), Some("two"));
        assert_eq!(sections[1].entries[2].key, "is_development");
        assert_eq!(sections[1].entries[2].value, None);
        assert_eq!(sections[1].entries[2].line, 8);
        assert_eq!(sections[2].kind, SectionKind::JobHttp);
        assert_eq!(sections[2].entries[0].value.as_deref(), Some("A: b"));
        assert_eq!(sections[3].kind, SectionKind::Hook);
        assert_eq!(sections[3].entries[0].value.as_deref(), Some(""));
        assert_eq!(sections[4].kind, SectionKind::User);
        assert_eq!(sections[4].name, "ann");
        assert_eq!(sections[4].entries[0].value.as_deref(), Some("$2b$x"));
    }

    #[test]
    fn values_are_literal() {
        let (sections, errors) = parse("[svc]\nsecret = \"a\\tb\" 'c' = d\n");
        assert!(errors.is_empty());
        assert_eq!(
            sections[0].entries[0].value.as_deref(),
            Some("\"a\\tb\" 'c' = d")
        );
    }

    #[test]
    fn header_errors() {
        for bad in [
            "[foo]",
            "[job]",
            "[svc \"x\"]",
            "[job \"x\"",
            "[job \"x]",
            "[job \"\"]",
            "[job \"x\"] # c",
            "[cron \"x\"]",
            "[user]",
        ] {
            let (sections, errors) = parse(&format!("{bad}\nkey = v\n"));
            assert!(sections.is_empty(), "{bad}");
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert!(errors[0].message.starts_with("line 1: "), "{bad}");
        }
    }

    #[test]
    fn key_errors() {
        let (_, errors) = parse("orphan = 1\n[svc]\n= v\n1abc = 2\nwith space = 3\nok = 4\n");
        let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![1, 3, 4, 5]);
        assert!(errors[0].message.contains("outside a section"));
        assert_eq!(errors[1].section.as_deref(), Some("svc"));
    }
}
