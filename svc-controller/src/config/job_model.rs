//! The jobs and JobHttps as the rest of the service uses them: what [`load`](super::load)
//! makes of their sections (`JobConfig`, `HttpJobConfig`) and of their values (auth
//! kinds, limits, methods, health-check URLs), with their defaults.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use proto::redact::Secret;

use super::model::WebhookKey;
use crate::time::schedule::Timer;
use crate::time::timezone::Zone;

/// Default number of logs kept per job.
pub const DEFAULT_LOG_RETENTION: usize = 5;
/// Default time limit of one Job run.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(3600);
/// Default header carrying a webhook signature.
pub const DEFAULT_HEADER_SIGN: &str = "x-svc-sign";
/// Published key of the patch-hosting service (sourcehut) webhooks, base64 Ed25519.
pub const DEFAULT_PATCHHOST_PUBLIC_KEY: &str = "uX7KWyyDNMaBma4aVbJ/cbUQpdjqczuCyK/HxzV/u+4=";

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
