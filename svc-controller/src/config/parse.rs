//! Reading the configuration files into [`super::Config`], collecting every problem.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::sync::Arc;

use lettre::message::Mailbox;

use super::model::{
    AuthKind, ClusterConfig, Config, ConfigError, ConfigIssue, DEFAULT_AUDIT_MAX_SIZE,
    DEFAULT_CATCH_UP_WINDOW, DEFAULT_DIR_STATE, DEFAULT_HEADER_SIGN, DEFAULT_HTTP_BODY_TIMEOUT,
    DEFAULT_HTTP_TIMEOUT, DEFAULT_JOB_TIMEOUT, DEFAULT_LISTEN_ADDRESS, DEFAULT_LOG_MAX_SIZE,
    DEFAULT_LOG_RETENTION, DEFAULT_MAX_BODY_IN_FLIGHT, DEFAULT_NAME, DEFAULT_PATCHHOST_PUBLIC_KEY,
    DEFAULT_RETRY_DELAY, EmailNotif, HttpJobConfig, JobConfig, MainConfig, NotifConfig, NotifKind,
    OnBusy, ResourceLimits, SmtpCredentials, SmtpSecurity, SmtpServer, UserConfig, WebhookKey,
    WebhookNotif, resolve_path,
};
use super::section_reader::KeyKind::{self, Bool, List, Scalar};
use super::section_reader::{NamedAt, Reader, entry_issue, new_issue};
use super::syntax::{self, Section, SectionKind};
use super::values::{
    check_group, check_header_name, check_host_name, check_http_url, check_listen_address,
    check_log_level, check_outside_protected, check_public_key, check_user, check_write_path,
    from_env, is_root_user, job_key, normalize_path, parse_audit_size, parse_auth_kind,
    parse_bytes, parse_capabilities, parse_count, parse_cpu_weight, parse_env, parse_http_header,
    parse_http_method, parse_http_timeout, parse_limit, parse_on_busy, parse_ping_url,
    parse_positive_duration, parse_ref_glob, parse_request_type, parse_timeout, resolve_http_url,
    standard_key,
};
use crate::time::duration::parse_duration;
use crate::time::timezone::Zone;
use proto::redact::Secret;

const MAIN_KEYS: &[(&str, KeyKind)] = &[
    ("name", Scalar),
    ("listen_address", Scalar),
    ("dir_base", Scalar),
    ("dir_public", Scalar),
    ("dir_state", Scalar),
    ("secret", Scalar),
    ("http_timeout", Scalar),
    ("max_job_running", Scalar),
    ("max_hook_running", Scalar),
    ("is_development", Bool),
    ("user", Scalar),
    ("group", Scalar),
    ("runner_path", Scalar),
    ("log_level", Scalar),
    ("allow_root_jobs", Bool),
    ("require_epoch", Bool),
    ("max_body_in_flight", Scalar),
    ("allowed_hosts", List),
    ("log_max_size", Scalar),
    ("http_body_timeout", Scalar),
    ("max_connections", Scalar),
    ("timezone", Scalar),
    ("public_read", Bool),
    ("trusted_proxies", List),
    ("audit_max_size", Scalar),
    ("database_url", Scalar),
    ("node_name", Scalar),
    ("database_max_connections", Scalar),
    ("limit_pids", Scalar),
    ("run_cgroups", Bool),
];

const JOB_KEYS: &[(&str, KeyKind)] = &[
    ("description", Scalar),
    ("secret", List),
    ("filter_event", List),
    ("filter_ref", List),
    ("timezone", Scalar),
    ("on_success", List),
    ("on_failure", List),
    ("on_busy", Scalar),
    ("retry", Scalar),
    ("retry_delay", Scalar),
    ("catch_up", Scalar),
    ("catch_up_window", Scalar),
    ("random_delay", Scalar),
    ("interval", Scalar),
    ("schedule", Scalar),
    ("path", Scalar),
    ("auth_kind", Scalar),
    ("one_time_deliveries", Bool),
    ("header_sign", Scalar),
    ("command", List),
    ("log_retention", Scalar),
    ("timeout", Scalar),
    ("user", Scalar),
    ("group", Scalar),
    ("dir_work", Scalar),
    ("env", List),
    ("capabilities", List),
    ("public_key", Scalar),
    ("limit_nproc", Scalar),
    ("limit_nofile", Scalar),
    ("limit_as", Scalar),
    ("limit_memory", Scalar),
    ("limit_pids", Scalar),
    ("cpu_weight", Scalar),
    ("write_paths", List),
    ("sandbox", Bool),
    ("notif_on_success", List),
    ("notif_on_failed", List),
    ("ping_url", Scalar),
];

const HTTP_JOB_KEYS: &[(&str, KeyKind)] = &[
    ("description", Scalar),
    ("secret", Scalar),
    ("interval", Scalar),
    ("schedule", Scalar),
    ("http_method", Scalar),
    ("http_url", Scalar),
    ("http_request_type", Scalar),
    ("http_header", List),
    ("http_timeout", Scalar),
    ("http_insecure", Bool),
    ("http_follow_redirects", Bool),
    ("header_sign", Scalar),
    ("log_retention", Scalar),
    ("user", Scalar),
    ("group", Scalar),
    ("timezone", Scalar),
    ("notif_on_success", List),
    ("notif_on_failed", List),
    ("ping_url", Scalar),
];

const NOTIF_KEYS: &[(&str, KeyKind)] = &[
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

/// Every key each section takes, by section word (`svc`, `job`, `job.http`, `notif`), for
/// the documentation, which must name them all.
pub fn known_keys() -> Vec<(&'static str, Vec<&'static str>)> {
    let names = |keys: &[(&'static str, KeyKind)]| keys.iter().map(|(k, _)| *k).collect();
    vec![
        ("svc", names(MAIN_KEYS)),
        ("job", names(JOB_KEYS)),
        ("job.http", names(HTTP_JOB_KEYS)),
        ("notif", names(NOTIF_KEYS)),
        ("user", names(USER_KEYS)),
    ]
}

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

const USER_KEYS: &[(&str, KeyKind)] = &[("password", Scalar), ("role", Scalar)];

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

/// Reads `[svc]` (or its defaults when `section` is `None`). The flag is false when
/// `dir_base` is unusable, in which case the job directories are not read.
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
fn read_main(
    file: &Path,
    section: Option<&Section>,
    env: EnvLookup<'_>,
    errors: &mut Vec<ConfigIssue>,
    warnings: &mut Vec<ConfigIssue>,
) -> (MainConfig, bool) {
    let file_dir = std::path::absolute(file)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .or_else(|| file.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    let mut config = MainConfig {
        file: file.to_path_buf(),
        name: DEFAULT_NAME.to_string(),
        listen_address: DEFAULT_LISTEN_ADDRESS.to_string(),
        dir_base: PathBuf::from("/"),
        dir_public: None,
        dir_state: PathBuf::from("/").join(DEFAULT_DIR_STATE),
        secret: None,
        http_timeout: DEFAULT_HTTP_TIMEOUT,
        max_job_running: 1,
        limit_pids: None,
        is_development: false,
        run_cgroups: true,
        user: None,
        group: None,
        runner_path: None,
        log_level: None,
        allow_root_jobs: false,
        require_epoch: false,
        max_body_in_flight: DEFAULT_MAX_BODY_IN_FLIGHT,
        allowed_hosts: Vec::new(),
        log_max_size: DEFAULT_LOG_MAX_SIZE,
        http_body_timeout: DEFAULT_HTTP_BODY_TIMEOUT,
        max_connections: None,
        timezone: Zone::utc(),
        public_read: false,
        trusted_proxies: Vec::new(),
        audit_max_size: DEFAULT_AUDIT_MAX_SIZE,
        cluster: None,
    };
    let Some(section) = section else {
        return (config, true);
    };
    let mut r = Reader::new(file, section, MAIN_KEYS, errors);

    if let Some(v) = r.text("name") {
        config.name = v;
    }
    if let Some(v) = r.parsed("listen_address", check_listen_address) {
        config.listen_address = v;
    }
    let mut base_ok = true;
    if r.has("dir_base") {
        let dir_base = r.parsed("dir_base", |v| {
            let dir = resolve_path(&file_dir, Path::new(v));
            if dir.is_dir() {
                // Canonical, so `../..` and symlinks do not show up in paths and logs.
                std::fs::canonicalize(&dir)
                    .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))
            } else {
                Err(format!("{} is not an existing directory", dir.display()))
            }
        });
        match dir_base {
            Some(dir) => config.dir_base = dir,
            None => base_ok = false,
        }
    }
    let base = config.dir_base.clone();
    config.dir_public = r.parsed("dir_public", |v| Ok(resolve_path(&base, Path::new(v))));
    config.dir_state = r
        .parsed("dir_state", |v| Ok(resolve_path(&base, Path::new(v))))
        .unwrap_or_else(|| base.join(DEFAULT_DIR_STATE));
    config.secret = r.secret("secret");
    // Checked once `dir_state` is known: it must stay clear of the state directory too.
    if let Some(dir) = config.dir_public.clone()
        && let Err(message) = guards::check_dir_public(&config, &dir)
        && let Some(entry) = r.first("dir_public")
    {
        r.fail(entry, &message);
        config.dir_public = None;
    }
    if let Some(v) = r.parsed("http_timeout", parse_positive_duration) {
        config.http_timeout = v;
    }
    let job_running = r.parsed("max_job_running", parse_count);
    let hook_running = r.parsed("max_hook_running", parse_count);
    if let Some(entry) = r.first("max_hook_running") {
        if r.has("max_job_running") {
            r.fail(
                entry,
                "max_hook_running is the old name of max_job_running; set only max_job_running",
            );
        } else {
            warnings.push(entry_issue(
                file,
                section,
                entry,
                "deprecated: use max_job_running",
            ));
        }
    }
    if let Some(n) = job_running.or(hook_running) {
        config.max_job_running = n;
    }
    config.limit_pids = r.parsed("limit_pids", parse_limit);
    if let Some(v) = r.flag("run_cgroups") {
        config.run_cgroups = v;
    }
    if let Some(v) = r.flag("is_development") {
        config.is_development = v;
    }
    config.user = r.parsed("user", check_user);
    config.group = r.parsed("group", check_group);
    config.runner_path = r.parsed("runner_path", |v| Ok(resolve_path(&base, Path::new(v))));
    config.log_level = r.parsed("log_level", check_log_level);
    if let Some(v) = r.flag("allow_root_jobs") {
        config.allow_root_jobs = v;
    }
    if let Some(v) = r.flag("require_epoch") {
        config.require_epoch = v;
    }
    if let Some(bytes) = r.parsed("max_body_in_flight", parse_bytes) {
        config.max_body_in_flight = bytes;
    }
    config.allowed_hosts = r.list("allowed_hosts", check_host_name);
    if let Some(bytes) = r.parsed("log_max_size", parse_bytes) {
        config.log_max_size = bytes;
    }
    if let Some(timeout) = r.parsed("http_body_timeout", parse_positive_duration) {
        config.http_body_timeout = timeout;
    }
    config.max_connections = r.parsed("max_connections", parse_count);
    if let Some(zone) = r.parsed("timezone", Zone::parse) {
        config.timezone = zone;
    }
    if let Some(v) = r.flag("public_read") {
        config.public_read = v;
    }
    config.trusted_proxies = r.list("trusted_proxies", crate::security::proxies::IpRange::parse);
    if let Some(bytes) = r.parsed("audit_max_size", parse_audit_size) {
        config.audit_max_size = bytes;
    }
    if let Some(message) = shared_main_dir(&config) {
        warnings.push(new_issue(file, None, None, None, message));
    }
    if let Some(user) = config.user.as_deref()
        && !config.allow_root_jobs
        && is_root_user(user)
        && let Some(entry) = r.first("user")
    {
        r.fail(
            entry,
            "jobs would run as root: set allow_root_jobs = true to allow it (and give each \
             job only the capabilities it needs), or name an unprivileged user",
        );
    }
    config.cluster = read_cluster(&mut r, env, warnings);
    (config, base_ok)
}

/// `database_url` and `node_name` of `[svc]`: `Some` in cluster mode. The URL is only
/// checked for its shape here (loading does no I/O); connecting is for `--check` and the
/// start.
fn read_cluster(
    r: &mut Reader<'_>,
    env: EnvLookup<'_>,
    warnings: &mut Vec<ConfigIssue>,
) -> Option<ClusterConfig> {
    let node_name = r.parsed("node_name", check_node_name);
    let max_connections = r.parsed("database_max_connections", check_database_connections);
    let Some(written) = r.text_or_empty("database_url").filter(|v| !v.is_empty()) else {
        // An empty value is no URL, as with `secret`: single-node mode.
        for key in ["node_name", "database_max_connections"] {
            if let Some(entry) = r.first(key) {
                warnings.push(entry_issue(
                    r.file,
                    r.section,
                    entry,
                    &format!(
                        "{key} does nothing without database_url (this node is not in a cluster)"
                    ),
                ));
            }
        }
        return None;
    };
    if max_connections.is_none() && r.has("database_max_connections") {
        return None;
    }
    let url_from_env = written.strip_prefix('$').map(|name| format!("${name}"));
    let url = r.parsed("database_url", |v| {
        let url = from_env(v, env)?;
        check_database_url(&url).map_err(|message| match &url_from_env {
            // The URL came from the environment: name the variable, show nothing of it.
            Some(name) => format!("the value of {name}: {message}"),
            None => message,
        })?;
        Ok(url)
    })?;
    let node_name = match node_name {
        Some(name) => name,
        None if r.has("node_name") => return None,
        None => match host_node_name() {
            Ok(name) => name,
            Err(message) => {
                r.fail_key("database_url", &message);
                return None;
            }
        },
    };
    Some(ClusterConfig {
        database_url: Secret::new(url),
        url_from_env,
        node_name,
        max_connections: max_connections.unwrap_or(DEFAULT_DATABASE_CONNECTIONS),
    })
}

/// A node's connections to the cluster's database when `database_max_connections` is not
/// set: room for the listener, the claimer, the heartbeat and a burst of triggers.
pub const DEFAULT_DATABASE_CONNECTIONS: u32 = 10;

/// `database_max_connections`: 2 (one is held by the listener for the other nodes'
/// signals, at least one is left for the work) to 1,000.
fn check_database_connections(value: &str) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(n) if (2..=1000).contains(&n) => Ok(n),
        _ => Err("not a whole number from 2 to 1000 (one connection is the listener's)".into()),
    }
}

/// A `database_url` must be a PostgreSQL URL with a host. The message never repeats the
/// value: the issue shows it redacted.
fn check_database_url(url: &str) -> Result<(), String> {
    const FORM: &str = "postgres://USER:PASSWORD@HOST:PORT/DATABASE";
    let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    else {
        return Err(format!("not a PostgreSQL URL: write {FORM}"));
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host.is_empty() {
        return Err(format!("the URL names no host: write {FORM}"));
    }
    // The driver's own parser has the last word on options and escapes; its message
    // is not shown, as it could quote part of the URL.
    sqlx::postgres::PgConnectOptions::from_str(url)
        .map(|_| ())
        .map_err(|_| format!("not a valid PostgreSQL URL: write {FORM}"))
}

/// Longest node name: a DNS label's length, so a host name always fits.
const NODE_NAME_MAX: usize = 63;

/// A node name: 1 to 63 ASCII letters, digits, `-`, `_` or `.`, starting with a letter or
/// a digit. It goes into log lines and into the column leases are matched on, so it must
/// be printable and mean one thing.
fn check_node_name(name: &str) -> Result<String, String> {
    let valid = name.len() <= NODE_NAME_MAX
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(name.to_string())
    } else {
        Err(format!(
            "a node name is 1 to {NODE_NAME_MAX} ASCII letters, digits, '-', '_' or '.', \
             starting with a letter or a digit"
        ))
    }
}

/// The default `node_name`: this host's name, when it is a valid node name. Otherwise an
/// error that asks for `node_name`, rather than a rewritten name two hosts could share.
fn host_node_name() -> Result<String, String> {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .unwrap_or_default();
    check_node_name(&host).map_err(|_| {
        format!(
            "this host's name ({host:?}) is no valid node name: set node_name (1 to \
             {NODE_NAME_MAX} ASCII letters, digits, '-', '_' or '.')"
        )
    })
}

/// A warning when the main file lies in a directory that jobs need to read: the sandbox
/// keeps the main file's directory out of their reach.
fn shared_main_dir(main: &MainConfig) -> Option<String> {
    const SHARED: &[&str] = &[
        "/", "/etc", "/usr", "/var", "/opt", "/srv", "/home", "/root", "/tmp", "/run",
    ];
    let dir = main.dir_main_file();
    if !SHARED.iter().any(|shared| dir == Path::new(shared)) {
        return None;
    }
    Some(if dir == Path::new("/") {
        "the main file lies in /: jobs cannot read it, but keep it in a directory of its \
         own (such as /etc/svc), whose whole content the sandbox keeps from jobs"
            .to_string()
    } else {
        format!(
            "the sandbox keeps the directory of the main file ({}) from jobs, and jobs \
             need to read what else it holds: keep the main file in a directory of its \
             own, such as /etc/svc",
            dir.display()
        )
    })
}

/// Where an ID or a path was first defined, for duplicate messages.
#[derive(Debug, Clone)]
struct Origin {
    /// The ID as configured.
    id: String,
    file: PathBuf,
    header: String,
}

/// A name a job lists that is checked once every file is read (what it names may be
/// defined in a later file than the job), and where it was written.
#[derive(Debug)]
struct LaterRef {
    key: &'static str,
    named: NamedAt,
    file: PathBuf,
    header: String,
}

impl LaterRef {
    /// An error about this name, at the key and value that wrote it.
    fn issue(&self, message: String) -> ConfigIssue {
        new_issue(
            &self.file,
            Some(&self.header),
            Some(self.key),
            Some(&self.named.value),
            message,
        )
    }
}

/// The environment variables a `$NAME` value reads.
type EnvLookup<'e> = &'e dyn Fn(&str) -> Option<String>;

/// Builds jobs and JobHttps from sections, file after file, and detects duplicates.
struct Loader<'m> {
    main: &'m MainConfig,
    env: EnvLookup<'m>,
    /// What commands must not write or read ([`MainConfig::sandbox_protected_paths`]),
    /// worked out once: with thousands of jobs, once per job was a tenth of the start-up.
    protected: Vec<(PathBuf, &'static str)>,
    errors: Vec<ConfigIssue>,
    warnings: Vec<ConfigIssue>,
    jobs: Vec<JobConfig>,
    http_jobs: Vec<HttpJobConfig>,
    /// Lower-cased ID → where it was first defined.
    job_ids: HashMap<String, Origin>,
    http_job_ids: HashMap<String, Origin>,
    paths: HashMap<String, Origin>,
    notifs: Vec<NotifConfig>,
    /// Notif name → where it was first defined.
    notif_names: HashMap<String, Origin>,
    /// The notifs each job names.
    notif_refs: Vec<LaterRef>,
    /// The jobs each job starts when it ends.
    chain_refs: Vec<ChainRef>,
}

/// A job named by `on_success` or `on_failure` of the job `from` (an index in `jobs`).
#[derive(Debug)]
struct ChainRef {
    from: usize,
    target: LaterRef,
}

impl<'m> Loader<'m> {
    fn new(main: &'m MainConfig, env: EnvLookup<'m>) -> Self {
        Loader {
            main,
            env,
            protected: main.sandbox_protected_paths(),
            errors: Vec::new(),
            warnings: Vec::new(),
            jobs: Vec::new(),
            http_jobs: Vec::new(),
            job_ids: HashMap::new(),
            http_job_ids: HashMap::new(),
            paths: HashMap::new(),
            notifs: Vec::new(),
            notif_names: HashMap::new(),
            notif_refs: Vec::new(),
            chain_refs: Vec::new(),
        }
    }

    /// Reads one file and loads its sections; problems are recorded.
    fn load_file(&mut self, file: &Path) {
        let text = match read_text(file) {
            Ok(text) => text,
            Err(message) => {
                self.errors.push(new_issue(file, None, None, None, message));
                return;
            }
        };
        let parsed = syntax::parse(&text);
        self.errors.extend(syntax_issues(file, parsed.errors));
        self.warnings.extend(syntax_issues(file, parsed.warnings));
        self.load_sections(file, &parsed.sections, false);
    }

    fn load_sections(&mut self, file: &Path, sections: &[Section], is_main: bool) {
        for section in sections {
            match section.kind {
                SectionKind::Main if is_main => {}
                SectionKind::Main => self.errors.push(new_issue(
                    file,
                    Some(&section.header),
                    None,
                    None,
                    format!(
                        "line {}: [svc] belongs in the main file {}",
                        section.line,
                        self.main.file.display()
                    ),
                )),
                SectionKind::Job | SectionKind::Hook => self.load_job(file, section),
                SectionKind::JobHttp => self.load_http_job(file, section),
                SectionKind::Notif => self.load_notif(file, section),
                SectionKind::User => self.errors.push(new_issue(
                    file,
                    Some(&section.header),
                    None,
                    None,
                    format!(
                        "line {}: [user \"NAME\"] sections belong in {}",
                        section.line,
                        self.main.user_conf().display()
                    ),
                )),
            }
        }
    }

    /// The job ID of `section`, recorded; a duplicate within the namespace is a problem,
    /// and so is one that differs only by case (IDs are looked up in any case).
    fn register_id(&mut self, file: &Path, section: &Section, http: bool) -> String {
        let id = job_id_from_name(&section.name);
        let ids = if http {
            &mut self.http_job_ids
        } else {
            &mut self.job_ids
        };
        if let Some(first) = ids.get(&id.to_ascii_lowercase()) {
            let what = if http { "JobHttp" } else { "job" };
            let same = if first.id == id {
                "the same ID".to_string()
            } else {
                format!("the ID {:?}, the same but for case", first.id)
            };
            let message = format!(
                "line {}: duplicate {what} ID {id:?}: [{}] in {} has {same}",
                section.line,
                first.header,
                first.file.display()
            );
            self.errors
                .push(new_issue(file, Some(&section.header), None, None, message));
        } else {
            ids.insert(
                id.to_ascii_lowercase(),
                Origin {
                    id: id.clone(),
                    file: file.to_path_buf(),
                    header: section.header.clone(),
                },
            );
        }
        id
    }

    #[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
    fn load_job(&mut self, file: &Path, section: &Section) {
        if section.kind == SectionKind::Hook {
            self.warnings.push(new_issue(
                file,
                Some(&section.header),
                None,
                None,
                format!(
                    "line {}: deprecated: use [job \"{}\"]",
                    section.line, section.name
                ),
            ));
        }
        let before = self.errors.len();
        let id = self.register_id(file, section, false);
        let main = self.main;
        let mut r = Reader::new(file, section, JOB_KEYS, &mut self.errors);

        let description = r.text_or_empty("description").unwrap_or_default();
        let timezone = r.zone(main);
        let timer = r.timer(&timezone);
        let path = r.parsed("path", normalize_path);
        let (auth_kind, auth_kind_name) = r
            .parsed("auth_kind", parse_auth_kind)
            .unwrap_or((AuthKind::HmacSha256, AuthKind::HmacSha256.as_str()));
        // An empty `secret =` means the main secret, as before; a repeated key holds
        // the secrets of a rotation.
        let secrets = r.non_empty_list("secret", |value| {
            guards::check_secret_not_blank(value)?;
            job_key(auth_kind, value)
        });
        let filter_event = r.list("filter_event", |v| Ok(v.to_ascii_lowercase()));
        let filter_ref = r.list("filter_ref", parse_ref_glob);
        let header_sign = r
            .parsed("header_sign", check_header_name)
            .unwrap_or_else(|| DEFAULT_HEADER_SIGN.to_string());
        let public_key = r
            .parsed("public_key", check_public_key)
            .unwrap_or_else(|| DEFAULT_PATCHHOST_PUBLIC_KEY.to_string());
        let commands = r.list("command", |v| Ok(v.to_string()));
        let log_retention = r
            .parsed("log_retention", parse_count)
            .unwrap_or(DEFAULT_LOG_RETENTION);
        let timeout = r
            .parsed("timeout", parse_timeout)
            .unwrap_or(Some(DEFAULT_JOB_TIMEOUT));
        let (user, group) = run_as(&mut r, main);
        let base = main.dir_base.clone();
        let dir_work = r.parsed("dir_work", |v| Ok(resolve_path(&base, Path::new(v))));
        let env = r.list("env", parse_env);
        let capabilities = r
            .list("capabilities", parse_capabilities)
            .into_iter()
            .fold(0, |all, mask| all | mask);
        if r.has("user")
            && let Some(name) = user.as_deref()
        {
            let root = is_root_user(name);
            if root
                && !main.allow_root_jobs
                && let Some(entry) = r.first("user")
            {
                r.fail(
                    entry,
                    "this job would run as root: set allow_root_jobs = true in [svc] to \
                     allow it (and list what it needs in capabilities), or name an \
                     unprivileged user",
                );
            }
            if !root
                && capabilities != 0
                && let Some(entry) = r.first("capabilities")
            {
                r.fail(
                    entry,
                    "only a job that runs as root keeps capabilities; this one runs as \
                     an unprivileged user",
                );
            }
        }
        let limits = ResourceLimits {
            nproc: r.parsed("limit_nproc", parse_limit),
            nofile: r.parsed("limit_nofile", parse_limit),
            address_space: r.parsed("limit_as", parse_bytes),
            memory: r.parsed("limit_memory", parse_bytes),
            pids: r.parsed("limit_pids", parse_limit).or(main.limit_pids),
            cpu_weight: r.parsed("cpu_weight", parse_cpu_weight),
        };
        let sandbox = r.flag("sandbox").unwrap_or(true);
        let one_time_deliveries = r.flag("one_time_deliveries").unwrap_or(false);
        let protected = &self.protected;
        let write_paths = r.list("write_paths", |v| check_write_path(v, protected));
        if sandbox
            && let Some(dir) = &dir_work
            && let Some(entry) = r.first("dir_work")
            && let Err(message) = check_outside_protected(dir, protected)
        {
            r.fail(entry, &message);
        }
        if r.has("limit_as")
            && let Some(entry) = r.first("limit_memory")
        {
            r.fail(
                entry,
                "limit_memory and limit_as both cap a command's memory (limit_memory its \
                 heap and anonymous mappings, limit_as its whole address space): set only one",
            );
        }

        let notif_on_success = r.notif_names("notif_on_success");
        let notif_on_failed = r.notif_names("notif_on_failed");
        let ping_url = r.parsed("ping_url", parse_ping_url);
        let on_busy = r.parsed("on_busy", parse_on_busy).unwrap_or_default();
        if main.cluster.is_some()
            && on_busy != OnBusy::Queue
            && let Some(entry) = r.first("on_busy")
        {
            // Skip and replace decide on a run that may be on another node; in the
            // shared queue only `queue` is kept exactly, so the others are refused rather
            // than quietly behaving like it.
            r.fail(
                entry,
                "in cluster mode (database_url set) only on_busy = queue is supported",
            );
        }
        let retry = r
            .parsed("retry", |v| {
                v.parse::<u32>()
                    .map_err(|_| "not a whole number of attempts (0 or more)".to_string())
            })
            .unwrap_or(0);
        let retry_delay = r
            .parsed("retry_delay", parse_positive_duration)
            .unwrap_or(DEFAULT_RETRY_DELAY);
        let catch_up_once = r
            .parsed("catch_up", |v| match v.to_ascii_lowercase().as_str() {
                "none" => Ok(false),
                "once" => Ok(true),
                _ => Err("unknown catch_up (expected none or once)".to_string()),
            })
            .unwrap_or(false);
        let catch_up_window = r
            .parsed("catch_up_window", parse_positive_duration)
            .unwrap_or(DEFAULT_CATCH_UP_WINDOW);
        let catch_up = catch_up_once.then_some(catch_up_window);
        let random_delay = r.parsed("random_delay", parse_duration).unwrap_or_default();
        let chain_empty = "no job ID (IDs of Jobs, comma-separated or one per line)";
        let on_success = r.names("on_success", chain_empty);
        let on_failure = r.names("on_failure", chain_empty);

        if !r.has("command") {
            r.fail_key("command", "a job needs at least one command");
        }
        if !r.has("interval") && !r.has("schedule") && !r.has("path") {
            r.fail_key(
                "path",
                "a job needs interval, schedule or path; without any it could never run",
            );
        }
        drop(r);
        let notif_on_success =
            self.note_notif_refs(file, section, "notif_on_success", notif_on_success);
        let notif_on_failed =
            self.note_notif_refs(file, section, "notif_on_failed", notif_on_failed);

        if let Some(p) = &path {
            if let Some(first) = self.paths.get(p) {
                let message = format!(
                    "duplicate path {p:?}: [{}] in {} uses it already",
                    first.header,
                    first.file.display()
                );
                self.errors.push(new_issue(
                    file,
                    Some(&section.header),
                    Some("path"),
                    Some(p),
                    message,
                ));
            } else {
                self.paths.insert(
                    p.clone(),
                    Origin {
                        id: id.clone(),
                        file: file.to_path_buf(),
                        header: section.header.clone(),
                    },
                );
            }
        }
        if path.is_some() && secrets.is_empty() && auth_kind == AuthKind::Gitlab {
            // GitLab sends the secret itself in every delivery's X-Gitlab-Token: the main
            // secret would travel in the clear to GitLab and through every proxy and log
            // on the way, and whoever reads it there signs pause, resume, cancel and run
            // now.
            self.errors.push(new_issue(
                file,
                Some(&section.header),
                Some("secret"),
                None,
                "auth_kind = gitlab needs a secret of its own: GitLab sends the secret \
                 itself in X-Gitlab-Token, and the main secret, which would be used \
                 instead, also signs pause, resume, cancel and run now",
            ));
        }
        if path.is_some()
            && secrets.is_empty()
            && auth_kind == AuthKind::Standard
            && let Some(main_secret) = &main.secret
            && let Err(reason) = standard_key(main_secret.expose())
        {
            // Its deliveries would be checked with the main secret, which could never
            // match: refused here rather than every delivery as a mismatch.
            self.errors.push(new_issue(
                file,
                Some(&section.header),
                Some("secret"),
                None,
                format!(
                    "this standard job has no secret of its own, and the main secret \
                     (secret in {}) cannot be its key: {reason}",
                    main.file.display()
                ),
            ));
        }
        if self.errors.len() != before {
            return;
        }
        if path.is_some() && secrets.is_empty() && auth_kind != AuthKind::Sourcehut {
            // Its webhooks are signed with the main secret, the one that also signs the
            // control requests: whoever can trigger it can sign those too.
            self.warnings.push(new_issue(
                file,
                Some(&section.header),
                Some("secret"),
                None,
                "this webhook job has no secret of its own: its deliveries are checked \
                 with the main secret, which also signs pause, resume and cancel; give \
                 it its own secret",
            ));
        }
        self.jobs.push(JobConfig {
            id,
            name: section.name.clone(),
            file: file.to_path_buf(),
            description,
            timer,
            timezone,
            path,
            auth_kind,
            one_time_deliveries,
            auth_kind_name,
            header_sign,
            secrets,
            filter_event,
            filter_ref,
            public_key,
            commands,
            log_retention,
            timeout,
            user,
            group,
            dir_work,
            env,
            capabilities,
            limits,
            write_paths,
            sandbox,
            notif_on_success,
            notif_on_failed,
            ping_url,
            // Filled with the IDs they name once every file is read.
            on_success: Vec::new(),
            on_failure: Vec::new(),
            on_busy,
            retry,
            retry_delay,
            catch_up,
            random_delay,
        });
        for (key, names) in [("on_success", on_success), ("on_failure", on_failure)] {
            for named in names {
                self.chain_refs.push(ChainRef {
                    from: self.jobs.len() - 1,
                    target: LaterRef {
                        key,
                        named,
                        file: file.to_path_buf(),
                        header: section.header.clone(),
                    },
                });
            }
        }
    }

    fn load_http_job(&mut self, file: &Path, section: &Section) {
        let before = self.errors.len();
        let id = self.register_id(file, section, true);
        let main = self.main;
        let mut r = Reader::new(file, section, HTTP_JOB_KEYS, &mut self.errors);

        let description = r.text_or_empty("description").unwrap_or_default();
        let secret = r.secret("secret");
        let timezone = r.zone(main);
        let timer = r.timer(&timezone);
        let http_method = r
            .parsed("http_method", parse_http_method)
            .unwrap_or_default();
        let http_url = r.parsed("http_url", |v| resolve_http_url(v, &main.listen_address));
        // Empty means the default, as upstream reads it.
        let http_request_type = match r.text_or_empty("http_request_type") {
            Some(text) if !text.is_empty() => r.parsed("http_request_type", parse_request_type),
            _ => None,
        }
        .unwrap_or_default();
        let http_headers = r.list("http_header", parse_http_header);
        let http_timeout = r
            .parsed("http_timeout", parse_http_timeout)
            .flatten()
            .unwrap_or(main.http_timeout);
        let header_sign = r
            .parsed("header_sign", check_header_name)
            .unwrap_or_else(|| DEFAULT_HEADER_SIGN.to_string());
        let http_insecure = r.flag("http_insecure").unwrap_or(false);
        let http_follow_redirects = r.flag("http_follow_redirects").unwrap_or(false);
        let log_retention = r
            .parsed("log_retention", parse_count)
            .unwrap_or(DEFAULT_LOG_RETENTION);
        let (user, group) = run_as(&mut r, main);
        let notif_on_success = r.notif_names("notif_on_success");
        let notif_on_failed = r.notif_names("notif_on_failed");
        let ping_url = r.parsed("ping_url", parse_ping_url);

        if !r.has("http_url") {
            r.fail_key("http_url", "a JobHttp needs http_url");
        }
        drop(r);
        let notif_on_success =
            self.note_notif_refs(file, section, "notif_on_success", notif_on_success);
        let notif_on_failed =
            self.note_notif_refs(file, section, "notif_on_failed", notif_on_failed);

        let Some(http_url) = http_url else {
            return;
        };
        if self.errors.len() != before {
            return;
        }
        self.http_jobs.push(HttpJobConfig {
            id,
            name: section.name.clone(),
            file: file.to_path_buf(),
            description,
            timer,
            timezone,
            http_method,
            http_url,
            http_request_type,
            http_headers,
            http_timeout,
            http_insecure,
            http_follow_redirects,
            secret,
            header_sign,
            log_retention,
            user,
            group,
            notif_on_success,
            notif_on_failed,
            ping_url,
        });
    }

    /// Records the notif names a job lists for the check at the end of loading, and
    /// returns them.
    fn note_notif_refs(
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
    fn load_notif(&mut self, file: &Path, section: &Section) {
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

    /// `on_success` and `on_failure`: each name must be a Job's ID (in any case; kept
    /// as configured), and no chain may lead back to a job it started from.
    fn check_chains(&mut self) {
        let ids: HashMap<String, usize> = self
            .jobs
            .iter()
            .enumerate()
            .map(|(index, job)| (job.id.to_ascii_lowercase(), index))
            .collect();
        let mut edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); self.jobs.len()];
        let mut resolved: Vec<(usize, &'static str, String)> = Vec::new();
        for (ref_index, chain) in self.chain_refs.iter().enumerate() {
            let named = &chain.target.named;
            match ids.get(&named.name.to_ascii_lowercase()) {
                Some(&target) => {
                    edges[chain.from].push((target, ref_index));
                    resolved.push((chain.from, chain.target.key, self.jobs[target].id.clone()));
                }
                None => {
                    let message = format!(
                        "line {}: no job has the ID {:?} (on_success and on_failure name \
                         Jobs)",
                        named.line, named.name
                    );
                    self.errors.push(chain.target.issue(message));
                }
            }
        }
        for (from, key, id) in resolved {
            let list = if key == "on_success" {
                &mut self.jobs[from].on_success
            } else {
                &mut self.jobs[from].on_failure
            };
            list.push(id);
        }
        // A cycle: a depth-first walk that meets a job still on its path.
        let mut state = vec![0u8; self.jobs.len()]; // 0 new, 1 on the path, 2 done
        let mut reported = std::collections::HashSet::new();
        for start in 0..self.jobs.len() {
            let mut path: Vec<(usize, usize)> = vec![(start, 0)];
            if state[start] != 0 {
                continue;
            }
            state[start] = 1;
            while let Some(&mut (node, ref mut next)) = path.last_mut() {
                if let Some(&(target, ref_index)) = edges[node].get(*next) {
                    *next += 1;
                    match state[target] {
                        0 => {
                            state[target] = 1;
                            path.push((target, 0));
                        }
                        1 => {
                            let from = path.iter().position(|(n, _)| *n == target).unwrap_or(0);
                            let mut cycle: Vec<&str> = path[from..]
                                .iter()
                                .map(|(n, _)| self.jobs[*n].id.as_str())
                                .collect();
                            cycle.push(self.jobs[target].id.as_str());
                            let mut members: Vec<usize> =
                                path[from..].iter().map(|(n, _)| *n).collect();
                            members.sort_unstable();
                            if reported.insert(members) {
                                let chain = &self.chain_refs[ref_index].target;
                                let message = format!(
                                    "line {}: the chain {} leads back to where it started; \
                                     on_success and on_failure may not form a cycle",
                                    chain.named.line,
                                    cycle.join(" -> ")
                                );
                                self.errors.push(chain.issue(message));
                            }
                        }
                        _ => {}
                    }
                } else {
                    state[node] = 2;
                    path.pop();
                }
            }
        }
    }

    /// Every notif name a job lists must be a `[notif]` section of some file.
    fn check_notif_refs(&mut self) {
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

/// `user` and `group` of a job. An unset `user` means the main section's user and group;
/// a job that sets `user` but not `group` gets that user's primary group (`None`), not the
/// main section's group.
fn run_as(r: &mut Reader<'_>, main: &MainConfig) -> (Option<String>, Option<String>) {
    let user = r.parsed("user", check_user);
    let group = r.parsed("group", check_group);
    if r.has("user") {
        (user, group)
    } else {
        (main.user.clone(), group.or_else(|| main.group.clone()))
    }
}

fn syntax_issues(
    file: &Path,
    errors: Vec<syntax::SyntaxError>,
) -> impl Iterator<Item = ConfigIssue> + '_ {
    errors.into_iter().map(move |e| {
        new_issue(
            file,
            e.section.as_deref(),
            e.key.as_deref(),
            e.value.as_deref(),
            e.message,
        )
    })
}

/// Reads a whole file as UTF-8 text; the error is the issue message.
fn read_text(file: &Path) -> Result<String, String> {
    let bytes = fs::read(file).map_err(|e| format!("cannot read the file: {e}"))?;
    String::from_utf8(bytes).map_err(|e| format!("the file is not valid UTF-8: {e}"))
}

/// Regular files (symbolic links followed) named `*.conf` and not starting with `.` in
/// `dir`, sorted by name. A missing directory has none.
fn conf_files(dir: &Path, errors: &mut Vec<ConfigIssue>) -> Vec<PathBuf> {
    match fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            errors.push(new_issue(
                dir,
                None,
                None,
                None,
                format!("cannot read: {e}"),
            ));
            return Vec::new();
        }
        Ok(meta) if !meta.is_dir() => {
            errors.push(new_issue(dir, None, None, None, "not a directory"));
            return Vec::new();
        }
        Ok(_) => {}
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            let message = format!("cannot list the directory: {e}");
            errors.push(new_issue(dir, None, None, None, message));
            return Vec::new();
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                let message = format!("cannot list the directory: {e}");
                errors.push(new_issue(dir, None, None, None, message));
                continue;
            }
        };
        let path = entry.path();
        if is_conf_file(&path) {
            files.push(path);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    files
}

/// Whether `path`, an entry of `job.d` or `job_http.d`, is a file that [`load`] reads: a
/// name ending in `.conf` and not starting with `.`, and a regular file (symbolic links
/// followed) or an entry that cannot be looked at (a dangling link, an unreadable one),
/// whose reading then reports the problem.
pub(crate) fn is_conf_file(path: &Path) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    let name = name.to_string_lossy();
    if name.starts_with('.') || !name.ends_with(".conf") {
        return false;
    }
    fs::metadata(path).map_or(true, |meta| meta.is_file())
}

/// Loads and validates the main file at `path` and the `job.d` / `job_http.d` files below
/// its `dir_base`.
///
/// A relative `dir_base` is taken relative to the directory holding the main file;
/// relative `dir_public`, `runner_path` and job `dir_work` values are taken relative to
/// `dir_base`. Job files are read in name order (hidden files and names not ending in
/// `.conf` are ignored); a missing directory holds no jobs. Every problem in every file is
/// returned at once; deprecated names load and are listed in [`Config::warnings`].
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with_env(path, &|name| std::env::var(name).ok())
}

/// [`load`], reading `$NAME` values from `env` instead of the process environment.
fn load_with_env(path: &Path, env: EnvLookup<'_>) -> Result<Config, ConfigError> {
    let text = match read_text(path) {
        Ok(text) => text,
        Err(message) => {
            return Err(ConfigError {
                issues: vec![new_issue(path, None, None, None, message)],
                warnings: Vec::new(),
            });
        }
    };
    let parsed = syntax::parse(&text);
    let sections = parsed.sections;
    let mut errors: Vec<ConfigIssue> = syntax_issues(path, parsed.errors).collect();
    let mut warnings: Vec<ConfigIssue> = syntax_issues(path, parsed.warnings).collect();

    let mut mains = sections.iter().filter(|s| s.kind == SectionKind::Main);
    let first_main = mains.next();
    for extra in mains {
        let first_line = first_main.map_or(0, |s| s.line);
        errors.push(new_issue(
            path,
            Some(&extra.header),
            None,
            None,
            format!(
                "line {}: duplicate section [svc] (first on line {first_line})",
                extra.line
            ),
        ));
    }
    let (main, base_ok) = read_main(path, first_main, env, &mut errors, &mut warnings);

    let mut loader = Loader::new(&main, env);
    loader.errors = errors;
    loader.warnings = warnings;
    loader.load_sections(path, &sections, true);

    let mut users = Vec::new();
    if base_ok {
        for dir in [main.dir_job_d(), main.dir_job_http_d()] {
            for file in conf_files(&dir, &mut loader.errors) {
                loader.load_file(&file);
            }
        }
        users = load_users(&main, &mut loader.errors, &mut loader.warnings);
        loader.check_notif_refs();
        loader.check_chains();
    }

    let Loader {
        errors,
        warnings,
        jobs,
        http_jobs,
        notifs,
        ..
    } = loader;
    if !errors.is_empty() {
        return Err(ConfigError {
            issues: errors,
            warnings,
        });
    }
    Ok(Config {
        main,
        jobs,
        http_jobs,
        users,
        notifs,
        warnings,
    })
}

/// Reads `$dir_base/etc/svc/user.conf` when it exists: `[user "NAME"]` sections, each with
/// one `password` hash. Problems go to `errors` with every value hidden (a value here is a
/// password hash, or a password typed by mistake); a file readable by every user is a
/// warning.
fn load_users(
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

/// The job ID for a job name: every character other than an ASCII letter, digit, `-` or
/// `_` (white space included) becomes `_`. Case is kept.
pub fn job_id_from_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[path = "guards.rs"]
mod guards;

#[cfg(test)]
#[path = "test_tree.rs"]
mod test_tree;

#[cfg(test)]
#[path = "guards_tests.rs"]
mod guards_tests;

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "notif_tests.rs"]
mod notif_tests;

#[cfg(test)]
#[path = "ping_tests.rs"]
mod ping_tests;

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod cluster_tests;
