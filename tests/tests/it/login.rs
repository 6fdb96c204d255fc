//! The optional login, against the real binary, where the process is what is tested:
//! `--check` reports a bad `user.conf` without showing the hash. What the API answers
//! with and without users (sessions, logout, the throttle) is tested in-process:
//! `svc-controller/src/http/session_tests.rs`.

use svc_tests::web::write_user_conf;
use svc_tests::{EX_CONFIG, TestService};

/// Password of the user `ann`, whose hash the test makes with the library.
const ANN_PASSWORD: &str = "correct horse battery staple";
/// A bcrypt (`$2a$`) hash of `password` made by another tool, for the user `bob`.
const BOB_BCRYPT: &str = "$2a$04$UuTkLRZZ6QofpDOlMz32MuuxEHA43WOemOYHPz6.SjsVsyO1tDU96";

/// `ann` (argon2id from `hash_password`) and `bob` (bcrypt).
fn users_text() -> String {
    let hash =
        svc_controller::security::password::hash_password(ANN_PASSWORD).expect("hash a password");
    assert!(svc_controller::security::password::verify_password(
        ANN_PASSWORD,
        &hash
    ));
    format!("[user \"ann\"]\npassword = {hash}\n\n[user \"bob\"]\npassword = {BOB_BCRYPT}\n")
}

// Stays: `--check` is the binary's command line, its output and exit status.
#[tokio::test]
async fn check_reports_a_bad_user_conf_without_the_hash() {
    let builder = TestService::builder();
    let hash = svc_controller::security::password::hash_password("x").expect("hash");
    let broken = format!("{}!", &hash[..hash.len() - 1]);
    let text =
        format!("[user \"ann\"]\npassword = {broken}\n[user \"bob\"]\npasswd = {BOB_BCRYPT}\n");
    write_user_conf(builder.dir_base(), &text, 0o600);
    let service = builder.build();
    let output = service.check().await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(EX_CONFIG), "{stderr}");
    let file = service.dir_base().join("etc/svc/user.conf");
    let ann = stderr
        .lines()
        .find(|line| line.contains("[user \"ann\"]"))
        .unwrap_or_else(|| panic!("no line about ann:\n{stderr}"));
    assert!(ann.contains(&file.display().to_string()), "{ann}");
    assert!(ann.contains("password = \"<hash>\""), "{ann}");
    assert!(ann.contains("argon2"), "{ann}");
    let bob = stderr
        .lines()
        .find(|line| line.contains("[user \"bob\"]") && line.contains("passwd"))
        .unwrap_or_else(|| panic!("no line about bob's passwd:\n{stderr}"));
    assert!(bob.contains("unknown key"), "{bob}");
    assert!(
        !stderr.contains(&broken[30..]),
        "the hash is not shown:\n{stderr}"
    );
    assert!(
        !stderr.contains(&BOB_BCRYPT[7..]),
        "the hash is not shown:\n{stderr}"
    );

    // Readable by everyone: a warning only.
    write_user_conf(service.dir_base(), &users_text(), 0o644);
    let output = service.check().await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning:"), "{stderr}");
    assert!(stderr.contains("user.conf"), "{stderr}");
    assert!(stderr.contains("0644"), "{stderr}");
}

// Stays: the password library as other crates call it, not an answer of the API.
#[test]
fn hash_password_makes_argon2id_hashes_that_verify() {
    use svc_controller::security::password::{
        hash_password, hash_password_from_reader, verify_password,
    };
    let hash = hash_password("s3cret").expect("hash");
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    assert!(verify_password("s3cret", &hash));
    assert!(!verify_password("s3cret\n", &hash));
    let from_input = hash_password_from_reader(&b"s3cret\n"[..]).expect("hash from input");
    assert!(verify_password("s3cret", &from_input));
    assert!(hash_password_from_reader(&b"\n"[..]).is_err());
    assert!(hash_password("").is_err());
}
