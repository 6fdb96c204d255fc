//! Unit tests of `public.rs`.

use std::path::PathBuf;

use super::*;

fn parse(raw: &str) -> Option<Vec<String>> {
    PublicPath::parse(raw).map(|p| p.segments)
}

#[test]
fn plain_paths_are_decoded_once() {
    assert_eq!(parse("/"), Some(vec![]));
    assert_eq!(parse("/a/b.txt"), Some(vec!["a".into(), "b.txt".into()]));
    assert_eq!(parse("/a%20b/c"), Some(vec!["a b".into(), "c".into()]));
    assert_eq!(parse("//a///b"), Some(vec!["a".into(), "b".into()]));
    assert_eq!(parse("/%C3%A9t%C3%A9"), Some(vec!["été".into()]));
    // Double encoding stays literal after the one decoding.
    assert_eq!(parse("/%252e%252e/"), Some(vec!["%2e%2e".into()]));
    assert_eq!(parse("/svcx/a"), Some(vec!["svcx".into(), "a".into()]));
    assert_eq!(parse("/a/svc"), Some(vec!["a".into(), "svc".into()]));
    let p = PublicPath::parse("/a/").expect("parses");
    assert!(p.trailing_slash);
    assert!(PublicPath::parse("/").is_some_and(|p| p.trailing_slash));
    assert!(PublicPath::parse("/a").is_some_and(|p| !p.trailing_slash));
}

#[test]
fn traversal_and_odd_segments_are_refused() {
    for raw in [
        "/..",
        "/../etc/passwd",
        "/a/../b",
        "/./a",
        "/a/.",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/%2E%2E/x",
        "/a/%2e%2e/%2e%2e/x",
        "/..%2fetc%2fpasswd",
        "/a%2fb",
        "/a%2Fb",
        "/..\\etc\\passwd",
        "/a%5c..%5cb",
        "/a%5C..",
        "/a%00b",
        "/.hidden",
        "/a/.git/config",
        "/%2ehidden",
        "/%ff",
        "/%c3%28",
        "/bad%zz",
        "/bad%2",
        "/bad%",
        "/svc",
        "/svc/",
        "/svc/x",
        "/SVC/x",
        "/%73vc/x",
        "relative",
        "",
    ] {
        assert_eq!(parse(raw), None, "{raw:?} must be refused");
    }
}

#[test]
fn redirect_target_is_rebuilt_from_segments() {
    let p = PublicPath::parse("//evil.example/dir").expect("parses");
    assert_eq!(p.encoded_dir(), "/evil.example/dir/");
    let p = PublicPath::parse("/a%20b/%3Cx%3E").expect("parses");
    assert_eq!(p.encoded_dir(), "/a%20b/%3Cx%3E/");
    assert_eq!(p.display(), "/a b/<x>/");
}

#[test]
fn encoding_round_trips_and_leaves_only_safe_bytes() {
    for name in [
        "plain.txt",
        "<b>&\"x.txt",
        "a b",
        "javascript:x",
        "été",
        "50%",
        "a?b#c",
    ] {
        let encoded = percent_encode(name);
        assert!(
            encoded
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)),
            "{encoded}"
        );
        assert_eq!(percent_decode(&encoded).as_deref(), Some(name.as_bytes()));
    }
    assert_eq!(percent_encode("javascript:x"), "javascript%3Ax");
}

#[test]
fn index_page_escapes_names_and_encodes_hrefs() {
    let entries = [
        IndexEntry {
            name: "sub<dir>".into(),
            is_dir: true,
            size: 0,
            modified: Some(UNIX_EPOCH),
        },
        IndexEntry {
            name: "<b>&\"x.txt".into(),
            is_dir: false,
            size: 42,
            modified: Some(UNIX_EPOCH + std::time::Duration::from_secs(86_400 + 61)),
        },
        IndexEntry {
            name: "it's".into(),
            is_dir: false,
            size: 1,
            modified: None,
        },
    ];
    let html = render_index("/a&b/<c>/", &entries);
    assert!(
        html.contains("<title>Index of /a&amp;b/&lt;c&gt;/</title>"),
        "{html}"
    );
    assert!(html.contains("<a href=\"../\">../</a>"));
    assert!(
        html.contains("<a href=\"sub%3Cdir%3E/\">sub&lt;dir&gt;/</a>"),
        "{html}"
    );
    assert!(html.contains("<a href=\"%3Cb%3E%26%22x.txt\">&lt;b&gt;&amp;&quot;x.txt</a>"));
    assert!(html.contains("<a href=\"it%27s\">it&#39;s</a>"));
    assert!(html.contains(">42<") && html.contains("1970-01-02 00:01:01"));
    assert!(html.contains("1970-01-01 00:00:00"));
    assert!(!html.contains("<b>&"), "raw name leaked: {html}");
    assert!(!render_index("/", &[]).contains("href=\"../\""));
}

#[test]
fn content_types_by_extension() {
    assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
    assert_eq!(content_type("A.CSS"), "text/css; charset=utf-8");
    assert_eq!(content_type("app.js"), "text/javascript; charset=utf-8");
    assert_eq!(content_type("d.json"), "application/json; charset=utf-8");
    assert_eq!(content_type("i.png"), "image/png");
    assert_eq!(content_type("n.txt"), "text/plain; charset=utf-8");
    assert_eq!(content_type("blob.unknownext"), "application/octet-stream");
    assert_eq!(content_type("noext"), "application/octet-stream");
}

#[test]
fn conditional_requests() {
    let time = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    let mut request = HeaderMap::new();
    assert!(!not_modified(&request, "W/\"1\"", Some(time)));
    request.insert(
        header::IF_MODIFIED_SINCE,
        HeaderValue::from_str(&httpdate::fmt_http_date(time)).expect("date"),
    );
    assert!(not_modified(&request, "W/\"1\"", Some(time)));
    assert!(!not_modified(
        &request,
        "W/\"1\"",
        Some(time + std::time::Duration::from_secs(1))
    ));
    request.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"2\""));
    assert!(!not_modified(&request, "W/\"1\"", Some(time)), "ETag wins");
    request.insert(
        header::IF_NONE_MATCH,
        HeaderValue::from_static("\"0\", W/\"1\""),
    );
    assert!(not_modified(&request, "W/\"1\"", Some(time)));
}

/// A tree with everything `resolve` must refuse or accept.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let base = tempfile::tempdir().expect("tempdir");
    let root = base.path().join("public");
    fs::create_dir_all(root.join("sub/deeper")).expect("mkdir");
    fs::create_dir_all(root.join("svc")).expect("mkdir");
    fs::create_dir_all(root.join(".git")).expect("mkdir");
    fs::write(root.join("a.txt"), "A").expect("write");
    fs::write(root.join("sub/deeper/b.txt"), "B").expect("write");
    fs::write(root.join("svc/s.txt"), "S").expect("write");
    fs::write(root.join(".git/config"), "G").expect("write");
    fs::write(base.path().join("secret.txt"), "SECRET").expect("write");
    let link = |target: &Path, name: &str| {
        std::os::unix::fs::symlink(target, root.join(name)).expect("symlink");
    };
    link(&base.path().join("secret.txt"), "out-file");
    link(base.path(), "out-dir");
    link(Path::new("sub/deeper/b.txt"), "in-file");
    link(Path::new("sub"), "in-dir");
    link(Path::new("svc"), "to-svc");
    link(Path::new(".git"), "to-git");
    nix::unistd::mkfifo(
        &root.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .expect("mkfifo");
    (base, root)
}

fn get(root: &Path, raw: &str) -> Option<Target> {
    resolve(root, &PublicPath::parse(raw)?).ok()
}

fn file_text(target: Option<Target>) -> Option<String> {
    match target? {
        Target::File(mut open) => {
            let mut text = String::new();
            io::Read::read_to_string(&mut open.file, &mut text).ok()?;
            Some(text)
        }
        _ => None,
    }
}

#[test]
fn resolve_serves_inside_and_refuses_outside() {
    let (_base, root) = tree();
    assert_eq!(file_text(get(&root, "/a.txt")).as_deref(), Some("A"));
    assert_eq!(
        file_text(get(&root, "/sub/deeper/b.txt")).as_deref(),
        Some("B")
    );
    for raw in [
        // No symlink is followed, not even one that stays inside.
        "/in-file",
        "/in-dir/",
        "/in-dir/deeper/b.txt",
        "/out-file",
        "/out-dir/",
        "/out-dir/secret.txt",
        "/to-svc/s.txt",
        "/to-git/config",
        "/fifo",
        "/a.txt/",
        "/missing",
        "/svc/s.txt",
    ] {
        assert!(get(&root, raw).is_none(), "{raw} must not be served");
    }
    assert!(matches!(get(&root, "/sub"), Some(Target::Redirect(to)) if to == "/sub/"));
}

#[test]
fn index_lists_only_what_is_served() {
    let (_base, root) = tree();
    let Some(Target::Index(html)) = get(&root, "/") else {
        panic!("the top level is an index page");
    };
    for shown in ["href=\"sub/\"", "href=\"a.txt\""] {
        assert!(html.contains(shown), "{shown} in {html}");
    }
    for hidden in ["svc", "git", "out-", "in-", "fifo", "to-"] {
        assert!(
            !html.contains(hidden),
            "{hidden} must not be listed: {html}"
        );
    }
    let dirs_first = html.find("sub/").zip(html.find("a.txt"));
    assert!(dirs_first.is_some_and(|(dir, file)| dir < file), "{html}");

    fs::write(root.join("sub/index.html"), "INDEX").expect("write");
    assert_eq!(file_text(get(&root, "/sub/")).as_deref(), Some("INDEX"));
}

#[test]
fn componentwise_walk_refuses_what_openat2_refuses() {
    let (_base, root) = tree();
    let dir = fs::File::open(&root).expect("open root");
    let walk = |raw: &str| {
        let path = PublicPath::parse(raw).expect("valid path");
        let fd =
            open_componentwise(&dir, &path.segments, OFlag::O_RDONLY | OFlag::O_NONBLOCK).ok()?;
        let mut text = String::new();
        io::Read::read_to_string(&mut fs::File::from(fd), &mut text).ok()?;
        Some(text)
    };
    assert_eq!(walk("/a.txt").as_deref(), Some("A"));
    assert_eq!(walk("/sub/deeper/b.txt").as_deref(), Some("B"));
    for raw in [
        "/in-file",
        "/in-dir/deeper/b.txt",
        "/out-file",
        "/out-dir/secret.txt",
    ] {
        assert!(walk(raw).is_none(), "{raw} must not be opened");
    }
}

/// A local user who can write into `dir_public` swaps a directory for a symlink to
/// the outside, again and again, while files are requested through it: no request
/// ever reads the outside file, whatever the interleaving.
#[test]
fn swapping_a_component_for_a_symlink_never_leads_outside() {
    let base = tempfile::tempdir().expect("tempdir");
    let root = base.path().join("public");
    let outside = base.path().join("outside");
    fs::create_dir_all(root.join("d")).expect("mkdir");
    fs::create_dir_all(&outside).expect("mkdir");
    fs::write(root.join("d/file"), "INSIDE").expect("write");
    fs::write(outside.join("file"), "SECRET").expect("write");
    std::os::unix::fs::symlink(&outside, root.join("swap")).expect("symlink");

    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let root = root.clone();
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                nix::fcntl::renameat2(
                    nix::fcntl::AT_FDCWD,
                    &root.join("d"),
                    nix::fcntl::AT_FDCWD,
                    &root.join("swap"),
                    nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                )
                .expect("exchange");
                swaps += 1;
            }
            swaps
        })
    };
    let path = PublicPath::parse("/d/file").expect("valid path");
    let mut inside = 0;
    for _ in 0..20_000 {
        if let Some(text) = file_text(resolve(&root, &path).ok()) {
            assert_eq!(text, "INSIDE", "a request read outside dir_public");
            inside += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper thread");
    assert!(swaps > 0, "the swapper ran");
    assert!(inside > 0, "some requests found the directory in place");
}
