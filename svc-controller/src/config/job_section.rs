//! The `[job "NAME"]` sections (legacy `[hook "NAME"]`): their keys, read in groups, the
//! checks between keys, and the chains `on_success` and `on_failure` make between jobs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::guards;
use super::job_model::{
    AuthKind, DEFAULT_CATCH_UP_WINDOW, DEFAULT_HEADER_SIGN, DEFAULT_JOB_TIMEOUT,
    DEFAULT_LOG_RETENTION, DEFAULT_PATCHHOST_PUBLIC_KEY, DEFAULT_RETRY_DELAY, JobConfig, OnBusy,
    PingUrl, ResourceLimits,
};
use super::loader::{LaterRef, Loader, Origin};
use super::model::{MainConfig, WebhookKey, resolve_path};
use super::section_reader::KeyKind::{self, Bool, List, Scalar};
use super::section_reader::{NamedAt, Reader, new_issue};
use super::syntax::{Section, SectionKind};
use super::values::{
    check_group, check_header_name, check_outside_protected, check_public_key, check_user,
    check_write_path, is_root_user, job_key, normalize_path, parse_auth_kind, parse_bytes,
    parse_capabilities, parse_count, parse_cpu_weight, parse_env, parse_limit, parse_on_busy,
    parse_ping_url, parse_positive_duration, parse_ref_glob, parse_timeout, standard_key,
};
use crate::security::sandbox_hint;
use crate::time::duration::parse_duration;
use crate::time::schedule::Timer;
use crate::time::timezone::Zone;

pub(super) const JOB_KEYS: &[(&str, KeyKind)] = &[
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

/// A job named by `on_success` or `on_failure` of the job `from` (an index in `jobs`).
#[derive(Debug)]
pub(super) struct ChainRef {
    from: usize,
    target: LaterRef,
}

impl Loader<'_> {
    /// A `[job "NAME"]` (or legacy `[hook "NAME"]`) section, read one group of keys after
    /// another; the job is kept when none of its keys has a problem.
    pub(super) fn load_job(&mut self, file: &Path, section: &Section) {
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
        // The problems of a section are listed in the order its keys are read: the groups
        // keep the order the keys were always read in.
        let trigger = read_trigger(&mut r, main);
        let execution = read_execution(&mut r, main);
        let limits = read_limits(&mut r, main);
        let sandbox = r.flag("sandbox").unwrap_or(true);
        let one_time_deliveries = r.flag("one_time_deliveries").unwrap_or(false);
        let write_paths = read_write_paths(
            &mut r,
            sandbox,
            execution.dir_work.as_deref(),
            &self.protected,
        );
        check_memory_limits(&mut r);
        let policy = read_run_policy(&mut r, main);
        check_job_can_run(&mut r);
        drop(r);

        let notif_on_success =
            self.note_notif_refs(file, section, "notif_on_success", policy.notif_on_success);
        let notif_on_failed =
            self.note_notif_refs(file, section, "notif_on_failed", policy.notif_on_failed);
        self.register_path(file, section, &id, trigger.path.as_deref());
        self.check_job_secrets(file, section, &trigger);
        if self.errors.len() != before {
            return;
        }
        self.warn_main_secret(file, section, &trigger);
        if sandbox {
            let mut writable = write_paths.clone();
            writable.push(
                execution
                    .dir_work
                    .clone()
                    .unwrap_or_else(|| main.default_dir_work(&id)),
            );
            writable.push(main.dir_run_tmp());
            self.warn_redirects(file, section, &execution.commands, &writable);
        }
        self.jobs.push(JobConfig {
            id,
            name: section.name.clone(),
            file: file.to_path_buf(),
            description: trigger.description,
            timer: trigger.timer,
            timezone: trigger.timezone,
            path: trigger.path,
            auth_kind: trigger.auth_kind,
            one_time_deliveries,
            auth_kind_name: trigger.auth_kind_name,
            header_sign: trigger.header_sign,
            secrets: trigger.secrets,
            filter_event: trigger.filter_event,
            filter_ref: trigger.filter_ref,
            public_key: trigger.public_key,
            commands: execution.commands,
            log_retention: execution.log_retention,
            timeout: execution.timeout,
            user: execution.user,
            group: execution.group,
            dir_work: execution.dir_work,
            env: execution.env,
            capabilities: execution.capabilities,
            limits,
            write_paths,
            sandbox,
            notif_on_success,
            notif_on_failed,
            ping_url: policy.ping_url,
            // Filled with the IDs they name once every file is read.
            on_success: Vec::new(),
            on_failure: Vec::new(),
            on_busy: policy.on_busy,
            retry: policy.retry,
            retry_delay: policy.retry_delay,
            catch_up: policy.catch_up,
            random_delay: policy.random_delay,
        });
        self.note_chain_refs(file, section, policy.on_success, policy.on_failure);
    }

    /// Records the jobs the job loaded last starts when it ends, for the check once every
    /// file is read.
    fn note_chain_refs(
        &mut self,
        file: &Path,
        section: &Section,
        on_success: Vec<NamedAt>,
        on_failure: Vec<NamedAt>,
    ) {
        let from = self.jobs.len() - 1;
        for (key, names) in [("on_success", on_success), ("on_failure", on_failure)] {
            for named in names {
                self.chain_refs.push(ChainRef {
                    from,
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

    /// A job's trigger `path`, recorded; one another job uses already is a problem.
    fn register_path(&mut self, file: &Path, section: &Section, id: &str, path: Option<&str>) {
        let Some(p) = path else {
            return;
        };
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
                p.to_string(),
                Origin {
                    id: id.to_string(),
                    file: file.to_path_buf(),
                    header: section.header.clone(),
                },
            );
        }
    }

    /// The webhook jobs whose deliveries the main secret cannot check: problems.
    fn check_job_secrets(&mut self, file: &Path, section: &Section, trigger: &Trigger) {
        if trigger.path.is_none() || !trigger.secrets.is_empty() {
            return;
        }
        if trigger.auth_kind == AuthKind::Gitlab {
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
        let main = self.main;
        if trigger.auth_kind == AuthKind::Standard
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
    }

    /// A webhook job checked with the main secret: a warning.
    fn warn_main_secret(&mut self, file: &Path, section: &Section, trigger: &Trigger) {
        if trigger.path.is_some()
            && trigger.secrets.is_empty()
            && trigger.auth_kind != AuthKind::Sourcehut
        {
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
    }

    /// A command of a sandboxed job that redirects into an absolute path it may not
    /// write (outside `writable`: its working directory, its TMPDIR and `write_paths`): a
    /// warning naming the key that would allow it, once per directory.
    fn warn_redirects(
        &mut self,
        file: &Path,
        section: &Section,
        commands: &[String],
        writable: &[PathBuf],
    ) {
        let mut named = Vec::new();
        for target in commands
            .iter()
            .flat_map(|c| sandbox_hint::redirect_targets(c))
        {
            if sandbox_hint::is_writable(&target, writable) {
                continue;
            }
            let dir = sandbox_hint::suggested_dir(&target).to_path_buf();
            if named.contains(&dir) {
                continue;
            }
            self.warnings.push(new_issue(
                file,
                Some(&section.header),
                Some("command"),
                None,
                format!(
                    "writes to {}, which the run's sandbox does not let it write (only its \
                     working directory, its TMPDIR and write_paths): add `write_paths = {}` \
                     to this job, or set `sandbox = false`",
                    target.display(),
                    dir.display()
                ),
            ));
            named.push(dir);
        }
    }

    /// `on_success` and `on_failure`: each name must be a Job's ID (in any case; kept
    /// as configured), and no chain may lead back to a job it started from.
    pub(super) fn check_chains(&mut self) {
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
}

/// The keys of a job that say when it runs and how a webhook delivery to it is checked.
struct Trigger {
    description: String,
    timezone: Zone,
    timer: Option<Timer>,
    path: Option<String>,
    auth_kind: AuthKind,
    auth_kind_name: &'static str,
    secrets: Vec<WebhookKey>,
    filter_event: Vec<String>,
    filter_ref: Vec<glob::Pattern>,
    header_sign: String,
    public_key: String,
}

fn read_trigger(r: &mut Reader<'_>, main: &MainConfig) -> Trigger {
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
    Trigger {
        description,
        timezone,
        timer,
        path,
        auth_kind,
        auth_kind_name,
        secrets,
        filter_event,
        filter_ref,
        header_sign,
        public_key,
    }
}

/// The keys of a job that say what a run executes, for how long, as whom and where.
struct Execution {
    commands: Vec<String>,
    log_retention: usize,
    timeout: Option<Duration>,
    user: Option<String>,
    group: Option<String>,
    dir_work: Option<PathBuf>,
    env: Vec<(String, String)>,
    capabilities: u64,
}

fn read_execution(r: &mut Reader<'_>, main: &MainConfig) -> Execution {
    let commands = r.list("command", |v| Ok(v.to_string()));
    let log_retention = r
        .parsed("log_retention", parse_count)
        .unwrap_or(DEFAULT_LOG_RETENTION);
    let timeout = r
        .parsed("timeout", parse_timeout)
        .unwrap_or(Some(DEFAULT_JOB_TIMEOUT));
    let (user, group) = run_as(r, main);
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
        check_job_user(r, main, name, capabilities);
    }
    Execution {
        commands,
        log_retention,
        timeout,
        user,
        group,
        dir_work,
        env,
        capabilities,
    }
}

/// The job's own `user`: root only where `[svc]` allows it, and capabilities only for
/// root.
fn check_job_user(r: &mut Reader<'_>, main: &MainConfig, name: &str, capabilities: u64) {
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

/// The resource limits of each command; `limit_pids` defaults to `[svc]`'s.
fn read_limits(r: &mut Reader<'_>, main: &MainConfig) -> ResourceLimits {
    ResourceLimits {
        nproc: r.parsed("limit_nproc", parse_limit),
        nofile: r.parsed("limit_nofile", parse_limit),
        address_space: r.parsed("limit_as", parse_bytes),
        memory: r.parsed("limit_memory", parse_bytes),
        pids: r.parsed("limit_pids", parse_limit).or(main.limit_pids),
        cpu_weight: r.parsed("cpu_weight", parse_cpu_weight),
    }
}

/// `write_paths`, and the working directory of a sandboxed job: both must stay clear of
/// what the sandbox protects.
fn read_write_paths(
    r: &mut Reader<'_>,
    sandbox: bool,
    dir_work: Option<&Path>,
    protected: &[(PathBuf, &'static str)],
) -> Vec<PathBuf> {
    let write_paths = r.list("write_paths", |v| check_write_path(v, protected));
    if sandbox
        && let Some(dir) = dir_work
        && let Some(entry) = r.first("dir_work")
        && let Err(message) = check_outside_protected(dir, protected)
    {
        r.fail(entry, &message);
    }
    write_paths
}

/// `limit_memory` and `limit_as` cap the same thing two ways: one of them only.
fn check_memory_limits(r: &mut Reader<'_>) {
    if r.has("limit_as")
        && let Some(entry) = r.first("limit_memory")
    {
        r.fail(
            entry,
            "limit_memory and limit_as both cap a command's memory (limit_memory its \
             heap and anonymous mappings, limit_as its whole address space): set only one",
        );
    }
}

/// The keys of a job about what surrounds its runs: whom an end is told, what a trigger
/// does while the job runs, retries, missed and delayed slots, and the jobs a run starts.
struct RunPolicy {
    notif_on_success: Vec<NamedAt>,
    notif_on_failed: Vec<NamedAt>,
    ping_url: Option<PingUrl>,
    on_busy: OnBusy,
    retry: u32,
    retry_delay: Duration,
    catch_up: Option<Duration>,
    random_delay: Duration,
    on_success: Vec<NamedAt>,
    on_failure: Vec<NamedAt>,
}

fn read_run_policy(r: &mut Reader<'_>, main: &MainConfig) -> RunPolicy {
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
    let random_delay = r.parsed("random_delay", parse_duration).unwrap_or_default();
    let chain_empty = "no job ID (IDs of Jobs, comma-separated or one per line)";
    let on_success = r.names("on_success", chain_empty);
    let on_failure = r.names("on_failure", chain_empty);
    RunPolicy {
        notif_on_success,
        notif_on_failed,
        ping_url,
        on_busy,
        retry,
        retry_delay,
        catch_up: catch_up_once.then_some(catch_up_window),
        random_delay,
        on_success,
        on_failure,
    }
}

/// A job needs a command, and something that starts it.
fn check_job_can_run(r: &mut Reader<'_>) {
    if !r.has("command") {
        r.fail_key("command", "a job needs at least one command");
    }
    if !r.has("interval") && !r.has("schedule") && !r.has("path") {
        r.fail_key(
            "path",
            "a job needs interval, schedule or path; without any it could never run",
        );
    }
}

/// `user` and `group` of a job. An unset `user` means the main section's user and group;
/// a job that sets `user` but not `group` gets that user's primary group (`None`), not the
/// main section's group.
pub(super) fn run_as(r: &mut Reader<'_>, main: &MainConfig) -> (Option<String>, Option<String>) {
    let user = r.parsed("user", check_user);
    let group = r.parsed("group", check_group);
    if r.has("user") {
        (user, group)
    } else {
        (main.user.clone(), group.or_else(|| main.group.clone()))
    }
}

#[cfg(test)]
#[path = "ping_tests.rs"]
mod ping_tests;

#[cfg(test)]
#[path = "job_section_tests.rs"]
mod tests;
