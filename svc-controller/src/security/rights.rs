//! Who may do what: the roles of `user.conf` accounts and the rights each one grants.
//!
//! A role is part of an account's configuration (`role = viewer | operator | admin`,
//! default `viewer`). The HTTP layer asks [`Role::may`] before it acts for a session; a
//! signed request (the main secret) is not a role and is allowed every action, as it
//! always was.

use std::fmt;

/// The role of an account, from least to most allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub enum Role {
    /// Reads: the dashboard, logs, history. Today's behaviour of a login, so the default.
    #[default]
    Viewer,
    /// Also runs now, pauses, resumes and cancels Jobs and JobHttps.
    Operator,
    /// Also reloads the configuration and reads the audit log.
    Admin,
}

/// What an action needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    /// Read pages and the GET API.
    Read,
    /// Run now, pause, resume, cancel.
    Operate,
    /// Reload, read the audit log.
    Administer,
}

impl Role {
    /// Every role, in order, for messages and documentation.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

    /// Parses a configured role name (lower case, as documented).
    pub fn parse(text: &str) -> Result<Role, String> {
        Role::ALL
            .into_iter()
            .find(|role| role.as_str() == text)
            .ok_or_else(|| format!("unknown role {text:?} (one of viewer, operator, admin)"))
    }

    /// The configured name of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// The least role that has `right`.
    pub fn needed_for(right: Right) -> Role {
        match right {
            Right::Read => Role::Viewer,
            Right::Operate => Role::Operator,
            Right::Administer => Role::Admin,
        }
    }

    /// True when this role has `right`: each role has the rights of the ones below it.
    pub fn may(self, right: Right) -> bool {
        self >= Role::needed_for(right)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_by_their_documented_names_only() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Ok(role));
        }
        for bad in ["", "Admin", "root", "operator ", "viewers"] {
            let err = Role::parse(bad).expect_err(bad);
            assert!(err.contains("viewer, operator, admin"), "{err}");
        }
        assert_eq!(Role::default(), Role::Viewer);
    }

    #[test]
    fn each_role_has_the_rights_of_the_ones_below() {
        use Right::*;
        let table = [
            (Role::Viewer, [true, false, false]),
            (Role::Operator, [true, true, false]),
            (Role::Admin, [true, true, true]),
        ];
        for (role, expected) in table {
            let got = [role.may(Read), role.may(Operate), role.may(Administer)];
            assert_eq!(got, expected, "{role}");
        }
    }
}
