//! The tests of the cluster keys of `[svc]`: `database_url` (with `$NAME` from the
//! environment, and never shown in problems) and `node_name`.

use crate::config::test_tree::{Tree, issue_about};

#[test]
fn without_database_url_the_node_is_alone() {
    let config = Tree::new("").load();
    assert_eq!(config.main.cluster, None);
    // An empty value is no URL, as an empty `secret` is no secret.
    let config = Tree::new("database_url =\n").load();
    assert_eq!(config.main.cluster, None);
}

#[test]
fn database_url_and_node_name_are_read() {
    let tree = Tree::new(
        "database_url = postgres://svc:hunter22@db.example.org:5432/svc\nnode_name = node-1\n",
    );
    let cluster = tree.load().main.cluster.expect("cluster mode");
    assert_eq!(
        cluster.database_url.expose(),
        "postgres://svc:hunter22@db.example.org:5432/svc"
    );
    assert_eq!(cluster.node_name, "node-1");
    assert_eq!(cluster.url_from_env, None);
    assert_eq!(
        cluster.shown_url(),
        "postgres://svc:[redacted]@db.example.org:5432/svc"
    );
    // Neither the Debug of the configuration shows the password.
    assert!(!format!("{cluster:?}").contains("hunter22"));
}

#[test]
fn database_url_may_come_from_the_environment() {
    let tree = Tree::new("database_url = $SVC_TEST_DB\nnode_name = n.2\n")
        .with_env("SVC_TEST_DB", "postgresql://svc:pw-from-env@127.0.0.1/svc");
    let cluster = tree.load().main.cluster.expect("cluster mode");
    assert_eq!(
        cluster.database_url.expose(),
        "postgresql://svc:pw-from-env@127.0.0.1/svc"
    );
    assert_eq!(cluster.url_from_env.as_deref(), Some("$SVC_TEST_DB"));
    // Nothing of a URL read from the environment is shown, only where it came from.
    assert_eq!(cluster.shown_url(), "$SVC_TEST_DB");
}

#[test]
fn node_name_defaults_to_the_host_name() {
    let host = nix::unistd::gethostname()
        .expect("host name")
        .into_string()
        .expect("UTF-8 host name");
    // The documented rule, written out here rather than taken from the code under test:
    // 1 to 63 ASCII letters, digits, `-`, `_` or `.`, starting with a letter or a digit.
    let valid = (1..=63).contains(&host.len())
        && host.starts_with(|c: char| c.is_ascii_alphanumeric())
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let tree = Tree::new("database_url = postgres://db.example.org/svc\n");
    match (valid, tree.result()) {
        (true, Ok(config)) => {
            assert_eq!(config.main.cluster.expect("cluster").node_name, host);
        }
        (true, Err(err)) => panic!("the host name {host:?} is a valid node name: {err}"),
        // A machine whose host name is no valid node name: the error names it and asks
        // for `node_name`.
        (false, Ok(config)) => panic!(
            "the host name {host:?} is no valid node name, yet it became {:?}",
            config.main.cluster.map(|cluster| cluster.node_name)
        ),
        (false, Err(err)) => {
            let text = err.to_string();
            assert!(text.contains("set node_name"), "{text}");
            assert!(text.contains(&format!("{host:?}")), "{text}");
        }
    }
}

#[test]
fn bad_urls_are_refused_without_showing_the_password() {
    for (url, message) in [
        ("mysql://svc:hunter22@db/svc", "not a PostgreSQL URL"),
        ("postgres://svc:hunter22@/svc", "names no host"),
        (
            "postgres://svc:hunter22@db:notaport/svc",
            "not a valid PostgreSQL URL",
        ),
        (
            "postgres://svc:hunter22@db1:5432,db2:5433/svc?target_session_attrs=read-only",
            "target_session_attrs=read-only is not supported",
        ),
    ] {
        let tree = Tree::new(&format!("database_url = {url}\nnode_name = a\n"));
        let issues = tree.issues();
        let shown = proto::redact::redact_url(url);
        let issue = issue_about(
            &issues,
            &tree.main_file(),
            "svc",
            "database_url",
            Some(&shown),
            message,
        );
        assert!(!issue.to_string().contains("hunter22"), "{issue}");
    }
}

#[test]
fn a_bad_url_from_the_environment_names_the_variable_only() {
    let tree = Tree::new("database_url = $SVC_TEST_DB\nnode_name = a\n")
        .with_env("SVC_TEST_DB", "mysql://svc:hunter22@db/svc");
    let issues = tree.issues();
    let issue = issue_about(
        &issues,
        &tree.main_file(),
        "svc",
        "database_url",
        Some("$SVC_TEST_DB"),
        "the value of $SVC_TEST_DB: not a PostgreSQL URL",
    );
    assert!(!issue.to_string().contains("hunter22"), "{issue}");
    let tree = Tree::new("database_url = $SVC_TEST_UNSET\nnode_name = a\n");
    issue_about(
        &tree.issues(),
        &tree.main_file(),
        "svc",
        "database_url",
        Some("$SVC_TEST_UNSET"),
        "SVC_TEST_UNSET is not set",
    );
}

#[test]
fn node_names_are_checked() {
    for bad in ["-a", "a b", "node/1", "ä", &"n".repeat(64)] {
        let tree = Tree::new(&format!(
            "database_url = postgres://db/svc\nnode_name = \"{bad}\"\n"
        ));
        issue_about(
            &tree.issues(),
            &tree.main_file(),
            "svc",
            "node_name",
            Some(bad),
            "a node name is 1 to 63",
        );
    }
    for good in ["a", "node-1", "db_2.example.org", &"n".repeat(63)] {
        let tree = Tree::new(&format!(
            "database_url = postgres://db/svc\nnode_name = {good}\n"
        ));
        assert_eq!(tree.load().main.cluster.expect("cluster").node_name, good);
    }
}

#[test]
fn several_hosts_are_read_and_without_target_session_attrs_warned_about() {
    let url = "postgres://svc:hunter22@db1:5432,db2:5433/svc";
    let config = Tree::new(&format!(
        "database_url = {url}?target_session_attrs=read-write\nnode_name = a\n"
    ))
    .load();
    assert!(config.main.cluster.is_some());
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    let config = Tree::new(&format!("database_url = {url}\nnode_name = a\n")).load();
    assert!(config.main.cluster.is_some());
    assert_eq!(config.warnings.len(), 1, "{:?}", config.warnings);
    let warning = &config.warnings[0];
    assert_eq!(warning.key.as_deref(), Some("database_url"));
    assert!(
        warning
            .message
            .contains("lists 2 hosts without target_session_attrs")
    );
    assert!(!warning.to_string().contains("hunter22"), "{warning}");
}

#[test]
fn node_name_alone_is_a_warning() {
    let config = Tree::new("node_name = lonely\n").load();
    assert_eq!(config.main.cluster, None);
    assert_eq!(config.warnings.len(), 1, "{:?}", config.warnings);
    assert_eq!(config.warnings[0].key.as_deref(), Some("node_name"));
    assert!(config.warnings[0].message.contains("without database_url"));
}

#[test]
fn in_cluster_mode_only_on_busy_queue_is_accepted() {
    let cluster = "database_url = postgres://db.example.org/svc\nnode_name = a\n";
    for value in ["skip", "replace"] {
        let tree = Tree::new(cluster);
        let file = tree.job(
            "busy.conf",
            &format!("[job \"busy\"]\ncommand = true\npath = /busy\non_busy = {value}\n"),
        );
        issue_about(
            &tree.issues(),
            &file,
            "job \"busy\"",
            "on_busy",
            Some(value),
            "in cluster mode (database_url set) only on_busy = queue is supported",
        );
        // The same job on a single node is fine.
        let alone = Tree::new("");
        alone.job(
            "busy.conf",
            &format!("[job \"busy\"]\ncommand = true\npath = /busy\non_busy = {value}\n"),
        );
        alone.load();
    }
    let tree = Tree::new(cluster);
    tree.job(
        "busy.conf",
        "[job \"busy\"]\ncommand = true\npath = /busy\non_busy = queue\n",
    );
    tree.load();
}

#[test]
fn database_max_connections_sizes_the_pool() {
    let cluster = Tree::new("database_url = postgres://db/svc\nnode_name = a\n")
        .load()
        .main
        .cluster
        .expect("cluster mode");
    assert_eq!(cluster.max_connections, 10);
    let cluster = Tree::new(
        "database_url = postgres://db/svc\nnode_name = a\ndatabase_max_connections = 3\n",
    )
    .load()
    .main
    .cluster
    .expect("cluster mode");
    assert_eq!(cluster.max_connections, 3);
    for bad in ["1", "0", "1001", "ten", "-2"] {
        let tree = Tree::new(&format!(
            "database_url = postgres://db/svc\nnode_name = a\ndatabase_max_connections = {bad}\n"
        ));
        issue_about(
            &tree.issues(),
            &tree.main_file(),
            "svc",
            "database_max_connections",
            Some(bad),
            "not a whole number from 2 to 1000",
        );
    }
}
