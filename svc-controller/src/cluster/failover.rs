//! Failover between the hosts of a multi-host `database_url`: the pool connects to the host
//! that is the primary now, refuses a session that cannot write, and follows the primary to
//! another host when it goes away (the driver connects to one host only, so the choice of
//! host is made here and handed to the pool with `Pool::set_connect_options`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions as _, Connection as _};

use super::error::ClusterError;
use super::store::ClusterStore;
use crate::config::{TargetSession, host_label};
use crate::util::lock::MutexExt as _;

/// How often the watcher checks that the pool's host is still the one to use.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How long one check of a host may take (connect, log in, one query): a host that does
/// not answer within it is passed over.
pub(super) const PROBE_LIMIT: Duration = Duration::from_secs(2);
/// How long the watcher's check through the pool may wait for a connection before it
/// checks the host on a connection of its own: short, because the pool retries a refused
/// connection until its acquire timeout, which would hold the move to another host.
const POOL_PROBE_LIMIT: Duration = Duration::from_millis(500);

/// The hosts a store may connect to and which one its pool uses now.
pub(super) struct Hosts {
    /// One host's options each, in the order of the URL.
    list: Vec<PgConnectOptions>,
    target: TargetSession,
    /// The index in `list` of the host the pool connects to.
    current: AtomicUsize,
    /// When the pool last changed host: connections older than that are the old host's.
    switched_at: Mutex<Option<Instant>>,
    /// Counts the changes of host, so that a holder of a long-lived session (the
    /// listener) can tell it is on the old one.
    generation: AtomicU64,
    /// Asks the watcher to look now rather than at its next round.
    kick: tokio::sync::Notify,
}

/// How a host answered a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostState {
    /// It takes the node's sessions.
    Usable,
    /// It answers but cannot write (a standby, or read-only).
    ReadOnly,
    /// It cannot be reached or refused the login (the reason, without secrets).
    Unreachable(String),
}

impl std::fmt::Debug for Hosts {
    // By hand: the options' own Debug shows the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let labels: Vec<String> = self.list.iter().map(host_label).collect();
        f.debug_struct("Hosts")
            .field("list", &labels)
            .field("target", &self.target)
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Display for HostState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostState::Usable => f.write_str("usable"),
            HostState::ReadOnly => f.write_str("read-only (a standby?)"),
            HostState::Unreachable(why) => write!(f, "unreachable ({why})"),
        }
    }
}

impl Hosts {
    pub(super) fn new(list: Vec<PgConnectOptions>, target: TargetSession) -> Arc<Hosts> {
        Arc::new(Hosts {
            list,
            target,
            current: AtomicUsize::new(0),
            switched_at: Mutex::new(None),
            generation: AtomicU64::new(0),
            kick: tokio::sync::Notify::new(),
        })
    }

    /// The options of the first host, which the pool starts with.
    pub(super) fn first(&self) -> Option<PgConnectOptions> {
        self.list.first().cloned()
    }

    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    /// The label of the host the pool uses now.
    pub(super) fn current_label(&self) -> String {
        self.list
            .get(self.current.load(Ordering::Acquire))
            .map(host_label)
            .unwrap_or_default()
    }

    /// See [`Hosts::generation`].
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The pool's hooks: a new session that cannot write is refused (and the watcher told
    /// at once), and a connection made before the last change of host is dropped rather
    /// than used.
    pub(super) fn hook(self: &Arc<Hosts>, pool: PgPoolOptions) -> PgPoolOptions {
        let on_connect = Arc::clone(self);
        let on_acquire = Arc::clone(self);
        pool.after_connect(
            move |conn, _meta| -> BoxFuture<'_, Result<(), sqlx::Error>> {
                let hosts = Arc::clone(&on_connect);
                Box::pin(async move {
                    if session_state(conn, hosts.target).await? == HostState::Usable {
                        return Ok(());
                    }
                    hosts.kick.notify_one();
                    // The pool logs this and tries again, on whichever host is current by then.
                    Err(sqlx::Error::Protocol(
                        "the database host is read-only (a standby?): the node needs the primary"
                            .into(),
                    ))
                })
            },
        )
        .before_acquire(
            move |_conn, meta| -> BoxFuture<'_, Result<bool, sqlx::Error>> {
                let switched = *on_acquire.switched_at.locked();
                Box::pin(async move { Ok(switched.is_none_or(|at| meta.age < at.elapsed())) })
            },
        )
    }

    /// Checks the hosts in the order of the URL and answers the first usable one's index,
    /// or each host's state when none is.
    pub(super) async fn find_usable(&self) -> Result<usize, Vec<(String, HostState)>> {
        let mut states = Vec::with_capacity(self.list.len());
        for (index, options) in self.list.iter().enumerate() {
            match probe(options, self.target).await {
                HostState::Usable => return Ok(index),
                state => states.push((host_label(options), state)),
            }
        }
        Err(states)
    }

    /// Makes `pool` connect to host `index` from now on.
    pub(super) fn switch_to(&self, pool: &PgPool, index: usize) {
        let Some(options) = self.list.get(index) else {
            return;
        };
        if self.current.swap(index, Ordering::AcqRel) == index {
            return;
        }
        pool.set_connect_options(options.clone());
        *self.switched_at.locked() = Some(Instant::now());
        self.generation.fetch_add(1, Ordering::AcqRel);
        tracing::warn!(host = %host_label(options), "the cluster database's primary is on another host now: connecting there");
    }

    /// Whether the pool's host is still usable: through the pool (an idle connection, no
    /// new login) when it answers in time, else by a connection of its own, so that a pool
    /// that is only busy does not count as a host gone.
    async fn current_usable(&self, pool: &PgPool) -> bool {
        let through_pool = async {
            let mut conn = pool.acquire().await?;
            session_state(&mut conn, self.target).await
        };
        if let Ok(Ok(state)) = tokio::time::timeout(POOL_PROBE_LIMIT, through_pool).await {
            return state == HostState::Usable;
        }
        match self.list.get(self.current.load(Ordering::Acquire)) {
            Some(options) => probe(options, self.target).await == HostState::Usable,
            None => false,
        }
    }
}

impl ClusterStore {
    /// How many hosts the database URL lists.
    pub fn host_count(&self) -> usize {
        self.hosts().len()
    }

    /// The host the pool connects to now (`host:port`, no secret).
    pub fn current_host(&self) -> String {
        self.hosts().current_label()
    }

    /// Changes each time the pool moves to another host: a long-lived session opened
    /// under another number (the listener's) is on a host no longer in use.
    pub fn host_generation(&self) -> u64 {
        self.hosts().generation()
    }

    /// Checks the hosts in order, makes the pool use the first usable one and answers its
    /// label (for `--check`, and a start that should not wait for the watcher).
    pub async fn select_host(&self) -> Result<String, ClusterError> {
        match self.hosts().find_usable().await {
            Ok(index) => {
                self.hosts().switch_to(self.pool(), index);
                Ok(self.current_host())
            }
            Err(states) => {
                let states: Vec<String> = states
                    .iter()
                    .map(|(host, state)| format!("{host}: {state}"))
                    .collect();
                Err(ClusterError::NoUsableHost(states.join("; ")))
            }
        }
    }
}

/// Keeps `pool` on a usable host while the store lives (`alive` upgrades): looks every
/// [`WATCH_EVERY`] and when a session was refused, and when the host in use is not usable
/// any more, takes the first usable one of the list. Runs only for several hosts.
pub(super) async fn watch(hosts: Arc<Hosts>, pool: PgPool, alive: Weak<()>) {
    // At start the first host may be a standby already: look at once.
    let mut search = true;
    loop {
        if alive.upgrade().is_none() || pool.is_closed() {
            return;
        }
        if search || !hosts.current_usable(&pool).await {
            match hosts.find_usable().await {
                Ok(index) => hosts.switch_to(&pool, index),
                Err(states) => {
                    let states: Vec<String> = states
                        .iter()
                        .map(|(host, state)| format!("{host}: {state}"))
                        .collect();
                    tracing::debug!(hosts = %states.join("; "), "no host of the cluster database is usable now; looking again");
                }
            }
        }
        search = false;
        tokio::select! {
            _ = tokio::time::sleep(WATCH_EVERY) => {}
            _ = hosts.kick.notified() => search = true,
        }
    }
}

/// One host's state, on a connection of its own closed afterwards.
pub(super) async fn probe(options: &PgConnectOptions, target: TargetSession) -> HostState {
    let check = async {
        let mut conn = options.connect().await?;
        let state = session_state(&mut conn, target).await;
        let _ = conn.close().await;
        state
    };
    match tokio::time::timeout(PROBE_LIMIT, check).await {
        Ok(Ok(state)) => state,
        Ok(Err(err)) => HostState::Unreachable(brief_error(&err)),
        Err(_elapsed) => {
            HostState::Unreachable(format!("no answer within {} s", PROBE_LIMIT.as_secs()))
        }
    }
}

/// Whether the session on `conn` serves a node that writes, as `target_session_attrs`
/// asks: libpq's `read-write` reads `transaction_read_only`, `primary` whether the server
/// is in recovery.
async fn session_state(
    conn: &mut PgConnection,
    target: TargetSession,
) -> Result<HostState, sqlx::Error> {
    let usable = match target {
        TargetSession::Any => true,
        TargetSession::ReadWrite => {
            let read_only: String = sqlx::query_scalar("SHOW transaction_read_only")
                .fetch_one(&mut *conn)
                .await?;
            read_only != "on"
        }
        TargetSession::Primary => {
            let recovering: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
                .fetch_one(&mut *conn)
                .await?;
            !recovering
        }
    };
    Ok(if usable {
        HostState::Usable
    } else {
        HostState::ReadOnly
    })
}

/// A connection error in a few words: its kind, never the options (which hold the
/// password).
fn brief_error(err: &sqlx::Error) -> String {
    match err {
        sqlx::Error::Io(io) => io.kind().to_string(),
        sqlx::Error::Database(db) => db.message().to_owned(),
        sqlx::Error::Tls(_) => "TLS failed".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_host_nothing_listens_on_is_unreachable_and_passed_over() {
        // Port 1 on loopback: nothing listens there, the connection is refused at once.
        let dead = PgConnectOptions::new().host("127.0.0.1").port(1);
        let hosts = Hosts::new(vec![dead.clone(), dead], TargetSession::ReadWrite);
        let states = hosts.find_usable().await.expect_err("no usable host");
        assert_eq!(states.len(), 2);
        assert_eq!(states[0].0, "127.0.0.1:1");
        assert!(
            matches!(states[0].1, HostState::Unreachable(_)),
            "{states:?}"
        );
        assert_eq!(hosts.current_label(), "127.0.0.1:1");
        assert_eq!(hosts.generation(), 0);
    }

    #[tokio::test]
    async fn switching_host_is_counted_and_makes_older_connections_stale() {
        let a = PgConnectOptions::new().host("127.0.0.1").port(1);
        let b = PgConnectOptions::new().host("127.0.0.1").port(2);
        let hosts = Hosts::new(vec![a.clone(), b], TargetSession::Primary);
        let pool = PgPoolOptions::new().connect_lazy_with(a);
        hosts.switch_to(&pool, 1);
        assert_eq!(hosts.current_label(), "127.0.0.1:2");
        assert_eq!(pool.connect_options().get_port(), 2);
        assert_eq!(hosts.generation(), 1);
        // The same host again is no change.
        hosts.switch_to(&pool, 1);
        assert_eq!(hosts.generation(), 1);
        assert!(hosts.switched_at.locked().is_some());
    }
}
