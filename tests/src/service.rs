//! [`TestService`]: one `svc-controller` process on its own temporary `dir_base`.
//!
//! Layout written by [`TestServiceBuilder::build`] (the temporary directory *is* `dir_base`,
//! mode 0755 so that job users other than root can reach their working directories):
//!
//! ```text
//! <dir_base>/etc/svc/svc.conf          main file, mode 0600: [svc] dir_base, listen_address,
//!                                      secret, then the test's own lines
//! <dir_base>/etc/svc/job.d/*.conf      job files
//! <dir_base>/etc/svc/job_http.d/*.conf JobHttp files
//! <dir_base>/test-output/controller.<n>.stdout|stderr   output of the n-th start
//! ```
//!
//! Dropping a [`TestService`] SIGKILLs the controller if it still runs; when the thread is
//! panicking it also prints the controller's output, and keeps the directory when the
//! environment variable `SVC_TESTS_KEEP` is set (`SVC_TESTS_KEEP=always` keeps it even
//! when the test passes).

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::Rng;
use rand::distr::Alphanumeric;
use tempfile::TempDir;

use crate::binaries::binaries;
use crate::free_port;

/// How long one API request may take, answer included.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a whole log may take to arrive: 10 MiB as base64 in JSON, to a service
/// whose HTTP threads yield to its runs, on a loaded machine.
pub(crate) const BULK_TIMEOUT: Duration = Duration::from_secs(120);

/// How long [`TestService::start`] waits for the API to answer.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`TestService::stop`] waits for the controller to exit after SIGTERM before it
/// gives up (and SIGKILLs it). Tests that assert the 10 s contract measure it themselves.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// Describes the configuration tree of a [`TestService`]; see the module documentation.
#[derive(Debug)]
pub struct TestServiceBuilder {
    dir: TempDir,
    port: u16,
    secret: String,
    svc_lines: Vec<String>,
    main_extra: Vec<String>,
    job_files: Vec<(String, Vec<u8>)>,
    job_http_files: Vec<(String, Vec<u8>)>,
    env: Vec<(String, String)>,
    wrapper: Vec<String>,
}

impl TestServiceBuilder {
    /// A new temporary `dir_base` with a free port and a random 32-character secret.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("svc-test-")
            .tempdir()
            .expect("create a temporary dir_base");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("make dir_base 0755");
        let secret = rand::rng()
            .sample_iter(&Alphanumeric)
            .take(32)
            .map(char::from)
            .collect();
        Self {
            dir,
            port: free_port(),
            secret,
            svc_lines: Vec::new(),
            main_extra: Vec::new(),
            job_files: Vec::new(),
            job_http_files: Vec::new(),
            env: Vec::new(),
            wrapper: Vec::new(),
        }
    }

    /// The temporary directory that becomes `dir_base` (known before the files are
    /// written, so job definitions can name paths inside it).
    pub fn dir_base(&self) -> &Path {
        self.dir.path()
    }

    /// Adds a `key = value` line to the `[svc]` section. A line setting `dir_base`,
    /// `listen_address` or `secret` replaces the harness's default for that key
    /// (`secret =` with no value makes the controller generate one).
    pub fn svc(mut self, line: impl Into<String>) -> Self {
        self.svc_lines.push(line.into());
        self
    }

    /// Appends raw text (for example a `[job "x"]` section) to the main file after `[svc]`.
    pub fn main_text(mut self, text: impl Into<String>) -> Self {
        self.main_extra.push(text.into());
        self
    }

    /// Writes `etc/svc/job.d/<name>.conf` with `contents`.
    pub fn job_file(self, name: &str, contents: impl Into<String>) -> Self {
        self.job_file_raw(&format!("{name}.conf"), contents.into().into_bytes())
    }

    /// Writes `etc/svc/job.d/<file_name>` (name taken as is) with arbitrary bytes.
    pub fn job_file_raw(mut self, file_name: &str, contents: impl Into<Vec<u8>>) -> Self {
        self.job_files.push((file_name.to_owned(), contents.into()));
        self
    }

    /// Writes `etc/svc/job_http.d/<name>.conf` with `contents`.
    pub fn job_http_file(mut self, name: &str, contents: impl Into<String>) -> Self {
        self.job_http_files
            .push((format!("{name}.conf"), contents.into().into_bytes()));
        self
    }

    /// Sets an environment variable of the controller process.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Starts the controller through `command` (a program and its arguments, such as
    /// `setpriv --bounding-set=...`), which must end by exec'ing the arguments that follow
    /// it, so that the controller keeps the PID the harness knows.
    pub fn wrapper(mut self, command: &[&str]) -> Self {
        self.wrapper = command.iter().map(|arg| (*arg).to_owned()).collect();
        self
    }

    /// Writes the configuration tree; the controller is not started.
    pub fn build(self) -> TestService {
        let dir_base = self.dir.path().to_path_buf();
        let config_dir = dir_base.join("etc/svc");
        for sub in ["job.d", "job_http.d"] {
            std::fs::create_dir_all(config_dir.join(sub))
                .unwrap_or_else(|err| panic!("create etc/svc/{sub}: {err}"));
        }
        std::fs::create_dir_all(dir_base.join("test-output")).expect("create test-output");

        let overridden = |key: &str| {
            self.svc_lines
                .iter()
                .find(|line| line_key(line).as_deref() == Some(key))
                .map(|line| line_value(line))
        };
        let mut listen_address = format!("127.0.0.1:{}", self.port);
        let own_port = overridden("listen_address").is_none();
        let mut secret = Some(self.secret.clone());
        let mut main = String::from("# Written by the svc-tests harness.\n[svc]\n");
        match overridden("dir_base") {
            Some(_) => {}
            None => main.push_str(&format!("dir_base = {}\n", dir_base.display())),
        }
        match overridden("listen_address") {
            Some(value) => listen_address = value,
            None => main.push_str(&format!("listen_address = {listen_address}\n")),
        }
        match overridden("secret") {
            Some(value) if value.is_empty() => secret = None,
            Some(value) => secret = Some(value),
            None => main.push_str(&format!("secret = {}\n", self.secret)),
        }
        for line in &self.svc_lines {
            main.push_str(line);
            main.push('\n');
        }
        for text in &self.main_extra {
            main.push('\n');
            main.push_str(text);
            main.push('\n');
        }
        let config_path = config_dir.join("svc.conf");
        std::fs::write(&config_path, main).expect("write the main configuration file");
        std::fs::set_permissions(&config_path, std::fs::Permissions::from_mode(0o600))
            .expect("make the main file 0600");
        for (name, contents) in &self.job_files {
            std::fs::write(config_dir.join("job.d").join(name), contents)
                .unwrap_or_else(|err| panic!("write job.d/{name}: {err}"));
        }
        for (name, contents) in &self.job_http_files {
            std::fs::write(config_dir.join("job_http.d").join(name), contents)
                .unwrap_or_else(|err| panic!("write job_http.d/{name}: {err}"));
        }

        let client = reqwest::Client::builder()
            .no_proxy()
            .gzip(true)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("build the HTTP client");
        TestService {
            tempdir: Some(self.dir),
            dir_base,
            config_path,
            listen_address,
            own_port,
            secret,
            env: self.env,
            wrapper: self.wrapper,
            child: None,
            last_exit: None,
            starts: 0,
            client,
        }
    }

    /// Writes the tree and starts the controller ([`TestService::start`]).
    pub async fn start(self) -> TestService {
        let mut service = self.build();
        service.start().await;
        service
    }
}

impl Default for TestServiceBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// One controller on one configuration tree, restartable.
#[derive(Debug)]
pub struct TestService {
    tempdir: Option<TempDir>,
    dir_base: PathBuf,
    config_path: PathBuf,
    listen_address: String,
    /// Whether the harness chose the port (the tree sets no `listen_address`): it may
    /// then choose another when the one it found free was taken before the start.
    own_port: bool,
    /// Main secret as configured; `None` when the controller generates it.
    secret: Option<String>,
    env: Vec<(String, String)>,
    /// Program and arguments the controller is started through (empty: directly).
    wrapper: Vec<String>,
    child: Option<Child>,
    /// Exit status of the last controller process that was reaped.
    last_exit: Option<ExitStatus>,
    /// Number of times the controller was spawned (names the output files).
    starts: u32,
    /// The API client ([`crate::service_api`]).
    pub(crate) client: reqwest::Client,
}

impl TestService {
    /// Starts describing a configuration tree.
    pub fn builder() -> TestServiceBuilder {
        TestServiceBuilder::new()
    }

    // ----- paths -------------------------------------------------------------------------

    /// `dir_base`, the temporary directory.
    pub fn dir_base(&self) -> &Path {
        &self.dir_base
    }

    /// The main configuration file, `etc/svc/svc.conf`.
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// `etc/svc/job.d`.
    pub fn job_d(&self) -> PathBuf {
        self.dir_base.join("etc/svc/job.d")
    }

    /// The configured `listen_address` (`127.0.0.1:<port>`).
    pub fn listen_address(&self) -> &str {
        &self.listen_address
    }

    /// `http://<listen_address>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.listen_address)
    }

    /// Default working directory of job `id`: `var/lib/svc/job/<id>`.
    pub fn dir_work(&self, id: &str) -> PathBuf {
        self.dir_base.join("var/lib/svc/job").join(id)
    }

    /// Log directory of `kind` (`job` or `job_http`) `id`: `var/log/svc/<kind>/<id>`.
    pub fn log_dir(&self, kind: &str, id: &str) -> PathBuf {
        self.dir_base.join("var/log/svc").join(kind).join(id)
    }

    /// State file of job `id`: `var/run/svc/job/<id>`.
    pub fn state_path(&self, id: &str) -> PathBuf {
        self.dir_base.join("var/run/svc/job").join(id)
    }

    // ----- process -----------------------------------------------------------------------

    /// Spawns `svc-controller --config <main file>` with stdout and stderr going to
    /// `test-output/controller.<n>.*`, without waiting for anything.
    pub fn spawn(&mut self) {
        assert!(
            !self.is_running(),
            "spawn: the controller is already running"
        );
        self.starts += 1;
        let (stdout, stderr) = self.output_paths(self.starts);
        let stdout = File::create(&stdout).expect("create the controller stdout file");
        let stderr = File::create(&stderr).expect("create the controller stderr file");
        let mut command = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(&binaries().controller);
                command
            }
            None => Command::new(&binaries().controller),
        };
        command
            .arg("--config")
            .arg(&self.config_path)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        let child = command.spawn().expect("spawn svc-controller");
        self.child = Some(child);
        self.last_exit = None;
    }

    /// Spawns the controller and waits (at most 10 s) until `GET /svc/api/environment`
    /// answers 200. Panics when the process exits first or the time runs out.
    pub async fn start(&mut self) {
        self.start_answering("/svc/api/environment", 200).await;
    }

    /// Spawns the controller and waits (at most 10 s) until `GET <path>` answers
    /// `status` (for a service with a `user.conf`, whose Environment needs a session:
    /// `/svc/api/session` and 401). Panics, with the controller's output, when the
    /// process exits first or the time runs out (then naming the last answer).
    pub async fn start_answering(&mut self, path: &str, status: u16) {
        self.spawn();
        let mut started = Instant::now();
        let mut collisions = 0;
        loop {
            if let Some(exit) = self.try_wait() {
                // The port was free when it was chosen, and another test's service took
                // it before this one could: another port, as a person would.
                if self.own_port
                    && collisions < crate::PORT_COLLISIONS
                    && crate::lost_its_port(&self.stderr())
                {
                    collisions += 1;
                    self.move_to_a_free_port();
                    self.spawn();
                    started = Instant::now();
                    continue;
                }
                panic!(
                    "svc-controller exited with {} before GET {path} answered {status} \
                     (output below)",
                    describe_status(exit)
                );
            }
            let last = match self.try_get(path).await {
                // Counted once this controller says it listens there: the answer may
                // come from another test's service on the port this one was given.
                Ok(response) if response.status == status && self.announced() => return,
                Ok(response) => format!("{}: {}", response.status, response.raw),
                Err(err) => format!("{err:#}"),
            };
            if started.elapsed() > START_TIMEOUT {
                panic!(
                    "GET {path} did not answer {status} within {START_TIMEOUT:?}; last: {last} \
                     (output below)"
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether the latest start said it listens on this service's address.
    fn announced(&self) -> bool {
        self.stdout()
            .contains(&format!("listening on http://{}", self.listen_address))
    }

    /// Gives the service another free port, in its configuration file too.
    fn move_to_a_free_port(&mut self) {
        let moved = format!("127.0.0.1:{}", crate::free_port());
        let text = std::fs::read_to_string(&self.config_path).expect("read the main file");
        let text = text.replace(
            &format!("listen_address = {}\n", self.listen_address),
            &format!("listen_address = {moved}\n"),
        );
        std::fs::write(&self.config_path, text).expect("write the main file");
        self.listen_address = moved;
    }

    /// Starts the controller again on the same directory (stopping it first with SIGTERM
    /// if it still runs, and asserting that stop exits 0).
    pub async fn restart(&mut self) {
        if self.is_running() {
            let status = self.stop().await;
            assert_eq!(status.code(), Some(0), "stop before restart: {status:?}");
        }
        self.start().await;
    }

    /// PID of the running controller.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|child| child.id() as i32)
    }

    /// True while the spawned controller has not exited (reaps it when it has).
    pub fn is_running(&mut self) -> bool {
        self.try_wait().is_none() && self.child.is_some()
    }

    /// Reaps the controller if it exited; `Some(status)` then.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                self.last_exit = Some(status);
                Some(status)
            }
            Ok(None) => None,
            Err(err) => panic!("waiting for svc-controller: {err}"),
        }
    }

    /// Waits up to `timeout` for the controller to exit; `None` if it still runs. When it
    /// was already reaped, returns the status it exited with.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.child.is_none() {
            assert!(
                self.last_exit.is_some(),
                "wait_exit: the controller never ran"
            );
            return self.last_exit;
        }
        let started = Instant::now();
        loop {
            if let Some(status) = self.try_wait() {
                return Some(status);
            }
            if started.elapsed() > timeout {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Sends `signal` to the controller.
    pub fn signal(&self, signal: Signal) {
        let pid = self.pid().expect("signal: the controller is not running");
        kill(Pid::from_raw(pid), signal)
            .unwrap_or_else(|err| panic!("send {signal} to the controller: {err}"));
    }

    /// SIGTERM, then waits for the exit and returns its status. Panics (after SIGKILL) when
    /// the controller is still running after 20 s.
    pub async fn stop(&mut self) -> ExitStatus {
        self.signal(Signal::SIGTERM);
        match self.wait_exit(STOP_TIMEOUT).await {
            Some(status) => status,
            None => {
                self.kill9().await;
                panic!("svc-controller did not exit within {STOP_TIMEOUT:?} of SIGTERM");
            }
        }
    }

    /// SIGKILL, then waits for the process to be gone.
    pub async fn kill9(&mut self) {
        self.signal(Signal::SIGKILL);
        self.wait_exit(Duration::from_secs(10))
            .await
            .expect("svc-controller survived SIGKILL");
    }

    /// SIGHUP (reload job definitions).
    pub fn sighup(&self) {
        self.signal(Signal::SIGHUP);
    }

    /// Runs `svc-controller --config <main file> --check` (limit 30 s) and returns its
    /// output.
    pub async fn check(&self) -> Output {
        let mut command = tokio::process::Command::new(&binaries().controller);
        command
            .arg("--config")
            .arg(&self.config_path)
            .arg("--check")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        tokio::time::timeout(Duration::from_secs(30), command.output())
            .await
            .expect("svc-controller --check finished within 30 s")
            .expect("run svc-controller --check")
    }

    fn output_paths(&self, start: u32) -> (PathBuf, PathBuf) {
        let dir = self.dir_base.join("test-output");
        (
            dir.join(format!("controller.{start}.stdout")),
            dir.join(format!("controller.{start}.stderr")),
        )
    }

    /// Standard output of the latest start so far.
    pub fn stdout(&self) -> String {
        read_lossy(&self.output_paths(self.starts).0)
    }

    /// Standard error of the latest start so far.
    pub fn stderr(&self) -> String {
        read_lossy(&self.output_paths(self.starts).1)
    }

    /// The main secret: as configured, or (when the configuration leaves it empty) the
    /// generated one, read from the stdout line that contains `secret`. The controller
    /// prints it only on the start that generated it, so every start's output is searched.
    pub fn secret(&self) -> String {
        if let Some(secret) = &self.secret {
            return secret.clone();
        }
        (1..=self.starts)
            .find_map(|start| generated_secret(&read_lossy(&self.output_paths(start).0)))
            .unwrap_or_else(|| {
                panic!(
                    "no generated secret on the controller's stdout:\n{}",
                    self.stdout()
                )
            })
    }
}

impl Drop for TestService {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let panicking = std::thread::panicking();
        if panicking {
            for start in 1..=self.starts {
                let (stdout, stderr) = self.output_paths(start);
                eprintln!(
                    "----- svc-controller start {start} stdout -----\n{}\n\
                     ----- svc-controller start {start} stderr -----\n{}\n-----",
                    read_lossy(&stdout),
                    read_lossy(&stderr)
                );
            }
        }
        let keep = std::env::var("SVC_TESTS_KEEP").ok();
        if (panicking && keep.is_some() || keep.as_deref() == Some("always"))
            && let Some(dir) = self.tempdir.take()
        {
            eprintln!("keeping {}", dir.keep().display());
        }
    }
}

pub(crate) fn line_key(line: &str) -> Option<String> {
    let (key, _) = line.split_once('=')?;
    Some(key.trim().to_ascii_lowercase())
}

pub(crate) fn line_value(line: &str) -> String {
    line.split_once('=')
        .map(|(_, value)| value.trim().to_owned())
        .unwrap_or_default()
}

fn read_lossy(path: &Path) -> String {
    std::fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// "exit status 3" or "signal 9".
fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => format!("{status:?}"),
    }
}

/// A 32-character alphanumeric word on a line that mentions `secret`.
pub(crate) fn generated_secret(stdout: &str) -> Option<String> {
    stdout
        .lines()
        .filter(|line| line.to_ascii_lowercase().contains("secret"))
        .flat_map(|line| line.split(|c: char| !c.is_ascii_alphanumeric()))
        .find(|word| word.len() == 32)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_generated_secret() {
        let out = "listening on http://127.0.0.1:1/svc\n\
                   generated secret: Ab3dEf7hIj1lMn0pQr5tUv9xYz2bCd4f\n";
        assert_eq!(
            generated_secret(out).as_deref(),
            Some("Ab3dEf7hIj1lMn0pQr5tUv9xYz2bCd4f")
        );
        assert_eq!(generated_secret("no such line"), None);
    }
}
