//! Password hashes of `user.conf`: making one (`svc-controller hash-password`: argon2id
//! with the argon2 crate's default parameters, from the terminal or standard input),
//! checking that a configured hash is usable (an argon2 PHC string within the memory
//! limit, or bcrypt), and verifying a password against one. The configuration refuses the
//! hashes [`check_password_hash`] refuses; the login service verifies with
//! [`verify_password`].

use std::io::BufRead;

use argon2::password_hash::SaltString;
use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};
use rand::RngCore as _;

/// Largest argon2 memory cost accepted in `user.conf`, in KiB (1 GiB).
pub const MAX_ARGON2_MEMORY_KIB: u32 = 1024 * 1024;

/// Why [`hash_password`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// An empty password is refused.
    #[error("the password is empty")]
    Empty,
    /// The hasher failed (not expected with the default parameters).
    #[error("cannot hash the password: {0}")]
    Hash(String),
}

/// An argon2id PHC string of `password` with a random salt and the argon2 crate's
/// default parameters (m=19456 KiB, t=2, p=1).
pub fn hash_password(password: &str) -> Result<String, HashError> {
    if password.is_empty() {
        return Err(HashError::Empty);
    }
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| HashError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| HashError::Hash(e.to_string()))
}

/// `svc-controller hash-password`: reads the password and returns its argon2id hash, for
/// `user.conf`. At a terminal it asks twice, without echo, and refuses two different
/// answers; from a pipe or a file it reads one line.
pub fn hash_password_from_stdin() -> anyhow::Result<String> {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // rpassword turns the terminal's echo off while the password is typed, and on
        // again afterwards, also when the read fails.
        let first = rpassword::prompt_password("Password: ")
            .map_err(|e| anyhow::anyhow!("cannot read the password from the terminal: {e}"))?;
        if first.is_empty() {
            anyhow::bail!("no password: an empty password is refused");
        }
        let again = rpassword::prompt_password("Password again: ")
            .map_err(|e| anyhow::anyhow!("cannot read the password from the terminal: {e}"))?;
        if first != again {
            anyhow::bail!("the two passwords differ: nothing was hashed");
        }
        return Ok(hash_password(&first)?);
    }
    hash_password_from_reader(std::io::stdin().lock())
}

/// As [`hash_password_from_stdin`] from any reader: the first line, without its line
/// ending; an empty password (or no input) is refused.
pub fn hash_password_from_reader(reader: impl BufRead) -> anyhow::Result<String> {
    let mut line = String::new();
    reader
        .take(64 * 1024)
        .read_line(&mut line)
        .map_err(|e| anyhow::anyhow!("cannot read the password from standard input: {e}"))?;
    let password = line
        .strip_suffix('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .unwrap_or(&line);
    if password.is_empty() {
        anyhow::bail!("no password: write it on standard input, one line");
    }
    Ok(hash_password(password)?)
}

/// The families of hashes `user.conf` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HashKind {
    Argon2,
    Bcrypt,
}

fn hash_kind(hash: &str) -> Option<HashKind> {
    if ["$argon2id$", "$argon2i$", "$argon2d$"]
        .iter()
        .any(|p| hash.starts_with(p))
    {
        Some(HashKind::Argon2)
    } else if ["$2a$", "$2b$", "$2y$"].iter().any(|p| hash.starts_with(p)) {
        Some(HashKind::Bcrypt)
    } else {
        None
    }
}

/// Checks that `value` is a usable password hash. The message never contains the value.
pub fn check_password_hash(value: &str) -> Result<(), String> {
    match hash_kind(value) {
        Some(HashKind::Argon2) => {
            let hash = PasswordHash::new(value)
                .map_err(|e| format!("not a valid argon2 PHC string: {e}"))?;
            let params = argon2::Params::try_from(&hash)
                .map_err(|e| format!("invalid argon2 parameters: {e}"))?;
            if hash.salt.is_none() || hash.hash.is_none() {
                return Err("the argon2 string lacks its salt or its hash".into());
            }
            if params.m_cost() > MAX_ARGON2_MEMORY_KIB {
                return Err(format!(
                    "the argon2 memory cost m={} KiB is over the limit of {MAX_ARGON2_MEMORY_KIB} KiB",
                    params.m_cost()
                ));
            }
            Ok(())
        }
        Some(HashKind::Bcrypt) => {
            let parts: bcrypt::HashParts = value
                .parse()
                .map_err(|e| format!("not a valid bcrypt hash: {e}"))?;
            if !(4..=31).contains(&parts.get_cost()) {
                return Err(format!("bcrypt cost {} is outside 4..31", parts.get_cost()));
            }
            Ok(())
        }
        None => Err(
            "not an argon2 ($argon2id$...) or bcrypt ($2b$...) hash; make one with \
             svc-controller hash-password"
                .into(),
        ),
    }
}

/// True when `password` matches `hash` (argon2 with the hash's own variant and
/// parameters, or bcrypt). A hash that [`check_password_hash`] refuses (one that does not
/// parse, or asks for too much memory) matches nothing.
pub fn verify_password(password: &str, hash: &str) -> bool {
    if check_password_hash(hash).is_err() {
        return false;
    }
    match hash_kind(hash) {
        Some(HashKind::Argon2) => PasswordHash::new(hash).is_ok_and(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        }),
        Some(HashKind::Bcrypt) => bcrypt::verify(password, hash).unwrap_or(false),
        None => false,
    }
}

/// What a check against `hash` costs, as a key: its family and parameters (argon2
/// variant, version, memory, passes, lanes and output length; bcrypt cost). Two hashes
/// with the same key take the same time to verify. `None` for a hash that
/// [`check_password_hash`] refuses.
pub fn hash_cost_key(hash: &str) -> Option<String> {
    check_password_hash(hash).ok()?;
    match hash_kind(hash)? {
        HashKind::Argon2 => {
            let parsed = PasswordHash::new(hash).ok()?;
            let params = argon2::Params::try_from(&parsed).ok()?;
            Some(format!(
                "{}$v={}$m={},t={},p={},len={:?}",
                parsed.algorithm,
                parsed.version.unwrap_or(0x13),
                params.m_cost(),
                params.t_cost(),
                params.p_cost(),
                params.output_len()
            ))
        }
        HashKind::Bcrypt => {
            let parts: bcrypt::HashParts = hash.parse().ok()?;
            Some(format!("bcrypt$cost={}", parts.get_cost()))
        }
    }
}

/// A hash of a random password that costs as much to verify as `hash` (same key for
/// [`hash_cost_key`]): what an unknown name is checked against, so that its refusal
/// takes as long as a user's wrong password. `None` for a hash that
/// [`check_password_hash`] refuses.
pub fn dummy_hash_like(hash: &str) -> Option<String> {
    check_password_hash(hash).ok()?;
    let mut random = [0u8; 24];
    rand::rng().fill_bytes(&mut random);
    let password = hex::encode(random);
    match hash_kind(hash)? {
        HashKind::Argon2 => {
            let parsed = PasswordHash::new(hash).ok()?;
            let params = argon2::Params::try_from(&parsed).ok()?;
            let algorithm = argon2::Algorithm::try_from(parsed.algorithm).ok()?;
            let version = argon2::Version::try_from(parsed.version.unwrap_or(0x13)).ok()?;
            let mut salt = [0u8; 16];
            rand::rng().fill_bytes(&mut salt);
            let salt = SaltString::encode_b64(&salt).ok()?;
            Argon2::new(algorithm, version, params)
                .hash_password(password.as_bytes(), &salt)
                .ok()
                .map(|hash| hash.to_string())
        }
        HashKind::Bcrypt => {
            let parts: bcrypt::HashParts = hash.parse().ok()?;
            bcrypt::hash(password, parts.get_cost()).ok()
        }
    }
}

/// A cheap argon2 hash (tests only; the service hashes with the default parameters).
#[cfg(test)]
pub(crate) fn cheap_argon2(algorithm: argon2::Algorithm, password: &str) -> String {
    use argon2::password_hash::SaltString;
    use argon2::{Argon2, Params, PasswordHasher, Version};
    let params = Params::new(1024, 1, 1, None).expect("argon2 parameters");
    let salt = SaltString::encode_b64(b"0123456789abcdef").expect("salt");
    Argon2::new(algorithm, Version::V0x13, params)
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 hash")
        .to_string()
}

#[cfg(test)]
mod tests {
    use argon2::Algorithm;

    use super::*;

    #[test]
    fn hash_password_gives_an_argon2id_string_that_verifies() {
        let hash = hash_password("correct horse").expect("hash");
        assert!(
            hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{hash}"
        );
        assert_eq!(check_password_hash(&hash), Ok(()));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("correct horse ", &hash));
        assert!(!verify_password("", &hash));
        // A new salt each time.
        assert_ne!(hash, hash_password("correct horse").expect("hash"));
        assert_eq!(hash_password(""), Err(HashError::Empty));
    }

    #[test]
    fn argon2i_and_argon2d_hashes_verify() {
        for (algorithm, prefix) in [
            (Algorithm::Argon2i, "$argon2i$"),
            (Algorithm::Argon2d, "$argon2d$"),
            (Algorithm::Argon2id, "$argon2id$"),
        ] {
            let hash = cheap_argon2(algorithm, "pw");
            assert!(hash.starts_with(prefix), "{hash}");
            assert_eq!(check_password_hash(&hash), Ok(()), "{hash}");
            assert!(verify_password("pw", &hash), "{hash}");
            assert!(!verify_password("pW", &hash), "{hash}");
        }
    }

    #[test]
    fn bcrypt_hashes_verify_in_every_accepted_version() {
        let hash = bcrypt::hash("hunter2", 4).expect("bcrypt hash");
        assert!(hash.starts_with("$2b$04$"), "{hash}");
        for prefix in ["$2a$", "$2b$", "$2y$"] {
            let variant = format!("{prefix}{}", &hash[4..]);
            assert_eq!(check_password_hash(&variant), Ok(()), "{variant}");
            assert!(verify_password("hunter2", &variant), "{variant}");
            assert!(!verify_password("hunter3", &variant), "{variant}");
        }
        // The buggy 2x variant is not accepted.
        let x = format!("$2x${}", &hash[4..]);
        assert!(check_password_hash(&x).is_err());
        assert!(!verify_password("hunter2", &x));
    }

    #[test]
    fn bad_hashes_are_refused_without_quoting_them() {
        let good_bcrypt = bcrypt::hash("x", 4).expect("bcrypt hash");
        for bad in [
            "hunter2".to_string(),
            "$argon2id$v=19$m=19456,t=2,p=1$notbase64!!$xx".to_string(),
            "$argon2id$v=19$m=19456,t=2,p=1".to_string(),
            "$argon2id$v=19$m=4194304,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
                .to_string(),
            "$2b$04$tooshort".to_string(),
            format!("$2b$99${}", &good_bcrypt[7..]),
            String::new(),
        ] {
            let message = check_password_hash(&bad).expect_err(&bad);
            if bad.len() > 8 {
                assert!(!message.contains(&bad[8..]), "{message} quotes {bad}");
            }
            assert!(!verify_password("x", &bad), "{bad}");
        }
        assert!(
            check_password_hash("hunter2")
                .expect_err("plain text")
                .contains("hash-password")
        );
    }

    #[test]
    fn a_dummy_hash_costs_what_its_model_costs() {
        let models = [
            hash_password("x").expect("hash"),
            cheap_argon2(Algorithm::Argon2i, "x"),
            cheap_argon2(Algorithm::Argon2d, "x"),
            bcrypt::hash("x", 4).expect("bcrypt hash"),
            bcrypt::hash("x", 5)
                .expect("bcrypt hash")
                .replacen("$2b$", "$2y$", 1),
        ];
        for model in &models {
            let dummy = dummy_hash_like(model).expect(model);
            assert_eq!(check_password_hash(&dummy), Ok(()), "{dummy}");
            assert_eq!(hash_cost_key(&dummy), hash_cost_key(model), "{model}");
            assert!(!verify_password("x", &dummy), "a random password");
        }
        let keys: std::collections::HashSet<_> = models.iter().map(|m| hash_cost_key(m)).collect();
        assert_eq!(keys.len(), models.len(), "{keys:?}");
        assert_eq!(hash_cost_key("hunter2"), None);
        assert_eq!(dummy_hash_like("hunter2"), None);
    }

    #[test]
    fn hash_password_from_a_reader_takes_one_line() {
        for input in ["s3cret\n", "s3cret\r\n", "s3cret", "s3cret\nsecond line\n"] {
            let hash = hash_password_from_reader(input.as_bytes()).expect(input);
            assert!(verify_password("s3cret", &hash), "{input:?}");
        }
        let spaced = hash_password_from_reader(" a b \n".as_bytes()).expect("spaces kept");
        assert!(verify_password(" a b ", &spaced));
        for empty in ["", "\n", "\r\n"] {
            assert!(
                hash_password_from_reader(empty.as_bytes()).is_err(),
                "{empty:?}"
            );
        }
    }
}
