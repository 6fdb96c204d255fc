//! A throwaway PostgreSQL server for the cluster tests: Debian's `postgresql` binaries,
//! a cluster initialised in a temporary directory, listening on a free loopback port.
//!
//! Whatever system cluster the package may have started is never used: each
//! [`PostgresServer`] has its own data directory, its own port on 127.0.0.1 and its Unix
//! socket inside its own directory. Tests may share one server and take a database each
//! ([`PostgresServer::create_database`]).
//!
//! PostgreSQL refuses to run as root, so when the tests run as root the server runs as the
//! package's `postgres` user (or `nobody` when there is none), which then owns the
//! temporary directory. The server runs with `fsync = off`: a test server need not survive
//! a crash of the machine, and the tests are faster without the syncs. A crash of the
//! server alone ([`PostgresServer::kill`]) still loses no committed transaction: commits
//! are synchronous (their WAL is written to the operating system before the commit
//! returns), only not synced to disk.
//!
//! A server may get a streaming standby of its own ([`PostgresServer::launch_standby`],
//! synchronous on request), which a failover test promotes
//! ([`PostgresServer::promote`]) once it has killed the first.
//!
//! Every call here blocks (it starts processes and waits for them, always with a bound).
//! The server gets an immediate shutdown when the test process ends (its parent-death
//! signal), so that a test run killed before it drops the server leaves none behind. The
//! signal belongs to the *thread* that spawned the server, so every server is spawned by
//! one launcher thread that lives as long as the process: a server launched from a
//! thread that ends early (an async runtime's blocking pool ends idle threads after
//! seconds) must not die with it while the test still uses it.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::free_port;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Name of the superuser the server is initialised with; every connection uses it.
pub const SUPERUSER: &str = "svc_test";

/// How long the server may take to accept connections after it is started.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the server may take to exit once asked to.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Time between two readiness or exit checks.
const POLL: Duration = Duration::from_millis(50);

/// A PostgreSQL server of its own, stopped and removed when dropped.
#[derive(Debug)]
pub struct PostgresServer {
    /// Removed on drop, after the server is stopped.
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// Who the server runs as, when the tests run as root.
    run_as: Option<(nix::unistd::Uid, nix::unistd::Gid)>,
    port: u16,
    /// The postmaster, while it runs.
    child: Option<Child>,
}

impl PostgresServer {
    /// Initialises a cluster in a new temporary directory and starts it on a free loopback
    /// port. Panics with what to install when the PostgreSQL binaries are missing.
    pub fn launch() -> PostgresServer {
        let mut server = PostgresServer::prepare();
        server.initdb();
        server.start_on_a_free_port();
        server
    }

    /// A streaming standby of this server: a base backup (`pg_basebackup -R`) in a
    /// temporary directory of its own, started on its own free port. With `synchronous`,
    /// this server then waits for the standby to have each commit before it returns, so
    /// that a commit answered here is on the standby when this server dies. Panics with
    /// what to install when `pg_basebackup` is missing.
    pub fn launch_standby(&self, synchronous: bool) -> PostgresServer {
        let mut standby = PostgresServer::prepare();
        let program = standby.bin.join("pg_basebackup");
        assert!(
            is_executable(&program),
            "the failover tests need {} (Debian's postgresql package)",
            program.display()
        );
        // Replication over loopback is allowed by initdb's default pg_hba.conf (trust).
        let output = standby
            .command("pg_basebackup")
            .arg("-D")
            .arg(standby.data_dir())
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                SUPERUSER,
            ])
            .args(["-R", "-X", "stream", "-c", "fast", "--no-sync"])
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null())
            .output()
            .expect("run pg_basebackup");
        assert!(
            output.status.success(),
            "pg_basebackup failed: {}",
            crate::output_text(&output)
        );
        standby.start_on_a_free_port();
        self.wait_for_replication("state = 'streaming'");
        if synchronous {
            self.psql(
                "postgres",
                "ALTER SYSTEM SET synchronous_standby_names = '*'",
            );
            self.psql("postgres", "SELECT pg_reload_conf()");
            self.wait_for_replication("sync_state = 'sync'");
        }
        standby
    }

    /// Promotes this standby to a primary (`pg_ctl promote`) and waits until it takes
    /// writes.
    pub fn promote(&self) {
        let output = self
            .command("pg_ctl")
            .arg("promote")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-w", "-t", &READY_TIMEOUT.as_secs().to_string()])
            .stdin(Stdio::null())
            .output()
            .expect("run pg_ctl promote");
        assert!(
            output.status.success(),
            "pg_ctl promote failed: {}",
            crate::output_text(&output)
        );
        self.poll_until("the promoted server to leave recovery", || {
            self.psql("postgres", "SELECT pg_is_in_recovery()").trim() == "f"
        });
    }

    /// Waits until a standby's replication here meets `condition` (SQL on
    /// `pg_stat_replication`).
    fn wait_for_replication(&self, condition: &str) {
        let sql = format!("SELECT count(*) FROM pg_stat_replication WHERE {condition}");
        self.poll_until(&format!("a standby with {condition}"), || {
            self.psql("postgres", &sql).trim() != "0"
        });
    }

    /// Polls `done` until it holds, within [`READY_TIMEOUT`]; panics with the log after.
    fn poll_until(&self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + READY_TIMEOUT;
        while !done() {
            assert!(
                Instant::now() < deadline,
                "no {what} within {READY_TIMEOUT:?}; the log:\n{}",
                self.log()
            );
            std::thread::sleep(POLL);
        }
    }

    /// A server not initialised yet: its temporary directory and socket directory, owned
    /// by the server's user.
    fn prepare() -> PostgresServer {
        let bin = find_bin_dir();
        let run_as = server_user();
        let dir = tempfile::Builder::new()
            .prefix("svc-pg-")
            .tempdir()
            .expect("create the temporary directory of the PostgreSQL server");
        let server = PostgresServer {
            dir,
            bin,
            run_as,
            port: 0,
            child: None,
        };
        std::fs::create_dir(server.socket_dir()).expect("create the socket directory");
        if let Some((uid, gid)) = run_as {
            for path in [server.dir.path().to_path_buf(), server.socket_dir()] {
                nix::unistd::chown(&path, Some(uid), Some(gid))
                    .expect("give the PostgreSQL user its temporary directories");
            }
        }
        server
    }

    /// Starts the server on a free port. The port is free when chosen but may be taken
    /// before the server binds it: then the server exits at once and another is tried.
    fn start_on_a_free_port(&mut self) {
        for attempt in 0..=crate::PORT_COLLISIONS {
            self.port = free_port();
            match self.try_start() {
                Ok(()) => return,
                Err(log) if attempt < crate::PORT_COLLISIONS && crate::lost_its_port(&log) => {
                    continue;
                }
                Err(log) => panic!("PostgreSQL did not start; its log:\n{log}"),
            }
        }
    }

    /// Starts the server again on the same port and data directory, after
    /// [`stop`](Self::stop) or [`kill`](Self::kill).
    pub fn start(&mut self) {
        assert!(
            self.child.is_none(),
            "the PostgreSQL server is already running"
        );
        if let Err(log) = self.try_start() {
            panic!(
                "PostgreSQL did not start again on port {}; its log:\n{log}",
                self.port
            );
        }
    }

    /// Stops the server with a fast shutdown: open sessions are ended, a checkpoint is
    /// written. Waits until the server has exited.
    pub fn stop(&mut self) {
        self.signal_and_wait(Signal::SIGINT);
    }

    /// Stops the server as a crash would: an immediate shutdown (no checkpoint; the next
    /// [`start`](Self::start) runs crash recovery). Unlike a SIGKILL of the postmaster it
    /// leaves no backend behind that would hold the shared memory and prevent the start.
    pub fn kill(&mut self) {
        self.signal_and_wait(Signal::SIGQUIT);
    }

    /// True while the server process runs.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Port the server listens on (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// URL of the `postgres` database.
    pub fn url(&self) -> String {
        self.url_of("postgres")
    }

    /// URL of the database `name`.
    pub fn url_of(&self, name: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates the database `name` (lower-case letters, digits and `_`) and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        assert!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "database names here are lower-case letters, digits and _: {name:?}"
        );
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url_of(name)
    }

    /// Runs `sql` in database `db` with `psql` and returns its unaligned output (no
    /// headers); panics with psql's error when it fails.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", SUPERUSER, "-d", db, "-c", sql])
            .env("PGCONNECT_TIMEOUT", "10")
            .output()
            .expect("run psql");
        assert!(
            output.status.success(),
            "psql {sql:?} failed: {}",
            crate::output_text(&output)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn socket_dir(&self) -> PathBuf {
        self.dir.path().join("socket")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// A command of the server's binaries, run as the server's user.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        command.current_dir(self.dir.path()).env("LC_ALL", "C");
        if let Some((uid, gid)) = self.run_as {
            // Set as root, the standard library also drops the supplementary groups.
            command.uid(uid.as_raw()).gid(gid.as_raw());
        }
        command
    }

    fn initdb(&self) {
        // Trust on loopback only: the server listens nowhere else, and the tests need no
        // password. --no-sync: the cluster is thrown away.
        let output = self
            .command("initdb")
            .arg("-D")
            .arg(self.data_dir())
            .args([
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
            ])
            .arg("--no-sync")
            .stdin(Stdio::null())
            .output()
            .expect("run initdb");
        assert!(
            output.status.success(),
            "initdb failed: {}",
            crate::output_text(&output)
        );
    }

    /// Starts the postmaster and waits until it accepts connections; on failure returns
    /// its log.
    fn try_start(&mut self) -> Result<(), String> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the PostgreSQL log");
        let log_err = log.try_clone().expect("clone the log's descriptor");
        let mut command = self.command("postgres");
        // SAFETY: the closure runs in the child between fork and exec and only makes the
        // prctl system call, which is async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                // A test process that dies without dropping the server (a killed test
                // run) leaves no server behind: it gets an immediate shutdown when the
                // thread that spawned it ends, the launcher, which ends with the process.
                nix::sys::prctl::set_pdeathsig(Signal::SIGQUIT).map_err(std::io::Error::from)
            });
        }
        command
            .arg("-D")
            .arg(self.data_dir())
            .args(["-p", &self.port.to_string()])
            .arg("-k")
            .arg(self.socket_dir())
            .args(["-c", "listen_addresses=127.0.0.1"])
            // Test server: no syncs (see the module's documentation). Commits stay
            // synchronous: with `synchronous_commit = off` a crash of the server alone
            // (kill) would lose the last commits, which the failure tests must not see.
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            // Three nodes' pools and the tests' own connections.
            .args(["-c", "max_connections=200"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        let child = spawn_on_launcher(command).expect("start postgres");
        self.child = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!("(exited: {status})\n{}", self.log()));
            }
            if self.is_ready() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.signal_and_wait(Signal::SIGQUIT);
                return Err(format!(
                    "(not ready after {READY_TIMEOUT:?})\n{}",
                    self.log()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    fn is_ready(&self) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", SUPERUSER, "-d", "postgres", "-t", "2"])
            .stdin(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Sends `signal` to the postmaster and waits for it to exit; SIGKILL if it has not
    /// exited within [`EXIT_TIMEOUT`].
    fn signal_and_wait(&mut self, signal: Signal) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = Pid::from_raw(child.id() as i32);
        let _ = kill(pid, signal);
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
                Ok(None) => std::thread::sleep(POLL),
            }
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        // Immediate: the data is thrown away with the directory.
        self.signal_and_wait(Signal::SIGQUIT);
    }
}

/// A command and where to send the spawned child.
type Launch = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `command` on the launcher thread (see the module's documentation), started on
/// first use and never ended, so that a parent-death signal set in `command` fires only
/// when the test process ends.
fn spawn_on_launcher(command: Command) -> std::io::Result<Child> {
    static LAUNCHER: OnceLock<Mutex<mpsc::Sender<Launch>>> = OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (send, receive) = mpsc::channel::<Launch>();
        std::thread::Builder::new()
            .name("postgres-launcher".into())
            .spawn(move || {
                for (mut command, answer) in receive {
                    let _ = answer.send(command.spawn());
                }
            })
            .expect("start the PostgreSQL launcher thread");
        Mutex::new(send)
    });
    let (answer, spawned) = mpsc::channel();
    launcher
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send((command, answer))
        .expect("the PostgreSQL launcher thread runs for the whole process");
    spawned
        .recv()
        .expect("the PostgreSQL launcher thread answers each command")
}

/// The newest `/usr/lib/postgresql/<version>/bin` that has every program the harness runs.
fn find_bin_dir() -> PathBuf {
    const ROOT: &str = "/usr/lib/postgresql";
    const PROGRAMS: [&str; 4] = ["initdb", "postgres", "pg_isready", "psql"];
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(ROOT)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            PROGRAMS
                .iter()
                .all(|program| is_executable(&bin.join(program)))
                .then_some((version, bin))
        })
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "the cluster tests need PostgreSQL's server programs ({}) under {ROOT}/<version>/bin: \
             install Debian's postgresql package (tests/setup does, or: apt-get install postgresql)",
            PROGRAMS.join(", ")
        ),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The unprivileged user the server runs as when the tests run as root: the package's
/// `postgres` user, or `nobody`.
fn server_user() -> Option<(nix::unistd::Uid, nix::unistd::Gid)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let user = ["postgres", "nobody"]
        .into_iter()
        .find_map(|name| nix::unistd::User::from_name(name).ok().flatten())
        .expect("PostgreSQL refuses to run as root and there is no postgres or nobody user");
    Some((user.uid, user.gid))
}
