//! Finding (and building) the binaries under test.
//!
//! Integration tests run from `target/[<triple>/]<profile>/deps/<test-exe>`. The binaries of
//! the other workspace members are not dependencies of this crate, so cargo does not build
//! them for `cargo test -p svc-tests`: [`binaries()`] runs `cargo build` for them once per
//! test process, with the same profile and target directory, and then points at
//! `target/[<triple>/]<profile>/svc-controller` and `.../svc-runner`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Paths of the binaries under test.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// `svc-controller`.
    pub controller: PathBuf,
    /// `svc-runner`.
    pub runner: PathBuf,
    /// The directory holding both (`target/<profile>`).
    pub profile_dir: PathBuf,
}

/// The binaries under test, built and current. The first call in a process runs
/// `$CARGO build -p svc-controller -p svc-runner` (same profile and target as this test
/// executable) and panics with cargo's output when that build fails; later calls return
/// the cached answer.
pub fn binaries() -> &'static Binaries {
    static BINARIES: OnceLock<Binaries> = OnceLock::new();
    BINARIES.get_or_init(build_binaries)
}

fn build_binaries() -> Binaries {
    let exe = std::env::current_exe().expect("path of the running test executable");
    // target/[<triple>/]<profile>/deps/<exe>
    let deps = exe.parent().expect("test executable lives in a directory");
    let profile_dir = if deps.file_name().is_some_and(|name| name == "deps") {
        deps.parent().expect("deps has a parent")
    } else {
        deps
    }
    .to_path_buf();
    let profile = profile_dir
        .file_name()
        .and_then(|name| name.to_str())
        .expect("profile directory has a UTF-8 name")
        .to_owned();
    let above = profile_dir
        .parent()
        .expect("profile directory has a parent");
    // The target root carries CACHEDIR.TAG; when the directory above the profile does not,
    // it is a target triple directory (`cargo test --target <triple>`).
    let (target_dir, triple) = if is_target_root(above) {
        (above.to_path_buf(), None)
    } else {
        let triple = above
            .file_name()
            .and_then(|name| name.to_str())
            .map(str::to_owned);
        (
            above
                .parent()
                .expect("triple directory has a parent")
                .to_path_buf(),
            triple,
        )
    };

    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace");
    let cargo = std::env::var_os("CARGO")
        .or_else(|| option_env!("CARGO").map(Into::into))
        .unwrap_or_else(|| "cargo".into());

    let mut command = Command::new(&cargo);
    command
        .arg("build")
        .args(["-p", "svc-controller", "-p", "svc-runner"])
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    if let Some(triple) = &triple {
        command.args(["--target", triple]);
    }
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("cannot run {cargo:?} build: {err}"));
    if !output.status.success() {
        panic!(
            "building svc-controller and svc-runner failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let binaries = Binaries {
        controller: profile_dir.join("svc-controller"),
        runner: profile_dir.join("svc-runner"),
        profile_dir,
    };
    for path in [&binaries.controller, &binaries.runner] {
        assert!(
            path.is_file(),
            "cargo build succeeded but {} does not exist",
            path.display()
        );
    }
    binaries
}

fn is_target_root(dir: &Path) -> bool {
    dir.join("CACHEDIR.TAG").is_file() || dir.file_name().is_some_and(|name| name == "target")
}
