//! `--check`: the configuration, each schedule's next slots, the replay notes, what the
//! runs get (containment, cgroups) and the cluster database; and the checks of the
//! configuration that the start-up makes too.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::{EXIT_CONFIG, cluster_join};
use crate::config::{Config, ConfigError, ConfigIssue, MainConfig};

/// `--check` of a configuration that loaded: what it means, printed; the exit status.
pub(super) fn check(config_file: &Path, config: &Config) -> ExitCode {
    println!(
        "{}: configuration is valid ({} jobs, {} http jobs)",
        config_file.display(),
        config.jobs.len(),
        config.http_jobs.len()
    );
    // The next three slots of each schedule, to see that it means what was meant.
    let now = chrono::Utc::now();
    for entry in crate::daemon::preview::job_timers(config) {
        let Some(timer @ crate::time::schedule::Timer::Schedule(..)) = entry.timer else {
            continue;
        };
        let next: Vec<String> = crate::daemon::preview::upcoming(timer, now, 3)
            .into_iter()
            .map(|t| crate::daemon::preview::local_text(t, entry.zone))
            .collect();
        println!(
            "  {} {}: {}: next {}",
            entry.kind.as_str(),
            entry.id,
            timer.describe(),
            next.join(", ")
        );
    }
    for note in super::replay_notes::replay_notes(config) {
        println!("  {note}");
    }
    if let Ok(runner) = super::runner_path(config.main.runner_path.as_deref()) {
        println!(
            "  containment: {}",
            crate::runner::containment::probe(&runner).line
        );
    }
    if config.main.run_cgroups {
        println!(
            "  cgroups: {} (as found for this command; the service finds its own at start-up)",
            crate::runner::cgroups::RunCgroups::inspect()
        );
    } else {
        println!(
            "  cgroups: {}",
            crate::runner::cgroups::RunCgroups::none("run_cgroups = false").line()
        );
    }
    if let Some(cluster) = &config.main.cluster {
        return check_cluster(cluster, config);
    }
    ExitCode::SUCCESS
}

/// How long `--check` waits for the cluster database's socket to accept a connection: a
/// server that is not there is reported within this.
const CLUSTER_REACH_LIMIT: Duration = Duration::from_secs(5);
/// How long `--check` then waits for the login and the schema's reads, all together.
/// Longer, because a server that accepted the connection is there and answers; only its
/// load decides how fast (a busy database, or one that has just started, may take
/// seconds to log a session in).
const CLUSTER_ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// `--check` with a `database_url`: reaches the server (within [`CLUSTER_REACH_LIMIT`]),
/// then logs in, says whether the schema is current and, when it is, compares this
/// configuration's job definitions with those the other live nodes recorded (all within
/// [`CLUSTER_ANSWER_LIMIT`]). Changes nothing in the database. Definitions that differ are
/// warnings: the exit status stays 0, since a rolling change of definitions passes
/// through them.
fn check_cluster(cluster: &crate::config::ClusterConfig, config: &Config) -> ExitCode {
    use crate::cluster::{ClusterStore, SchemaStatus, StoreOptions};
    let shown = cluster.shown_url();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let options = StoreOptions {
        max_connections: 1,
        acquire_timeout: CLUSTER_ANSWER_LIMIT,
        ..StoreOptions::default()
    };
    let node = &cluster.node_name;
    let defs = cluster_join::job_defs(config);
    let status = runtime.block_on(async {
        let store = ClusterStore::new(cluster.database_url.expose(), &options)?;
        // Not through the pool: it would retry a refused connection until its timeout,
        // the long one. Several hosts are each checked within a short limit instead, and
        // the pool is pointed at the first usable one.
        let reached = match store.host_count() {
            1 => store.reach(CLUSTER_REACH_LIMIT).await,
            count => store.select_host().await.map(|host| {
                println!("  cluster: primary {host} (of {count} hosts in database_url)");
            }),
        };
        if let Err(err) = reached {
            store.close().await;
            return Err(err);
        }
        // The pool's timeout bounds the login; this one bounds the reads too.
        let reads = async {
            let status = store.schema_status().await?;
            // Only a current schema has the tables this release reads; a pending one is
            // applied at start, and a newer or broken one is an error below.
            let comparison = match status {
                SchemaStatus::Current => Some(store.compare_job_defs(node, &defs).await?),
                _ => None,
            };
            Ok::<_, crate::cluster::ClusterError>((status, comparison))
        };
        let status = tokio::time::timeout(CLUSTER_ANSWER_LIMIT, reads).await;
        store.close().await;
        Ok::<_, crate::cluster::ClusterError>(status)
    });
    match status {
        Ok(Ok(Ok((SchemaStatus::Current, comparison)))) => {
            println!("  cluster: node {node} on {shown}: reachable, schema current");
            if let Some(comparison) = comparison {
                let report = cluster_join::drift_report(&comparison);
                for line in &report.lines {
                    println!("  cluster: {line}");
                }
                for warning in &report.warnings {
                    eprintln!("warning: cluster: {warning}");
                }
            }
            ExitCode::SUCCESS
        }
        Ok(Ok(Ok((SchemaStatus::Pending(versions), _)))) => {
            println!(
                "  cluster: node {node} on {shown}: reachable, {} schema migration(s) to \
                 apply at start ({versions:?}); job definitions not compared",
                versions.len()
            );
            ExitCode::SUCCESS
        }
        Ok(Ok(Ok((SchemaStatus::Newer(versions), _)))) => {
            eprintln!(
                "error: database_url ({shown}): the schema is newer than this release (it has \
                 migrations {versions:?}); upgrade this node"
            );
            ExitCode::from(EXIT_CONFIG)
        }
        Ok(Ok(Ok((SchemaStatus::Broken { version, reason }, _)))) => {
            eprintln!(
                "error: database_url ({shown}): schema migration {version} is broken: {reason}"
            );
            ExitCode::from(EXIT_CONFIG)
        }
        Ok(Ok(Err(err))) | Err(err) => {
            eprintln!("error: database_url ({shown}): cannot check the cluster database: {err}");
            ExitCode::from(EXIT_CONFIG)
        }
        Ok(Err(_elapsed)) => {
            eprintln!(
                "error: database_url ({shown}): the cluster database accepted the connection \
                 but did not answer within {} s",
                CLUSTER_ANSWER_LIMIT.as_secs()
            );
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// Prints a configuration's problems and warnings, for a person.
pub(super) fn report_config_error(err: &ConfigError) {
    for warning in &err.warnings {
        eprintln!("warning: {warning}");
    }
    eprintln!("error: {err}");
}

/// Jobs that run as root only because no `user` is set anywhere and the controller is
/// root. decisions.md makes the controller's own user the default, so they are allowed
/// (unlike `user = root`, which needs `allow_root_jobs`), but they keep no capability
/// unless they list some, and the operator is told.
pub(super) fn implicit_root_warning(config: &Config) -> Option<String> {
    if config.main.allow_root_jobs || !nix::unistd::geteuid().is_root() {
        return None;
    }
    let names: Vec<&str> = config
        .jobs
        .iter()
        .filter(|job| job.user.is_none())
        .map(|job| job.id.as_str())
        .collect();
    if names.is_empty() {
        return None;
    }
    Some(format!(
        "{}: {} job{} run{} as root because no user is set in the job or in [svc] ({}); \
         they keep only the capabilities they list. Set `user` (the package uses svc), or \
         `allow_root_jobs = true` to say it is meant",
        config.main.file.display(),
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        if names.len() == 1 { "s" } else { "" },
        some_names(&names)
    ))
}

/// Names listed in a warning before the rest is only counted: with thousands of jobs
/// the whole list made one line of tens of kilobytes.
const NAMES_SHOWN: usize = 10;

/// The first [`NAMES_SHOWN`] of `names`, and how many more there are.
pub(super) fn some_names(names: &[&str]) -> String {
    match names.len().checked_sub(NAMES_SHOWN) {
        Some(more) if more > 0 => format!("{} and {more} more", names[..NAMES_SHOWN].join(", ")),
        _ => names.join(", "),
    }
}

/// The runner binary must exist and be executable; checked by `--check` and at start.
pub(super) fn runner_issue(main: &MainConfig) -> Option<ConfigIssue> {
    use std::os::unix::fs::PermissionsExt as _;
    let (path, value) = match &main.runner_path {
        Some(path) => (path.clone(), path.display().to_string()),
        None => match super::runner_path(None) {
            Ok(path) => {
                let shown = format!("{} (default: beside svc-controller)", path.display());
                (path, shown)
            }
            Err(err) => {
                return Some(ConfigIssue {
                    file: main.file.clone(),
                    section: Some("svc".to_string()),
                    key: Some("runner_path".to_string()),
                    value: None,
                    message: format!("{err:#}"),
                });
            }
        },
    };
    let problem = match std::fs::metadata(&path) {
        Err(err) => format!("no runner binary there: {err}"),
        Ok(meta) if !meta.is_file() => "not a regular file".to_string(),
        Ok(meta) if meta.permissions().mode() & 0o111 == 0 => "not executable".to_string(),
        Ok(_) => return None,
    };
    Some(ConfigIssue {
        file: main.file.clone(),
        section: Some("svc".to_string()),
        key: Some("runner_path".to_string()),
        value: Some(value),
        message: problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_lists_ten_names_and_counts_the_rest() {
        let few = ["a", "b", "c"];
        assert_eq!(some_names(&few), "a, b, c");
        let ten: Vec<String> = (0..10).map(|i| format!("j{i}")).collect();
        let ten: Vec<&str> = ten.iter().map(String::as_str).collect();
        assert_eq!(some_names(&ten), ten.join(", "));
        let many: Vec<String> = (0..10_000).map(|i| format!("j{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            some_names(&many),
            "j0, j1, j2, j3, j4, j5, j6, j7, j8, j9 and 9990 more"
        );
    }
}
