//! Optional login for the web UI and the GET API: the service (users and their password
//! checks, sessions, the failed-login throttle and the access check). Its HTTP side, the login
//! calls and the answers of the access check, is `http/login.rs`; this module imports
//! nothing from the HTTP layer.
//!
//! Users come from `$dir_base/etc/svc/user.conf` ([`crate::config::UserConfig`]). With no
//! user, nothing here changes anything: every route stays open, as in the interface.
//! With at least one user:
//!
//! - [`guard`] (in front of the router, for every route that the route table does not
//!   mark open: the login page, the assets, the login and logout calls, the webhook
//!   triggers and the signed POST endpoints, whose signatures are their authentication;
//!   everything outside `/svc`, the public directory, is open too) lets through only
//!   requests that carry a live session cookie. A refused page (`/svc`, `/svc/doc/...`)
//!   is sent to `/svc/login?next=<path>` (303); a refused API call gets 401 `login
//!   required` in the JSON wrapper ([`Access`] says which). With `public_read`, GET and
//!   HEAD requests go on without a session too.
//! - Each account has a role ([`Role`]); the HTTP layer checks it before an action done
//!   with a session, which must also carry the session's CSRF token ([`SessionInfo::csrf`],
//!   random per session, compared in constant time by [`SessionInfo::csrf_matches`]).
//! - `POST /svc/api/login` checks a name and password ([`Login::attempt`]) against the
//!   argon2 or bcrypt hash of `user.conf`, then starts a session. Every attempt costs the
//!   same, whatever the name: it verifies one hash of each cost among the users' hashes
//!   (the user's own where the name is a user's, else a dummy hash of that cost made at
//!   load, see [`crate::security::password::dummy_hash_like`]), so an unknown name, a bcrypt user's
//!   wrong password and an argon2 user's take the same time and get the same answer.
//!   The session: a random 32-byte token (hex) in the cookie `svc_session`
//!   (`Path=/svc; HttpOnly; SameSite=Strict; Max-Age=43200`, plus `Secure` behind a proxy
//!   that sets `X-Forwarded-Proto: https`).
//! - Sessions live in memory only (a restart ends them all), keyed by the SHA-256 of the
//!   token (so a lookup's timing says nothing about the token), last [`SESSION_LIFETIME`]
//!   from login, and are capped at [`MAX_SESSIONS`] (the oldest is dropped).
//! - Failed logins are throttled in memory (`login_throttle.rs`), per client address
//!   (IPv6 by /64: one attempt at a time) and per attempted name (each name its own
//!   entry, a user's or not, so the throttle tells nothing about who has an account):
//!   each attempt waits the longer of the two delays, which double with every
//!   consecutive failure ([`FIRST_DELAY`] up to [`MAX_DELAY`]). So a guesser spread over
//!   many addresses is slowed on the name it guesses, and slows no other user's login
//!   (there is no global cap, which would let anyone lock everyone out). The tables are
//!   bounded: [`MAX_TRACKED_CLIENTS`] addresses, [`MAX_TRACKED_NAMES`] names, and
//!   [`MAX_NAMES_PER_CLIENT`] new names per address. At most [`MAX_CONCURRENT_VERIFICATIONS`] hashes are checked at once (each
//!   argon2 check takes about 19 MiB and tens of milliseconds).
//!
//! Tokens and passwords are never logged; hashes never leave [`Login`].

use crate::util::lock::{MutexExt as _, RwLockExt as _};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
#[cfg(test)]
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, Uri, header};
use rand::RngCore as _;
use sha2::{Digest, Sha256};

use crate::config::UserConfig;
use crate::security::password::{dummy_hash_like, hash_cost_key, hash_password, verify_password};
use crate::security::rights::Role;

#[path = "login_throttle.rs"]
mod throttle;

use throttle::Throttle;
#[cfg(test)]
use throttle::delay_after;
pub use throttle::{ClientKey, MAX_NAMES_PER_CLIENT, MAX_TRACKED_NAMES, NameKey, Refusal};

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "svc_session";
/// Life of a session from its login (the cookie's `Max-Age`).
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// Live sessions kept at most; a login beyond it ends the oldest session.
pub const MAX_SESSIONS: usize = 10_000;
/// Wait before the attempt that follows one failed login from the same address.
pub const FIRST_DELAY: Duration = Duration::from_millis(500);
/// Longest wait between attempts of one address (the delay doubles up to it).
pub const MAX_DELAY: Duration = Duration::from_secs(30);
/// A wait up to this long is served by holding the request; a longer one is refused
/// with 429 and `Retry-After`.
pub const MAX_HELD_WAIT: Duration = Duration::from_secs(5);
/// Failures of an address are forgotten after this long without attempts.
pub const FORGET_FAILURES_AFTER: Duration = Duration::from_secs(60 * 60);
/// Addresses tracked at most by the throttle.
pub const MAX_TRACKED_CLIENTS: usize = 10_000;
/// Password hashes checked at the same time.
pub const MAX_CONCURRENT_VERIFICATIONS: usize = 2;

// ---------------------------------------------------------------------------------------
// The dummy hash.

/// Checked when no user's hash gave a cost to copy (login disabled: nothing is checked
/// then anyway), with the default argon2id parameters.
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| {
    let mut random = [0u8; 24];
    rand::rng().fill_bytes(&mut random);
    hash_password(&hex::encode(random)).unwrap_or_else(|_| FALLBACK_DUMMY_HASH.to_string())
});

/// Used only if hashing at start failed (it does not): same parameters, unknown password.
const FALLBACK_DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$\
     c3ZjZHVtbXlzYWx0MDAwMA$0lxCq0rQ9Jq0l9b+nMZz6hX7Jb8y5cQ0a6bKJ8u0k4s";

// ---------------------------------------------------------------------------------------
// Sessions.

/// The clock sessions and the throttle use; injected by tests.
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// SHA-256 of a well-formed token (64 lower-case hex digits); `None` otherwise.
fn token_key(token: &str) -> Option<[u8; 32]> {
    let well_formed = token.len() == 64
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    well_formed.then(|| Sha256::digest(token.as_bytes()).into())
}

#[derive(Debug)]
struct Session {
    user: String,
    /// The CSRF token of the session (hex), handed out by `GET /svc/api/session`.
    csrf: String,
    expires: Instant,
    seq: u64,
}

/// A live session as the HTTP layer sees it: whose it is, the account's role now (a
/// reload that changes the role applies to live sessions at once), and its CSRF token.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The account's name.
    pub name: String,
    /// The account's role.
    pub role: Role,
    /// The token an action done with this session must carry in `X-Svc-Csrf`.
    pub csrf: String,
}

/// Never shows the CSRF token.
impl fmt::Debug for SessionInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionInfo")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl SessionInfo {
    /// True when `given` (the `X-Svc-Csrf` header) is this session's token, compared in
    /// constant time.
    pub fn csrf_matches(&self, given: Option<&[u8]>) -> bool {
        use subtle::ConstantTimeEq as _;
        given.is_some_and(|given| bool::from(given.ct_eq(self.csrf.as_bytes())))
    }
}

/// 32 random bytes in hex.
fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Live sessions by token hash, with their order of creation. The lifetime is fixed, so
/// the order of creation is also the order of expiry.
#[derive(Debug, Default)]
struct Sessions {
    by_key: HashMap<[u8; 32], Session>,
    order: BTreeMap<u64, [u8; 32]>,
    next_seq: u64,
}

impl Sessions {
    /// Drops expired sessions, then the oldest until there is room for one more.
    fn make_room(&mut self, now: Instant) {
        while let Some((_, key)) = self.order.first_key_value() {
            let expired = self.by_key.get(key).is_none_or(|s| s.expires <= now);
            let full = self.by_key.len() >= MAX_SESSIONS;
            if !expired && !full {
                break;
            }
            if let Some((_, key)) = self.order.pop_first() {
                self.by_key.remove(&key);
            }
        }
    }

    fn insert(&mut self, user: &str, now: Instant) -> String {
        self.make_room(now);
        let token = random_hex();
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.insert(seq, key);
        self.by_key.insert(
            key,
            Session {
                user: user.to_string(),
                csrf: random_hex(),
                expires: now + SESSION_LIFETIME,
                seq,
            },
        );
        token
    }

    /// The user and CSRF token of a live session.
    fn get(&mut self, token: &str, now: Instant) -> Option<(String, String)> {
        let key = token_key(token)?;
        let session = self.by_key.get(&key)?;
        if session.expires <= now {
            self.remove_key(&key);
            return None;
        }
        Some((session.user.clone(), session.csrf.clone()))
    }

    fn remove_key(&mut self, key: &[u8; 32]) -> Option<Session> {
        let session = self.by_key.remove(key)?;
        self.order.remove(&session.seq);
        Some(session)
    }

    fn remove(&mut self, token: &str) -> Option<String> {
        let key = token_key(token)?;
        self.remove_key(&key).map(|s| s.user)
    }

    fn retain_users(&mut self, keep: impl Fn(&str) -> bool) {
        let gone: Vec<[u8; 32]> = self
            .by_key
            .iter()
            .filter(|(_, s)| !keep(&s.user))
            .map(|(key, _)| *key)
            .collect();
        for key in gone {
            self.remove_key(&key);
        }
    }

    fn len(&self) -> usize {
        self.by_key.len()
    }
}

// ---------------------------------------------------------------------------------------
// Login: users, sessions and throttle together.

/// What [`Login`] keeps of a configured user.
#[derive(Clone)]
struct UserEntry {
    hash: Arc<str>,
    /// What checking `hash` costs ([`hash_cost_key`]).
    cost: Option<String>,
    role: Role,
}

/// A dummy hash for one cost among the users' hashes.
#[derive(Clone)]
struct Dummy {
    cost: String,
    hash: Arc<str>,
}

/// Users, live sessions and the failed-login throttle of one service.
pub struct Login {
    /// Name to hash and role.
    users: RwLock<HashMap<String, UserEntry>>,
    /// One dummy hash per cost among the users' hashes, in a fixed order: what each
    /// attempt verifies (a user's own hash standing in for the dummy of its cost).
    dummies: RwLock<Vec<Dummy>>,
    sessions: Mutex<Sessions>,
    throttle: Mutex<Throttle>,
    verifying: tokio::sync::Semaphore,
    /// Hashes verified, real and dummy (an attempt verifies one per cost).
    checks: AtomicU64,
    clock: Clock,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("users", &self.users.reading().len())
            .field("sessions", &self.sessions.locked().len())
            .finish_non_exhaustive()
    }
}

impl Default for Login {
    /// No users: login disabled.
    fn default() -> Self {
        Login::new(&[])
    }
}

/// Ends an admitted attempt when its request goes away before the outcome (its account
/// is not charged: only a checked password counts as a failure).
struct Admitted<'a> {
    login: &'a Login,
    key: ClientKey,
    finished: bool,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.login.throttle.locked().release(self.key);
        }
    }
}

impl Login {
    /// Login for `users` (none: disabled), on the system clock.
    pub fn new(users: &[UserConfig]) -> Login {
        Login::with_clock(users, Arc::new(Instant::now))
    }

    /// As [`Login::new`] with another clock.
    pub fn with_clock(users: &[UserConfig], clock: Clock) -> Login {
        let login = Login {
            users: RwLock::new(HashMap::new()),
            dummies: RwLock::new(Vec::new()),
            sessions: Mutex::new(Sessions::default()),
            throttle: Mutex::new(Throttle::default()),
            verifying: tokio::sync::Semaphore::new(MAX_CONCURRENT_VERIFICATIONS),
            checks: AtomicU64::new(0),
            clock,
        };
        login.set_users(users);
        login
    }

    /// True when at least one user is configured.
    pub fn enabled(&self) -> bool {
        !self.users.reading().is_empty()
    }

    /// Replaces the users (on reload). Sessions of users removed, or whose hash changed,
    /// end.
    pub fn set_users(&self, users: &[UserConfig]) {
        let new: HashMap<String, UserEntry> = users
            .iter()
            .map(|u| {
                let account = UserEntry {
                    hash: Arc::from(u.password_hash.as_str()),
                    cost: hash_cost_key(&u.password_hash),
                    role: u.role,
                };
                (u.name.clone(), account)
            })
            .collect();
        if !new.is_empty() {
            LazyLock::force(&DUMMY_HASH);
        }
        self.set_dummies(&new);
        let mut current = self.users.write().unwrap_or_else(|e| e.into_inner());
        // A changed role needs no new login: it is looked up with every request.
        let unchanged = |name: &str| {
            current
                .get(name)
                .is_some_and(|old| new.get(name).is_some_and(|a| a.hash == old.hash))
        };
        self.sessions.locked().retain_users(unchanged);
        *current = new;
    }

    /// Makes one dummy hash per cost among `users`' hashes, keeping those of costs
    /// already known (a reload pays only for new costs).
    fn set_dummies(&self, users: &HashMap<String, UserEntry>) {
        let old = self.dummies.reading().clone();
        let mut dummies: Vec<Dummy> = Vec::new();
        for user in users.values() {
            let Some(cost) = &user.cost else { continue };
            if dummies.iter().any(|d| &d.cost == cost) {
                continue;
            }
            let kept = old.iter().find(|d| &d.cost == cost).cloned();
            let made = || {
                dummy_hash_like(&user.hash).map(|hash| Dummy {
                    cost: cost.clone(),
                    hash: Arc::from(hash),
                })
            };
            if let Some(dummy) = kept.or_else(made) {
                dummies.push(dummy);
            }
        }
        dummies.sort_by(|a, b| a.cost.cmp(&b.cost));
        *self.dummies.write().unwrap_or_else(|e| e.into_inner()) = dummies;
    }

    /// The hashes an attempt for `name` verifies, in order, and which of them is the
    /// user's (`None` for a name that is no user's): one per cost, the same costs for
    /// every name.
    fn hashes_for(&self, name: &str) -> (Vec<Arc<str>>, Option<usize>) {
        let user = self.users.reading().get(name).cloned();
        let dummies = self.dummies.reading();
        let mut own = None;
        let mut hashes: Vec<Arc<str>> = Vec::with_capacity(dummies.len().max(1));
        for dummy in dummies.iter() {
            match &user {
                Some(user) if own.is_none() && user.cost.as_ref() == Some(&dummy.cost) => {
                    own = Some(hashes.len());
                    hashes.push(user.hash.clone());
                }
                _ => hashes.push(dummy.hash.clone()),
            }
        }
        if let (Some(user), None) = (&user, own) {
            // A hash without a cost key (which the configuration refuses) matches
            // nothing; checked for the name's answer all the same.
            own = Some(hashes.len());
            hashes.push(user.hash.clone());
        }
        if hashes.is_empty() {
            hashes.push(Arc::from(DUMMY_HASH.as_str()));
        }
        (hashes, own)
    }

    /// The costs an attempt for `name` pays (the tests compare names).
    #[cfg(test)]
    pub(crate) fn costs_for(&self, name: &str) -> Vec<Option<String>> {
        let (hashes, _) = self.hashes_for(name);
        hashes.iter().map(|h| hash_cost_key(h)).collect()
    }

    /// The user of a live session `token`, whether or not the account still exists: the
    /// session table's own view, for its tests (the service asks [`Login::session`]).
    #[cfg(test)]
    pub(crate) fn session_user(&self, token: &str) -> Option<String> {
        let now = (self.clock)();
        self.sessions.locked().get(token, now).map(|(name, _)| name)
    }

    /// The live session `token`, with its account's current role.
    pub fn session(&self, token: &str) -> Option<SessionInfo> {
        let now = (self.clock)();
        let (name, csrf) = self.sessions.locked().get(token, now)?;
        let role = self.users.reading().get(&name)?.role;
        Some(SessionInfo { name, role, csrf })
    }

    /// Starts a session for `user` and returns its token.
    pub fn create_session(&self, user: &str) -> String {
        let now = (self.clock)();
        self.sessions.locked().insert(user, now)
    }

    /// Ends the session `token`; returns its user when it was live.
    pub fn end_session(&self, token: &str) -> Option<String> {
        self.sessions.locked().remove(token)
    }

    /// Number of live sessions (expired ones may be counted until they are looked up).
    pub fn session_count(&self) -> usize {
        self.sessions.locked().len()
    }

    /// Hashes verified so far, an unknown name's included (one per cost per attempt).
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }

    /// The first live session of the cookies in `headers`.
    pub fn session_of(&self, headers: &HeaderMap) -> Option<SessionInfo> {
        session_cookies(headers).find_map(|token| self.session(token))
    }

    /// Checks `name` and `password`, throttled; see the module documentation. On success
    /// the caller starts the session.
    pub async fn attempt(
        &self,
        client: ClientKey,
        name: &str,
        password: &str,
    ) -> Result<(), Refusal> {
        let name_key = NameKey::of(name);
        let wait = self
            .throttle
            .locked()
            .admit(client, name_key, (self.clock)())?;
        let mut admitted = Admitted {
            login: self,
            key: client,
            finished: false,
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        // Looked up after the wait: a reload meanwhile counts.
        let (hashes, own) = self.hashes_for(name);
        let known = own.is_some();
        let matches = {
            let _permit = self.verifying.acquire().await;
            let password = password.to_string();
            self.checks
                .fetch_add(hashes.len() as u64, Ordering::Relaxed);
            // Every hash is verified, the user's one among them: no early end, so the
            // time does not depend on which one is the user's, or on whether one is.
            let verified = tokio::task::spawn_blocking(move || {
                hashes
                    .iter()
                    .map(|hash| verify_password(&password, hash))
                    .collect::<Vec<bool>>()
            })
            .await
            .unwrap_or_default();
            own.is_some_and(|at| verified.get(at).copied().unwrap_or(false))
        };
        let success = known && matches;
        self.throttle
            .locked()
            .finish(client, name_key, success, (self.clock)());
        admitted.finished = true;
        if success {
            Ok(())
        } else {
            Err(Refusal::Invalid { known })
        }
    }
}

// ---------------------------------------------------------------------------------------
// The session cookie and the access check.

/// Values of every `svc_session` cookie of a request.
pub fn session_cookies(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name.trim() == SESSION_COOKIE).then(|| value.trim().trim_matches('"'))
        })
}

/// The `Set-Cookie` value of a new session.
pub fn session_cookie(token: &str, secure: bool) -> String {
    format!(
        "{SESSION_COOKIE}={token}; Path=/svc; HttpOnly; SameSite=Strict; Max-Age={}{}",
        SESSION_LIFETIME.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn cleared_cookie(secure: bool) -> String {
    format!(
        "{SESSION_COOKIE}=; Path=/svc; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}

/// Where a login may send the browser afterwards: a path below `/svc` (not the login
/// page itself), else `/svc/`.
pub fn safe_next(next: &str) -> String {
    let below_svc = next == "/svc"
        || ["/svc/", "/svc?", "/svc#"]
            .iter()
            .any(|p| next.starts_with(p));
    let clean = !next.contains('\\') && !next.chars().any(|c| c.is_control() || c == ' ');
    let login_page = next.starts_with("/svc/login");
    if below_svc && clean && !login_page {
        next.to_string()
    } else {
        "/svc/".to_string()
    }
}

/// `/svc/login?next=<path and query, percent-encoded>`.
fn login_location(path_and_query: &str) -> String {
    let next: String = form_urlencoded::byte_serialize(path_and_query.as_bytes()).collect();
    format!("/svc/login?next={next}")
}

/// What the access check decided about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Login is disabled: the request goes on.
    Open,
    /// The request carries a live session: it goes on as its user's.
    User(SessionInfo),
    /// `public_read` lets a GET or HEAD go on without a session.
    Anonymous,
    /// A page asked for without a session: the browser is sent to `location` (the login
    /// page, with the page to come back to).
    LoginFirst {
        /// `/svc/login?next=<path and query>`.
        location: String,
    },
    /// An API call without a session: refused (`login required`).
    Refused,
}

/// The access check of the front (`App` in the HTTP layer), for a request to a route that
/// needs a session: with login enabled, it goes on only with a live session, or, with
/// `public_read`, as a GET or HEAD; otherwise pages (outside `/svc/api/`, GET or HEAD)
/// are sent to the login page and API calls refused. The HTTP layer turns a refusal into
/// its answer.
pub fn guard(
    login: &Login,
    public_read: bool,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Access {
    if !login.enabled() {
        return Access::Open;
    }
    if let Some(session) = login.session_of(headers) {
        return Access::User(session);
    }
    let reads = *method == Method::GET || *method == Method::HEAD;
    if public_read && reads {
        return Access::Anonymous;
    }
    let path = uri.path();
    let is_page = !path.starts_with("/svc/api/") && reads;
    if is_page {
        let target = uri.path_and_query().map_or(path, |pq| pq.as_str());
        return Access::LoginFirst {
            location: login_location(target),
        };
    }
    Access::Refused
}

#[cfg(test)]
#[path = "login_tests.rs"]
mod tests;
