//! A configuration tree in a temporary directory, for the tests of [`super::load`]: the
//! files written as a test needs them, loaded with an environment of the test's own.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::ConfigError;
use super::loader::load_with_env;
use crate::config::{Config, ConfigIssue};

/// `<tmp>/etc/svc/svc.conf` with `dir_base` set to `<tmp>`, and the `$NAME` values its
/// load may read (none unless [`Tree::with_env`] gives them).
pub(super) struct Tree {
    dir: tempfile::TempDir,
    env: HashMap<String, String>,
}

impl Tree {
    /// `main_body` follows the `[svc]` header and the `dir_base` line.
    pub fn new(main_body: &str) -> Tree {
        let dir = tempfile::tempdir().expect("temporary directory");
        let tree = Tree {
            dir,
            env: HashMap::new(),
        };
        let text = format!(
            "[svc]\ndir_base = {}\n{main_body}",
            tree.dir.path().display()
        );
        tree.write("etc/svc/svc.conf", &text);
        tree
    }

    pub fn with_env(mut self, name: &str, value: &str) -> Tree {
        self.env.insert(name.to_string(), value.to_string());
        self
    }

    pub fn base(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn main_file(&self) -> PathBuf {
        self.path("etc/svc/svc.conf")
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().expect("a parent")).expect("create directories");
        fs::write(&path, text).expect("write file");
    }

    /// Writes `etc/svc/job.d/<file>`; returns its path.
    pub fn job(&self, file: &str, text: &str) -> PathBuf {
        let rel = format!("etc/svc/job.d/{file}");
        self.write(&rel, text);
        self.path(&rel)
    }

    pub fn http_job(&self, file: &str, text: &str) {
        self.write(&format!("etc/svc/job_http.d/{file}"), text);
    }

    pub fn result(&self) -> Result<Config, ConfigError> {
        let env = |name: &str| self.env.get(name).cloned();
        load_with_env(&self.main_file(), &env)
    }

    pub fn load(&self) -> Config {
        match self.result() {
            Ok(config) => config,
            Err(e) => panic!("configuration should load: {e}"),
        }
    }

    pub fn issues(&self) -> Vec<ConfigIssue> {
        self.result().expect_err("configuration should fail").issues
    }
}

/// The single issue about `key`, checked to name `file`, `section` and `value`.
#[track_caller]
pub(super) fn only_issue<'a>(
    issues: &'a [ConfigIssue],
    file: &Path,
    section: &str,
    key: &str,
    value: Option<&str>,
) -> &'a ConfigIssue {
    let found: Vec<&ConfigIssue> = issues
        .iter()
        .filter(|i| i.key.as_deref() == Some(key))
        .collect();
    assert_eq!(found.len(), 1, "one issue about {key}: {issues:#?}");
    let issue = found[0];
    assert_eq!(issue.file, file, "{issue}");
    assert_eq!(issue.section.as_deref(), Some(section), "{issue}");
    assert_eq!(issue.value.as_deref(), value, "{issue}");
    issue
}

/// The one issue about `key` in `section` (issues of other sections aside), checked to
/// name `file` and `value`, and to say `message` (a part of it).
#[track_caller]
pub(super) fn issue_about(
    issues: &[ConfigIssue],
    file: &Path,
    section: &str,
    key: &str,
    value: Option<&str>,
    message: &str,
) -> ConfigIssue {
    let in_section: Vec<ConfigIssue> = issues
        .iter()
        .filter(|i| i.section.as_deref() == Some(section))
        .cloned()
        .collect();
    let issue = only_issue(&in_section, file, section, key, value).clone();
    assert!(issue.message.contains(message), "{issue}");
    issue
}

pub(super) fn current_user() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .expect("user lookup")
        .expect("current user has a name")
        .name
}

pub(super) fn current_group() -> String {
    nix::unistd::Group::from_gid(nix::unistd::getgid())
        .expect("group lookup")
        .expect("current group has a name")
        .name
}

pub(super) const NO_SUCH_USER: &str = "svc-test-no-such-user-x";
pub(super) const NO_SUCH_GROUP: &str = "svc-test-no-such-group-x";

/// A bcrypt hash of `pw` (cost 4, so the tests stay fast).
pub(super) fn bcrypt_hash() -> String {
    bcrypt::hash("pw", 4).expect("bcrypt hash")
}

/// An argon2id hash of `pw` with small parameters.
pub(super) fn argon2_hash() -> String {
    use argon2::PasswordHasher as _;
    let params = argon2::Params::new(1024, 1, 1, None).expect("parameters");
    let salt = argon2::password_hash::SaltString::encode_b64(b"saltsaltsaltsalt").expect("salt");
    argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
        .hash_password(b"pw", &salt)
        .expect("hash")
        .to_string()
}

impl Tree {
    /// Writes `etc/svc/user.conf` with `mode`.
    pub(super) fn users(&self, text: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        self.write("etc/svc/user.conf", text);
        fs::set_permissions(
            self.path("etc/svc/user.conf"),
            fs::Permissions::from_mode(mode),
        )
        .expect("chmod user.conf");
    }
}
