//! Run logs on disk: `<dir>/<id>.<counter>.<status>`, one file per run.
//!
//! A log is created as `.started`, written line by line while the run goes on (every
//! line prefixed with its UTC time), and renamed to `.success` or `.fail` when the run
//! ends. Nothing of a log's content is held in memory: the list of logs is rebuilt from
//! the directory on start and content is read from disk on request.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDateTime, Utc};

use crate::store::state::RunResult;
use crate::util::fsutil;

/// Format of the time prefix of every log line.
pub const LINE_TIME_FORMAT: &str = "%Y-%m-%d %H:%M:%S";

/// A partial line longer than this is written out without waiting for its newline.
const MAX_PARTIAL_LINE: usize = 64 * 1024;

/// Bytes read from the end of an interrupted log to repair it: more than the longest
/// line ([`MAX_PARTIAL_LINE`] and its time), so that the last newline is among them.
const REPAIR_TAIL: u64 = MAX_PARTIAL_LINE as u64 + 1024;

/// Status part of a log file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStatus {
    Started,
    Finished(RunResult),
}

impl LogStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LogStatus::Started => "started",
            LogStatus::Finished(result) => result.log_status(),
        }
    }

    fn parse(text: &str) -> Option<LogStatus> {
        match text {
            "started" => Some(LogStatus::Started),
            "success" => Some(LogStatus::Finished(RunResult::Success)),
            "fail" => Some(LogStatus::Finished(RunResult::Fail)),
            _ => None,
        }
    }
}

/// The name of a log file, `<id>.<counter>.<status>` ([`LogDir::file_name`]), for
/// writing it where it goes without a `String` of its own: the Environment lists 100,000
/// of them with 10,000 jobs.
#[derive(Debug, Clone, Copy)]
pub struct LogName<'a> {
    pub id: &'a str,
    pub counter: u64,
    pub status: LogStatus,
}

impl std::fmt::Display for LogName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.id, self.counter, self.status.as_str())
    }
}

/// One log file, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogMeta {
    pub counter: u64,
    pub status: LogStatus,
}

/// The file of a run's log made ahead of the run, nameless until the run begins
/// ([`LogDir::make_ahead`]). Dropped unused, it is gone.
#[derive(Debug)]
pub struct AheadLog {
    file: File,
    /// The directory it was made in, the only one it may be named in.
    dir: PathBuf,
}

impl AheadLog {
    /// The file's inode number, which its name will show.
    #[cfg(test)]
    pub fn inode(&self) -> u64 {
        use std::os::unix::fs::MetadataExt as _;
        self.file.metadata().map_or(0, |meta| meta.ino())
    }

    /// Writes the log's first line and gives the file its name, `path` (not durable:
    /// the caller syncs the directory).
    fn name(mut self, first_line: &str, path: &Path) -> io::Result<File> {
        use std::os::fd::AsRawFd as _;
        self.file.write_all(first_line.as_bytes())?;
        // The documented way to name an O_TMPFILE without CAP_DAC_READ_SEARCH.
        let link = format!("/proc/self/fd/{}", self.file.as_raw_fd());
        nix::unistd::linkat(
            nix::fcntl::AT_FDCWD,
            link.as_str(),
            nix::fcntl::AT_FDCWD,
            path,
            nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
        )?;
        Ok(self.file)
    }
}

/// The log directory of one job.
#[derive(Debug, Clone)]
pub struct LogDir {
    dir: PathBuf,
    id: String,
    /// Most bytes of command output one run's log keeps (`log_max_size`).
    max_output: u64,
}

impl LogDir {
    pub fn new(dir: PathBuf, id: &str) -> LogDir {
        LogDir {
            dir,
            id: id.to_string(),
            max_output: u64::MAX,
        }
    }

    /// The same directory, whose run logs keep at most `bytes` of command output (the
    /// lines with their times); the rest is dropped after one line that says so.
    pub fn with_max_output(mut self, bytes: u64) -> LogDir {
        self.max_output = bytes;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<id>.<counter>.<status>`: the file name, which is also the JobLog `name`.
    pub fn file_name(&self, counter: u64, status: LogStatus) -> String {
        LogName {
            id: &self.id,
            counter,
            status,
        }
        .to_string()
    }

    pub fn path(&self, counter: u64, status: LogStatus) -> PathBuf {
        self.dir.join(self.file_name(counter, status))
    }

    /// Lists this job's logs, oldest first, at start (or when a reload adds the job):
    /// files that are not this job's logs are ignored; a missing directory is an empty
    /// list. What a [`LogDir::create`] cut short by a crash left, a `.creating` file, is
    /// removed as it is found: it never became a log (its run is recorded as interrupted
    /// by the state file alone), and one pass over the directory is all a start pays per
    /// job.
    pub fn scan(&self) -> io::Result<Vec<LogMeta>> {
        self.list_logs(true)
    }

    /// This job's logs as [`LogDir::scan`] lists them, the directory left as it is (a
    /// `.creating` file is passed over, not removed): for a reader other than the
    /// controller, which may be creating a log there at that moment.
    pub fn list(&self) -> io::Result<Vec<LogMeta>> {
        self.list_logs(false)
    }

    fn list_logs(&self, remove_cut_short: bool) -> io::Result<Vec<LogMeta>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(err),
        };
        let prefix = format!("{}.", self.id);
        let mut logs = Vec::new();
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(rest) = name.strip_prefix(&prefix) else {
                continue;
            };
            let Some((counter, status)) = rest.split_once('.') else {
                continue;
            };
            if status == "creating" {
                if !remove_cut_short {
                    continue;
                }
                if let Err(err) = fs::remove_file(entry.path()) {
                    tracing::warn!(file = %entry.path().display(), error = %err, "cannot remove a log creation cut short");
                }
                continue;
            }
            let (Ok(counter), Some(status)) = (counter.parse::<u64>(), LogStatus::parse(status))
            else {
                continue;
            };
            logs.push(LogMeta { counter, status });
        }
        logs.sort_by_key(|log| log.counter);
        // Two files for one counter can only come from a crash between a copy and a
        // delete; keep the finished one.
        logs.dedup_by(|later, earlier| {
            if later.counter == earlier.counter {
                if earlier.status == LogStatus::Started {
                    earlier.status = later.status;
                }
                true
            } else {
                false
            }
        });
        Ok(logs)
    }

    /// Starts the log of run `counter` with its first line, `header`. The file appears
    /// under its `.started` name with that line already in it (written under a
    /// `.creating` name, then renamed), so that a log never lacks its header, even when
    /// the controller is killed as it creates it. The new name is durable (the directory
    /// is synced) before this returns: it is the record that run `counter` began, from
    /// which a start after any crash, a power failure included, numbers the next run, so
    /// the number must be on disk before anything else shows it. The header needs no
    /// sync: a power failure may leave the log empty, and the repair at the next start
    /// ends it as interrupted all the same.
    pub fn create(&self, counter: u64, header: &str) -> io::Result<RunLog> {
        self.create_with(counter, header, None)
    }

    /// [`LogDir::create`], with the file made ahead of the run when there is one of
    /// this directory ([`LogDir::make_ahead`]): it gets its header, then its name at
    /// once (it had none, so no temporary name is needed).
    pub fn create_with(
        &self,
        counter: u64,
        header: &str,
        ahead: Option<AheadLog>,
    ) -> io::Result<RunLog> {
        let path = self.path(counter, LogStatus::Started);
        if let Some(ahead) = ahead.filter(|ahead| ahead.dir == self.dir) {
            match ahead.name(&format_line(Utc::now(), header), &path) {
                Ok(file) => return self.created(file, path, counter),
                Err(err) => {
                    tracing::debug!(path = %path.display(), error = %err, "a log made ahead could not be named; made anew");
                }
            }
        }
        let creating = self.creating_path(counter);
        let open = || {
            OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(&creating)
        };
        let mut file = match open() {
            // The job's first run: its directory is made, and its name made durable
            // with the log's.
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(&self.dir)?;
                if let Some(parent) = self.dir.parent() {
                    fsutil::sync_dir(parent)?;
                }
                open()?
            }
            other => other?,
        };
        let named = file
            .write_all(format_line(Utc::now(), header).as_bytes())
            .and_then(|()| fs::rename(&creating, &path));
        if let Err(err) = named {
            // A full disk, say: leave nothing half-made behind.
            let _ = fs::remove_file(&creating);
            return Err(err);
        }
        self.created(file, path, counter)
    }

    /// The log just named `path`, once its name is durable.
    fn created(&self, file: File, path: PathBuf, counter: u64) -> io::Result<RunLog> {
        if let Err(err) = self.sync() {
            // A name that may not survive a power failure must not number a run: the
            // run goes on as one whose log could not be made (see the engine's begin).
            let _ = fs::remove_file(&path);
            return Err(err);
        }
        // Appends from here on (the descriptor keeps its offset at the end).
        Ok(RunLog {
            file,
            path,
            log_dir: self.clone(),
            counter,
            lines: LineSplitter::default(),
            output_left: self.max_output,
            cut: false,
        })
    }

    /// Makes the file of a run's log ahead of the run, without a name (`O_TMPFILE`), for
    /// [`LogDir::create_with`]: the file system's allocation of its inode is then off
    /// the run's begin (ext4 without a journal looks past every inode freed in the last
    /// minutes for one, which a job's replaced logs and state files keep many). It has
    /// no name before its run begins: none shows in the directory early, and a crash
    /// leaves none (the file system frees a nameless file). `None` where it
    /// cannot be made (no directory yet, a file system without `O_TMPFILE`): the log is
    /// then made as usual. Blocking.
    pub fn make_ahead(&self) -> Option<AheadLog> {
        use std::os::unix::fs::OpenOptionsExt as _;
        // The mode of a log made as usual (0666 less the umask).
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(&self.dir)
            .ok()?;
        Some(AheadLog {
            file,
            dir: self.dir.clone(),
        })
    }

    /// Where [`LogDir::create`] writes a log's first line before it gets its name.
    fn creating_path(&self, counter: u64) -> PathBuf {
        self.dir.join(format!("{}.{counter}.creating", self.id))
    }

    /// The log of run `counter`, open for reading, with its status; `None` when absent.
    /// A log renamed to its final status while this looks is found on a second pass.
    pub fn open(&self, counter: u64) -> io::Result<Option<(LogStatus, File)>> {
        for _ in 0..2 {
            for status in [
                LogStatus::Finished(RunResult::Success),
                LogStatus::Finished(RunResult::Fail),
                LogStatus::Started,
            ] {
                match File::open(self.path(counter, status)) {
                    Ok(file) => return Ok(Some((status, file))),
                    Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                    Err(err) => return Err(err),
                }
            }
        }
        Ok(None)
    }

    /// The last `max` bytes of the log of run `counter`, whatever its status; `None`
    /// when absent.
    pub fn read_end(&self, counter: u64, max: u64) -> io::Result<Option<Vec<u8>>> {
        match self.open(counter)? {
            Some((_, mut file)) => tail(&mut file, max).map(Some),
            None => Ok(None),
        }
    }

    /// The last `max` bytes of the log of run `counter` with `status`.
    pub fn read_tail(&self, counter: u64, status: LogStatus, max: u64) -> io::Result<Vec<u8>> {
        tail(&mut File::open(self.path(counter, status))?, max)
    }

    /// Deletes the oldest finished logs until at most `keep` remain in `logs`, and makes
    /// the deletions durable.
    pub fn enforce_retention(&self, logs: &mut Vec<LogMeta>, keep: usize) -> io::Result<()> {
        if self.remove_excess(logs, keep)? > 0 {
            self.sync()?;
        }
        Ok(())
    }

    /// Flushes the directory's entries (logs created, renamed or deleted) to disk.
    pub fn sync(&self) -> io::Result<()> {
        fsutil::sync_dir(&self.dir)
    }

    /// Deletes the oldest logs until at most `keep` remain in `logs`, without syncing the
    /// directory; returns how many went.
    pub fn remove_excess(&self, logs: &mut Vec<LogMeta>, keep: usize) -> io::Result<usize> {
        let excess = logs.len().saturating_sub(keep);
        if excess == 0 {
            return Ok(0);
        }
        let mut removed = 0;
        let mut result = Ok(());
        for log in logs.iter().take(excess) {
            match fs::remove_file(self.path(log.counter, log.status)) {
                Ok(()) => removed += 1,
                Err(err) if err.kind() == io::ErrorKind::NotFound => removed += 1,
                Err(err) => {
                    result = Err(err);
                    break;
                }
            }
        }
        logs.drain(..removed);
        result.map(|()| removed)
    }

    /// Finishes every `.started` log of `logs` (as [`LogDir::scan`] listed them) left by
    /// a controller that died during a run. A run whose end the history recorded before
    /// the stop (`recorded` gives its result: the history line is written before the
    /// log's rename) is finished as recorded; any other was interrupted: a line saying so
    /// is appended and it becomes `.fail`. Returns each counter repaired, with whether
    /// its end was recorded.
    pub fn recover_interrupted(
        &self,
        logs: &mut [LogMeta],
        recorded: &HashMap<u64, (RunResult, String)>,
    ) -> io::Result<Vec<(u64, bool)>> {
        let mut repaired = Vec::new();
        for log in logs.iter_mut().filter(|l| l.status == LogStatus::Started) {
            let end = recorded.get(&log.counter);
            log.status = match end {
                Some((result, summary)) => self.finish_started(log.counter, *result, summary)?,
                None => self.fail_started(log.counter, INTERRUPTED)?,
            };
            repaired.push((log.counter, end.is_some()));
        }
        Ok(repaired)
    }

    /// Ends the `.started` log of run `counter`, whose writer is gone, as a failure: a
    /// final line `=== run N finished: fail: <reason>` (on a line of its own, even if the
    /// run stopped in the middle of one), synced, then a durable rename to `.fail`.
    pub fn fail_started(&self, counter: u64, reason: &str) -> io::Result<LogStatus> {
        self.finish_started(counter, RunResult::Fail, reason)
    }

    /// Ends the `.started` log of run `counter`, whose writer is gone, with `result`: its
    /// last line `=== run N finished: success` or `=== run N finished: fail: <summary>`
    /// (kept when the run wrote it before the stop, else appended on a line of its own,
    /// even if the run stopped in the middle of one), synced, then a durable rename.
    fn finish_started(
        &self,
        counter: u64,
        result: RunResult,
        summary: &str,
    ) -> io::Result<LogStatus> {
        let path = self.path(counter, LogStatus::Started);
        let status = LogStatus::Finished(result);
        let mut file = OpenOptions::new().append(true).open(&path)?;
        let tail = self.read_tail(counter, LogStatus::Started, REPAIR_TAIL)?;
        let last_line = tail
            .strip_suffix(b"\n")
            .map(|text| text.rsplit(|&b| b == b'\n').next().unwrap_or(text));
        let finished = match result {
            RunResult::Success => format!("=== run {counter} finished: success"),
            RunResult::Fail => format!("=== run {counter} finished: fail: "),
        };
        if last_line.is_some_and(|line| {
            line.windows(finished.len())
                .any(|window| window == finished.as_bytes())
        }) {
            // Ended so already (by the run itself, or by an earlier repair cut short
            // before its rename): only the rename is missing. A run whose last line says
            // it succeeded and whose end was not recorded is interrupted all the same:
            // its end was never saved.
            fsutil::durable_rename(&path, &self.path(counter, status))?;
            return Ok(status);
        }
        // Every write of a log ends with a newline, but a SIGKILL can cut a write short
        // (the kernel stops a write between pages): what follows the last newline is
        // the start of a line never written whole, without its time perhaps. It goes,
        // so that every line of the log is whole and timestamped.
        if let Some(last_newline) = tail.iter().rposition(|&b| b == b'\n') {
            let torn = (tail.len() - last_newline - 1) as u64;
            if torn > 0 {
                let len = file.metadata()?.len();
                file.set_len(len - torn)?;
            }
        }
        let line = match result {
            RunResult::Success => finished,
            RunResult::Fail => format!("{finished}{summary}"),
        };
        file.write_all(format_line(Utc::now(), &line).as_bytes())?;
        file.sync_all()?;
        fsutil::durable_rename(&path, &self.path(counter, status))?;
        Ok(status)
    }

    /// When the `.started` log of run `counter` was begun (its first line) and last
    /// written to (its modification time): the span of a run that was interrupted.
    pub fn written_between(&self, counter: u64) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let first = self.first_line_time(counter, LogStatus::Started)?;
        let modified = std::fs::metadata(self.path(counter, LogStatus::Started))
            .and_then(|meta| meta.modified())
            .ok()?;
        Some((first, DateTime::<Utc>::from(modified).max(first)))
    }

    /// Time of the first line of a log, used to rebuild `last_run` from logs.
    pub fn first_line_time(&self, counter: u64, status: LogStatus) -> Option<DateTime<Utc>> {
        let mut head = [0u8; 19];
        let mut file = File::open(self.path(counter, status)).ok()?;
        file.read_exact(&mut head).ok()?;
        let text = std::str::from_utf8(&head).ok()?;
        NaiveDateTime::parse_from_str(text, LINE_TIME_FORMAT)
            .ok()
            .map(|t| t.and_utc())
    }
}

/// Why the log of a run the controller's death interrupted ends as a failure.
pub const INTERRUPTED: &str = "interrupted, the controller stopped before the run ended";

/// `YYYY-MM-DD HH:MM:SS text\n`.
pub fn format_line(time: DateTime<Utc>, text: &str) -> String {
    format!("{} {text}\n", time.format(LINE_TIME_FORMAT))
}

/// Which output a chunk of bytes came from; each keeps its own partial line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    Stdout = 0,
    Stderr = 1,
    Body = 2,
}

/// What a line of standard error starts with, after its time: `2> `, the shell's name
/// for that stream. Standard output and a JobHttp's body stay unmarked, as upstream
/// writes them, so a log reads the same in `less` and to clients that only know the
/// interface's format; stderr lines stand out without a second file or a framing.
pub const STDERR_MARKER: &str = "2> ";

impl OutputKind {
    /// The marker a log line of this output starts with (after its time).
    fn marker(self) -> &'static [u8] {
        match self {
            OutputKind::Stderr => STDERR_MARKER.as_bytes(),
            OutputKind::Stdout | OutputKind::Body => b"",
        }
    }
}

/// Turns the chunks of each output into whole log lines: a partial line waits, per
/// output, for its newline, so that a line split over several chunks becomes one log
/// line with one time and one marker, and a stdout line and a stderr line that arrive
/// interleaved never merge. A line longer than [`MAX_PARTIAL_LINE`] is cut into log lines
/// of exactly that many bytes (the rest starts the next one, marked again), however its
/// bytes were split into chunks, so that output without newlines is never held in memory
/// for ever and the same output always gives the same log. Pure: it writes into buffers,
/// the caller writes those to the file.
#[derive(Debug, Default)]
struct LineSplitter {
    partial: [Vec<u8>; 3],
}

impl LineSplitter {
    /// Appends to `out` the log lines that `data` completes for `kind`, each as
    /// `<stamp> <marker><text>\n`; keeps the rest for later.
    fn push(&mut self, kind: OutputKind, mut data: &[u8], stamp: &str, out: &mut Vec<u8>) {
        loop {
            let partial = &mut self.partial[kind as usize];
            // Bytes the current line may still take (the pending part is never longer).
            let room = MAX_PARTIAL_LINE.saturating_sub(partial.len());
            let window = &data[..data.len().min(room + 1)];
            if let Some(pos) = window.iter().position(|&b| b == b'\n') {
                // A whole line within the limit.
                line_start(out, stamp, kind);
                out.append(partial);
                out.extend_from_slice(&data[..=pos]);
                data = &data[pos + 1..];
            } else if data.len() > room {
                // The line goes on past the limit: cut it there.
                line_start(out, stamp, kind);
                out.append(partial);
                out.extend_from_slice(&data[..room]);
                out.push(b'\n');
                data = &data[room..];
            } else {
                partial.extend_from_slice(data);
                return;
            }
        }
    }

    /// The pending partial lines, each as a whole log line ended with a newline, stdout
    /// first; none is kept.
    fn flush(&mut self, stamp: &str) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        for kind in [OutputKind::Stdout, OutputKind::Stderr, OutputKind::Body] {
            let partial = &mut self.partial[kind as usize];
            if partial.is_empty() {
                continue;
            }
            let mut out = Vec::with_capacity(partial.len() + stamp.len() + 8);
            line_start(&mut out, stamp, kind);
            out.append(partial);
            out.push(b'\n');
            lines.push(out);
        }
        lines
    }

    /// Drops every pending partial line.
    fn clear(&mut self) {
        self.partial = Default::default();
    }

    /// Bytes of the partial line `kind` has waiting.
    #[cfg(test)]
    fn pending(&self, kind: OutputKind) -> usize {
        self.partial[kind as usize].len()
    }
}

/// `<stamp> <marker>`: the start of a log line of output `kind`.
fn line_start(out: &mut Vec<u8>, stamp: &str, kind: OutputKind) {
    out.extend_from_slice(stamp.as_bytes());
    out.push(b' ');
    out.extend_from_slice(kind.marker());
}

/// The log of a run in progress.
#[derive(Debug)]
pub struct RunLog {
    file: File,
    path: PathBuf,
    log_dir: LogDir,
    counter: u64,
    lines: LineSplitter,
    /// Bytes of output this log may still take.
    output_left: u64,
    /// Output was cut at the limit: the rest is dropped.
    cut: bool,
}

impl RunLog {
    pub fn counter(&self) -> u64 {
        self.counter
    }

    /// Writes one line of svc's own text, after any pending partial output lines.
    pub fn line(&mut self, text: &str) -> io::Result<()> {
        self.flush_partial()?;
        self.file
            .write_all(format_line(Utc::now(), text).as_bytes())
    }

    /// Adds command output. Complete lines are written at once with their time (and
    /// the stderr marker for standard error); a trailing partial line waits for its
    /// newline (or for [`RunLog::flush_partial`]).
    pub fn output(&mut self, kind: OutputKind, data: &[u8]) -> io::Result<()> {
        let stamp = Utc::now().format(LINE_TIME_FORMAT).to_string();
        let mut out = Vec::with_capacity(data.len() + 32);
        self.lines.push(kind, data, &stamp, &mut out);
        self.write_output(&out)
    }

    /// Writes whole timestamped output lines while the output budget lasts; at the limit,
    /// the lines that fit, then one line that says the rest is not kept.
    fn write_output(&mut self, out: &[u8]) -> io::Result<()> {
        if self.cut || out.is_empty() {
            return Ok(());
        }
        let fits = usize::try_from(self.output_left).unwrap_or(usize::MAX);
        if out.len() <= fits {
            self.output_left -= out.len() as u64;
            return self.file.write_all(out);
        }
        // Only whole lines, so that every line keeps its time.
        let kept = out[..fits]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        self.file.write_all(&out[..kept])?;
        self.cut = true;
        self.lines.clear();
        let limit = self.log_dir.max_output;
        self.file.write_all(
            format_line(
                Utc::now(),
                &format!(
                    "=== output cut at {limit} bytes (log_max_size): the rest of this run's \
                     output is not kept"
                ),
            )
            .as_bytes(),
        )
    }

    /// Writes out pending partial lines, each ended with a newline.
    pub fn flush_partial(&mut self) -> io::Result<()> {
        let stamp = Utc::now().format(LINE_TIME_FORMAT).to_string();
        for out in self.lines.flush(&stamp) {
            self.write_output(&out)?;
        }
        Ok(())
    }

    /// Renames the log to its final status, whole (every line is written before), and
    /// returns the file, which the caller syncs later together with the directory (see
    /// the engine's syncer): a killed controller finds the final name at once, and a
    /// power failure before the sync at worst shows the run as interrupted.
    pub fn finish(mut self, result: RunResult) -> io::Result<(LogMeta, File)> {
        self.flush_partial()?;
        let status = LogStatus::Finished(result);
        fs::rename(&self.path, self.log_dir.path(self.counter, status))?;
        let meta = LogMeta {
            counter: self.counter,
            status,
        };
        Ok((meta, self.file))
    }
}

/// The last `max` bytes of `file`.
fn tail(file: &mut File, max: u64) -> io::Result<Vec<u8>> {
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(max)))?;
    let mut tail = Vec::new();
    file.take(max).read_to_end(&mut tail)?;
    Ok(tail)
}

/// The last `count` lines of `tail`, the end of a log as [`LogDir::read_end`] or
/// [`LogDir::read_tail`] read it with `max`: oldest first, without their newlines,
/// invalid UTF-8 replaced. A tail of `max` bytes may start in the middle of the log, so
/// its first line, likely a part of one, is left out.
pub fn last_lines(tail: &[u8], max: u64, count: usize) -> Vec<String> {
    let text = String::from_utf8_lossy(tail);
    let mut lines: Vec<&str> = text.lines().collect();
    if tail.len() as u64 >= max && !lines.is_empty() {
        lines.remove(0);
    }
    let skip = lines.len().saturating_sub(count);
    lines[skip..].iter().map(|line| line.to_string()).collect()
}

#[cfg(test)]
#[path = "logstore_tests.rs"]
mod tests;
