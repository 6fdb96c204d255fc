//! The tests of `database_url`'s hosts: libpq's two multi-host forms, ports paired with
//! hosts, `target_session_attrs`, and messages that never show the password.

use super::*;

fn labels(url: &str) -> Vec<String> {
    let targets = parse_database_url(url).expect("parses");
    targets.hosts.iter().map(host_label).collect()
}

#[test]
fn one_host_is_one_target_with_any_session() {
    let targets = parse_database_url("postgres://svc:pw@db.example.org:5433/svc").expect("url");
    assert_eq!(targets.hosts.len(), 1);
    assert_eq!(targets.written_target, None);
    assert_eq!(targets.target(), TargetSession::Any);
    let host = &targets.hosts[0];
    assert_eq!(host_label(host), "db.example.org:5433");
    assert_eq!(host.get_username(), "svc");
    assert_eq!(host.get_database(), Some("svc"));
}

#[test]
fn hosts_listed_in_the_authority_each_keep_their_port_and_share_the_rest() {
    let targets = parse_database_url(
        "postgresql://svc:s3cret@h1:5432,h2:5433,[::1]:5434/jobs\
         ?sslmode=disable&target_session_attrs=read-write&application_name=x",
    )
    .expect("url");
    assert_eq!(targets.target(), TargetSession::ReadWrite);
    let shown: Vec<String> = targets.hosts.iter().map(host_label).collect();
    assert_eq!(shown, ["h1:5432", "h2:5433", "[::1]:5434"]);
    for host in &targets.hosts {
        assert_eq!(host.get_username(), "svc");
        assert_eq!(host.get_database(), Some("jobs"));
    }
    // Neither the Debug of the targets shows the password.
    assert!(!format!("{targets:?}").contains("s3cret"));
    // A host without a port gets the default one.
    assert_eq!(labels("postgres://u@a,b:6000/d"), ["a:5432", "b:6000"]);
}

#[test]
fn hosts_listed_in_the_query_are_paired_with_their_ports() {
    assert_eq!(
        labels("postgres://svc:pw@/svc?host=a,b&port=5001,5002&target_session_attrs=primary"),
        ["a:5001", "b:5002"]
    );
    // One port for all.
    assert_eq!(
        labels("postgres://svc@/svc?host=a,b&port=6000"),
        ["a:6000", "b:6000"]
    );
    // A port list paired with the authority's hosts.
    assert_eq!(
        labels("postgres://svc@a,b/svc?port=7001,7002"),
        ["a:7001", "b:7002"]
    );
    let targets = parse_database_url("postgres://svc@/svc?host=a,b&target_session_attrs=primary")
        .expect("url");
    assert_eq!(targets.target(), TargetSession::Primary);
}

#[test]
fn what_a_writing_node_cannot_use_is_refused_without_showing_the_password() {
    for (url, message) in [
        (
            "postgres://svc:hunter22@a,b/svc?target_session_attrs=read-only",
            "target_session_attrs=read-only is not supported",
        ),
        (
            "postgres://svc:hunter22@a,b/svc?target_session_attrs=standby",
            "target_session_attrs=standby is not supported",
        ),
        (
            "postgres://svc:hunter22@a,b/svc?target_session_attrs=hunter22",
            "not one of read-write, primary or any",
        ),
        ("postgres://svc:hunter22@a,,b/svc", "empty one"),
        (
            "postgres://svc:hunter22@/svc?host=a,b&port=1,2,3",
            "3 ports for 2 hosts",
        ),
        (
            "postgres://svc:hunter22@a,b/svc?host=c,d",
            "both before the path and in host=",
        ),
        (
            "postgres://svc:hunter22@a:1,b:notaport/svc",
            "host 2 of the list: not a valid",
        ),
        ("mysql://svc:hunter22@a/svc", "not a PostgreSQL URL"),
    ] {
        let err = parse_database_url(url).expect_err(url);
        assert!(err.contains(message), "{url}: {err}");
        assert!(!err.contains("hunter22"), "{err}");
    }
}
