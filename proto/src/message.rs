//! The message enums, one per direction, and the execution request they carry.

use serde::{Deserialize, Serialize};

use crate::redact::{Secret, redact_header, redact_url};

/// Messages sent by the controller to a runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControllerMessage {
    /// Handshake accepted; `version` is the controller's [`crate::PROTOCOL_VERSION`].
    /// Sent as soon as the runner's `Hello` is checked, which may be long before the
    /// work: a runner is started ahead of need.
    Welcome {
        version: u32,
        /// The service's protected paths (those of every run's [`Sandbox`]), so that the
        /// runner builds the part of the sandbox they decide while it waits for its work.
        /// `None`: nothing to build ahead (none is needed, or the controller expects to
        /// send a ruleset it built with the work).
        #[serde(default)]
        protected_paths: Option<Vec<String>>,
        /// The `tasks` files (cgroup v1, one per hierarchy) of the cgroup the runner's
        /// run will have: the runner's thread that starts commands joins it while the
        /// runner waits for its work, so that each command is born in the run's cgroup
        /// instead of moving there as it starts (a move waits for an RCU grace period,
        /// 10 to 20 ms, when no other move happened just before). Empty: the commands
        /// join their cgroup themselves ([`ExecRequest::cgroup_procs`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cgroup_tasks: Vec<String>,
        /// The private directories of the run the runner is started for, when its job is
        /// known ahead (a timer's run): a runner that makes the namespaces itself while
        /// privileged makes them while it waits, its thread that starts commands joins
        /// them, and the run uses them when its [`ExecRequest::private_dirs`] are these
        /// (else it makes its own as usual). `None`: made when the work comes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        private_dirs: Option<Vec<PrivateDir>>,
    },
    /// Handshake refused (wrong version or token); the controller closes after it.
    Reject { reason: String },
    /// The work to do. Sent once, after `Welcome`, when the run begins.
    Execute(Box<ExecRequest>),
    /// End the work now: SIGTERM to the command's process group, SIGKILL after the grace
    /// period, then report `Finished` as usual.
    Cancel { reason: String },
}

/// Messages sent by a runner to the controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunnerMessage {
    /// First frame on the connection.
    Hello { version: u32, token: String },
    /// A line the runner itself writes to the run's log (not command output): the HTTP
    /// request line, response headers, notes about signals sent, and so on.
    Log { line: String },
    /// Command `index` (0-based) of the request is about to be executed.
    CommandStarted {
        index: usize,
        command: String,
        pid: u32,
    },
    /// Bytes produced by the running command (or the HTTP response body).
    Output {
        stream: OutputStream,
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
    },
    /// Command `index` ended.
    CommandExited { index: usize, exit: ExitReport },
    /// The HTTP call of a JobHttp got a response.
    HttpResponse {
        status: u16,
        /// Bytes of body received (at most the request's `max_body_bytes` are kept).
        body_bytes: u64,
        /// True when the body was longer than `max_body_bytes` and was cut.
        truncated: bool,
    },
    /// The work is over. Last message of a run that got started. `timed_out`: it ended
    /// because its time limit ran out (absent from older runners: false).
    Finished {
        success: bool,
        summary: String,
        #[serde(default)]
        timed_out: bool,
        /// What the run's processes used (a run of commands; absent from older runners
        /// and for an HTTP call, which the runner makes itself).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<ResourceUsage>,
    },
    /// The work could not be done at all (bad credentials, unusable request ...).
    Error { message: String },
}

/// The resources a run's processes used, measured when the work is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceUsage {
    /// CPU time spent in user mode, in milliseconds.
    pub cpu_user_ms: u64,
    /// CPU time spent in the kernel on the processes' behalf, in milliseconds.
    pub cpu_system_ms: u64,
    /// Peak memory in bytes. Measured by [`UsageSource::Rusage`], the largest resident
    /// set of any single process of the run, not the sum of processes alive at once.
    pub peak_memory_bytes: u64,
    /// Bytes read from storage (not from the page cache), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_read_bytes: Option<u64>,
    /// Bytes written to storage (or to be, for dirty pages), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_write_bytes: Option<u64>,
    /// How the numbers were measured, which tells what the peak means.
    pub measured_by: UsageSource,
}

/// Where a [`ResourceUsage`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageSource {
    /// The reaped processes' resource usage (`getrusage(RUSAGE_CHILDREN)`): every
    /// process the runner or the run's init waited for.
    Rusage,
    /// The run's cgroup: every process that was ever in it.
    Cgroup,
}

/// Which output a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    Stdout,
    Stderr,
    /// Body of an HTTP response.
    Body,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitReport {
    /// Exit code when the command exited by itself.
    pub code: Option<i32>,
    /// Signal number when it was killed by a signal.
    pub signal: Option<i32>,
    /// True when the runner ended it because the time limit ran out.
    pub timed_out: bool,
    /// True when the runner ended it because the controller sent `Cancel`.
    pub cancelled: bool,
    /// Wall time the command ran, in milliseconds.
    pub duration_ms: u64,
}

impl ExitReport {
    /// True when the command exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out && !self.cancelled
    }
}

/// One execution to perform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    pub job_id: String,
    pub counter: u64,
    /// Limit for the whole execution in milliseconds; `None` means no limit.
    pub timeout_ms: Option<u64>,
    /// Time between SIGTERM and SIGKILL when the work is ended early.
    pub kill_grace_ms: u64,
    /// Who the work runs as. `None`: stay who the runner was started as.
    pub credentials: Option<Credentials>,
    /// Resource limits of each command process.
    #[serde(default)]
    pub limits: ResourceLimits,
    /// Set when the commands run as root: the only capabilities they keep (bit N =
    /// capability N); every other one is dropped before they start. `None`: the work
    /// runs as an unprivileged user, which keeps none anyway.
    #[serde(default)]
    pub keep_capabilities: Option<u64>,
    /// The file-system sandbox of the commands. `None`: none (a JobHttp, whose call the
    /// runner makes itself, or a job with `sandbox = false`).
    #[serde(default)]
    pub sandbox: Option<Sandbox>,
    /// Directories of the service that hold every run's (or every job's) own entry:
    /// in the run's mount namespace each is covered, and only the entry of this run's
    /// job is put back, so that the commands cannot reach another run's request body,
    /// temporary directory or working directory, not even to change its permissions
    /// (which no file-system sandbox restricts). Empty: nothing covered (a JobHttp, or
    /// a runner that cannot make namespaces).
    #[serde(default)]
    pub private_dirs: Vec<PrivateDir>,
    /// The `cgroup.procs` files of the run's cgroup (one per hierarchy) that each
    /// command joins before it executes, through descriptors the runner opens before it
    /// switches to the job's user. Empty: the run has no cgroup.
    #[serde(default)]
    pub cgroup_procs: Vec<String>,
    /// Set when nothing waits for the run's end on its way (a timer's run, due with
    /// others): the init of its namespaces, which ends them, runs at the lowest priority,
    /// so that the CPU goes first to the runs starting meanwhile. A run of a busy job
    /// (the next run waits for this one's end) leaves it unset.
    #[serde(default)]
    pub end_yields: bool,
    pub action: Action,
}

/// A directory the commands see empty but for one entry of their own
/// ([`ExecRequest::private_dirs`]). Paths are absolute.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivateDir {
    /// The directory covered (with an empty, read-only file system).
    pub cover: String,
    /// The name of the one entry of `cover` put back (a directory), when there is one.
    pub keep: Option<String>,
}

/// What the commands of a run may write and may not read: a Landlock ruleset applied to
/// each command between fork and exec ([`crate::sandbox`]). Every path is absolute.
///
/// Reading (and executing) is allowed everywhere except below `protected_paths`;
/// writing only below `write_paths` (and a few character devices such as `/dev/null`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    /// Where the commands may also write, create, rename and remove: the working
    /// directory, the job's temporary directories and the job's `write_paths`.
    pub write_paths: Vec<String>,
    /// What the commands may not read, list nor execute: the controller's state, its
    /// configuration, its logs, the request bodies and temporary directories of runs.
    pub protected_paths: Vec<String>,
    /// Directories below a protected path whose files the commands may read all the
    /// same (without listing them): the job's own request bodies' directory.
    #[serde(default)]
    pub readable_dirs: Vec<String>,
    /// Set when the controller built the ruleset of this sandbox itself and sends it
    /// with the `Execute` frame that carries this request ([`crate::fdpass`]): the
    /// summary line of that ruleset. `None`: the runner builds it.
    #[serde(default)]
    pub attached: Option<String>,
}

/// `setrlimit` values (soft and hard) applied to each command before it executes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceLimits {
    /// `RLIMIT_NPROC`: processes of the command's user (all of them, system-wide).
    pub nproc: Option<u64>,
    /// `RLIMIT_NOFILE`: open file descriptors per process.
    pub nofile: Option<u64>,
    /// `RLIMIT_AS`: bytes of address space per process.
    pub address_space: Option<u64>,
    /// `RLIMIT_DATA`: bytes of writable private memory per process (heap and anonymous
    /// mappings).
    #[serde(default)]
    pub data: Option<u64>,
    /// `limit_pids`: tasks of the whole run at once. The controller applies it through
    /// the run's cgroup (or turns it into `nproc` where there is none); the runner does
    /// not read it.
    #[serde(default)]
    pub pids: Option<u64>,
    /// `limit_memory`: bytes of memory of the whole run. The controller applies it
    /// through the run's cgroup (or turns it into `data` where there is none); the
    /// runner does not read it.
    #[serde(default)]
    pub memory: Option<u64>,
    /// `cpu_weight`: the run's share of the CPU (1 to 10000, 100 is even), through its
    /// cgroup; the runner does not read it.
    #[serde(default)]
    pub cpu_weight: Option<u64>,
}

/// User and groups to switch to before doing the work (only possible when root).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, set with `setgroups` before `setgid` and `setuid`.
    pub groups: Vec<u32>,
    /// Name of the user, for log lines.
    pub user_name: String,
}

/// What the runner does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Run each command with `/bin/sh -c`, in order, stopping at the first failure.
    Commands {
        commands: Vec<String>,
        /// The complete environment of the commands; nothing else is inherited.
        env: Vec<(String, String)>,
        /// Working directory of the commands.
        dir_work: String,
    },
    /// Make one HTTP request (a JobHttp run).
    Http(HttpCall),
}

/// Description of a JobHttp request. Its `Debug` hides the secret, the headers' sensitive
/// values and the URL's tokens, by the one redaction rule ([`crate::redact`]).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpCall {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: String,
    pub url: String,
    pub request_type: HttpRequestType,
    /// Sent on every request, in order.
    pub headers: Vec<(String, String)>,
    /// When set, the query (for `query`) or body (for `form`/`json`) is signed with
    /// HMAC-SHA-256 and the hex signature sent in `sign_header`.
    pub secret: Option<Secret>,
    /// The header that carries the signature (the JobHttp's `header_sign`).
    #[serde(default = "default_sign_header")]
    pub sign_header: String,
    /// Accept a server certificate that does not verify.
    pub insecure: bool,
    /// Follow redirects, to the same origin only; otherwise a 3xx ends the call.
    #[serde(default)]
    pub follow_redirects: bool,
    /// At most this many bytes of the response body are sent back.
    pub max_body_bytes: u64,
}

impl std::fmt::Debug for HttpCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, value)| redact_header(name, value))
            .collect();
        f.debug_struct("HttpCall")
            .field("method", &self.method)
            .field("url", &redact_url(&self.url))
            .field("request_type", &self.request_type)
            .field("headers", &headers)
            .field("secret", &self.secret)
            .field("sign_header", &self.sign_header)
            .field("insecure", &self.insecure)
            .field("follow_redirects", &self.follow_redirects)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish()
    }
}

fn default_sign_header() -> String {
    "x-svc-sign".to_string()
}

/// How the `_svc_epoch` parameter is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HttpRequestType {
    Query,
    Form,
    Json,
}

mod base64_bytes {
    //! Output bytes travel as standard base64 so any byte sequence fits in JSON.
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(data: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(data))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::{HttpCall, HttpRequestType, RunnerMessage};
    use crate::redact::Secret;

    #[test]
    fn an_older_runners_end_has_no_usage_and_a_newer_one_is_read_whole() {
        let old = r#"{"type":"finished","success":true,"summary":"ok"}"#;
        let Ok(RunnerMessage::Finished { usage, .. }) = serde_json::from_str(old) else {
            panic!("an end without usage does not parse");
        };
        assert_eq!(usage, None);
        let new = r#"{"type":"finished","success":true,"summary":"ok","usage":
            {"cpu_user_ms":5,"cpu_system_ms":1,"peak_memory_bytes":4096,
             "measured_by":"rusage","a_later_field":1}}"#;
        let Ok(RunnerMessage::Finished {
            usage: Some(usage), ..
        }) = serde_json::from_str(new)
        else {
            panic!("an end with usage does not parse");
        };
        assert_eq!((usage.cpu_user_ms, usage.io_read_bytes), (5, None));
    }

    #[test]
    fn an_http_call_debug_shows_no_secret_token_or_credential() {
        let call = HttpCall {
            method: "POST".into(),
            url: "https://user:pa55word@hooks.example/services/T0AB12CD34EF56GH78IJ90?token=tok3n"
                .into(),
            request_type: HttpRequestType::Json,
            headers: vec![
                ("Authorization".into(), "Bearer b3arer".into()),
                ("Accept".into(), "text/plain".into()),
            ],
            secret: Some(Secret::new("s3cret")),
            sign_header: "x-svc-sign".into(),
            insecure: false,
            follow_redirects: false,
            max_body_bytes: 1024,
        };
        let shown = format!("{call:?}");
        for hidden in [
            "pa55word",
            "T0AB12CD34EF56GH78IJ90",
            "tok3n",
            "b3arer",
            "s3cret",
        ] {
            assert!(!shown.contains(hidden), "{hidden} shown in {shown}");
        }
        assert!(shown.contains("Accept: text/plain"), "{shown}");
        assert!(shown.contains("hooks.example"), "{shown}");
    }
}
