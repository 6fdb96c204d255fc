//! The tests of one replay store and of the spend store's rules.

use super::super::ReplayStores;
use super::*;

const T0: i64 = 1_700_000_000;
const TTL: i64 = 100;

fn open(dir: &Path, max: usize, compact_min: usize, now: i64) -> ReplayStore {
    ReplayStore::open_at(
        &dir.join("store.log"),
        Limits::new(TTL, max, compact_min),
        now,
    )
    .expect("open")
}

fn record(store: &ReplayStore, job: &str, value: &[u8], now: i64) -> Seen {
    store.check_and_record_at(job, value, now).expect("record")
}

fn file_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("store.log"))
        .expect("read")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_spent_signature_is_refused_on_every_other_route() {
    use RouteClass::{Control, Webhook};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 100, 1000, T0);
    let sig = vec![b"abc".to_vec()];
    let claim = |store: &ReplayStore, route: &str, class, repeatable: bool, now: i64| {
        store
            .claim_at(&sig, route, class, repeatable, now)
            .expect("claim")
    };
    assert_eq!(claim(&store, "webhook:a", Webhook, true, T0), Claim::New);
    // The same route may repeat it when repeats are allowed there...
    assert_eq!(
        claim(&store, "webhook:a", Webhook, true, T0 + 1),
        Claim::Repeat
    );
    // ...not when they are not; no control route may use it at all; another job's
    // webhook may (a host sends one body to every hook of a repository).
    assert_eq!(
        claim(&store, "webhook:a", Webhook, false, T0 + 1),
        Claim::Spent
    );
    assert_eq!(
        claim(&store, "control", Control, false, T0 + 1),
        Claim::Spent
    );
    assert_eq!(
        claim(&store, "webhook:b", Webhook, false, T0 + 1),
        Claim::New
    );
    // Kept across a restart, until its time to live.
    drop(store);
    let store = open(dir.path(), 100, 1000, T0 + 2);
    assert_eq!(
        claim(&store, "control", Control, false, T0 + 2),
        Claim::Spent
    );
    assert_eq!(
        claim(&store, "control", Control, false, T0 + TTL + 2),
        Claim::New
    );
    // A control signature: one-time on every control route, refused on webhooks.
    assert_eq!(
        claim(&store, "control", Control, false, T0 + TTL + 3),
        Claim::Spent
    );
    assert_eq!(
        claim(&store, "other", Control, true, T0 + TTL + 3),
        Claim::Spent
    );
    assert_eq!(
        claim(&store, "webhook:a", Webhook, true, T0 + TTL + 3),
        Claim::Spent
    );
}

#[test]
fn a_released_claim_lets_its_route_retry_and_nothing_else() {
    use RouteClass::{Control, Webhook};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 100, 1000, T0);
    let sig = vec![b"abc".to_vec()];
    assert_eq!(
        store
            .claim_at(&sig, "webhook:a", Webhook, false, T0)
            .expect("claim"),
        Claim::New
    );
    store.release(&sig, "webhook:a");
    assert_eq!(
        store
            .claim_at(&sig, "control", Control, false, T0)
            .expect("claim"),
        Claim::Spent
    );
    assert_eq!(
        store
            .claim_at(&sig, "webhook:a", Webhook, false, T0)
            .expect("claim"),
        Claim::New
    );
}

#[test]
fn a_signature_spent_under_any_of_its_spellings_is_spent() {
    // During a key rotation a delivery is known by its HMAC under each key.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 100, 1000, T0);
    let both = vec![b"new".to_vec(), b"old".to_vec()];
    let webhook = RouteClass::Webhook;
    assert_eq!(
        store
            .claim_at(&both, "webhook:a", webhook, false, T0)
            .expect("claim"),
        Claim::New
    );
    let old_only = vec![b"old".to_vec()];
    assert_eq!(
        store
            .claim_at(&old_only, "control", RouteClass::Control, false, T0)
            .expect("claim"),
        Claim::Spent
    );
    assert_eq!(
        file_lines(dir.path()).len(),
        4,
        "two entries per key, one write"
    );
}

#[test]
fn insert_duplicate_and_per_job_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 10, 1000, T0);
    assert_eq!(record(&store, "a", b"d1", T0), Seen::New);
    assert_eq!(record(&store, "a", b"d1", T0 + 1), Seen::Replay);
    // The same value for another job, and another value, are new.
    assert_eq!(record(&store, "b", b"d1", T0 + 1), Seen::New);
    assert_eq!(record(&store, "a", b"d2", T0 + 1), Seen::New);
    // Raw bytes, including non-UTF-8 and spaces, are kept as they are.
    assert_eq!(record(&store, "a", b"\xff x\n", T0 + 1), Seen::New);
    assert_eq!(record(&store, "a", b"\xff x\n", T0 + 2), Seen::Replay);
    assert_eq!(store.len(), 4);
    // A replay changes nothing on disk.
    assert_eq!(file_lines(dir.path()).len(), 4);
}

#[test]
fn a_look_answers_at_once_unless_a_write_holds_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 10, 1000, unix_now());
    assert_eq!(
        store.check_and_record("a", b"sig").expect("record"),
        Seen::New
    );
    assert_eq!(store.try_is_recorded("a", b"sig"), Some(true));
    assert_eq!(store.try_is_recorded("a", b"other"), Some(false));
    assert_eq!(store.try_is_recorded("b", b"sig"), Some(false));
    // A write in progress holds the lock (through its fsync): no waiting.
    let writing = store.lock();
    assert_eq!(store.try_is_recorded("a", b"sig"), None);
    drop(writing);
    assert!(store.is_recorded("a", b"sig"));
}

#[test]
fn entries_expire_after_the_time_to_live() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 10, 1000, T0);
    assert_eq!(record(&store, "a", b"d", T0), Seen::New);
    assert_eq!(record(&store, "a", b"d", T0 + TTL - 1), Seen::Replay);
    assert_eq!(record(&store, "a", b"d", T0 + TTL), Seen::New);
    assert_eq!(record(&store, "a", b"d", T0 + TTL + 1), Seen::Replay);
    // Expired entries are dropped as time goes on.
    assert_eq!(record(&store, "a", b"other", T0 + 3 * TTL), Seen::New);
    assert_eq!(store.len(), 1);
}

#[test]
fn forget_lets_a_retry_run_and_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 10, 1000, T0);
    assert_eq!(record(&store, "a", b"d", T0), Seen::New);
    assert_eq!(record(&store, "a", b"e", T0), Seen::New);
    store.forget_at("a", b"d", T0 + 1);
    // Forgetting something unknown is a no-op.
    store.forget_at("a", b"unknown", T0 + 1);
    assert_eq!(file_lines(dir.path()).len(), 3);
    drop(store);
    let store = open(dir.path(), 10, 1000, T0 + 2);
    assert_eq!(store.len(), 1);
    assert_eq!(record(&store, "a", b"e", T0 + 2), Seen::Replay);
    assert_eq!(record(&store, "a", b"d", T0 + 2), Seen::New);
}

#[test]
fn the_cap_drops_the_oldest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 3, 1000, T0);
    for (i, value) in [b"1", b"2", b"3", b"4"].iter().enumerate() {
        let now = T0 + i64::try_from(i).expect("small");
        assert_eq!(record(&store, "a", *value, now), Seen::New);
    }
    assert_eq!(store.len(), 3);
    assert_eq!(record(&store, "a", b"4", T0 + 5), Seen::Replay);
    assert_eq!(record(&store, "a", b"2", T0 + 5), Seen::Replay);
    // "1" was dropped: it is new again (and now "2" is the oldest to go).
    assert_eq!(record(&store, "a", b"1", T0 + 5), Seen::New);
    assert_eq!(record(&store, "a", b"2", T0 + 6), Seen::New);
    drop(store);
    // The cap also holds when a file written with a larger cap is loaded.
    let store = open(dir.path(), 2, 1000, T0 + 7);
    assert_eq!(store.len(), 2);
    assert_eq!(file_lines(dir.path()).len(), 2);
}

#[test]
fn survives_reopen_and_expires_on_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 10, 1000, T0);
    assert_eq!(record(&store, "a", b"old", T0), Seen::New);
    assert_eq!(record(&store, "a", b"new", T0 + 50), Seen::New);
    drop(store);
    let store = open(dir.path(), 10, 1000, T0 + 60);
    assert_eq!(record(&store, "a", b"old", T0 + 60), Seen::Replay);
    assert_eq!(record(&store, "a", b"new", T0 + 60), Seen::Replay);
    drop(store);
    // Reopened after "old" expired: it is gone from memory and from the file.
    let store = open(dir.path(), 10, 1000, T0 + 120);
    assert_eq!(store.len(), 1);
    assert_eq!(file_lines(dir.path()).len(), 1);
    assert_eq!(record(&store, "a", b"new", T0 + 120), Seen::Replay);
    assert_eq!(record(&store, "a", b"old", T0 + 120), Seen::New);
}

#[test]
fn torn_last_line_and_garbage_are_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 10, 1000, T0);
    assert_eq!(record(&store, "a", b"kept", T0), Seen::New);
    drop(store);
    // A crash in the middle of an append of "torn", plus a line that never parsed.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("store.log"))
        .expect("open");
    let whole = line(
        '+',
        T0,
        &Key {
            job: "a".into(),
            value: b"torn".to_vec(),
        },
    );
    file.write_all(b"? what\n").expect("write");
    file.write_all(&whole.as_bytes()[..whole.len() - 3])
        .expect("write");
    drop(file);
    let store = open(dir.path(), 10, 1000, T0 + 1);
    assert_eq!(store.len(), 1);
    assert_eq!(record(&store, "a", b"kept", T0 + 1), Seen::Replay);
    assert_eq!(record(&store, "a", b"torn", T0 + 1), Seen::New);
    drop(store);
    // The rewrite on open removed the fragment: the next append started a new line.
    let store = open(dir.path(), 10, 1000, T0 + 2);
    assert_eq!(store.len(), 2);
    assert_eq!(record(&store, "a", b"torn", T0 + 2), Seen::Replay);
    assert!(file_lines(dir.path()).iter().all(|l| l.starts_with("+ ")));
}

#[test]
fn compaction_keeps_live_entries_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1000, 8, T0);
    // Six entries that will expire, and one that will still be live.
    for i in 0..6u8 {
        assert_eq!(record(&store, "a", &[b'x', i], T0), Seen::New);
    }
    assert_eq!(record(&store, "a", b"live", T0 + 50), Seen::New);
    assert_eq!(file_lines(dir.path()).len(), 7);
    // At T0 + TTL the six have expired: 8 lines for 2 live entries, compacted.
    assert_eq!(record(&store, "a", b"late", T0 + TTL), Seen::New);
    let lines = file_lines(dir.path());
    assert_eq!(lines.len(), 2, "{lines:?}");
    drop(store);
    let store = open(dir.path(), 1000, 8, T0 + TTL + 1);
    assert_eq!(record(&store, "a", b"live", T0 + TTL + 1), Seen::Replay);
    assert_eq!(record(&store, "a", b"late", T0 + TTL + 1), Seen::Replay);
    assert_eq!(record(&store, "a", &[b'x', 0], T0 + TTL + 1), Seen::New);
}

#[test]
fn forgotten_entries_are_compacted_away() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1000, 4, T0);
    assert_eq!(record(&store, "a", b"keep", T0), Seen::New);
    for i in 0..3u8 {
        assert_eq!(record(&store, "a", &[i], T0), Seen::New);
        store.forget_at("a", &[i], T0);
    }
    assert!(file_lines(dir.path()).len() <= 3);
    assert_eq!(store.len(), 1);
    drop(store);
    let store = open(dir.path(), 1000, 4, T0 + 1);
    assert_eq!(record(&store, "a", b"keep", T0 + 1), Seen::Replay);
    assert_eq!(record(&store, "a", &[0], T0 + 1), Seen::New);
}

#[test]
fn concurrent_records_of_one_value_let_exactly_one_through() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = std::sync::Arc::new(open(dir.path(), 1000, 1000, T0));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || record(&store, "a", b"same", T0))
        })
        .collect();
    let new = handles
        .into_iter()
        .map(|h| h.join().expect("thread"))
        .filter(|seen| *seen == Seen::New)
        .count();
    assert_eq!(new, 1);
}

#[test]
fn a_write_failure_records_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 10, 1000, T0);
    // Make the append handle unusable: a read-only handle on the same file.
    store.lock().file = Some(File::open(dir.path().join("store.log")).expect("open"));
    let err = store
        .check_and_record_at("a", b"d", T0)
        .expect_err("write fails");
    assert!(err.to_string().contains("store.log"), "{err}");
    assert_eq!(store.len(), 0);
    // The store recovers: the handle was reopened by the rewrite.
    assert_eq!(record(&store, "a", b"d", T0), Seen::New);
    assert_eq!(record(&store, "a", b"d", T0), Seen::Replay);
}

#[test]
fn stores_open_in_a_new_directory_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("var/lib/svc/replay");
    let stores = ReplayStores::open(&path).expect("open");
    assert_eq!(
        stores
            .nonces()
            .check_and_record("job", b"n1")
            .expect("record"),
        Seen::New
    );
    assert_eq!(
        stores
            .deliveries()
            .check_and_record("job", b"n1")
            .expect("record"),
        Seen::New
    );
    drop(stores);
    let stores = ReplayStores::open(&path).expect("reopen");
    assert_eq!(
        stores
            .nonces()
            .check_and_record("job", b"n1")
            .expect("record"),
        Seen::Replay
    );
    assert_eq!(stores.deliveries().len(), 1);
    let memory = ReplayStores::in_memory();
    assert_eq!(
        memory
            .nonces()
            .check_and_record("job", b"n")
            .expect("record"),
        Seen::New
    );
    assert_eq!(
        memory
            .nonces()
            .check_and_record("job", b"n")
            .expect("record"),
        Seen::Replay
    );
}
