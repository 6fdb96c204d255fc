//! The configuration as the rest of the service uses it: the domain types that
//! [`load`](super::load) produces (the main section, jobs, JobHttps, notifications, users), their
//! defaults, the paths derived from `dir_base`, and the problems loading reports.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use proto::redact::Secret;

use crate::time::schedule::Timer;
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
/// Default number of logs kept per job.
pub const DEFAULT_LOG_RETENTION: usize = 5;
/// Default time limit of one Job run.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(3600);
/// Default timeout of a JobHttp request.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(300);
/// Default header carrying a webhook signature.
pub const DEFAULT_HEADER_SIGN: &str = "x-svc-sign";
/// Published key of the patch-hosting service (sourcehut) webhooks, base64 Ed25519.
pub const DEFAULT_PATCHHOST_PUBLIC_KEY: &str = "uX7KWyyDNMaBma4aVbJ/cbUQpdjqczuCyK/HxzV/u+4=";

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

/// How a webhook trigger is authenticated: by the code host that sends it. Each kind is
/// one scheme; the names it may be configured by are [`AuthKind::parse`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthKind {
    /// HMAC-SHA-256 of the body in `header_sign`.
    #[default]
    HmacSha256,
    /// GitHub (`github`, or the spec's `codehost`): `X-Hub-Signature-256` /
    /// `X-Hub-Signature`, `X-GitHub-Delivery`.
    Github,
    /// GitLab: `X-Gitlab-Token` (the secret itself), `Idempotency-Key` or
    /// `X-Gitlab-Event-UUID`.
    Gitlab,
    /// Gitea and Forgejo: hex HMAC-SHA-256 in `X-Gitea-Signature` or
    /// `X-Forgejo-Signature`, `X-Gitea-Delivery` / `X-Forgejo-Delivery`.
    Gitea,
    /// Bitbucket: `X-Hub-Signature: sha256=<hex>`, `X-Request-UUID`.
    Bitbucket,
    /// Standard Webhooks v1: `webhook-id`, `webhook-timestamp`, `webhook-signature`.
    Standard,
    /// sourcehut (`sourcehut`, or the spec's `patchhost`): Ed25519 `X-Payload-Signature`
    /// + `X-Payload-Nonce`.
    Sourcehut,
}

impl AuthKind {
    /// Every name `auth_kind` takes, lower-case, with its kind: `codehost` and
    /// `patchhost` are the spec's names of GitHub's and sourcehut's schemes, and Forgejo
    /// (Gitea's fork) signs as Gitea does.
    const NAMES: [(&'static str, AuthKind); 10] = [
        ("hmac-sha256", AuthKind::HmacSha256),
        ("github", AuthKind::Github),
        ("gitlab", AuthKind::Gitlab),
        ("gitea", AuthKind::Gitea),
        ("bitbucket", AuthKind::Bitbucket),
        ("standard", AuthKind::Standard),
        ("sourcehut", AuthKind::Sourcehut),
        ("codehost", AuthKind::Github),
        ("patchhost", AuthKind::Sourcehut),
        ("forgejo", AuthKind::Gitea),
    ];

    /// The kind `name` (in any case) configures, and the name in lower case.
    pub fn parse(name: &str) -> Option<(AuthKind, &'static str)> {
        AuthKind::NAMES
            .into_iter()
            .find(|(known, _)| known.eq_ignore_ascii_case(name))
            .map(|(known, kind)| (kind, known))
    }

    /// The kind's own name (the first of [`AuthKind::parse`]'s).
    pub fn as_str(self) -> &'static str {
        AuthKind::NAMES
            .into_iter()
            .find(|(_, kind)| *kind == self)
            .map_or("", |(name, _)| name)
    }
}

impl fmt::Display for AuthKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `[job "NAME"]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct JobConfig {
    /// Derived from `name` by [`job_id_from_name`](super::job_id_from_name).
    pub id: String,
    /// The quoted section name.
    pub name: String,
    /// File the section was read from.
    pub file: PathBuf,
    /// `description`, may be HTML.
    pub description: String,
    /// `schedule` (wins) or `interval`; `None` for a webhook-only job.
    pub timer: Option<Timer>,
    /// `timezone`, default the main section's: the wall clock of `schedule`.
    pub timezone: Zone,
    /// `path`: trigger path below `/svc/api/job/run/`, normalised to start with `/`.
    pub path: Option<String>,
    /// `auth_kind`, default `hmac-sha256`.
    pub auth_kind: AuthKind,
    /// The name `auth_kind` was configured by, in lower case (the API shows it).
    pub auth_kind_name: &'static str,
    /// `header_sign`, lower-cased, default [`DEFAULT_HEADER_SIGN`].
    pub header_sign: String,
    /// `one_time_deliveries`, default false: an `hmac-sha256` delivery whose body was
    /// delivered before (the same signature) is refused, as every other scheme's is.
    /// Off by default because such clients send the same body again on purpose.
    pub one_time_deliveries: bool,
    /// `secret`, repeated during a rotation (a delivery signed with any of them is
    /// accepted), as the keys deliveries are checked with: decoded at load for
    /// `standard` (`whsec_<base64>`), any other as its own bytes; empty = use the main
    /// secret. Never shown in `Debug`.
    pub secrets: Vec<WebhookKey>,
    /// `filter_event`, repeated, lower-cased: a delivery whose event is none of these
    /// starts nothing (empty = any event).
    pub filter_event: Vec<String>,
    /// `filter_ref`, repeated globs on `refs/...` (`*` within one segment, `**` across):
    /// a delivery whose ref matches none starts nothing (empty = any). Compiled at load,
    /// not for each delivery.
    pub filter_ref: Vec<glob::Pattern>,
    /// `public_key`: base64 Ed25519 key for `patchhost`, default
    /// [`DEFAULT_PATCHHOST_PUBLIC_KEY`]; validated to decode to 32 bytes.
    pub public_key: String,
    /// `command`, repeated, in order.
    pub commands: Vec<String>,
    /// `log_retention`, default [`DEFAULT_LOG_RETENTION`], at least 1.
    pub log_retention: usize,
    /// `timeout`: per-run limit, default [`DEFAULT_JOB_TIMEOUT`]; `0` gives `None`.
    pub timeout: Option<Duration>,
    /// `user`, default the main section's.
    pub user: Option<String>,
    /// `group`. Default: the main section's when the job does not set `user`; when it sets
    /// `user` but not `group`, `None` (that user's primary group).
    pub group: Option<String>,
    /// `dir_work`; `None` = `$dir_base/var/lib/svc/job/<id>`. A relative value is below
    /// `dir_base`.
    pub dir_work: Option<PathBuf>,
    /// `env`, repeated `K=V`, in order.
    pub env: Vec<(String, String)>,
    /// `capabilities`: the capabilities a job that runs as root keeps, as a bit mask
    /// (bit N = capability number N); every other one is dropped. 0 by default.
    pub capabilities: u64,
    /// `limit_nproc`, `limit_nofile`, `limit_as`, `limit_memory`, `limit_pids`,
    /// `cpu_weight`: resource limits of each command and of the whole run.
    pub limits: ResourceLimits,
    /// `write_paths`, repeated: absolute paths where the commands may write besides
    /// their working directory and `TMPDIR`.
    pub write_paths: Vec<PathBuf>,
    /// `sandbox`, default true: the commands run under the file-system sandbox (writes
    /// only below `dir_work`, `TMPDIR` and `write_paths`; the service's own files not
    /// readable).
    pub sandbox: bool,
    /// `notif_on_success`, repeated or comma-separated: the `[notif "NAME"]` sections
    /// told when a run succeeds.
    pub notif_on_success: Vec<String>,
    /// `notif_on_failed`, likewise: those told when a run fails.
    pub notif_on_failed: Vec<String>,
    /// `ping_url`: the health-check URL told when each run starts and how it ended.
    pub ping_url: Option<PingUrl>,
    /// `on_success`, repeated or comma-separated: the Jobs started when a run succeeds
    /// (their IDs as configured; checked to exist and to form no cycle).
    pub on_success: Vec<String>,
    /// `on_failure`, likewise: the Jobs started when a run fails.
    pub on_failure: Vec<String>,
    /// `on_busy`: what a trigger or timer slot that finds the job running does.
    pub on_busy: OnBusy,
    /// `retry`: how many more attempts a failed run gets (0: none).
    pub retry: u32,
    /// `retry_delay`: the wait before the first retry, doubled for each next one and
    /// capped at [`MAX_RETRY_DELAY`].
    pub retry_delay: Duration,
    /// `catch_up = once`: the window within which a schedule slot missed while the
    /// service was down (or the job paused) runs once at start (or resume); `None` for
    /// `catch_up = none`, the default.
    pub catch_up: Option<Duration>,
    /// `random_delay`: each timer slot starts up to this much later, at random (like
    /// systemd's `RandomizedDelaySec`); zero by default.
    pub random_delay: Duration,
}

/// Default `catch_up_window`.
pub const DEFAULT_CATCH_UP_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// Default `retry_delay`.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_secs(30);
/// The longest wait between two attempts.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(3600);

impl JobConfig {
    /// The wait before attempt `next` (2 for the first retry): `retry_delay`, doubled for
    /// each attempt after, at most [`MAX_RETRY_DELAY`].
    pub fn retry_wait(&self, next: u32) -> Duration {
        let doublings = next.saturating_sub(2).min(31);
        self.retry_delay
            .saturating_mul(1u32 << doublings)
            .min(MAX_RETRY_DELAY)
    }
}

/// `on_busy`: what a trigger or a timer slot that finds its job running does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnBusy {
    /// A trigger waits in the one-slot queue (a further one gets 429); a timer slot is
    /// skipped.
    #[default]
    Queue,
    /// Both are dropped, and the service log says so.
    Skip,
    /// The running run is cancelled and the new one runs after it.
    Replace,
}

/// Per-command resource limits (`setrlimit`, soft and hard alike); `None` leaves the
/// limit inherited from the service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceLimits {
    /// `limit_nproc`: processes the job's user may have, system-wide (`RLIMIT_NPROC`;
    /// ignored by the kernel for root).
    pub nproc: Option<u64>,
    /// `limit_nofile`: open files per process (`RLIMIT_NOFILE`).
    pub nofile: Option<u64>,
    /// `limit_as`: address space per process in bytes (`RLIMIT_AS`).
    pub address_space: Option<u64>,
    /// `limit_memory`: bytes of memory of the whole run, its cgroup's limit where the
    /// host gives runs cgroups ([`crate::runner::cgroups`]); else of each process, as
    /// `RLIMIT_DATA` (heap and anonymous mappings).
    pub memory: Option<u64>,
    /// `limit_pids` (the job's, else `[svc]`'s): tasks of the whole run at once, its
    /// cgroup's `pids.max` ([`crate::runner::cgroups::DEFAULT_LIMIT_PIDS`] when neither sets
    /// it); without cgroups, a value set here is the job user's `RLIMIT_NPROC`.
    pub pids: Option<u64>,
    /// `cpu_weight`: the run's share of the CPU against other runs, 1 to 10000 (100 is
    /// even), where runs have cgroups with the `cpu` controller.
    pub cpu_weight: Option<u64>,
}

/// HTTP method of a JobHttp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpMethod {
    /// `GET` (default).
    #[default]
    Get,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
    /// `DELETE`.
    Delete,
}

impl HttpMethod {
    /// The upper-case method name.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Put => "PUT",
            HttpMethod::Delete => "DELETE",
        }
    }
}

/// How a JobHttp sends its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpRequestType {
    /// `_svc_epoch` in the URL query (default).
    #[default]
    Query,
    /// `application/x-www-form-urlencoded` body (POST and PUT).
    Form,
    /// `application/json` body (POST and PUT).
    Json,
}

impl HttpRequestType {
    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpRequestType::Query => "query",
            HttpRequestType::Form => "form",
            HttpRequestType::Json => "json",
        }
    }
}

/// A `[job.http "NAME"]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpJobConfig {
    /// Derived from `name` by [`job_id_from_name`](super::job_id_from_name); unique among
    /// JobHttps.
    pub id: String,
    /// The quoted section name.
    pub name: String,
    /// File the section was read from.
    pub file: PathBuf,
    /// `description`, may be HTML.
    pub description: String,
    /// `schedule` or `interval`; without either (as upstream allows) it runs only when
    /// started by hand.
    pub timer: Option<Timer>,
    /// `timezone`, default the main section's: the wall clock of `schedule`.
    pub timezone: Zone,
    /// `http_method`, default GET.
    pub http_method: HttpMethod,
    /// `http_url`, required, `http` or `https`; a path (`/...`) is resolved against the
    /// service's own `listen_address`, as upstream does.
    pub http_url: String,
    /// `http_request_type`, default query.
    pub http_request_type: HttpRequestType,
    /// `http_header`, repeated `Key: Value`, split at the first `:` and trimmed.
    pub http_headers: Vec<(String, String)>,
    /// `http_timeout`, default the main section's.
    pub http_timeout: Duration,
    /// `http_insecure`, default false.
    pub http_insecure: bool,
    /// `http_follow_redirects`, default false: a 3xx fails the run; when true, redirects
    /// are followed to the same origin only.
    pub http_follow_redirects: bool,
    /// `secret` used to sign the request; `None` = unsigned. `Debug` hides it.
    pub secret: Option<Secret>,
    /// `header_sign`: the header that carries the signature, lower-cased, default
    /// [`DEFAULT_HEADER_SIGN`].
    pub header_sign: String,
    /// `log_retention`, default [`DEFAULT_LOG_RETENTION`].
    pub log_retention: usize,
    /// `user`: who the runner making the call runs as (defaults as for jobs).
    pub user: Option<String>,
    /// `group` (defaults as for jobs).
    pub group: Option<String>,
    /// `notif_on_success`, as for jobs.
    pub notif_on_success: Vec<String>,
    /// `notif_on_failed`, as for jobs.
    pub notif_on_failed: Vec<String>,
    /// `ping_url`, as for jobs.
    pub ping_url: Option<PingUrl>,
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

/// A job's `ping_url`: an `http://` or `https://` URL of a health-check service
/// (healthchecks.io style) told when each run starts and how it ended. Whoever knows
/// the URL can ping the check, so the whole URL is the credential: `Debug`, every log
/// line and every configuration problem show it as [`redact_ping_url`] does.
#[derive(Clone, PartialEq, Eq)]
pub struct PingUrl(String);

impl PingUrl {
    /// The URL, checked at load to be `http://` or `https://` with a host.
    pub(crate) fn new(url: String) -> PingUrl {
        PingUrl(url)
    }

    /// The URL itself, with its secret: for the request only, never for a log line.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL as it may be shown: `scheme://host[:port]/[redacted]`.
    pub fn redacted(&self) -> String {
        redact_ping_url(&self.0)
    }
}

/// A `ping_url` (or what was written for one) as it may be shown:
/// `scheme://host[:port]/[redacted]`, without user info, path, query or fragment.
///
/// The secret of a check is not always a long token: Dead Man's Snitch's is a
/// 10-character path segment (`https://nosnch.in/c2354d53d2`), Uptime Kuma's a short
/// one after `/api/push/`, and a healthchecks.io ping key may be short too. No
/// heuristic tells such a segment from a plain word, so nothing after the host is
/// shown. A value that does not start with `scheme://` shows as `[redacted]` whole (its
/// host cannot be told from its secret); an empty one stays empty, as it holds nothing.
pub(crate) fn redact_ping_url(url: &str) -> String {
    let url = url.trim();
    if url.is_empty() {
        return String::new();
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return proto::redact::REDACTED.to_string();
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return proto::redact::REDACTED.to_string();
    }
    // The authority ends where the path, query or fragment begins; a blank or a
    // backslash ends it too, so that a mistyped URL cannot pass its secret off as host.
    let end = rest
        .find(|c: char| matches!(c, '/' | '?' | '#' | '\\') || c.is_whitespace())
        .unwrap_or(rest.len());
    let authority = &rest[..end];
    // User info may hold a password, or be the check's key itself.
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}/{}", proto::redact::REDACTED)
}

impl fmt::Debug for PingUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PingUrl").field(&self.redacted()).finish()
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
