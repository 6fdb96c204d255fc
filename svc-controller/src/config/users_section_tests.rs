//! Tests of `user.conf`, loaded from configuration trees in temporary directories.

use std::fs;

use crate::config::ConfigIssue;
use crate::config::test_tree::*;

// ---------------------------------------------------------------------------------------
// user.conf.

#[test]
fn without_user_conf_there_are_no_users() {
    let tree = Tree::new("");
    let config = tree.load();
    assert!(config.users.is_empty());
    assert!(config.warnings.is_empty());
}

#[test]
fn users_are_loaded_in_file_order() {
    let tree = Tree::new("");
    let (argon2, bcrypt) = (argon2_hash(), bcrypt_hash());
    tree.users(
        &format!(
            "# who may log in\n[user \"ann\"]\npassword = {argon2}\n\n[User \"bob.smith@example\"]\n\
             PASSWORD = {bcrypt}\n"
        ),
        0o600,
    );
    let config = tree.load();
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    let names: Vec<&str> = config.users.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["ann", "bob.smith@example"]);
    assert_eq!(config.users[0].password_hash, argon2);
    assert_eq!(config.users[1].password_hash, bcrypt);
    assert_eq!(config.users[0].file, tree.path("etc/svc/user.conf"));
    let shown = format!("{:?}", config.users);
    assert!(
        !shown.contains(&argon2) && !shown.contains(&bcrypt),
        "{shown}"
    );
}

#[test]
fn a_user_conf_readable_by_all_is_a_warning() {
    let tree = Tree::new("");
    tree.users(
        &format!("[user \"ann\"]\npassword = {}\n", bcrypt_hash()),
        0o644,
    );
    let config = tree.load();
    assert_eq!(config.users.len(), 1);
    assert_eq!(config.warnings.len(), 1, "{:?}", config.warnings);
    let warning = &config.warnings[0];
    assert_eq!(warning.file, tree.path("etc/svc/user.conf"));
    assert!(warning.message.contains("0644"), "{warning}");
    assert!(warning.message.contains("chmod 600"), "{warning}");
    tree.users(
        &format!("[user \"ann\"]\npassword = {}\n", bcrypt_hash()),
        0o640,
    );
    assert!(tree.load().warnings.is_empty());
}

#[test]
fn user_conf_problems_name_file_section_and_key_but_never_the_hash() {
    let tree = Tree::new("");
    let hash = bcrypt_hash();
    let broken = format!("{}X", &hash[..59]);
    let text = format!(
        "[user \"ann\"]\npassword = {hash}\n\
         [user \"ann\"]\npassword = {hash}\n\
         [user \"bad name\"]\npassword = {hash}\n\
         [user \"cy\"]\npassword = hunter2\n\
         [user \"dee\"]\npasswd = {hash}\n\
         [user \"eve\"]\npassword = {broken}\n\
         [user \"fay\"]\npassword = {hash}\npassword = {hash}\n\
         [job \"j\"]\ncommand = true\n\
         {hash}\n"
    );
    tree.users(&text, 0o600);
    let file = tree.path("etc/svc/user.conf");
    let issues = tree.issues();
    for issue in &issues {
        let shown = issue.to_string();
        assert!(!shown.contains(&hash[7..]), "the hash is shown: {shown}");
        assert!(!shown.contains("hunter2"), "the value is shown: {shown}");
        assert_eq!(issue.file, file, "{issue}");
    }
    let of_section = |section: &str| -> Vec<&ConfigIssue> {
        issues
            .iter()
            .filter(|i| i.section.as_deref() == Some(section))
            .collect()
    };
    let ann = of_section("user \"ann\"");
    assert_eq!(ann.len(), 1, "{issues:#?}");
    assert!(
        ann[0]
            .message
            .contains("duplicate user \"ann\" (first on line 1)")
    );
    let bad = of_section("user \"bad name\"");
    assert!(bad[0].message.contains("invalid user name"), "{issues:#?}");
    let cy = of_section("user \"cy\"");
    assert_eq!(cy[0].key.as_deref(), Some("password"));
    assert_eq!(cy[0].value.as_deref(), Some("<hash>"));
    assert!(cy[0].message.contains("hash-password"), "{}", cy[0]);
    let dee = of_section("user \"dee\"");
    assert_eq!(dee.len(), 2, "{dee:#?}");
    assert_eq!(dee[0].key.as_deref(), Some("passwd"));
    assert_eq!(dee[0].value.as_deref(), Some("<redacted>"));
    assert!(dee[0].message.contains("unknown key"));
    assert_eq!(dee[1].key.as_deref(), Some("password"));
    assert!(dee[1].message.contains("a user needs password"));
    let eve = of_section("user \"eve\"");
    assert_eq!(eve[0].value.as_deref(), Some("<hash>"));
    assert!(eve[0].message.contains("bcrypt"), "{}", eve[0]);
    let fay = of_section("user \"fay\"");
    assert!(fay[0].message.contains("repeated key"), "{}", fay[0]);
    let job = of_section("job \"j\"");
    assert!(
        job.iter()
            .any(|i| i.message.contains("only [user \"NAME\"] sections")),
        "{job:#?}"
    );
    // The pasted hash without a key: named by its line only.
    let pasted = issues
        .iter()
        .find(|i| i.message.starts_with("line 18:"))
        .expect("an issue for line 18");
    assert_eq!(pasted.key, None);
    assert!(
        pasted.message.contains("not a 'key = value' line"),
        "{pasted}"
    );
    assert_eq!(issues.len(), 9, "{issues:#?}");
}

#[test]
fn user_sections_elsewhere_are_errors() {
    let tree = Tree::new(&format!("[user \"ann\"]\npassword = {}\n", bcrypt_hash()));
    tree.job("a.conf", "[user \"bob\"]\npassword = x\n");
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert_eq!(issues[0].file, tree.main_file());
    assert!(issues[0].message.contains("belong in"), "{}", issues[0]);
    assert!(issues[0].message.contains("user.conf"), "{}", issues[0]);
    assert_eq!(issues[1].file, tree.path("etc/svc/job.d/a.conf"));
}

#[test]
fn an_empty_user_conf_enables_nothing() {
    let tree = Tree::new("");
    tree.users("# nobody yet\n", 0o600);
    assert!(tree.load().users.is_empty());
}

#[test]
fn user_conf_that_is_a_directory() {
    let tree = Tree::new("");
    fs::create_dir_all(tree.path("etc/svc/user.conf")).expect("mkdir");
    let issues = tree.issues();
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert!(issues[0].message.contains("not a regular file"));
}
