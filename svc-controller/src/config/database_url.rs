//! The value of `database_url`: one host or several (libpq's multi-host form), each turned
//! into connection options of its own, because the driver connects to one host only.
//!
//! Both of libpq's ways of listing hosts are read: in the authority
//! (`postgres://user:pw@host1:5432,host2:5433/db`) and in the query
//! (`postgres://user:pw@/db?host=host1,host2&port=5432,5433`). `target_session_attrs` says
//! which host a node may use; svc always writes, so only `any`, `read-write` and `primary`
//! are taken. Messages never repeat the value: it holds a password.

use std::fmt;
use std::str::FromStr as _;

use sqlx::postgres::PgConnectOptions;

/// The form messages suggest.
const FORM: &str = "postgres://USER:PASSWORD@HOST:PORT/DATABASE";

/// Which session of the listed hosts a node accepts: `target_session_attrs`, as libpq
/// reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetSession {
    /// `any`, libpq's default: the first host that accepts the login.
    Any,
    /// `read-write`: a session whose `transaction_read_only` is off.
    ReadWrite,
    /// `primary`: a server that is not in recovery (not a standby).
    Primary,
}

/// A `database_url` split into its hosts, in the order written: the order in which they
/// are tried.
#[derive(Clone)]
pub struct DatabaseTargets {
    /// One host's connection options each (user, password, database and options shared).
    pub hosts: Vec<PgConnectOptions>,
    /// `target_session_attrs`, `None` when not written (then [`TargetSession::Any`]).
    pub written_target: Option<TargetSession>,
}

impl DatabaseTargets {
    /// The session the hosts are chosen by.
    pub fn target(&self) -> TargetSession {
        self.written_target.unwrap_or(TargetSession::Any)
    }
}

impl fmt::Debug for DatabaseTargets {
    // By hand: the options' own Debug shows the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts: Vec<String> = self.hosts.iter().map(host_label).collect();
        f.debug_struct("DatabaseTargets")
            .field("hosts", &hosts)
            .field("written_target", &self.written_target)
            .finish()
    }
}

/// A host as logs and `--check` name it: `host:port`, or the socket directory and port.
/// Never the user or password.
pub fn host_label(options: &PgConnectOptions) -> String {
    if let Some(dir) = options.get_socket() {
        return format!("{}:{}", dir.display(), options.get_port());
    }
    let host = options.get_host();
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{}", options.get_port())
    } else {
        format!("{host}:{}", options.get_port())
    }
}

/// One host of the list: as written in the authority, or from the query's `host=` list.
struct HostEntry<'a> {
    host: &'a str,
    port: Option<&'a str>,
    from_query: bool,
}

/// Splits `url` into one set of connection options per host. The error is a message for
/// the configuration's issue, which shows the value redacted.
pub fn parse_database_url(url: &str) -> Result<DatabaseTargets, String> {
    let (scheme, rest) = ["postgres://", "postgresql://"]
        .iter()
        .find_map(|scheme| url.strip_prefix(scheme).map(|rest| (*scheme, rest)))
        .ok_or_else(|| format!("not a PostgreSQL URL: write {FORM}"))?;
    let (head, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = head.find('/').map_or((head, ""), |i| head.split_at(i));
    let (userinfo, host_list) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    };
    let mut kept: Vec<&str> = Vec::new();
    let (mut query_hosts, mut query_ports, mut target) = (None, None, None);
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("host", value) => query_hosts = Some(value),
            ("port", value) => query_ports = Some(value),
            ("target_session_attrs", value) => target = Some(parse_target(value)?),
            _ => kept.push(pair),
        }
    }
    let entries = host_entries(host_list, query_hosts, query_ports)?;
    let mut hosts = Vec::with_capacity(entries.len());
    for (n, entry) in entries.iter().enumerate() {
        let single = single_host_url(scheme, userinfo, host_list, path, &kept, entry);
        let options = PgConnectOptions::from_str(&single).map_err(|_| {
            // The driver's message is not shown: it could quote part of the URL.
            if entries.len() == 1 {
                format!("not a valid PostgreSQL URL: write {FORM}")
            } else {
                format!(
                    "host {} of the list: not a valid PostgreSQL URL: write {FORM}",
                    n + 1
                )
            }
        })?;
        hosts.push(options);
    }
    Ok(DatabaseTargets {
        hosts,
        written_target: target,
    })
}

/// `target_session_attrs`: what a node that writes can use.
fn parse_target(value: &str) -> Result<TargetSession, String> {
    match value {
        "any" => Ok(TargetSession::Any),
        "read-write" => Ok(TargetSession::ReadWrite),
        "primary" => Ok(TargetSession::Primary),
        "read-only" | "standby" | "prefer-standby" => Err(format!(
            "target_session_attrs={value} is not supported: svc writes to the database, so \
             it takes read-write (or primary, or any)"
        )),
        _ => Err("target_session_attrs: not one of read-write, primary or any".into()),
    }
}

/// The hosts, from the query's `host=` (which wins, as in libpq) or the authority, each
/// with its port: a port list holds one port for all or one per host.
fn host_entries<'a>(
    host_list: &'a str,
    query_hosts: Option<&'a str>,
    query_ports: Option<&'a str>,
) -> Result<Vec<HostEntry<'a>>, String> {
    let (hosts, from_query): (Vec<&str>, bool) = match query_hosts {
        Some(_) if host_list.contains(',') => {
            return Err("hosts listed both before the path and in host=: write one list".into());
        }
        Some(list) => (list.split(',').collect(), true),
        // Commas separate the hosts (an IPv6 address is in brackets and has none).
        None => (host_list.split(',').collect(), false),
    };
    if hosts.iter().any(|host| host.is_empty()) {
        return Err(format!(
            "the URL names no host (or an empty one): write {FORM}"
        ));
    }
    let ports: Vec<&str> = query_ports.map_or_else(Vec::new, |list| list.split(',').collect());
    if ports.len() > 1 && ports.len() != hosts.len() {
        return Err(format!(
            "port= lists {} ports for {} hosts: write one port for all, or one per host",
            ports.len(),
            hosts.len()
        ));
    }
    Ok(hosts
        .into_iter()
        .enumerate()
        .map(|(n, host)| {
            let port = match ports.as_slice() {
                [] => None,
                [one] => Some(*one),
                many => many.get(n).copied(),
            };
            HostEntry {
                host,
                port,
                from_query,
            }
        })
        .collect())
}

/// A URL of the one host `entry`, with everything else as written (but the keys this
/// module read), for the driver's own parser.
fn single_host_url(
    scheme: &str,
    userinfo: Option<&str>,
    host_list: &str,
    path: &str,
    kept: &[&str],
    entry: &HostEntry<'_>,
) -> String {
    let mut url = String::from(scheme);
    if let Some(userinfo) = userinfo {
        url.push_str(userinfo);
        url.push('@');
    }
    let mut query: Vec<String> = kept.iter().map(|pair| (*pair).to_owned()).collect();
    if entry.from_query {
        // The driver reads `host=` after the authority, so it wins over it; an authority
        // left empty is given a placeholder the driver never connects to, because a URL
        // with a user and no host does not parse.
        url.push_str(if host_list.is_empty() {
            "localhost"
        } else {
            host_list
        });
        query.push(format!("host={}", entry.host));
        if let Some(port) = entry.port {
            query.push(format!("port={port}"));
        }
    } else {
        url.push_str(entry.host);
        if let Some(port) = entry.port {
            query.push(format!("port={port}"));
        }
    }
    url.push_str(path);
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    url
}

#[cfg(test)]
#[path = "database_url_tests.rs"]
mod tests;
