//! Building the runner's [`ExecRequest`] for a run: credentials, environment, working
//! directory. Request data is passed in files and variables, never spliced into commands.

use std::collections::BTreeSet;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::unistd::{Gid, Group, Uid, User, getgrouplist};
use proto::{Action, Credentials, ExecRequest, HttpCall, Sandbox};

use crate::config::{HttpJobConfig, HttpRequestType, JobConfig, MainConfig};
use crate::store::delivery::DeliveryFacts;

/// Time between SIGTERM and SIGKILL when a run is ended early.
pub const KILL_GRACE: Duration = Duration::from_secs(5);
/// Bytes of a JobHttp response body kept in its log.
pub const MAX_HTTP_BODY: u64 = 64 * 1024;
/// `PATH` given to job commands.
pub const JOB_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Who a run executes as, resolved from user and group names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub credentials: Option<Credentials>,
    pub home: Option<PathBuf>,
}

/// The `user` and `group` a run uses, from the job's own keys and the main section's.
///
/// A job that names its own `user` runs with that user's primary group unless it names a
/// `group` too: the main section's group belongs with the main section's user (with
/// the package, `svc`), and `user = root` must not run as `root:svc`. A job that names
/// no user takes the main section's user, with its own group or else the main one's.
pub fn user_and_group<'a>(
    own_user: Option<&'a str>,
    own_group: Option<&'a str>,
    main: &'a crate::config::MainConfig,
) -> (Option<&'a str>, Option<&'a str>) {
    match own_user {
        Some(user) => (Some(user), own_group),
        None => (main.user.as_deref(), own_group.or(main.group.as_deref())),
    }
}

impl RunAs {
    /// Whether the work runs as root: as user root, or, with no user, as the controller
    /// itself when it is root.
    pub fn is_root(&self) -> bool {
        match &self.credentials {
            Some(creds) => creds.uid == 0,
            None => Uid::effective().is_root(),
        }
    }
}

/// Resolves the `user` / `group` names of a job (already defaulted by [`user_and_group`]).
pub fn resolve_run_as(user: Option<&str>, group: Option<&str>) -> Result<RunAs, String> {
    let user_entry = match user {
        Some(name) => Some(
            User::from_name(name)
                .map_err(|e| format!("cannot look up user {name:?}: {e}"))?
                .ok_or_else(|| format!("user {name:?} does not exist"))?,
        ),
        None => None,
    };
    let group_gid = match group {
        Some(name) => Some(
            Group::from_name(name)
                .map_err(|e| format!("cannot look up group {name:?}: {e}"))?
                .ok_or_else(|| format!("group {name:?} does not exist"))?
                .gid,
        ),
        None => None,
    };
    let Some(user_entry) = user_entry else {
        let Some(gid) = group_gid else {
            return Ok(RunAs {
                credentials: None,
                home: None,
            });
        };
        let uid = Uid::current();
        let name = User::from_uid(uid)
            .ok()
            .flatten()
            .map_or_else(|| uid.to_string(), |u| u.name);
        return Ok(RunAs {
            credentials: Some(Credentials {
                uid: uid.as_raw(),
                gid: gid.as_raw(),
                groups: vec![gid.as_raw()],
                user_name: name,
            }),
            home: None,
        });
    };
    let gid = group_gid.unwrap_or(user_entry.gid);
    let groups = supplementary_groups(&user_entry.name, gid);
    Ok(RunAs {
        credentials: Some(Credentials {
            uid: user_entry.uid.as_raw(),
            gid: gid.as_raw(),
            groups,
            user_name: user_entry.name.clone(),
        }),
        home: Some(user_entry.dir),
    })
}

fn supplementary_groups(user: &str, gid: Gid) -> Vec<u32> {
    let mut groups = std::ffi::CString::new(user)
        .ok()
        .and_then(|name| getgrouplist(&name, gid).ok())
        .map(|list| list.into_iter().map(Gid::as_raw).collect::<Vec<_>>())
        .unwrap_or_default();
    if !groups.contains(&gid.as_raw()) {
        groups.insert(0, gid.as_raw());
    }
    groups
}

/// Mode of a default working directory when it is created.
const DIR_WORK_MODE: u32 = 0o750;

/// Makes sure the working directory is there for the job's user, without any privilege
/// the packaged unit lacks (it grants CAP_CHOWN, not CAP_FOWNER nor CAP_DAC_OVERRIDE).
///
/// A directory the operator configured is used as it is and must exist. The default one
/// is created once, with its mode set while root still owns it, then handed to the job's
/// user; from then on it is used as it is. A default directory owned by someone else
/// (for example after the job's `user` changed) is refused with a message saying what to
/// do: changing it would need privileges the service does not have, and silently taking
/// over another user's files is not its call. A symbolic link is refused too, so that
/// no chown ever follows one.
pub fn prepare_dir_work(dir: &Path, is_default: bool, run_as: &RunAs) -> Result<(), String> {
    if !is_default {
        return if dir.is_dir() {
            Ok(())
        } else {
            Err(format!(
                "working directory {} does not exist",
                dir.display()
            ))
        };
    }
    let hand_over = run_as
        .credentials
        .as_ref()
        .filter(|_| Uid::effective().is_root());
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            create_dir_work(dir)?;
            std::fs::symlink_metadata(dir)
                .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        }
        Err(err) => return Err(format!("cannot read {}: {err}", dir.display())),
    };
    if !meta.file_type().is_dir() {
        return Err(format!(
            "working directory {} is not a directory (a symbolic link or a file is not used)",
            dir.display()
        ));
    }
    let Some(creds) = hand_over else {
        return Ok(());
    };
    let owner = std::os::unix::fs::MetadataExt::uid(&meta);
    if owner == creds.uid {
        return Ok(());
    }
    if owner == Uid::effective().as_raw() {
        // Ours: created just now, or by a start that died before handing it over.
        // Setting the mode of our own directory needs no capability.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_WORK_MODE))
            .map_err(|e| format!("cannot set mode of {}: {e}", dir.display()))?;
        return chown(dir, Some(creds.uid), Some(creds.gid))
            .map_err(|e| format!("cannot hand {} to {}: {e}", dir.display(), creds.user_name));
    }
    Err(format!(
        "working directory {} belongs to uid {owner}, not to the job's user {} (uid {}): \
         hand it over (chown -R {} {}) or set dir_work",
        dir.display(),
        creds.user_name,
        creds.uid,
        creds.user_name,
        dir.display()
    ))
}

/// Creates a default working directory (and its parents); an existing one is fine, as a
/// concurrent creation is.
fn create_dir_work(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    match std::fs::DirBuilder::new().mode(DIR_WORK_MODE).create(dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(format!(
            "cannot create working directory {}: {err}",
            dir.display()
        )),
    }
}

/// What a webhook trigger hands to the commands.
#[derive(Debug, Clone, Default)]
pub struct RequestData {
    /// File holding the raw request body.
    pub body_path: Option<PathBuf>,
    /// The run's own temporary directory, given as `TMPDIR`.
    pub tmp_dir: Option<PathBuf>,
    /// What the webhook delivery said of itself.
    pub facts: DeliveryFacts,
}

/// The request for a run of a Job.
pub fn job_request(
    main: &MainConfig,
    job: &JobConfig,
    counter: u64,
    dir_work: &Path,
    run_as: &RunAs,
    data: &RequestData,
) -> ExecRequest {
    let home = run_as
        .home
        .clone()
        .unwrap_or_else(|| dir_work.to_path_buf());
    let mut env = vec![
        ("PATH".to_string(), JOB_PATH.to_string()),
        ("HOME".to_string(), home.display().to_string()),
        ("SVC_JOB_ID".to_string(), job.id.clone()),
        ("SVC_JOB_COUNTER".to_string(), counter.to_string()),
    ];
    if let Some(dir) = &data.tmp_dir {
        env.push(("TMPDIR".to_string(), dir.display().to_string()));
    }
    if let Some(creds) = &run_as.credentials {
        env.push(("USER".to_string(), creds.user_name.clone()));
        env.push(("LOGNAME".to_string(), creds.user_name.clone()));
    }
    for (key, value) in &job.env {
        env.retain(|(k, _)| k != key);
        env.push((key.clone(), value.clone()));
    }
    if let Some(path) = &data.body_path {
        env.push(("SVC_REQUEST_BODY".to_string(), path.display().to_string()));
    }
    for (name, value) in data.facts.env() {
        env.push((name.to_string(), value.to_string()));
    }
    ExecRequest {
        job_id: job.id.clone(),
        counter,
        timeout_ms: job.timeout.map(duration_ms),
        kill_grace_ms: duration_ms(KILL_GRACE),
        credentials: run_as.credentials.clone(),
        limits: proto::ResourceLimits {
            nproc: job.limits.nproc,
            nofile: job.limits.nofile,
            address_space: job.limits.address_space,
            data: None,
            pids: job.limits.pids,
            memory: job.limits.memory,
            cpu_weight: job.limits.cpu_weight,
        },
        keep_capabilities: run_as.is_root().then_some(job.capabilities),
        sandbox: job.sandbox.then(|| sandbox(main, job, dir_work)),
        private_dirs: private_dirs(main, job),
        cgroup_procs: Vec::new(),
        end_yields: false,
        action: Action::Commands {
            commands: job.commands.clone(),
            env,
            dir_work: dir_work.display().to_string(),
        },
    }
}

/// The sandbox of a job's runs: writable are its working directory, its temporary
/// directories and the job's `write_paths`; unreadable is what
/// [`MainConfig::sandbox_protected_paths`] lists, but for the files of the job's own
/// request bodies. It is the same for every run of the job (no path in it names a run),
/// so that a ruleset built for one run serves the next ([`crate::runner::sandboxes`]).
fn sandbox(main: &MainConfig, job: &JobConfig, dir_work: &Path) -> Sandbox {
    let text = |path: &Path| path.display().to_string();
    let tmp = crate::store::runtmp::job_dir(main, &job.id);
    let write_paths = [dir_work, tmp.as_path()]
        .into_iter()
        .chain(job.write_paths.iter().map(PathBuf::as_path))
        .map(text)
        .collect();
    Sandbox {
        write_paths,
        protected_paths: protected_paths(main),
        readable_dirs: vec![text(&bodies_dir(main, &job.id))],
        attached: None,
    }
}

/// What a run of `job` sees of the directories that hold every job's request bodies,
/// temporary directories and default working directories: only its job's entry. The
/// job's whole directory is put back (not only this run's body or `TMPDIR`), since the
/// sandbox's rules name the job's directories and a job's runs share its working
/// directory anyway. The working directories' parent is left as it is when the job was
/// told to work or write in more than one of its entries (a `write_paths` shared on
/// purpose).
pub fn private_dirs(main: &MainConfig, job: &JobConfig) -> Vec<proto::PrivateDir> {
    let text = |path: &Path| path.display().to_string();
    let mut dirs = vec![
        proto::PrivateDir {
            cover: text(&main.dir_bodies()),
            keep: Some(job.id.clone()),
        },
        proto::PrivateDir {
            cover: text(&main.dir_run_tmp()),
            keep: Some(job.id.clone()),
        },
    ];
    let works = main.dir_lib().join("job");
    let (dir_work, _) = dir_work(main, job);
    // The entry of the working directories' parent that each of the job's directories
    // is in; `None` for the parent itself.
    let entries: BTreeSet<Option<&std::ffi::OsStr>> = std::iter::once(dir_work.as_path())
        .chain(job.write_paths.iter().map(PathBuf::as_path))
        .filter_map(|path| path.strip_prefix(&works).ok())
        .map(|below| below.iter().next())
        .collect();
    if entries.len() <= 1 && !entries.contains(&None) {
        dirs.push(proto::PrivateDir {
            cover: text(&works),
            keep: entries
                .first()
                .copied()
                .flatten()
                .map(|name| name.to_string_lossy().into_owned()),
        });
    }
    dirs
}

/// The directory of the request bodies of job `id`'s runs (`<counter>.body`): the files
/// in it are readable in the job's sandbox.
pub fn bodies_dir(main: &MainConfig, id: &str) -> PathBuf {
    main.dir_bodies().join(id)
}

/// What every run's sandbox keeps its commands from reading
/// ([`MainConfig::sandbox_protected_paths`]), as the runner is told.
pub fn protected_paths(main: &MainConfig) -> Vec<String> {
    main.sandbox_protected_paths()
        .iter()
        .map(|(path, _)| path.display().to_string())
        .collect()
}

/// The request for a run of a JobHttp.
pub fn http_request(job: &HttpJobConfig, counter: u64, run_as: &RunAs) -> ExecRequest {
    ExecRequest {
        job_id: job.id.clone(),
        counter,
        timeout_ms: Some(duration_ms(job.http_timeout)),
        kill_grace_ms: duration_ms(KILL_GRACE),
        credentials: run_as.credentials.clone(),
        limits: proto::ResourceLimits::default(),
        // A JobHttp runs no command: the runner makes the call itself.
        keep_capabilities: None,
        sandbox: None,
        private_dirs: Vec::new(),
        cgroup_procs: Vec::new(),
        end_yields: false,
        action: Action::Http(HttpCall {
            method: job.http_method.as_str().to_string(),
            url: job.http_url.clone(),
            request_type: match job.http_request_type {
                HttpRequestType::Query => proto::HttpRequestType::Query,
                HttpRequestType::Form => proto::HttpRequestType::Form,
                HttpRequestType::Json => proto::HttpRequestType::Json,
            },
            headers: job.http_headers.clone(),
            secret: job.secret.clone(),
            sign_header: job.header_sign.clone(),
            insecure: job.http_insecure,
            follow_redirects: job.http_follow_redirects,
            max_body_bytes: MAX_HTTP_BODY,
        }),
    }
}

/// The working directory of a job and whether it is the default one.
pub fn dir_work(main: &MainConfig, job: &JobConfig) -> (PathBuf, bool) {
    match &job.dir_work {
        Some(dir) => (dir.clone(), false),
        None => (main.default_dir_work(&job.id), true),
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobConfig {
        JobConfig {
            id: "deploy".into(),
            name: "deploy".into(),
            file: PathBuf::from("/etc/svc/job.d/deploy.conf"),
            description: String::new(),
            timer: None,
            timezone: Default::default(),
            path: Some("/deploy".into()),
            auth_kind: Default::default(),
            auth_kind_name: "hmac-sha256",
            header_sign: "x-svc-sign".into(),
            one_time_deliveries: false,
            secrets: Vec::new(),
            filter_event: Vec::new(),
            filter_ref: Vec::new(),
            public_key: String::new(),
            commands: vec!["make".into()],
            log_retention: 5,
            timeout: Some(Duration::from_secs(2)),
            user: None,
            group: None,
            dir_work: None,
            env: vec![("PATH".into(), "/opt/bin".into()), ("A".into(), "1".into())],
            capabilities: 0,
            limits: Default::default(),
            write_paths: vec!["/srv/www".into()],
            sandbox: true,
            notif_on_success: Vec::new(),
            notif_on_failed: Vec::new(),
            ping_url: None,
            on_success: Vec::new(),
            on_failure: Vec::new(),
            on_busy: Default::default(),
            retry: 0,
            retry_delay: std::time::Duration::from_secs(30),
            catch_up: None,
            random_delay: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn environment_is_rebuilt_and_job_env_wins() {
        let run_as = RunAs {
            credentials: None,
            home: None,
        };
        let data = RequestData {
            body_path: Some("/run/body".into()),
            tmp_dir: Some("/t/deploy.9".into()),
            facts: DeliveryFacts {
                event: Some("push".into()),
                id: Some("d-1".into()),
                git_ref: Some("refs/heads/main".into()),
                commit: None,
            },
        };
        let main = main("/base");
        let request = job_request(&main, &job(), 9, Path::new("/w"), &run_as, &data);
        let Action::Commands { env, dir_work, .. } = request.action else {
            panic!("commands expected");
        };
        let get = |k: &str| {
            env.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("PATH"), Some("/opt/bin"));
        assert_eq!(get("HOME"), Some("/w"));
        assert_eq!(get("SVC_JOB_ID"), Some("deploy"));
        assert_eq!(get("SVC_JOB_COUNTER"), Some("9"));
        assert_eq!(get("SVC_REQUEST_BODY"), Some("/run/body"));
        assert_eq!(get("SVC_EVENT"), Some("push"));
        assert_eq!(get("SVC_DELIVERY"), Some("d-1"));
        assert_eq!(get("SVC_REF"), Some("refs/heads/main"));
        assert_eq!(get("SVC_COMMIT"), None);
        assert_eq!(get("TMPDIR"), Some("/t/deploy.9"));
        assert_eq!(get("A"), Some("1"));
        assert_eq!(env.iter().filter(|(k, _)| k == "PATH").count(), 1);
        assert_eq!(dir_work, "/w");
        assert_eq!(request.timeout_ms, Some(2000));
        let sandbox = request.sandbox.expect("sandboxed by default");
        assert_eq!(
            sandbox.write_paths,
            ["/w", "/base/var/lib/svc/tmp/deploy", "/srv/www"]
        );
        assert_eq!(sandbox.readable_dirs, ["/base/var/lib/svc/run/deploy"]);
        assert_eq!(sandbox.attached, None);
        assert_eq!(
            sandbox.protected_paths,
            [
                "/base/var/run/svc",
                "/base/etc/svc",
                "/base/var/log/svc",
                "/base/var/lib/svc/run",
                "/base/var/lib/svc/tmp",
            ]
        );
    }

    #[test]
    fn sandbox_false_sends_none() {
        let run_as = RunAs {
            credentials: None,
            home: None,
        };
        let mut job = job();
        job.sandbox = false;
        let request = job_request(
            &main("/base"),
            &job,
            1,
            Path::new("/w"),
            &run_as,
            &RequestData::default(),
        );
        assert_eq!(request.sandbox, None);
    }

    /// The main section of a configuration in `dir_base`, its file in `etc/svc`.
    fn main(dir_base: &str) -> MainConfig {
        let base = Path::new(dir_base);
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("svc.conf");
        std::fs::write(
            &file,
            format!("[svc]\ndir_base = {}\n", dir.path().display()),
        )
        .expect("write");
        let mut main = crate::config::load(&file).expect("load").main;
        main.file = base.join("etc/svc/svc.conf");
        main.dir_state = base.join("var/run/svc");
        main.dir_base = base.to_path_buf();
        main
    }

    #[test]
    fn unknown_user_is_an_error_and_no_user_means_no_switch() {
        assert!(resolve_run_as(Some("no-such-user-svc-test"), None).is_err());
        assert!(resolve_run_as(None, Some("no-such-group-svc-test")).is_err());
        assert_eq!(resolve_run_as(None, None).expect("ok").credentials, None);
    }

    #[test]
    fn root_resolves_with_its_groups() {
        let run_as = resolve_run_as(Some("root"), None).expect("root exists");
        let creds = run_as.credentials.expect("credentials");
        assert_eq!((creds.uid, creds.gid), (0, 0));
        assert!(creds.groups.contains(&0));
    }
}
