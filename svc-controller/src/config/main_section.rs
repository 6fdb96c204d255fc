//! The `[svc]` section of the main file: its keys, their defaults and the checks that
//! need several of them.

use std::path::{Path, PathBuf};

use super::cluster_section::read_cluster;
use super::guards;
use super::loader::EnvLookup;
use super::model::{
    ConfigIssue, DEFAULT_AUDIT_MAX_SIZE, DEFAULT_DIR_STATE, DEFAULT_HTTP_BODY_TIMEOUT,
    DEFAULT_HTTP_TIMEOUT, DEFAULT_LISTEN_ADDRESS, DEFAULT_LOG_MAX_SIZE, DEFAULT_MAX_BODY_IN_FLIGHT,
    DEFAULT_NAME, MainConfig, resolve_path,
};
use super::section_reader::KeyKind::{self, Bool, List, Scalar};
use super::section_reader::{Reader, entry_issue, new_issue};
use super::syntax::Section;
use super::values::{
    check_group, check_host_name, check_listen_address, check_log_level, check_user, is_root_user,
    parse_audit_size, parse_bytes, parse_count, parse_limit, parse_positive_duration,
};
use crate::time::timezone::Zone;

pub(super) const MAIN_KEYS: &[(&str, KeyKind)] = &[
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

/// Reads `[svc]` (or its defaults when `section` is `None`). The flag is false when
/// `dir_base` is unusable, in which case the job directories are not read.
pub(super) fn read_main(
    file: &Path,
    section: Option<&Section>,
    env: EnvLookup<'_>,
    errors: &mut Vec<ConfigIssue>,
    warnings: &mut Vec<ConfigIssue>,
) -> (MainConfig, bool) {
    let mut config = main_defaults(file);
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
    let base_ok = read_dirs(&mut r, &mut config);
    config.secret = r.secret("secret");
    refuse_unsafe_dir_public(&mut r, &mut config);
    if let Some(v) = r.parsed("http_timeout", parse_positive_duration) {
        config.http_timeout = v;
    }
    read_max_job_running(&mut r, &mut config, warnings);
    config.limit_pids = r.parsed("limit_pids", parse_limit);
    if let Some(v) = r.flag("run_cgroups") {
        config.run_cgroups = v;
    }
    if let Some(v) = r.flag("is_development") {
        config.is_development = v;
    }
    config.user = r.parsed("user", check_user);
    config.group = r.parsed("group", check_group);
    let base = config.dir_base.clone();
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
    refuse_root_user(&mut r, &config);
    config.cluster = read_cluster(&mut r, env, warnings);
    (config, base_ok)
}

/// `[svc]` as a main file without that section has it.
fn main_defaults(file: &Path) -> MainConfig {
    MainConfig {
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
    }
}

/// `dir_base` (relative to the main file's directory), then `dir_public` and `dir_state`
/// (relative to `dir_base`). False when `dir_base` is unusable.
fn read_dirs(r: &mut Reader<'_>, config: &mut MainConfig) -> bool {
    let file = r.file;
    let mut base_ok = true;
    if r.has("dir_base") {
        let file_dir = std::path::absolute(file)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .or_else(|| file.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("."));
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
    base_ok
}

/// A `dir_public` that would serve the service's own files is refused (and dropped);
/// checked once `dir_state` is known, as it must stay clear of the state directory too.
fn refuse_unsafe_dir_public(r: &mut Reader<'_>, config: &mut MainConfig) {
    if let Some(dir) = config.dir_public.clone()
        && let Err(message) = guards::check_dir_public(config, &dir)
        && let Some(entry) = r.first("dir_public")
    {
        r.fail(entry, &message);
        config.dir_public = None;
    }
}

/// `max_job_running`, or its old name `max_hook_running` (with a warning), not both.
fn read_max_job_running(
    r: &mut Reader<'_>,
    config: &mut MainConfig,
    warnings: &mut Vec<ConfigIssue>,
) {
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
                r.file,
                r.section,
                entry,
                "deprecated: use max_job_running",
            ));
        }
    }
    if let Some(n) = job_running.or(hook_running) {
        config.max_job_running = n;
    }
}

/// A root `user` for every job only where `allow_root_jobs` says so.
fn refuse_root_user(r: &mut Reader<'_>, config: &MainConfig) {
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
}

/// A warning when the main file lies in a directory that jobs need to read: the sandbox
/// keeps the main file's directory out of their reach.
pub(super) fn shared_main_dir(main: &MainConfig) -> Option<String> {
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

#[cfg(test)]
#[path = "main_section_tests.rs"]
mod tests;
