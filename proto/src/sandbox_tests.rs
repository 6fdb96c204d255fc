//! Unit tests of `sandbox.rs`.

use super::walk::names_to_skip;
use super::*;

#[test]
fn the_names_skipped_are_the_steps_towards_protected_paths() {
    let protected = vec![
        PathBuf::from("/a/b/c"),
        PathBuf::from("/a/x"),
        PathBuf::from("/etc/svc"),
    ];
    let on_the_way = ancestors(&protected);
    let skipped = names_to_skip(&on_the_way, &protected);
    let names = |dir: &str| {
        let mut names: Vec<String> = skipped
            .get(Path::new(dir))
            .into_iter()
            .flatten()
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names("/"), ["a", "etc"]);
    assert_eq!(names("/a"), ["b", "x"]);
    assert_eq!(names("/a/b"), ["c"]);
    assert_eq!(names("/etc"), ["svc"]);
    // Below a protected path there is nothing to walk, so nothing to skip.
    assert!(names("/a/b/c").is_empty());
    assert_eq!(skipped.len(), 4);
}

#[test]
fn the_way_to_protected_paths_stops_at_them() {
    let protected = vec![
        PathBuf::from("/srv/svc/state"),
        PathBuf::from("/srv/svc/state/job"),
        PathBuf::from("/srv/svc/etc"),
        PathBuf::from("/var/log/svc"),
    ];
    let way: Vec<PathBuf> = ancestors(&protected).into_iter().collect();
    assert_eq!(
        way,
        ["/", "/srv", "/srv/svc", "/var", "/var/log"]
            .map(PathBuf::from)
            .to_vec()
    );
    assert!(ancestors(&[]).is_empty());
}

/// A directory `a` with an old modification time holding directory `b`, and a basis
/// that walked `a` and granted `b`, as if the walk began `walk_began`.
fn walked_tree(walk_began: SystemTime) -> (tempfile::TempDir, PathBuf, PathBuf, Basis) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a"), dir.path().join("a/b"));
    std::fs::create_dir_all(&b).expect("mkdir");
    let old = nix::sys::time::TimeSpec::new(1_000_000, 0);
    nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        &a,
        &old,
        &old,
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    )
    .expect("utimensat");
    let mut basis = Basis::default();
    basis.walked(&a, nix::sys::stat::lstat(&a).ok().as_ref(), walk_began);
    basis.granted(&b, nix::sys::stat::stat(&b).ok().as_ref());
    basis.granted(&a.join("missing"), None);
    (dir, a, b, basis)
}

#[test]
fn a_ruleset_is_current_until_a_walked_directory_or_a_granted_path_changes() {
    let (_dir, a, _b, basis) = walked_tree(SystemTime::now());
    assert!(basis.is_current(), "nothing changed");
    std::fs::write(a.join("new"), "").expect("write");
    assert!(!basis.is_current(), "an entry was added beside the way");

    let (_dir, _a, b, basis) = walked_tree(SystemTime::now());
    std::fs::remove_dir(&b).expect("rmdir");
    std::fs::create_dir(&b).expect("mkdir");
    assert!(!basis.is_current(), "a granted directory was replaced");

    let (_dir, a, _b, basis) = walked_tree(SystemTime::now());
    std::fs::create_dir(a.join("missing")).expect("mkdir");
    assert!(!basis.is_current(), "a path found missing appeared");
}

#[test]
fn a_walk_right_after_a_change_is_for_one_run_only() {
    // The directory's time is 1,000,000 s after the epoch: a walk that began less
    // than a second after it cannot tell a change made in the same clock tick.
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let (_dir, _a, _b, basis) = walked_tree(at + Duration::from_millis(500));
    assert!(basis.unsettled);
    assert!(!basis.is_current());
    let (_dir, _a, _b, basis) = walked_tree(at + SETTLED);
    assert!(basis.is_current());
}

#[test]
fn overlapping_paths() {
    assert!(overlaps(Path::new("/a/b"), Path::new("/a")));
    assert!(overlaps(Path::new("/a"), Path::new("/a/b")));
    assert!(overlaps(Path::new("/a"), Path::new("/a/")));
    assert!(!overlaps(Path::new("/a/bc"), Path::new("/a/b")));
}

#[test]
fn resolve_keeps_the_missing_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = std::fs::canonicalize(dir.path()).expect("canonical");
    let link = real.join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    assert_eq!(resolve(&link.join("not/there")), real.join("not/there"));
}

#[test]
fn levels_name_what_an_older_kernel_misses() {
    assert_eq!(level(10), "fully enforced");
    assert_eq!(level(9), "fully enforced");
    assert_eq!(
        level(7),
        "partially enforced (this kernel does not restrict connecting to Unix sockets)"
    );
    assert!(level(1).contains("truncation") && level(1).contains("device ioctls"));
}

#[test]
fn a_walk_is_for_its_paths_and_stale_once_an_entry_is_made_beside_the_way() {
    let dir = tempfile::tempdir().expect("tempdir");
    let protected = dir.path().join("state");
    std::fs::create_dir(&protected).expect("mkdir state");
    std::fs::write(dir.path().join("readable"), "x").expect("write");
    let paths = vec![protected.display().to_string()];
    let walk = Walk::new(&paths).expect("walk");
    assert!(walk.protects(&paths));
    assert!(!walk.protects(&[dir.path().display().to_string()]));
    // `readable` is beside the way and gets a rule; `state` is protected and gets none.
    let granted = |walk: &Walk, name: &str| {
        let path = dir.path().join(name);
        walk.granted_paths().any(|granted| granted == path)
    };
    assert!(granted(&walk, "readable"));
    assert!(!granted(&walk, "state"));
    std::fs::write(dir.path().join("made-later"), "y").expect("write");
    // Made within the second of the walk, or after it: either way not current.
    assert!(!walk.is_current());
    assert!(!granted(&walk, "made-later"));
    assert!(granted(
        &Walk::new(&paths).expect("walk again"),
        "made-later"
    ));
}
