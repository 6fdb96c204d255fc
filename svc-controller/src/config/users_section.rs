//! `user.conf`: the `[user "NAME"]` sections of those who may log in, each with a
//! password hash and a role. Its problems never show a value but a role.

use std::collections::HashMap;
use std::fs;

use super::loader::{read_text, syntax_issues};
use super::model::{ConfigIssue, MainConfig, UserConfig};
use super::section_reader::KeyKind::{self, Scalar};
use super::section_reader::{Reader, new_issue};
use super::syntax::{self, SectionKind};

pub(super) const USER_KEYS: &[(&str, KeyKind)] = &[("password", Scalar), ("role", Scalar)];

/// Reads `$dir_base/etc/svc/user.conf` when it exists: `[user "NAME"]` sections, each with
/// one `password` hash. Problems go to `errors` with every value hidden (a value here is a
/// password hash, or a password typed by mistake); a file readable by every user is a
/// warning.
pub(super) fn load_users(
    main: &MainConfig,
    errors: &mut Vec<ConfigIssue>,
    warnings: &mut Vec<ConfigIssue>,
) -> Vec<UserConfig> {
    use std::os::unix::fs::PermissionsExt as _;

    let file = main.user_conf();
    match fs::metadata(&file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            errors.push(new_issue(
                &file,
                None,
                None,
                None,
                format!("cannot read: {e}"),
            ));
            return Vec::new();
        }
        Ok(meta) if !meta.is_file() => {
            errors.push(new_issue(&file, None, None, None, "not a regular file"));
            return Vec::new();
        }
        Ok(meta) => {
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o004 != 0 {
                let message = format!(
                    "the file is readable by every user (mode {mode:04o}) and holds password \
                     hashes; make it readable by the service only (chmod 600)"
                );
                warnings.push(new_issue(&file, None, None, None, message));
            }
        }
    }
    let text = match read_text(&file) {
        Ok(text) => text,
        Err(message) => {
            errors.push(new_issue(&file, None, None, None, message));
            return Vec::new();
        }
    };
    let parsed = syntax::parse(&text);
    let sections = parsed.sections;
    let mut issues: Vec<ConfigIssue> = syntax_issues(&file, parsed.errors).collect();
    warnings.extend(syntax_issues(&file, parsed.warnings));
    let mut users: Vec<UserConfig> = Vec::new();
    let mut first_line: HashMap<&str, usize> = HashMap::new();
    for section in &sections {
        if section.kind != SectionKind::User {
            let message = format!(
                "line {}: only [user \"NAME\"] sections belong in user.conf",
                section.line
            );
            issues.push(new_issue(&file, Some(&section.header), None, None, message));
            continue;
        }
        let before = issues.len();
        if let Err(message) = check_user_name(&section.name) {
            let message = format!("line {}: {message}", section.line);
            issues.push(new_issue(&file, Some(&section.header), None, None, message));
        }
        if let Some(first) = first_line.get(section.name.as_str()) {
            let message = format!(
                "line {}: duplicate user {:?} (first on line {first})",
                section.line, section.name
            );
            issues.push(new_issue(&file, Some(&section.header), None, None, message));
        } else {
            first_line.insert(&section.name, section.line);
        }
        let mut r = Reader::new(&file, section, USER_KEYS, &mut issues);
        let hash = r.parsed("password", |v| {
            crate::security::password::check_password_hash(v).map(|()| v.to_string())
        });
        if !r.has("password") {
            r.fail_key(
                "password",
                "a user needs password = <hash>; make one with svc-controller hash-password",
            );
        }
        let role = r.parsed("role", crate::security::rights::Role::parse);
        drop(r);
        if let (Some(password_hash), true) = (hash, issues.len() == before) {
            users.push(UserConfig {
                name: section.name.clone(),
                password_hash,
                role: role.unwrap_or_default(),
                file: file.clone(),
            });
        }
    }
    errors.extend(issues.into_iter().map(redact_user_issue));
    users
}

/// A login name: 1 to 64 ASCII letters, digits, `.`, `_`, `-` or `@`.
fn check_user_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "invalid user name {name:?} (1 to 64 letters, digits, '.', '_', '-' or '@')"
        ))
    }
}

/// Hides what an issue of `user.conf` could reveal: every non-empty value becomes
/// `<hash>` (for `password`) or `<redacted>`, and a line that is not `key = value` is
/// not quoted (it may be a hash pasted without its key).
fn redact_user_issue(mut issue: ConfigIssue) -> ConfigIssue {
    let valid_key = |key: &str| {
        let mut chars = key.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    if issue.key.as_deref().is_some_and(|key| !valid_key(key)) {
        issue.key = None;
        let line = issue.message.split(':').next().unwrap_or_default();
        issue.message = format!(
            "{line}: not a 'key = value' line (the text is not shown: it may hold a password \
             hash)"
        );
    }
    // A role is no secret, and the wrong one is what the operator needs to see.
    let shown_as_is = issue.key.as_deref() == Some("role");
    if let Some(value) = &issue.value {
        if !value.is_empty() && !shown_as_is {
            let shown = if issue.key.as_deref() == Some("password") {
                "<hash>"
            } else {
                "<redacted>"
            };
            issue.value = Some(shown.to_string());
        }
    }
    issue
}

#[cfg(test)]
#[path = "users_section_tests.rs"]
mod tests;
