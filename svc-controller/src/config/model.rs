//! The configuration as the rest of the service uses it: the domain types that
//! [`load`](super::load) produces (the main section, notifications, users; those of jobs
//! and JobHttps are in `job_model.rs`), their defaults, the paths derived from
//! `dir_base`, and the problems loading reports.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use proto::redact::Secret;

use super::job_model::{HttpJobConfig, JobConfig};
use crate::time::timezone::Zone;

/// Default of `log_max_size`: 10 MiB.
pub const DEFAULT_LOG_MAX_SIZE: u64 = 10 * 1024 * 1024;
/// Default `audit_max_size`: the audit log is rotated past 10 MiB.
pub const DEFAULT_AUDIT_MAX_SIZE: u64 = 10 * 1024 * 1024;

/// Default of `max_body_in_flight`: 64 MiB.
pub const DEFAULT_MAX_BODY_IN_FLIGHT: u64 = 64 * 1024 * 1024;

/// Default of `http_body_timeout`: a request body must have arrived whole within it.
pub const DEFAULT_HTTP_BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// Default address the HTTP server listens on.
pub const DEFAULT_LISTEN_ADDRESS: &str = "127.0.0.1:31937";
/// Default server name.
pub const DEFAULT_NAME: &str = "svc";
/// Default `dir_state`, below `dir_base`.
pub const DEFAULT_DIR_STATE: &str = "var/run/svc";
/// Default timeout of a JobHttp request.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(300);

/// Everything loaded from the configuration files.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The `[svc]` section (defaults when absent).
    pub main: MainConfig,
    /// Jobs in load order: main file first, then `job.d` files sorted by name.
    pub jobs: Vec<JobConfig>,
    /// JobHttp definitions in load order.
    pub http_jobs: Vec<HttpJobConfig>,
    /// Users of `user.conf` in file order; empty when the file is absent (no login).
    pub users: Vec<UserConfig>,
    /// `[notif "NAME"]` sections in load order; every name a job lists is among them.
    pub notifs: Vec<NotifConfig>,
    /// Problems that do not stop loading, such as deprecated names.
    pub warnings: Vec<ConfigIssue>,
}

/// The `[svc]` section of the main file.
#[derive(Debug, Clone, PartialEq)]
pub struct MainConfig {
    /// The main file as given on the command line.
    pub file: PathBuf,
    /// `name`, default [`DEFAULT_NAME`].
    pub name: String,
    /// `listen_address`, default [`DEFAULT_LISTEN_ADDRESS`]; validated as `host:port`.
    pub listen_address: String,
    /// `dir_base`, default `/`. A relative value is taken relative to the directory that
    /// holds the main file, so a configuration tree can be moved as a whole.
    pub dir_base: PathBuf,
    /// `dir_public`: directory served under `/`; relative values are below `dir_base`.
    pub dir_public: Option<PathBuf>,
    /// `dir_state`, default `$dir_base/var/run/svc` ([`DEFAULT_DIR_STATE`]); relative values
    /// are below `dir_base`. Holds job state, the replay stores, the generated secret and
    /// the lock that allows one controller per state directory.
    pub dir_state: PathBuf,
    /// `secret`; `None` when empty (a new one is generated at each start). `Debug` hides
    /// it.
    pub secret: Option<Secret>,
    /// `http_timeout`: default timeout of JobHttp requests.
    pub http_timeout: Duration,
    /// `max_job_running` (legacy `max_hook_running`), default 1, at least 1.
    pub max_job_running: usize,
    /// `limit_pids`: tasks of each run at once, for jobs that set none.
    pub limit_pids: Option<u64>,
    /// `run_cgroups`, default true: each run of commands in a cgroup of its own where
    /// the host allows it ([`crate::runner::cgroups`]); false applies the limits to each process
    /// instead.
    pub run_cgroups: bool,
    /// `is_development`, default false.
    pub is_development: bool,
    /// `user`: default user for job commands; `None` = the controller's own.
    pub user: Option<String>,
    /// `group`: default group for job commands; `None` = the user's primary group.
    pub group: Option<String>,
    /// `runner_path`: the runner binary; `None` = `svc-runner` next to the controller. A
    /// relative value is below `dir_base`.
    pub runner_path: Option<PathBuf>,
    /// `log_level`: a tracing filter such as `info` or `svc_controller=debug`.
    pub log_level: Option<String>,
    /// `allow_root_jobs`, default false: a job whose `user` is root is refused unless
    /// this is set.
    pub allow_root_jobs: bool,
    /// `require_epoch`, default false (upstream clients send JobHttp pause and resume
    /// without one): signed control requests without `_svc_epoch` are refused.
    pub require_epoch: bool,
    /// `max_body_in_flight`, default [`DEFAULT_MAX_BODY_IN_FLIGHT`]: bytes of webhook
    /// bodies being received at once, all requests together (read at start).
    pub max_body_in_flight: u64,
    /// `allowed_hosts`, repeated: host names the `Host` header may carry besides IP
    /// literals (and, on a loopback listener, `localhost`). Empty on a loopback listener:
    /// only those; empty elsewhere: no check. Read at start.
    pub allowed_hosts: Vec<String>,
    /// `log_max_size`, default [`DEFAULT_LOG_MAX_SIZE`]: bytes of command output one
    /// run's log keeps; the rest is dropped after a line that says so.
    pub log_max_size: u64,
    /// `http_body_timeout`, default [`DEFAULT_HTTP_BODY_TIMEOUT`]: time from the end of a
    /// request's head to the end of its body, however steadily the bytes come (read at
    /// start).
    pub http_body_timeout: Duration,
    /// `timezone`: the IANA zone of the jobs' schedules that set none; default UTC.
    pub timezone: Zone,
    /// `max_connections`: HTTP connections served at once. `None`: derived from the
    /// open-file limit (read at start; see `http::server::connection_limit`).
    pub max_connections: Option<usize>,
    /// `public_read`, default false: with users configured, pages and the GET API are
    /// open without a session too (actions still need a role or a signature). Read at
    /// start.
    pub public_read: bool,
    /// `trusted_proxies`, repeated: addresses and CIDR ranges of reverse proxies whose
    /// `X-Forwarded-For` and `X-Forwarded-Proto` are believed. Read at start.
    pub trusted_proxies: Vec<crate::security::proxies::IpRange>,
    /// `audit_max_size`, default [`DEFAULT_AUDIT_MAX_SIZE`]: size past which the audit
    /// log is rotated. Read at start.
    pub audit_max_size: u64,
    /// Cluster mode: `database_url` and `node_name`. `None` (no `database_url`): a single
    /// node, as always. Read at start.
    pub cluster: Option<ClusterConfig>,
}

/// What makes a controller one node of a cluster (`docs/cluster.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// `database_url`: the cluster's PostgreSQL, as a `postgres://` URL (a `$NAME` value
    /// already read from the environment). `Debug` hides it; it is shown only through
    /// [`ClusterConfig::shown_url`].
    pub database_url: Secret,
    /// Where the value came from, for messages: `$NAME` when it was read from the
    /// environment (then nothing of the URL is shown), `None` when written in the file.
    pub url_from_env: Option<String>,
    /// `node_name`, default the host name: this node's name in the cluster, unique among
    /// its live nodes.
    pub node_name: String,
    /// `database_max_connections`: the most connections this node opens to the database
    /// (its pool, the listener's included).
    pub max_connections: u32,
}

impl ClusterConfig {
    /// The URL as messages may show it: the environment variable's name when it came from
    /// one, else the URL with its password and tokens hidden (the one redaction rule).
    pub fn shown_url(&self) -> String {
        match &self.url_from_env {
            Some(name) => name.clone(),
            None => proto::redact::redact_url(self.database_url.expose()),
        }
    }
}

/// A `[notif "NAME"]` section: where the notifications of the jobs that name it go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifConfig {
    /// The quoted section name, which `notif_on_success` and `notif_on_failed` use.
    pub name: String,
    /// File the section was read from.
    pub file: PathBuf,
    /// `kind` and the keys of that kind.
    pub kind: NotifKind,
}

/// How a notification is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifKind {
    /// `kind = email`.
    Email(EmailNotif),
    /// `kind = webhook`; shared with the messages under way, which each hold it.
    Webhook(Arc<WebhookNotif>),
}

impl NotifKind {
    /// The configuration spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            NotifKind::Email(_) => "email",
            NotifKind::Webhook(_) => "webhook",
        }
    }
}

/// The keys of a `kind = email` notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailNotif {
    /// `smtp_server`, required.
    pub server: SmtpServer,
    /// `smtp_user` and `smtp_password` (a `$NAME` value read from the controller's
    /// environment at load); `None` when neither is set: no authentication.
    pub credentials: Option<SmtpCredentials>,
    /// `from`, required: a mailbox, `a@example.org` or `Name <a@example.org>`.
    pub from: lettre::message::Mailbox,
    /// `to`, repeated, at least one: mailboxes.
    pub to: Vec<lettre::message::Mailbox>,
    /// `smtp_insecure`, default false: the server's certificate is not verified (for test
    /// servers only).
    pub insecure: bool,
}

/// `smtp_server`: where and how to reach the mail server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpServer {
    pub security: SmtpSecurity,
    /// A host name or an IP address (an IPv6 one without its brackets).
    pub host: String,
    pub port: u16,
}

/// How the connection to the mail server is encrypted. There is no plain-text choice:
/// the password would cross the network as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpSecurity {
    /// `smtps://`: TLS from the first byte; port 465 by default.
    Tls,
    /// `smtp+starttls://`: plain SMTP that must switch to TLS (STARTTLS) before anything
    /// else; port 587 by default.
    StartTls,
}

impl SmtpSecurity {
    /// The URL scheme.
    pub fn scheme(self) -> &'static str {
        match self {
            SmtpSecurity::Tls => "smtps",
            SmtpSecurity::StartTls => "smtp+starttls",
        }
    }

    /// The port of a URL that names none.
    pub fn default_port(self) -> u16 {
        match self {
            SmtpSecurity::Tls => 465,
            SmtpSecurity::StartTls => 587,
        }
    }
}

impl fmt::Display for SmtpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = self.security.scheme();
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// SMTP credentials. The password never shows in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpCredentials {
    pub user: String,
    pub password: String,
}

impl fmt::Debug for SmtpCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpCredentials")
            .field("user", &self.user)
            .field("password", &proto::redact::REDACTED)
            .finish()
    }
}

/// The keys of a `kind = webhook` notification. `Debug` shows the URL as
/// [`proto::redact::redact_url`] does (it may carry a token), never the key.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookNotif {
    /// `url`, required: `http://` or `https://`.
    pub url: String,
    /// `secret`, required: the key messages are signed with (Standard Webhooks).
    pub key: WebhookKey,
}

impl fmt::Debug for WebhookNotif {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookNotif")
            .field("url", &proto::redact::redact_url(&self.url))
            .field("key", &self.key)
            .finish()
    }
}

/// A webhook key: of a notification (what its messages are signed with) or of a job
/// (what its deliveries are checked with). The bytes a `whsec_<base64>` secret decodes
/// to where Standard Webhooks are spoken, or a secret's own bytes. Never shown in
/// `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookKey(Vec<u8>);

impl WebhookKey {
    pub fn new(bytes: Vec<u8>) -> WebhookKey {
        WebhookKey(bytes)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for WebhookKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(proto::redact::REDACTED)
    }
}

/// A `[user "NAME"]` section of `user.conf`.
#[derive(Clone, PartialEq, Eq)]
pub struct UserConfig {
    /// The quoted section name: the login name.
    pub name: String,
    /// `password`: an argon2 PHC string (`$argon2id$...`, `$argon2i$`, `$argon2d$`) or a
    /// bcrypt hash (`$2a$`, `$2b$`, `$2y$`), validated at load.
    pub password_hash: String,
    /// `role`, default viewer: what the account may do.
    pub role: crate::security::rights::Role,
    /// File the section was read from.
    pub file: PathBuf,
}

/// Never shows the hash.
impl fmt::Debug for UserConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserConfig")
            .field("name", &self.name)
            .field("password_hash", &"<hash>")
            .field("file", &self.file)
            .finish()
    }
}

/// One problem found in the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// The file (or directory) concerned.
    pub file: PathBuf,
    /// Section header as written, e.g. `job "backup"`; `None` for file-level problems.
    pub section: Option<String>,
    /// The key, lower-cased; `None` for section- and file-level problems.
    pub key: Option<String>,
    /// The value as written; `None` when no single value is at fault.
    pub value: Option<String>,
    /// What is wrong; syntax and key problems start with `line N: `.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(section) = &self.section {
            write!(f, ": [{section}]")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        if let Some(value) = &self.value {
            write!(f, " = {value:?}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Loading failed; every problem found is listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Every problem, in file order.
    pub issues: Vec<ConfigIssue>,
    /// Deprecations found on the way, reported alongside the problems.
    pub warnings: Vec<ConfigIssue>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.issues.len();
        write!(
            f,
            "{n} configuration problem{}",
            if n == 1 { "" } else { "s" }
        )?;
        for issue in &self.issues {
            write!(f, "\n  {issue}")?;
        }
        Ok(())
    }
}

/// Paths derived from `dir_base`.
impl MainConfig {
    /// `$dir_base/etc/svc`.
    pub fn dir_config(&self) -> PathBuf {
        self.dir_base.join("etc/svc")
    }
    /// `$dir_base/etc/svc/job.d`.
    pub fn dir_job_d(&self) -> PathBuf {
        self.dir_base.join("etc/svc/job.d")
    }
    /// `$dir_base/etc/svc/job_http.d`.
    pub fn dir_job_http_d(&self) -> PathBuf {
        self.dir_base.join("etc/svc/job_http.d")
    }
    /// `$dir_base/etc/svc/user.conf`: the users who may log in (optional).
    pub fn user_conf(&self) -> PathBuf {
        self.dir_base.join("etc/svc/user.conf")
    }
    /// `$dir_base/var/log/svc/job`.
    pub fn dir_job_logs(&self) -> PathBuf {
        self.dir_base.join("var/log/svc/job")
    }
    /// `$dir_base/var/log/svc/job_http`.
    pub fn dir_job_http_logs(&self) -> PathBuf {
        self.dir_base.join("var/log/svc/job_http")
    }
    /// `$dir_base/var/log/svc/history/job` (and `.../job_http`): the run history of
    /// each job, kept beside the logs and beyond their retention.
    pub fn dir_history(&self, kind: &str) -> PathBuf {
        self.dir_base.join("var/log/svc/history").join(kind)
    }
    /// `dir_state`: job state, replay stores, the generated secret, the lock.
    pub fn dir_state(&self) -> PathBuf {
        self.dir_state.clone()
    }
    /// Where state lived before `dir_state` existed, and still does by default:
    /// `$dir_base/var/run/svc`. Taken over from at start when `dir_state` is elsewhere.
    pub fn legacy_dir_state(&self) -> PathBuf {
        self.dir_base.join(DEFAULT_DIR_STATE)
    }
    /// `<dir_state>/job`: one state file per Job.
    pub fn dir_job_state(&self) -> PathBuf {
        self.dir_state.join("job")
    }
    /// `<dir_state>/job_http`: one state file per JobHttp.
    pub fn dir_job_http_state(&self) -> PathBuf {
        self.dir_state.join("job_http")
    }
    /// `<dir_state>/replay`: delivery IDs and nonces already accepted.
    pub fn dir_replay(&self) -> PathBuf {
        self.dir_state.join("replay")
    }
    /// Runtime directory of the controller (runner socket), mode 0700.
    pub fn dir_runtime(&self) -> PathBuf {
        self.dir_base.join("var/run/svc/controller")
    }
    /// `$dir_base/var/lib/svc`: working directories, webhook bodies and the runs'
    /// temporary directories (and, before `dir_state`, the replay stores).
    pub fn dir_lib(&self) -> PathBuf {
        self.dir_base.join("var/lib/svc")
    }
    /// `$dir_base/var/lib/svc/run`: webhook request bodies, one file per run.
    pub fn dir_bodies(&self) -> PathBuf {
        self.dir_base.join("var/lib/svc/run")
    }
    /// `$dir_base/var/lib/svc/tmp`: the temporary directory (`TMPDIR`) of each run.
    pub fn dir_run_tmp(&self) -> PathBuf {
        self.dir_base.join("var/lib/svc/tmp")
    }
    /// `$dir_base/var/log/svc`: every run log.
    pub fn dir_logs(&self) -> PathBuf {
        self.dir_base.join("var/log/svc")
    }
    /// The directory that holds the main file.
    pub fn dir_main_file(&self) -> PathBuf {
        std::path::absolute(&self.file)
            .ok()
            .and_then(|file| file.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| self.dir_config())
    }
    /// What the sandbox keeps jobs from reading (each with what it is, for messages): the
    /// state directory (job state, replay stores, the generated secret), the runner
    /// socket's directory, the configuration (the main file's directory and
    /// `$dir_base/etc/svc`, with `user.conf`), the logs, the request bodies and the runs'
    /// temporary directories. A main file directly in `/` is protected alone.
    pub fn sandbox_protected_paths(&self) -> Vec<(PathBuf, &'static str)> {
        let main_dir = self.dir_main_file();
        let main = if main_dir.parent().is_none() {
            (
                std::path::absolute(&self.file).unwrap_or_else(|_| self.file.clone()),
                "main configuration file",
            )
        } else {
            (main_dir, "directory of the main configuration file")
        };
        let all = [
            (self.dir_state(), "state directory"),
            (self.dir_runtime(), "runner socket's directory"),
            main,
            (self.dir_config(), "configuration directory"),
            (self.dir_logs(), "log directory"),
            (self.dir_bodies(), "request bodies' directory"),
            (self.dir_run_tmp(), "runs' temporary directories"),
        ];
        // Without those already covered by another one.
        let mut kept: Vec<(PathBuf, &'static str)> = Vec::new();
        for (path, what) in &all {
            if all
                .iter()
                .any(|(other, _)| other != path && path.starts_with(other))
                || kept.iter().any(|(seen, _)| seen == path)
            {
                continue;
            }
            kept.push((path.clone(), what));
        }
        kept
    }
    /// Default working directory of a job.
    pub fn default_dir_work(&self, job_id: &str) -> PathBuf {
        self.dir_base.join("var/lib/svc/job").join(job_id)
    }
}

/// Resolves `path` against `base` unless it is absolute.
pub fn resolve_path(base: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}
