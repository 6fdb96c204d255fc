//! Tests of [`super`]: the dummy hash, sessions on a fake clock, the throttle, the session
//! cookie and the access check.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argon2::Algorithm;

use crate::util::lock::MutexExt as _;
use axum::http::HeaderValue;

use super::*;
use crate::security::password::{cheap_argon2, check_password_hash};

/// A clock that moves only when told to.
#[derive(Clone)]
struct FakeClock {
    start: Instant,
    offset: Arc<Mutex<Duration>>,
}

impl FakeClock {
    fn new() -> FakeClock {
        FakeClock {
            start: Instant::now(),
            offset: Arc::new(Mutex::new(Duration::ZERO)),
        }
    }

    fn now(&self) -> Instant {
        self.start + *self.offset.lock().expect("clock lock")
    }

    fn advance(&self, by: Duration) {
        *self.offset.lock().expect("clock lock") += by;
    }

    fn clock(&self) -> Clock {
        let me = self.clone();
        Arc::new(move || me.now())
    }
}

fn user(name: &str, hash: &str) -> UserConfig {
    UserConfig {
        name: name.to_string(),
        password_hash: hash.to_string(),
        role: crate::security::rights::Role::Viewer,
        file: PathBuf::from("/etc/svc/user.conf"),
    }
}

const IP1: ClientKey = ClientKey::Ip(IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1)));
const IP2: ClientKey = ClientKey::Ip(IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2)));

// ----- the dummy hash ------------------------------------------------------------------

#[test]
fn the_dummy_hash_costs_as_much_as_a_real_one() {
    // Same algorithm and parameters as hash_password: an unknown name costs one full
    // argon2id check, like a wrong password.
    let real = hash_password("x").expect("hash");
    let params = |h: &str| h.split('$').take(4).collect::<Vec<_>>().join("$");
    assert_eq!(params(&DUMMY_HASH), params(&real));
    assert_eq!(check_password_hash(&DUMMY_HASH), Ok(()));
    assert_eq!(params(FALLBACK_DUMMY_HASH), params(&real));
    assert_eq!(check_password_hash(FALLBACK_DUMMY_HASH), Ok(()));
}

#[tokio::test]
async fn an_unknown_name_is_checked_against_the_dummy_hash() {
    let login = Login::new(&[user("ann", &cheap_argon2(Algorithm::Argon2id, "pw"))]);
    assert!(login.enabled());
    assert_eq!(login.attempt(IP1, "ann", "pw").await, Ok(()));
    assert_eq!(login.checks(), 1);
    assert_eq!(
        login.attempt(IP2, "bob", "pw").await,
        Err(Refusal::Invalid { known: false })
    );
    assert_eq!(login.checks(), 2, "the unknown name cost a hash check too");
    // Whatever the password, an unknown name is refused after its check (counted rather
    // than timed: the dummy is as cheap as ann's test hash, on purpose).
    let unknown = login.attempt(IP1, "nobody", "whatever").await;
    assert_eq!(unknown, Err(Refusal::Invalid { known: false }));
    assert_eq!(login.checks(), 3);
    assert_eq!(
        login.attempt(ClientKey::Unknown, "ann", "wrong").await,
        Err(Refusal::Invalid { known: true })
    );
}

// ----- sessions ------------------------------------------------------------------------

#[test]
fn sessions_last_twelve_hours_from_login() {
    let clock = FakeClock::new();
    let login = Login::with_clock(&[], clock.clock());
    let token = login.create_session("ann");
    assert_eq!(token.len(), 64);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(login.session_user(&token).as_deref(), Some("ann"));
    clock.advance(SESSION_LIFETIME - Duration::from_secs(1));
    assert_eq!(login.session_user(&token).as_deref(), Some("ann"));
    clock.advance(Duration::from_secs(1));
    assert_eq!(login.session_user(&token), None);
    assert_eq!(login.session_count(), 0, "an expired session is dropped");
    // Expired sessions also go when a new one is made.
    let _old = login.create_session("ann");
    clock.advance(SESSION_LIFETIME);
    let fresh = login.create_session("bob");
    assert_eq!(login.session_count(), 1);
    assert_eq!(login.session_user(&fresh).as_deref(), Some("bob"));
}

#[test]
fn tokens_are_random_and_looked_up_exactly() {
    let login = Login::default();
    let a = login.create_session("ann");
    let b = login.create_session("ann");
    assert_ne!(a, b);
    assert_eq!(login.session_user(&a.to_uppercase()), None);
    assert_eq!(login.session_user(&a[..63]), None);
    assert_eq!(login.session_user(""), None);
    let mut other = a.clone().into_bytes();
    other[0] = if other[0] == b'0' { b'1' } else { b'0' };
    let other = String::from_utf8(other).expect("hex");
    assert_eq!(login.session_user(&other), None);
    assert_eq!(login.end_session(&a).as_deref(), Some("ann"));
    assert_eq!(login.session_user(&a), None);
    assert_eq!(login.session_user(&b).as_deref(), Some("ann"));
    assert_eq!(login.end_session(&a), None);
}

#[test]
fn the_session_cap_drops_the_oldest() {
    let login = Login::default();
    let first = login.create_session("first");
    let second = login.create_session("second");
    for _ in 2..MAX_SESSIONS {
        login.create_session("many");
    }
    assert_eq!(login.session_count(), MAX_SESSIONS);
    assert_eq!(login.session_user(&first).as_deref(), Some("first"));
    let newest = login.create_session("newest");
    assert_eq!(login.session_count(), MAX_SESSIONS);
    assert_eq!(login.session_user(&first), None, "the oldest went");
    assert_eq!(login.session_user(&second).as_deref(), Some("second"));
    assert_eq!(login.session_user(&newest).as_deref(), Some("newest"));
}

#[test]
fn new_users_end_the_sessions_of_removed_or_changed_users() {
    let ann = user("ann", &cheap_argon2(Algorithm::Argon2id, "a"));
    let bob = user("bob", &cheap_argon2(Algorithm::Argon2id, "b"));
    let cy = user("cy", &cheap_argon2(Algorithm::Argon2id, "c"));
    let login = Login::new(&[ann.clone(), bob.clone(), cy.clone()]);
    let (a, b, c) = (
        login.create_session("ann"),
        login.create_session("bob"),
        login.create_session("cy"),
    );
    let bob_new = user("bob", &cheap_argon2(Algorithm::Argon2i, "b2"));
    login.set_users(&[ann, bob_new]);
    assert_eq!(login.session_user(&a).as_deref(), Some("ann"));
    assert_eq!(login.session_user(&b), None, "bob's password changed");
    assert_eq!(login.session_user(&c), None, "cy was removed");
    login.set_users(&[]);
    assert!(!login.enabled());
    assert_eq!(login.session_user(&a), None);
}

// ----- throttle ------------------------------------------------------------------------

/// A name of its own for each address, so that only the address's entry counts.
fn own(key: ClientKey) -> NameKey {
    NameKey::of(&format!("user-at-{key}"))
}

#[test]
fn the_delay_doubles_with_each_failure_up_to_the_cap() {
    let delays: Vec<Duration> = (0..10).map(delay_after).collect();
    assert_eq!(delays[0], Duration::ZERO);
    assert_eq!(delays[1], FIRST_DELAY);
    assert_eq!(delays[2], FIRST_DELAY * 2);
    assert_eq!(delays[3], FIRST_DELAY * 4);
    assert!(delays.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(delay_after(9), MAX_DELAY);
    assert_eq!(delay_after(u32::MAX), MAX_DELAY);
}

#[test]
fn failures_of_one_address_slow_down_only_that_address() {
    let clock = FakeClock::new();
    let mut throttle = Throttle::default();
    let now = clock.now();
    assert_eq!(throttle.admit(IP1, own(IP1), now), Ok(Duration::ZERO));
    // One attempt at a time per address.
    assert_eq!(throttle.admit(IP1, own(IP1), now), Err(Refusal::Busy));
    throttle.finish(IP1, own(IP1), false, now);
    assert_eq!(throttle.admit(IP1, own(IP1), now), Ok(FIRST_DELAY));
    throttle.finish(IP1, own(IP1), false, now);
    assert_eq!(throttle.admit(IP1, own(IP1), now), Ok(FIRST_DELAY * 2));
    throttle.finish(IP1, own(IP1), false, now);
    assert_eq!(
        throttle.admit(IP2, own(IP2), now),
        Ok(Duration::ZERO),
        "other addresses"
    );
    throttle.finish(IP2, own(IP2), true, now);
    // The wait counts from the last failure.
    clock.advance(FIRST_DELAY);
    assert_eq!(
        throttle.admit(IP1, own(IP1), clock.now()),
        Ok(FIRST_DELAY * 3)
    );
    throttle.release(IP1);
    // Past MAX_HELD_WAIT the attempt is refused with the time to wait.
    for _ in 0..2 {
        let now = clock.now();
        throttle.admit(IP1, own(IP1), now).expect("admitted");
        throttle.finish(IP1, own(IP1), false, now);
    }
    let now = clock.now();
    match throttle.admit(IP1, own(IP1), now) {
        Err(Refusal::TooMany { retry_after }) => assert_eq!(retry_after, delay_after(5)),
        other => panic!("expected TooMany, got {other:?}"),
    }
    // A success forgets the failures.
    clock.advance(MAX_DELAY);
    assert!(throttle.admit(IP1, own(IP1), clock.now()).is_ok());
    throttle.finish(IP1, own(IP1), true, clock.now());
    assert_eq!(
        throttle.admit(IP1, own(IP1), clock.now()),
        Ok(Duration::ZERO)
    );
    throttle.finish(IP1, own(IP1), false, clock.now());
    // So does an hour without attempts.
    clock.advance(FORGET_FAILURES_AFTER);
    assert_eq!(
        throttle.admit(IP1, own(IP1), clock.now()),
        Ok(Duration::ZERO)
    );
}

#[test]
fn a_released_attempt_frees_its_address() {
    let now = Instant::now();
    let mut throttle = Throttle::default();
    assert!(throttle.admit(IP1, own(IP1), now).is_ok());
    throttle.release(IP1);
    assert_eq!(throttle.admit(IP1, own(IP1), now), Ok(Duration::ZERO));
}

#[test]
fn attempts_without_a_known_address_share_the_delay_but_not_the_lock() {
    let now = Instant::now();
    let mut throttle = Throttle::default();
    assert!(
        throttle
            .admit(ClientKey::Unknown, own(ClientKey::Unknown), now)
            .is_ok()
    );
    assert!(
        throttle
            .admit(ClientKey::Unknown, own(ClientKey::Unknown), now)
            .is_ok()
    );
    throttle.finish(ClientKey::Unknown, own(ClientKey::Unknown), false, now);
    assert_eq!(
        throttle.admit(ClientKey::Unknown, own(ClientKey::Unknown), now),
        Ok(FIRST_DELAY)
    );
}

#[test]
fn a_spread_out_attack_slows_its_name_and_no_other() {
    let clock = FakeClock::new();
    let mut throttle = Throttle::default();
    let alice = NameKey::of("alice");
    let bob = NameKey::of("bob");
    let address =
        |i: u32| ClientKey::from_addr(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i)));
    // Guesses for alice, each from a new address: the name's delay grows anyway.
    let mut expected = Duration::ZERO;
    for i in 0..5 {
        let now = clock.now();
        assert_eq!(throttle.admit(address(i), alice, now), Ok(expected));
        throttle.finish(address(i), alice, false, now);
        expected = delay_after(i + 1);
    }
    match throttle.admit(address(100), alice, clock.now()) {
        Err(Refusal::TooMany { retry_after }) => assert_eq!(retry_after, delay_after(5)),
        other => panic!("expected TooMany, got {other:?}"),
    }
    // Bob logs in at once, from a new address or from one the attacker used.
    assert_eq!(
        throttle.admit(address(200), bob, clock.now()),
        Ok(Duration::ZERO)
    );
    throttle.finish(address(200), bob, true, clock.now());
    // Every other name has its own entry, a user's or not.
    for (i, name) in ["nobody-1", "nobody-2"].into_iter().enumerate() {
        let at = address(300 + i as u32);
        assert_eq!(
            throttle.admit(at, NameKey::of(name), clock.now()),
            Ok(Duration::ZERO)
        );
        throttle.finish(at, NameKey::of(name), false, clock.now());
    }
    assert_eq!(
        throttle.admit(address(310), NameKey::of("nobody-1"), clock.now()),
        Ok(FIRST_DELAY)
    );
    throttle.release(address(310));
    assert_eq!(throttle.names.len(), 3, "alice and the two other names");
    // A success of alice's (after the wait) clears her name.
    clock.advance(MAX_DELAY);
    assert!(throttle.admit(address(400), alice, clock.now()).is_ok());
    throttle.finish(address(400), alice, true, clock.now());
    assert_eq!(
        throttle.admit(address(401), alice, clock.now()),
        Ok(Duration::ZERO)
    );
}

#[tokio::test]
async fn names_are_throttled_alike_whether_or_not_they_are_users() {
    // ann is a user; the other names are not. Each failed name slows only itself, so a
    // guesser learns nothing from the delays: before, all unknown names shared one
    // entry, and a failure for one slowed the next unknown name from anywhere.
    let login = Login::new(&[user("ann", &cheap_argon2(Algorithm::Argon2id, "pw"))]);
    let address =
        |i: u32| ClientKey::from_addr(IpAddr::V4(std::net::Ipv4Addr::from(0x0c00_0000 + i)));
    for (i, name) in ["ann", "nobody-1"].into_iter().enumerate() {
        assert!(
            login
                .attempt(address(i as u32), name, "wrong")
                .await
                .is_err()
        );
    }
    let started = Instant::now();
    let other = login.attempt(address(10), "nobody-2", "wrong").await;
    assert_eq!(other, Err(Refusal::Invalid { known: false }));
    assert!(
        started.elapsed() < FIRST_DELAY,
        "another unknown name waited {:?}",
        started.elapsed()
    );
    // The failed names themselves wait alike, from fresh addresses.
    let mut waits = Vec::new();
    for (i, name) in ["ann", "nobody-1"].into_iter().enumerate() {
        let mut throttle = login.throttle.locked();
        waits.push(throttle.admit(address(20 + i as u32), NameKey::of(name), Instant::now()));
        throttle.release(address(20 + i as u32));
    }
    match (waits[0], waits[1]) {
        (Ok(ann), Ok(nobody)) => {
            assert!(ann > Duration::ZERO && nobody > Duration::ZERO, "{waits:?}");
            // Apart only by the time between the two failures.
            let apart = ann.abs_diff(nobody);
            assert!(apart < Duration::from_millis(200), "{waits:?}");
        }
        other => panic!("both admitted after a wait: {other:?}"),
    }
}

#[test]
fn the_throttle_tracks_a_bounded_number_of_names() {
    let now = Instant::now();
    let mut throttle = Throttle::default();
    // Spread over addresses, so that no address reaches its own cap.
    for i in 0..(MAX_TRACKED_NAMES as u32 + 50) {
        let key = ClientKey::from_addr(IpAddr::V4(std::net::Ipv4Addr::from(0x0d00_0000 + i / 50)));
        let name = NameKey::of(&format!("guess-{i}"));
        throttle.admit(key, name, now).expect("admitted");
        throttle.finish(key, name, false, now);
        throttle.clients.remove(&key);
    }
    assert!(
        throttle.names.len() <= MAX_TRACKED_NAMES,
        "{}",
        throttle.names.len()
    );
}

#[test]
fn one_address_brings_a_bounded_number_of_names() {
    let clock = FakeClock::new();
    let mut throttle = Throttle::default();
    for i in 0..MAX_NAMES_PER_CLIENT {
        let name = NameKey::of(&format!("guess-{i}"));
        // Past the address's own delay: only the names' cap is tested here.
        clock.advance(MAX_DELAY);
        throttle.admit(IP1, name, clock.now()).expect("admitted");
        throttle.finish(IP1, name, false, clock.now());
    }
    clock.advance(MAX_DELAY);
    // A new name, a user's or not: refused alike.
    for name in ["ann", "another-guess"] {
        match throttle.admit(IP1, NameKey::of(name), clock.now()) {
            Err(Refusal::TooMany { retry_after }) => {
                assert!(retry_after <= FORGET_FAILURES_AFTER, "{retry_after:?}")
            }
            other => panic!("expected TooMany for {name}, got {other:?}"),
        }
    }
    assert_eq!(throttle.names.len(), MAX_NAMES_PER_CLIENT as usize);
    // A name it has tried already is still let through (after its delay) ...
    assert!(
        throttle
            .admit(IP1, NameKey::of("guess-0"), clock.now())
            .is_ok()
    );
    throttle.release(IP1);
    // ... another address is not affected, and an hour later the address is forgotten.
    assert!(
        throttle
            .admit(IP2, NameKey::of("another-guess"), clock.now())
            .is_ok()
    );
    throttle.release(IP2);
    clock.advance(FORGET_FAILURES_AFTER);
    assert!(
        throttle
            .admit(IP1, NameKey::of("another-guess"), clock.now())
            .is_ok()
    );
}

#[test]
fn every_attempt_pays_the_same_hash_costs_whatever_the_name() {
    // A bcrypt user and an argon2 user: an unknown name, bob's and ann's names each
    // verify one bcrypt hash of bob's cost and one argon2 hash of ann's parameters, so
    // none answers faster than another (before, an unknown name cost one argon2 check
    // and a bcrypt user's wrong password one cheap bcrypt check).
    let login = Login::new(&[
        user("ann", &cheap_argon2(Algorithm::Argon2id, "pw")),
        user("bob", &bcrypt::hash("pw", 4).expect("bcrypt hash")),
    ]);
    let costs = login.costs_for("nobody");
    assert_eq!(costs.len(), 2, "{costs:?}");
    assert!(costs.iter().all(Option::is_some), "{costs:?}");
    assert_eq!(login.costs_for("ann"), costs);
    assert_eq!(login.costs_for("bob"), costs);
    // Only bcrypt users: the dummy is bcrypt of their cost, not the default argon2id.
    let login = Login::new(&[user("bob", &bcrypt::hash("pw", 5).expect("bcrypt hash"))]);
    assert_eq!(
        login.costs_for("nobody"),
        [Some("bcrypt$cost=5".to_string())]
    );
    assert_eq!(login.costs_for("bob"), login.costs_for("nobody"));
}

#[tokio::test]
async fn each_attempt_verifies_every_cost_and_logs_in_only_its_user() {
    let login = Login::new(&[
        user("ann", &cheap_argon2(Algorithm::Argon2id, "ann-pw")),
        user("bob", &bcrypt::hash("bob-pw", 4).expect("bcrypt hash")),
    ]);
    assert_eq!(login.attempt(IP1, "ann", "ann-pw").await, Ok(()));
    assert_eq!(login.attempt(IP1, "bob", "bob-pw").await, Ok(()));
    assert_eq!(login.checks(), 4, "two hashes per attempt");
    assert_eq!(
        login.attempt(IP1, "bob", "ann-pw").await,
        Err(Refusal::Invalid { known: true })
    );
    assert_eq!(
        login.attempt(IP2, "nobody", "ann-pw").await,
        Err(Refusal::Invalid { known: false })
    );
    assert_eq!(login.checks(), 8);
}

#[test]
fn the_throttle_tracks_a_bounded_number_of_addresses() {
    let now = Instant::now();
    let mut throttle = Throttle::default();
    for i in 0..(MAX_TRACKED_CLIENTS as u32 + 50) {
        let key = ClientKey::from_addr(IpAddr::V4(std::net::Ipv4Addr::from(0x0b00_0000 + i)));
        throttle.admit(key, own(key), now).expect("admitted");
        throttle.release(key);
    }
    assert!(throttle.clients.len() <= MAX_TRACKED_CLIENTS);
}

#[test]
fn ipv6_addresses_are_grouped_by_their_64_bit_prefix() {
    let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
    let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().expect("ip");
    let c: IpAddr = "2001:db8:1:3::1".parse().expect("ip");
    assert_eq!(ClientKey::from_addr(a), ClientKey::from_addr(b));
    assert_ne!(ClientKey::from_addr(a), ClientKey::from_addr(c));
    let mapped: IpAddr = "::ffff:192.0.2.1".parse().expect("ip");
    assert_eq!(ClientKey::from_addr(mapped), IP1);
}

#[tokio::test]
async fn a_wrong_password_delays_the_next_attempt_of_that_address() {
    let login = Login::new(&[user("ann", &cheap_argon2(Algorithm::Argon2id, "pw"))]);
    assert!(login.attempt(IP1, "ann", "nope").await.is_err());
    let started = Instant::now();
    assert_eq!(login.attempt(IP1, "ann", "pw").await, Ok(()));
    assert!(
        started.elapsed() >= FIRST_DELAY - Duration::from_millis(50),
        "{:?}",
        started.elapsed()
    );
    // The success cleared the address.
    let started = Instant::now();
    assert_eq!(login.attempt(IP1, "ann", "pw").await, Ok(()));
    assert!(started.elapsed() < FIRST_DELAY, "{:?}", started.elapsed());
}

// ----- the session cookie and the access check -----------------------------------------

#[test]
fn session_cookie_attributes() {
    let cookie = session_cookie("ab12", false);
    assert_eq!(
        cookie,
        "svc_session=ab12; Path=/svc; HttpOnly; SameSite=Strict; Max-Age=43200"
    );
    assert!(session_cookie("ab12", true).ends_with("; Secure"));
    let cleared = cleared_cookie(false);
    assert!(cleared.starts_with("svc_session=;"));
    assert!(cleared.contains("Max-Age=0"));
    assert!(cleared.contains("Path=/svc"));
    assert!(cleared_cookie(true).contains("Secure"));
}

#[test]
fn the_session_cookie_is_found_among_others() {
    // A session counts only while its user is configured (its role comes from there).
    let login = Login::new(&[user("ann", &cheap_argon2(Algorithm::Argon2id, "pw"))]);
    let token = login.create_session("ann");
    let mut headers = HeaderMap::new();
    headers.append(
        header::COOKIE,
        HeaderValue::from_static("theme=dark; svc_session=0000"),
    );
    assert_eq!(login.session_of(&headers).map(|s| s.name), None);
    headers.append(
        header::COOKIE,
        HeaderValue::from_str(&format!("a=b; svc_session={token}; c=d")).expect("header"),
    );
    assert_eq!(
        login.session_of(&headers).map(|s| s.name).as_deref(),
        Some("ann")
    );
    let names: Vec<&str> = session_cookies(&headers).collect();
    assert_eq!(names, vec!["0000", token.as_str()]);
}

#[test]
fn the_access_check_sends_pages_to_the_login_page_and_refuses_api_calls() {
    let get = Method::GET;
    let no_cookie = HeaderMap::new();
    let uri = |text: &str| text.parse::<Uri>().expect("uri");
    // Without users every request goes on.
    let disabled = Login::default();
    assert_eq!(
        guard(
            &disabled,
            false,
            &get,
            &uri("/svc/api/environment"),
            &no_cookie
        ),
        Access::Open
    );
    let login = Login::new(&[user("ann", &cheap_argon2(Algorithm::Argon2id, "pw"))]);
    assert_eq!(
        guard(&login, false, &get, &uri("/svc/doc/api?x=1"), &no_cookie),
        Access::LoginFirst {
            location: "/svc/login?next=%2Fsvc%2Fdoc%2Fapi%3Fx%3D1".into()
        }
    );
    assert_eq!(
        guard(&login, false, &Method::HEAD, &uri("/svc"), &no_cookie),
        Access::LoginFirst {
            location: "/svc/login?next=%2Fsvc".into()
        }
    );
    // API calls, and pages asked for with another method, are refused.
    assert_eq!(
        guard(
            &login,
            false,
            &get,
            &uri("/svc/api/environment"),
            &no_cookie
        ),
        Access::Refused
    );
    assert_eq!(
        guard(&login, false, &Method::POST, &uri("/svc/doc"), &no_cookie),
        Access::Refused
    );
    let token = login.create_session("ann");
    let mut cookie = HeaderMap::new();
    cookie.insert(
        header::COOKIE,
        HeaderValue::from_str(&format!("svc_session={token}")).expect("header"),
    );
    let session = login.session(&token).expect("a live session");
    assert_eq!(session.name, "ann");
    assert_eq!(
        guard(&login, false, &get, &uri("/svc/api/environment"), &cookie),
        Access::User(session.clone())
    );
    assert_eq!(
        guard(&login, false, &get, &uri("/svc/doc"), &cookie),
        Access::User(session.clone())
    );
    // public_read: reads go on without a session, nothing else does; a session is
    // still recognised.
    for method in [Method::GET, Method::HEAD] {
        assert_eq!(
            guard(
                &login,
                true,
                &method,
                &uri("/svc/api/environment"),
                &no_cookie
            ),
            Access::Anonymous
        );
    }
    assert_eq!(
        guard(
            &login,
            true,
            &Method::POST,
            &uri("/svc/api/environment"),
            &no_cookie
        ),
        Access::Refused
    );
    assert_eq!(
        guard(&login, true, &get, &uri("/svc/doc"), &cookie),
        Access::User(session)
    );
}

#[test]
fn sessions_carry_the_current_role_and_a_csrf_token_of_their_own() {
    use crate::security::rights::Role;
    let hash = cheap_argon2(Algorithm::Argon2id, "pw");
    let mut ann = user("ann", &hash);
    ann.role = Role::Operator;
    let login = Login::new(&[ann.clone()]);
    let first = login.create_session("ann");
    let second = login.create_session("ann");
    let a = login.session(&first).expect("first");
    let b = login.session(&second).expect("second");
    assert_eq!(a.role, Role::Operator);
    assert_eq!(a.csrf.len(), 64);
    assert_ne!(a.csrf, b.csrf, "one token per session");
    assert!(a.csrf_matches(Some(a.csrf.as_bytes())));
    assert!(!a.csrf_matches(Some(b.csrf.as_bytes())));
    assert!(!a.csrf_matches(Some(&a.csrf.as_bytes()[..63])));
    assert!(!a.csrf_matches(Some(b"")));
    assert!(!a.csrf_matches(None));
    assert!(!format!("{a:?}").contains(&a.csrf), "Debug hides the token");
    // A reload that changes the role only: the session lives on with the new role.
    ann.role = Role::Admin;
    login.set_users(&[ann]);
    let after = login.session(&first).expect("still live");
    assert_eq!(after.role, Role::Admin);
    assert_eq!(after.csrf, a.csrf);
}

#[test]
fn next_stays_below_svc() {
    for good in ["/svc", "/svc/", "/svc/#/job/x", "/svc/doc/api", "/svc?x=1"] {
        assert_eq!(safe_next(good), good);
    }
    for bad in [
        "",
        "/",
        "https://example.com/svc/",
        "//example.com/svc/",
        "/svcx",
        "/svc/login?next=/svc/",
        "/svc/\\\\example.com",
        "/svc/\nx",
        "javascript:alert(1)",
    ] {
        assert_eq!(safe_next(bad), "/svc/", "{bad:?}");
    }
    assert_eq!(
        login_location("/svc/doc/api?x=1&y=2"),
        "/svc/login?next=%2Fsvc%2Fdoc%2Fapi%3Fx%3D1%26y%3D2"
    );
}

#[test]
fn debug_output_shows_no_hash() {
    let hash = cheap_argon2(Algorithm::Argon2id, "pw");
    let login = Login::new(&[user("ann", &hash)]);
    let text = format!("{login:?} {:?}", user("ann", &hash));
    assert!(!text.contains(&hash), "{text}");
    assert!(!text.contains("argon2"), "{text}");
}
