//! Privilege drop (`setgroups`, `setgid`, `setuid`, then checks) and the `prctl` settings
//! that tie the runner to the controller and its command tree.

use nix::errno::Errno;
use nix::sys::prctl;
use nix::sys::signal::Signal;
use nix::unistd::{
    Gid, Pid, Uid, getegid, geteuid, getgid, getppid, getuid, setgid, setgroups, setuid,
};
use proto::Credentials;

/// Why the runner could not become the requested user.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// A system call of the switch failed.
    #[error("cannot switch to user {user} (uid {uid}, gid {gid}): {call} failed: {errno}")]
    Call {
        /// Name of the user, for the message.
        user: String,
        /// Target uid.
        uid: u32,
        /// Target gid.
        gid: u32,
        /// The failing call, e.g. `setuid(65534)`.
        call: String,
        /// Its error.
        errno: Errno,
    },
    /// The switch seemed to work but the ids are not the requested ones afterwards.
    #[error("cannot switch to user {user}: {check}")]
    Check {
        /// Name of the user.
        user: String,
        /// What did not match.
        check: String,
    },
    /// Not root, and the request is for somebody else.
    #[error(
        "runner is not root, cannot switch to user {user} (uid {uid}, gid {gid}; runner is uid {current_uid}, gid {current_gid})"
    )]
    NotRoot {
        /// Name of the user.
        user: String,
        /// Target uid.
        uid: u32,
        /// Target gid.
        gid: u32,
        /// The runner's uid.
        current_uid: u32,
        /// The runner's gid.
        current_gid: u32,
    },
}

/// Marks the runner as a child subreaper, so orphans of its commands become its children
/// and can be swept. Survives the credential change; call it early.
pub fn set_child_subreaper() -> Result<(), Errno> {
    prctl::set_child_subreaper(true)
}

/// Asks for SIGTERM when the parent (the controller) dies, then checks the parent is still
/// `parent`. Returns false when the parent is already gone. Call it after the credential
/// change, which clears the setting.
pub fn tie_to_parent(parent: Pid) -> Result<bool, Errno> {
    prctl::set_pdeathsig(Signal::SIGTERM)?;
    Ok(getppid() == parent)
}

/// Switches to `credentials`: as root with `setgroups`, `setgid` then `setuid`, verified
/// afterwards; without root only when they are already the current ids.
pub fn apply(credentials: &Credentials) -> Result<(), CredentialsError> {
    if geteuid().is_root() {
        switch_as_root(credentials)
    } else {
        check_unprivileged(credentials)
    }
}

fn check_unprivileged(credentials: &Credentials) -> Result<(), CredentialsError> {
    let same = getuid().as_raw() == credentials.uid
        && geteuid().as_raw() == credentials.uid
        && getgid().as_raw() == credentials.gid
        && getegid().as_raw() == credentials.gid;
    if same {
        Ok(())
    } else {
        Err(CredentialsError::NotRoot {
            user: credentials.user_name.clone(),
            uid: credentials.uid,
            gid: credentials.gid,
            current_uid: getuid().as_raw(),
            current_gid: getgid().as_raw(),
        })
    }
}

fn switch_as_root(credentials: &Credentials) -> Result<(), CredentialsError> {
    let call_error = |call: String, errno: Errno| CredentialsError::Call {
        user: credentials.user_name.clone(),
        uid: credentials.uid,
        gid: credentials.gid,
        call,
        errno,
    };
    let groups: Vec<Gid> = credentials
        .groups
        .iter()
        .copied()
        .map(Gid::from_raw)
        .collect();
    setgroups(&groups)
        .map_err(|e| call_error(format!("setgroups({} groups)", credentials.groups.len()), e))?;
    setgid(Gid::from_raw(credentials.gid))
        .map_err(|e| call_error(format!("setgid({})", credentials.gid), e))?;
    setuid(Uid::from_raw(credentials.uid))
        .map_err(|e| call_error(format!("setuid({})", credentials.uid), e))?;
    verify(credentials)
}

fn verify(credentials: &Credentials) -> Result<(), CredentialsError> {
    let check = |check: String| CredentialsError::Check {
        user: credentials.user_name.clone(),
        check,
    };
    let ids = [
        ("getuid", getuid().as_raw(), credentials.uid),
        ("geteuid", geteuid().as_raw(), credentials.uid),
        ("getgid", getgid().as_raw(), credentials.gid),
        ("getegid", getegid().as_raw(), credentials.gid),
    ];
    for (call, got, want) in ids {
        if got != want {
            return Err(check(format!("{call}() returned {got} instead of {want}")));
        }
    }
    if credentials.uid != 0 && setuid(Uid::from_raw(0)).is_ok() {
        return Err(check("setuid(0) still succeeds after dropping root".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_ids_are_accepted_without_root_logic() {
        let credentials = Credentials {
            uid: getuid().as_raw(),
            gid: getgid().as_raw(),
            groups: vec![],
            user_name: "me".into(),
        };
        // Only the unprivileged path is exercised: the root path would change the test
        // process's own ids.
        if getuid() == geteuid() && getgid() == getegid() {
            check_unprivileged(&credentials).expect("same ids accepted");
        }
    }

    #[test]
    fn other_ids_are_refused_without_root() {
        let credentials = Credentials {
            uid: getuid().as_raw().wrapping_add(1),
            gid: getgid().as_raw(),
            groups: vec![],
            user_name: "other".into(),
        };
        let err = check_unprivileged(&credentials).expect_err("refused");
        assert!(
            err.to_string()
                .starts_with("runner is not root, cannot switch to user other"),
            "{err}"
        );
    }

    #[test]
    fn call_error_names_user_and_call() {
        let err = CredentialsError::Call {
            user: "nobody".into(),
            uid: 65534,
            gid: 65534,
            call: "setuid(65534)".into(),
            errno: Errno::EPERM,
        };
        let text = err.to_string();
        assert!(
            text.contains("nobody") && text.contains("setuid(65534)"),
            "{text}"
        );
    }
}
