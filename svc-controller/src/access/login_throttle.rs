//! The failed-login throttle of [`super::Login`]: per client address and per attempted
//! name, in memory, bounded.
//!
//! Each attempt waits the longer of two delays, its address's and its name's, which
//! double with every consecutive failure ([`FIRST_DELAY`] up to [`MAX_DELAY`]). Every
//! name has an entry of its own, whether or not it is a user's: an entry shared by the
//! unknown names would answer differently for them than for a user's name (a guess at
//! one unknown name slowed every other one), which tells who has an account. Keys are
//! the SHA-256 of the name, so an entry's size does not depend on what was sent.
//!
//! Memory stays bounded whatever an attacker sends: at most [`MAX_TRACKED_CLIENTS`]
//! addresses and [`MAX_TRACKED_NAMES`] names (forgotten ones dropped first, then the
//! least recently seen), and one address may bring at most [`MAX_NAMES_PER_CLIENT`] new
//! names into the table until it is forgotten (an hour without attempts) or logs in;
//! past that its attempts at names not in the table are refused as too many, the same
//! for a user's name as for any other.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::{FIRST_DELAY, FORGET_FAILURES_AFTER, MAX_DELAY, MAX_HELD_WAIT, MAX_TRACKED_CLIENTS};

/// Names tracked at most by the throttle.
pub const MAX_TRACKED_NAMES: usize = 10_000;
/// New names one address may bring into the throttle's table before it is forgotten.
pub const MAX_NAMES_PER_CLIENT: u32 = 100;

/// Who a login attempt comes from: the peer address (IPv6 by its /64, IPv4-mapped IPv6
/// as IPv4), or `Unknown` when the server did not record the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// A peer address, masked.
    Ip(IpAddr),
    /// No peer address known: all such attempts share one entry.
    Unknown,
}

impl ClientKey {
    /// The key of a peer address.
    pub fn from_addr(addr: IpAddr) -> ClientKey {
        match addr {
            IpAddr::V4(v4) => ClientKey::Ip(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientKey::Ip(IpAddr::V4(v4)),
                None => {
                    let masked = u128::from(v6) & !((1u128 << 64) - 1);
                    ClientKey::Ip(IpAddr::V6(Ipv6Addr::from(masked)))
                }
            },
        }
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientKey::Ip(ip) => write!(f, "{ip}"),
            ClientKey::Unknown => f.write_str("unknown"),
        }
    }
}

/// Why an attempt was not checked, or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Wrong password, or unknown name (`known` says which, for the log only).
    Invalid {
        /// The name exists.
        known: bool,
    },
    /// Another attempt from the same address is being checked.
    Busy,
    /// Too many failures: from this address, or for this name.
    TooMany {
        /// When an attempt may be made again.
        retry_after: Duration,
    },
}

/// The name an attempt is for, as the throttle keys it: its SHA-256, so that every
/// entry has the same small size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NameKey([u8; 32]);

impl NameKey {
    /// The key of `name`.
    pub fn of(name: &str) -> NameKey {
        NameKey(Sha256::digest(name.as_bytes()).into())
    }
}

#[derive(Debug, Clone)]
pub(super) struct ClientState {
    failures: u32,
    blocked_until: Instant,
    last_seen: Instant,
    in_flight: bool,
    /// Names this address brought into the table.
    names: u32,
}

impl ClientState {
    fn new(now: Instant) -> ClientState {
        ClientState {
            failures: 0,
            blocked_until: now,
            last_seen: now,
            in_flight: false,
            names: 0,
        }
    }
}

/// Consecutive failures of one name.
#[derive(Debug, Clone)]
pub(super) struct NameState {
    failures: u32,
    blocked_until: Instant,
    last_seen: Instant,
}

/// Failed-login bookkeeping; see the module documentation.
#[derive(Debug, Default)]
pub(super) struct Throttle {
    pub(super) clients: HashMap<ClientKey, ClientState>,
    pub(super) names: HashMap<NameKey, NameState>,
}

/// The wait imposed after `failures` consecutive failures.
pub(super) fn delay_after(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let factor = 1u32 << (failures - 1).min(16);
    FIRST_DELAY.saturating_mul(factor).min(MAX_DELAY)
}

/// True when an entry last seen at `last_seen` is forgotten at `now`.
fn forgotten(last_seen: Instant, now: Instant) -> bool {
    now.saturating_duration_since(last_seen) >= FORGET_FAILURES_AFTER
}

impl Throttle {
    /// Admits an attempt: the time it must wait before its check, or a refusal. An
    /// admitted attempt must be ended with [`Throttle::finish`] or [`Throttle::release`].
    pub(super) fn admit(
        &mut self,
        key: ClientKey,
        name: NameKey,
        now: Instant,
    ) -> Result<Duration, Refusal> {
        self.prune(now);
        let name_wait = match self.names.get(&name) {
            Some(state) if forgotten(state.last_seen, now) => {
                self.names.remove(&name);
                None
            }
            Some(state) => Some(state.blocked_until.saturating_duration_since(now)),
            None => None,
        };
        let client = self
            .clients
            .entry(key)
            .or_insert_with(|| ClientState::new(now));
        // Without a known peer every client shares one entry: serialising them, or
        // capping their names, would let anyone block everyone's login, so only the
        // delay applies there.
        if client.in_flight && key != ClientKey::Unknown {
            return Err(Refusal::Busy);
        }
        if forgotten(client.last_seen, now) {
            *client = ClientState::new(now);
        }
        if name_wait.is_none() && client.names >= MAX_NAMES_PER_CLIENT && key != ClientKey::Unknown
        {
            let since = now.saturating_duration_since(client.last_seen);
            return Err(Refusal::TooMany {
                retry_after: FORGET_FAILURES_AFTER.saturating_sub(since),
            });
        }
        let wait = client
            .blocked_until
            .saturating_duration_since(now)
            .max(name_wait.unwrap_or_default());
        if wait > MAX_HELD_WAIT {
            return Err(Refusal::TooMany { retry_after: wait });
        }
        client.in_flight = true;
        client.last_seen = now;
        Ok(wait)
    }

    /// Records the outcome of an admitted attempt.
    pub(super) fn finish(&mut self, key: ClientKey, name: NameKey, success: bool, now: Instant) {
        if success {
            self.clients.remove(&key);
            self.names.remove(&name);
            return;
        }
        let client = self
            .clients
            .entry(key)
            .or_insert_with(|| ClientState::new(now));
        client.failures = client.failures.saturating_add(1);
        client.blocked_until = now + delay_after(client.failures);
        client.last_seen = now;
        client.in_flight = false;
        if !self.names.contains_key(&name) {
            client.names = client.names.saturating_add(1);
            self.make_room_for_a_name(now);
        }
        let state = self.names.entry(name).or_insert(NameState {
            failures: 0,
            blocked_until: now,
            last_seen: now,
        });
        state.failures = state.failures.saturating_add(1);
        state.blocked_until = now + delay_after(state.failures);
        state.last_seen = now;
    }

    /// Ends an admitted attempt whose outcome is unknown (the client went away).
    pub(super) fn release(&mut self, key: ClientKey) {
        if let Some(client) = self.clients.get_mut(&key) {
            client.in_flight = false;
        }
    }

    /// Keeps at most [`MAX_TRACKED_CLIENTS`] addresses: forgotten ones first, then the
    /// least recently seen.
    fn prune(&mut self, now: Instant) {
        if self.clients.len() < MAX_TRACKED_CLIENTS {
            return;
        }
        self.clients
            .retain(|_, c| c.in_flight || !forgotten(c.last_seen, now));
        if self.clients.len() < MAX_TRACKED_CLIENTS {
            return;
        }
        let mut idle: Vec<(Instant, ClientKey)> = self
            .clients
            .iter()
            .filter(|(_, c)| !c.in_flight)
            .map(|(key, c)| (c.last_seen, *key))
            .collect();
        idle.sort_unstable_by_key(|(seen, _)| *seen);
        let excess = self.clients.len() + 1 - MAX_TRACKED_CLIENTS;
        for (_, key) in idle.into_iter().take(excess) {
            self.clients.remove(&key);
        }
    }

    /// Makes room for one more name under [`MAX_TRACKED_NAMES`]: forgotten names first,
    /// then the least recently seen (whoever's they are: a user's name is kept no longer
    /// than another, or keeping it would tell that it is one).
    fn make_room_for_a_name(&mut self, now: Instant) {
        if self.names.len() < MAX_TRACKED_NAMES {
            return;
        }
        self.names.retain(|_, n| !forgotten(n.last_seen, now));
        if self.names.len() < MAX_TRACKED_NAMES {
            return;
        }
        let mut by_age: Vec<(Instant, NameKey)> = self
            .names
            .iter()
            .map(|(key, n)| (n.last_seen, *key))
            .collect();
        by_age.sort_unstable_by_key(|(seen, _)| *seen);
        let excess = self.names.len() + 1 - MAX_TRACKED_NAMES;
        for (_, key) in by_age.into_iter().take(excess) {
            self.names.remove(&key);
        }
    }
}
