//! The cluster keys of `[svc]`: `database_url` (or `$NAME` for one from the
//! environment), `node_name` and `database_max_connections`.

use super::database_url::{DatabaseTargets, parse_database_url};
use super::loader::EnvLookup;
use super::model::{ClusterConfig, ConfigIssue};
use super::section_reader::{Reader, entry_issue};
use super::values::from_env;
use proto::redact::Secret;

/// `database_url` and `node_name` of `[svc]`: `Some` in cluster mode. The URL is only
/// checked for its shape here (loading does no I/O); connecting is for `--check` and the
/// start.
pub(super) fn read_cluster(
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
    let mut targets = None;
    let url = r.parsed("database_url", |v| {
        let url = from_env(v, env)?;
        targets = Some(
            check_database_url(&url).map_err(|message| match &url_from_env {
                // The URL came from the environment: name the variable, show nothing of it.
                Some(name) => format!("the value of {name}: {message}"),
                None => message,
            })?,
        );
        Ok(url)
    })?;
    if let (Some(warning), Some(entry)) = (
        targets.as_ref().and_then(any_of_several_warning),
        r.first("database_url"),
    ) {
        warnings.push(entry_issue(r.file, r.section, entry, &warning));
    }
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

/// A `database_url` must be a PostgreSQL URL with a host, or several (libpq's multi-host
/// form), and a `target_session_attrs` a writing node can use. The message never repeats
/// the value: the issue shows it redacted.
fn check_database_url(url: &str) -> Result<DatabaseTargets, String> {
    parse_database_url(url)
}

/// A warning when several hosts are listed and nothing says which one to use: libpq's
/// default (`any`) takes the first that accepts a login, a standby too, on which every
/// write of the node would fail.
fn any_of_several_warning(targets: &DatabaseTargets) -> Option<String> {
    (targets.hosts.len() > 1 && targets.written_target.is_none()).then(|| {
        format!(
            "database_url lists {} hosts without target_session_attrs: a standby among them \
             could be taken for the primary; add ?target_session_attrs=read-write",
            targets.hosts.len()
        )
    })
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

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
