//! The `[notif "NAME"]` sections (where the jobs' notifications go), the values only
//! they take (SMTP server, mailboxes, webhook key), and the check that every notif a job
//! names exists. Their problems never show a password, a secret or a URL's credentials.

use std::path::Path;
use std::sync::Arc;

use lettre::message::Mailbox;

use super::guards;
use super::loader::{EnvLookup, LaterRef, Loader, Origin};
use super::model::{
    ConfigIssue, EmailNotif, NotifConfig, NotifKind, SmtpCredentials, SmtpSecurity, SmtpServer,
    WebhookKey, WebhookNotif,
};
use super::section_reader::KeyKind::{self, Bool, List, Scalar};
use super::section_reader::{NamedAt, Reader, new_issue};
use super::syntax::Section;
use super::values::{check_http_url, from_env, standard_key};

pub(super) const NOTIF_KEYS: &[(&str, KeyKind)] = &[
    ("kind", Scalar),
    ("smtp_server", Scalar),
    ("smtp_user", Scalar),
    ("smtp_password", Scalar),
    ("smtp_insecure", Bool),
    ("from", Scalar),
    ("to", List),
    ("url", Scalar),
    ("secret", Scalar),
];

/// The keys of `kind = email`, and of `kind = webhook`: each is an error in the other kind.
const EMAIL_KEYS: &[&str] = &[
    "smtp_server",
    "smtp_user",
    "smtp_password",
    "smtp_insecure",
    "from",
    "to",
];
const WEBHOOK_KEYS: &[&str] = &["url", "secret"];

impl Loader<'_> {
    /// Records the notif names a job lists for the check at the end of loading, and
    /// returns them.
    pub(super) fn note_notif_refs(
        &mut self,
        file: &Path,
        section: &Section,
        key: &'static str,
        names: Vec<NamedAt>,
    ) -> Vec<String> {
        names
            .into_iter()
            .map(|named| {
                let name = named.name.clone();
                self.notif_refs.push(LaterRef {
                    key,
                    named,
                    file: file.to_path_buf(),
                    header: section.header.clone(),
                });
                name
            })
            .collect()
    }

    /// A `[notif "NAME"]` section. Its problems never show a password, a secret or the
    /// credentials of a URL ([`redact_notif_issue`]).
    pub(super) fn load_notif(&mut self, file: &Path, section: &Section) {
        let mut issues = Vec::new();
        if let Some(first) = self.notif_names.get(&section.name) {
            let message = format!(
                "line {}: duplicate notif {:?}: [{}] in {} has the same name",
                section.line,
                section.name,
                first.header,
                first.file.display()
            );
            issues.push(new_issue(file, Some(&section.header), None, None, message));
        } else {
            self.notif_names.insert(
                section.name.clone(),
                Origin {
                    id: section.name.clone(),
                    file: file.to_path_buf(),
                    header: section.header.clone(),
                },
            );
        }
        let env = self.env;
        let mut r = Reader::new(file, section, NOTIF_KEYS, &mut issues);
        let word = r.parsed("kind", parse_notif_kind);
        if !r.has("kind") {
            r.fail_key("kind", "a notif needs kind = email or kind = webhook");
        }
        let (others, other_kind) = match word {
            Some(NotifWord::Email) => (WEBHOOK_KEYS, "webhook"),
            Some(NotifWord::Webhook) => (EMAIL_KEYS, "email"),
            None => (&[][..], ""),
        };
        for key in others {
            if let Some(entry) = r.first(key) {
                r.fail(entry, &format!("{key} belongs to kind = {other_kind}"));
            }
        }
        let kind = match word {
            Some(NotifWord::Email) => read_email_notif(&mut r, env).map(NotifKind::Email),
            Some(NotifWord::Webhook) => {
                read_webhook_notif(&mut r).map(|webhook| NotifKind::Webhook(Arc::new(webhook)))
            }
            None => None,
        };
        drop(r);
        let clean = issues.is_empty();
        self.errors
            .extend(issues.into_iter().map(redact_notif_issue));
        if let (Some(kind), true) = (kind, clean) {
            self.notifs.push(NotifConfig {
                name: section.name.clone(),
                file: file.to_path_buf(),
                kind,
            });
        }
    }

    /// Every notif name a job lists must be a `[notif]` section of some file.
    pub(super) fn check_notif_refs(&mut self) {
        for reference in &self.notif_refs {
            if self.notif_names.contains_key(&reference.named.name) {
                continue;
            }
            let mut known: Vec<&str> = self.notif_names.keys().map(String::as_str).collect();
            known.sort_unstable();
            let known = if known.is_empty() {
                "there is no [notif] section".to_string()
            } else {
                format!("known: {}", known.join(", "))
            };
            let message = format!(
                "line {}: no [notif {:?}] section ({known})",
                reference.named.line, reference.named.name
            );
            self.errors.push(reference.issue(message));
        }
    }
}

/// The keys of a `kind = email` section; `None` when one is missing or bad (recorded).
fn read_email_notif(r: &mut Reader<'_>, env: EnvLookup<'_>) -> Option<EmailNotif> {
    let server = r.parsed("smtp_server", parse_smtp_server);
    // Empty means unset, as upstream reads them.
    let secret = |r: &mut Reader<'_>, key: &str| match r.text_or_empty(key) {
        Some(value) if !value.is_empty() => r.parsed(key, |v| from_env(v, env)),
        _ => None,
    };
    let user = secret(r, "smtp_user");
    let password = secret(r, "smtp_password");
    let from = r.parsed("from", parse_mailbox);
    let to: Vec<Mailbox> = r
        .list("to", parse_mailboxes)
        .into_iter()
        .flatten()
        .collect();
    let insecure = r.flag("smtp_insecure").unwrap_or(false);
    if !r.has("smtp_server") {
        r.fail_key("smtp_server", "an email notif needs smtp_server");
    }
    if !r.has("from") {
        r.fail_key("from", "an email notif needs from (the sender's address)");
    }
    if !r.has("to") {
        r.fail_key("to", "an email notif needs to (one recipient or more)");
    }
    let has = |r: &Reader<'_>, key: &str| r.text_or_empty(key).is_some_and(|v| !v.is_empty());
    let (has_user, has_password) = (has(r, "smtp_user"), has(r, "smtp_password"));
    if has_user && !has_password {
        r.fail_key(
            "smtp_password",
            "smtp_user is set: smtp_password is needed too",
        );
    }
    if has_password && !has_user {
        r.fail_key("smtp_user", "smtp_password is set: smtp_user is needed too");
    }
    let credentials = match (user, password) {
        (Some(user), Some(password)) => Some(SmtpCredentials { user, password }),
        _ => None,
    };
    if (has_user || has_password) && credentials.is_none() {
        return None;
    }
    Some(EmailNotif {
        server: server?,
        credentials,
        from: from?,
        to,
        insecure,
    })
    .filter(|email| !email.to.is_empty())
}

/// The keys of a `kind = webhook` section; `None` when one is missing or bad (recorded).
fn read_webhook_notif(r: &mut Reader<'_>) -> Option<WebhookNotif> {
    let url = r.parsed("url", check_http_url);
    let key = r.parsed("secret", parse_webhook_key);
    if !r.has("url") {
        r.fail_key("url", "a webhook notif needs url");
    }
    if !r.has("secret") {
        r.fail_key(
            "secret",
            "a webhook notif needs secret (whsec_<base64> or any other text), the key its \
             messages are signed with",
        );
    }
    Some(WebhookNotif {
        url: url?,
        key: key?,
    })
}

/// The `kind` of a `[notif]` section, before its keys are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NotifWord {
    Email,
    Webhook,
}

fn parse_notif_kind(value: &str) -> Result<NotifWord, String> {
    match value.to_ascii_lowercase().as_str() {
        "email" => Ok(NotifWord::Email),
        "webhook" => Ok(NotifWord::Webhook),
        _ => Err("unknown kind (expected email or webhook)".into()),
    }
}

/// `smtp_server`: `smtps://HOST[:PORT]` (TLS from the start, port 465 by default) or
/// `smtp+starttls://HOST[:PORT]` (STARTTLS, 587). No user or password in the URL: they go
/// in `smtp_user` and `smtp_password`.
fn parse_smtp_server(value: &str) -> Result<SmtpServer, String> {
    let expected = "expected smtps://HOST[:465] or smtp+starttls://HOST[:587]";
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a URL must not contain white space".into());
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return Err(format!("not a URL ({expected})"));
    };
    let security = match scheme.to_ascii_lowercase().as_str() {
        "smtps" => SmtpSecurity::Tls,
        "smtp+starttls" => SmtpSecurity::StartTls,
        "smtp" => {
            return Err(format!(
                "smtp:// would send the password and the messages unencrypted ({expected})"
            ));
        }
        other => return Err(format!("scheme {other:?} is not an SMTP one ({expected})")),
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains(['/', '?', '#']) {
        return Err(format!(
            "a path, query or fragment means nothing here ({expected})"
        ));
    }
    if authority.contains('@') {
        return Err("no user or password in the URL: set smtp_user and smtp_password".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((host, after)) = v6.split_once(']') else {
            return Err("unbalanced '[' in the URL host".into());
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{host:?} is not an IPv6 address"));
        }
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(format!("unexpected text after the host ({expected})")),
            },
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let valid_name = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if !valid_name && !host.contains(':') {
        return Err(format!("missing or invalid host ({expected})"));
    }
    let port = match port {
        None => security.default_port(),
        Some(port) => match port.parse::<u16>() {
            Ok(number) if number != 0 && port.bytes().all(|b| b.is_ascii_digit()) => number,
            _ => return Err(format!("port {port:?} is not a number 1-65535")),
        },
    };
    Ok(SmtpServer {
        security,
        host: host.to_ascii_lowercase(),
        port,
    })
}

/// `from`: one mailbox, `a@example.org` or `Name <a@example.org>`.
fn parse_mailbox(value: &str) -> Result<Mailbox, String> {
    value
        .parse::<Mailbox>()
        .map_err(|e| format!("not an e-mail address ({e})"))
}

/// One `to` value: one mailbox or several, comma-separated.
fn parse_mailboxes(value: &str) -> Result<Vec<Mailbox>, String> {
    let mailboxes = value
        .parse::<lettre::message::Mailboxes>()
        .map_err(|e| format!("not an e-mail address or a comma-separated list of them ({e})"))?;
    let all: Vec<Mailbox> = mailboxes.into_iter().collect();
    if all.is_empty() {
        return Err("no e-mail address".into());
    }
    Ok(all)
}

/// A webhook notification's `secret`: `whsec_<base64>` is a Standard Webhooks key (the
/// bytes the base64 decodes to); any other value is used as it is. The message never
/// quotes the value.
fn parse_webhook_key(value: &str) -> Result<WebhookKey, String> {
    guards::check_secret_not_blank(value)?;
    let bytes = standard_key(value)?;
    if bytes.is_empty() {
        return Err("the key is empty".into());
    }
    Ok(WebhookKey::new(bytes))
}

/// Hides what an issue of a `[notif]` section could reveal: the value of a sensitive key
/// (`smtp_password`, `secret`, any name [`proto::redact::is_sensitive_name`] flags) and
/// the credentials or tokens of a URL.
fn redact_notif_issue(mut issue: ConfigIssue) -> ConfigIssue {
    let key = issue.key.clone().unwrap_or_default();
    if let Some(value) = issue.value.as_mut() {
        if proto::redact::is_sensitive_name(&key) {
            if !value.is_empty() {
                *value = proto::redact::REDACTED.to_string();
            }
        } else if key == "smtp_server" || key == "url" {
            *value = proto::redact::redact_url(value);
        }
    }
    issue
}

#[cfg(test)]
#[path = "notif_tests.rs"]
mod tests;
