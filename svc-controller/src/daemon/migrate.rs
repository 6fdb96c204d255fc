//! `svc-controller migrate --from DIR`: takes over an upstream installation (its base
//! directory DIR) into svc's layout, reading DIR only.
//!
//! - Configuration: the main file (`etc/karajo/karajo.conf` with its `[karajo]` section,
//!   or an `etc/svc/svc.conf`), the files of `job.d` and `job_http.d` that loading reads
//!   (`*.conf`, not hidden) and `user.conf` are copied to the destination named by
//!   `--config`; the main section is renamed `[svc]` and `dir_base` set to the
//!   destination's base. An existing destination configuration is kept.
//! - Logs: every file `<id>.<counter>[.<status>]` below `var/log/<word>/job*/<dir>/`,
//!   whatever the case of the directory and the status (`success`, `fail`, `failed`,
//!   `canceled`, `started`, none), becomes `<ID>.<counter>.<status>` of the job whose ID
//!   matches (in any case, `-` and `_` alike); a run that was going on stays `started`,
//!   which the first start records as interrupted.
//! - State: `var/run/<word>/job*/<dir>` (upstream's two-line form or svc's `key = value`
//!   form) becomes the job's state file (last run, status, paused).
//!
//! It prints each file it wrote, each rename, and each thing it did not take, with why.
//! Nothing is overwritten, so it can be run again after fixing a problem.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::config::{self, Config};
use crate::store::logstore::{LogDir, LogStatus};
use crate::store::state::{JobState, RunResult};
use crate::util::fsutil;

/// Why a migration could not go on.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error(
        "{0}: no upstream installation there (expected etc/karajo/karajo.conf or \
         etc/svc/svc.conf below it)"
    )]
    NotAnInstallation(PathBuf),
    #[error("{0}: {1}")]
    Io(PathBuf, io::Error),
    #[error(
        "the destination {dest} is inside {from}, which a migration only reads; choose \
         another --config"
    )]
    DestinationInsideSource { dest: PathBuf, from: PathBuf },
    #[error(
        "--config must name <base>/etc/svc/svc.conf (the base of the new installation \
         is derived from it), not {0}"
    )]
    UnknownBase(PathBuf),
    #[error("the migrated configuration does not load; fix it and run again:\n{0}")]
    Config(config::ConfigError),
}

/// What a migration did, one line per action, as printed.
#[derive(Debug, Default)]
pub struct Report {
    pub lines: Vec<String>,
    /// Things not taken.
    pub skipped: usize,
    /// Directories given new names, synced once each at the end.
    written_dirs: BTreeSet<PathBuf>,
}

impl Report {
    fn did(&mut self, line: String) {
        self.lines.push(line);
    }
    fn skip(&mut self, what: &Path, why: &str) {
        self.skipped += 1;
        self.lines
            .push(format!("not taken: {}: {why}", what.display()));
    }
}

/// Where upstream kept things, below its base directory, under its product word.
struct Source {
    base: PathBuf,
    word: &'static str,
}

impl Source {
    fn find(base: &Path) -> Result<Source, MigrateError> {
        for word in ["karajo", "svc"] {
            if base.join(format!("etc/{word}/{word}.conf")).is_file() {
                return Ok(Source {
                    base: base.to_path_buf(),
                    word,
                });
            }
        }
        Err(MigrateError::NotAnInstallation(base.to_path_buf()))
    }
    fn etc(&self) -> PathBuf {
        self.base.join("etc").join(self.word)
    }
    fn main_file(&self) -> PathBuf {
        self.etc().join(format!("{}.conf", self.word))
    }
    fn logs(&self, kind: &str) -> PathBuf {
        self.base.join("var/log").join(self.word).join(kind)
    }
    fn states(&self, kind: &str) -> PathBuf {
        self.base.join("var/run").join(self.word).join(kind)
    }
    fn work(&self) -> PathBuf {
        self.base.join("var/lib").join(self.word)
    }
}

/// Migrates the installation below `from` to the configuration file `config_file`
/// (`<base>/etc/svc/svc.conf`). Blocking.
pub fn migrate(from: &Path, config_file: &Path) -> Result<Report, MigrateError> {
    let source = Source::find(from)?;
    let dest_base = destination_base(config_file)?;
    let canonical = |p: &Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (from_real, dest_real) = (canonical(from), canonical(&dest_base));
    if dest_real.starts_with(&from_real) {
        return Err(MigrateError::DestinationInsideSource {
            dest: dest_base,
            from: from.to_path_buf(),
        });
    }
    let mut report = Report::default();
    take_configuration(&source, config_file, &dest_base, &mut report)?;
    let config = config::load(config_file).map_err(MigrateError::Config)?;
    for (kind, ids, logs, states) in [
        (
            "job",
            config.jobs.iter().map(|j| j.id.clone()).collect::<Vec<_>>(),
            config.main.dir_job_logs(),
            config.main.dir_job_state(),
        ),
        (
            "job_http",
            config.http_jobs.iter().map(|j| j.id.clone()).collect(),
            config.main.dir_job_http_logs(),
            config.main.dir_job_http_state(),
        ),
    ] {
        take_logs(&source.logs(kind), &ids, &logs, &mut report)?;
        take_states(&source.states(kind), &ids, &states, &logs, &mut report)?;
    }
    note_work_dirs(&source, &config, &mut report);
    for dir in std::mem::take(&mut report.written_dirs) {
        fsutil::sync_dir(&dir).map_err(io_error(&dir))?;
    }
    Ok(report)
}

/// `<base>` of `<base>/etc/svc/svc.conf`.
fn destination_base(config_file: &Path) -> Result<PathBuf, MigrateError> {
    let unknown = || MigrateError::UnknownBase(config_file.to_path_buf());
    if config_file.file_name().is_none_or(|n| n != "svc.conf") {
        return Err(unknown());
    }
    let etc_svc = config_file.parent().ok_or_else(unknown)?;
    let etc = etc_svc
        .parent()
        .filter(|_| etc_svc.ends_with("svc"))
        .ok_or_else(unknown)?;
    let base = etc
        .parent()
        .filter(|_| etc.ends_with("etc"))
        .ok_or_else(unknown)?;
    Ok(if base.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        base.to_path_buf()
    })
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> MigrateError + '_ {
    move |err| MigrateError::Io(path.to_path_buf(), err)
}

/// Copies `src` to `dest` (new, written whole and synced, then renamed) unless `dest`
/// exists. The directory is synced once, at the end of the migration.
fn copy_new(
    src: &Path,
    dest: &Path,
    contents: Option<&[u8]>,
    report: &mut Report,
) -> Result<bool, MigrateError> {
    if dest.exists() {
        report.did(format!("kept: {} (already there)", dest.display()));
        return Ok(false);
    }
    if let Some(dir) = dest.parent() {
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        report.written_dirs.insert(dir.to_path_buf());
    }
    let bytes = match contents {
        Some(bytes) => bytes.to_vec(),
        None => fs::read(src).map_err(io_error(src))?,
    };
    fsutil::replace_file(dest, &bytes).map_err(io_error(dest))?;
    Ok(true)
}

/// The main file with its section renamed `[svc]` and `dir_base` set to `dest_base`;
/// `job.d`, `job_http.d` and `user.conf` as they are.
fn take_configuration(
    source: &Source,
    config_file: &Path,
    dest_base: &Path,
    report: &mut Report,
) -> Result<(), MigrateError> {
    let main = source.main_file();
    let text = fs::read_to_string(&main).map_err(io_error(&main))?;
    let rewritten = rewrite_main(&text, source.word, dest_base, &main);
    if copy_new(&main, config_file, Some(rewritten.as_bytes()), report)? {
        report.did(format!(
            "renamed: {} -> {} (section [{}] as [svc], dir_base = {})",
            main.display(),
            config_file.display(),
            source.word,
            dest_base.display()
        ));
    }
    let dest_etc = dest_base.join("etc/svc");
    for sub in ["job.d", "job_http.d"] {
        let dir = source.etc().join(sub);
        for file in sorted_entries(&dir)? {
            if !config::is_conf_file(&file) {
                report.skip(
                    &file,
                    "the configuration reads only files named *.conf, not hidden ones",
                );
                continue;
            }
            let dest = dest_etc
                .join(sub)
                .join(file.file_name().unwrap_or_default());
            if copy_new(&file, &dest, None, report)? {
                report.did(format!("copied: {} -> {}", file.display(), dest.display()));
            }
        }
    }
    let users = source.etc().join("user.conf");
    if users.is_file() {
        let dest = dest_etc.join("user.conf");
        if copy_new(&users, &dest, None, report)? {
            report.did(format!("copied: {} -> {}", users.display(), dest.display()));
        }
    }
    Ok(())
}

/// Every entry of `dir` (files, directories, links), sorted; none when it does not
/// exist.
fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, MigrateError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(MigrateError::Io(dir.to_path_buf(), err)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_error(dir))?;
        paths.push(entry.path());
    }
    paths.sort();
    Ok(paths)
}

/// Subdirectories of `dir`, sorted; none when it does not exist.
fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>, MigrateError> {
    Ok(sorted_entries(dir)?
        .into_iter()
        .filter(|p| p.is_dir())
        .collect())
}

/// Upstream's main file as svc's: `[<word>]` becomes `[svc]` and `dir_base` in it names
/// the new base (the old lines kept as comments). Sections and keys are found by the
/// configuration's own parser, so a key on the header's line and a value continued with
/// `\` are rewritten as loading reads them.
fn rewrite_main(text: &str, word: &str, dest_base: &Path, origin: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Migrated from {}.", origin.display());
    let dir_base_line = format!(
        "dir_base = {}",
        crate::config::quote_value(&dest_base.display().to_string())
    );
    let sections = config::main_sections(text, word);
    let old_dir_base = |at: usize| {
        sections
            .iter()
            .flat_map(|s| &s.dir_base)
            .find(|(first, last)| (*first..=*last).contains(&at))
            .copied()
    };
    // When no main section sets dir_base: the line after which it goes, the end of the
    // first one.
    let mut add_after = sections
        .first()
        .map(|s| s.end)
        .filter(|_| sections.iter().all(|s| s.dir_base.is_empty()));
    for (at, line) in (1..).zip(text.lines()) {
        let mut body = line;
        if sections.iter().any(|s| s.header == at) {
            let _ = writeln!(out, "[svc]");
            if add_after == Some(at) {
                let _ = writeln!(out, "{dir_base_line}");
                add_after = None;
            }
            // The parser read `[<word>]` here, so the first `]` after the `[` closes it;
            // what follows (a key, a comment) goes on a line of its own.
            body = line
                .find('[')
                .and_then(|open| line[open..].find(']').map(|close| open + close + 1))
                .map_or("", |after| line[after..].trim_start());
            if body.is_empty() {
                continue;
            }
        }
        match old_dir_base(at) {
            Some((_, last)) if last == at => {
                let _ = writeln!(out, "# {} (before the migration)", body.trim());
                let _ = writeln!(out, "{dir_base_line}");
            }
            Some(_) => {
                let _ = writeln!(out, "# {}", body.trim());
            }
            None => {
                let _ = writeln!(out, "{body}");
            }
        }
        if add_after == Some(at) {
            let _ = writeln!(out, "{dir_base_line}");
            add_after = None;
        }
    }
    if sections.is_empty() {
        let _ = writeln!(out, "[svc]");
        let _ = writeln!(out, "{dir_base_line}");
    }
    out
}

/// An ID as upstream's directories may spell it: lower-cased, `-` and `_` alike.
fn folded(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// The last part of `path`, as text.
fn name_of(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// The configured ID of the job that `path` (a job's log directory or state file) is
/// of; `None`, with the reason in the report, when there is none.
fn job_of<'a>(path: &Path, ids: &'a [String], report: &mut Report) -> Option<&'a str> {
    match id_for(&name_of(path), ids) {
        Ok(id) => Some(id),
        Err(why) => {
            report.skip(path, why);
            None
        }
    }
}

/// The configured ID that the directory `name` belongs to, or why none.
fn id_for<'a>(name: &str, ids: &'a [String]) -> Result<&'a str, &'static str> {
    let key = folded(name);
    let mut matches = ids.iter().filter(|id| folded(id) == key);
    match (matches.next(), matches.next()) {
        (Some(id), None) => Ok(id),
        (Some(_), Some(_)) => Err("more than one configured ID matches this directory"),
        (None, _) => Err("no job in the configuration has this ID"),
    }
}

/// `<anything>.<counter>[.<status>]` → (counter, svc's status), or why not.
fn log_name(name: &str) -> Result<(u64, LogStatus), String> {
    let parts: Vec<&str> = name.split('.').collect();
    let counter_at = parts
        .iter()
        .rposition(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        .filter(|&at| at >= 1 && at + 2 >= parts.len() && !parts[0].is_empty())
        .ok_or_else(|| "not a log name (<id>.<counter>.<status>)".to_string())?;
    let counter: u64 = parts[counter_at]
        .parse()
        .map_err(|_| "counter out of range".to_string())?;
    let fail = LogStatus::Finished(RunResult::Fail);
    let status = match parts.get(counter_at + 1).map(|s| s.to_ascii_lowercase()) {
        None => fail,
        Some(status) => match status.as_str() {
            "success" => LogStatus::Finished(RunResult::Success),
            "fail" | "failed" | "canceled" | "cancelled" | "timeout" | "paused" => fail,
            "started" | "running" => LogStatus::Started,
            other => return Err(format!("unknown status {other:?}")),
        },
    };
    Ok((counter, status))
}

/// Every log of every job directory below `src` into `dest/<ID>/`.
fn take_logs(
    src: &Path,
    ids: &[String],
    dest: &Path,
    report: &mut Report,
) -> Result<(), MigrateError> {
    for dir in sorted_dirs(src)? {
        let Some(id) = job_of(&dir, ids, report) else {
            continue;
        };
        let dir_name = name_of(&dir);
        let logs = LogDir::new(dest.join(id), id);
        for file in sorted_entries(&dir)? {
            if !file.is_file() {
                report.skip(&file, "not a regular file");
                continue;
            }
            let file_name = name_of(&file);
            let (counter, status) = match log_name(&file_name) {
                Ok(parsed) => parsed,
                Err(why) => {
                    report.skip(&file, &why);
                    continue;
                }
            };
            let target = logs.path(counter, status);
            if copy_new(&file, &target, None, report)? {
                let verb = if file_name == logs.file_name(counter, status) && dir_name == id {
                    "copied"
                } else {
                    "renamed"
                };
                report.did(format!(
                    "{verb}: {} -> {}",
                    file.display(),
                    target.display()
                ));
            }
        }
    }
    Ok(())
}

/// A state file in upstream's two-line form (last run, status) or svc's own.
fn parse_state(text: &str, origin: &str) -> Result<JobState, String> {
    let mut lines = text.lines().map(str::trim);
    let first = lines.next().unwrap_or_default();
    if let Ok(time) = DateTime::parse_from_rfc3339(first) {
        let mut state = JobState {
            last_run: Some(time.with_timezone(&Utc)).filter(|t| t.timestamp() > 0),
            ..JobState::default()
        };
        match lines.next().unwrap_or_default() {
            "success" => state.last_result = Some(RunResult::Success),
            "failed" | "fail" | "canceled" => state.last_result = Some(RunResult::Fail),
            "paused" => state.paused = true,
            _ => {}
        }
        return Ok(state);
    }
    JobState::parse(text, origin).map_err(|e| e.to_string())
}

/// Each state file below `src` as the state file of its job in `dest`, with the counter
/// of its newest migrated log.
fn take_states(
    src: &Path,
    ids: &[String],
    dest: &Path,
    logs: &Path,
    report: &mut Report,
) -> Result<(), MigrateError> {
    for file in sorted_entries(src)?.into_iter().filter(|p| p.is_file()) {
        let Some(id) = job_of(&file, ids, report) else {
            continue;
        };
        let text = fs::read_to_string(&file).map_err(io_error(&file))?;
        let mut state = match parse_state(&text, &file.display().to_string()) {
            Ok(state) => state,
            Err(why) => {
                report.skip(
                    &file,
                    &format!("not a state file ({why}); the logs rebuild it"),
                );
                continue;
            }
        };
        state.started = false;
        state.queued = None;
        state.counter = state.counter.max(newest_counter(&logs.join(id), id)?);
        let target = dest.join(id);
        if copy_new(&file, &target, Some(state.to_text().as_bytes()), report)? {
            report.did(format!(
                "converted: {} -> {}",
                file.display(),
                target.display()
            ));
        }
    }
    Ok(())
}

/// The highest counter among the logs of job `id` in `dir` (0 when none), the directory
/// left as it is (a controller may be running on it).
fn newest_counter(dir: &Path, id: &str) -> Result<u64, MigrateError> {
    let logs = LogDir::new(dir.to_path_buf(), id)
        .list()
        .map_err(io_error(dir))?;
    Ok(logs.last().map_or(0, |log| log.counter))
}

/// Working directories are left where they are: they may be large, and the jobs that
/// need theirs say so in `dir_work`.
fn note_work_dirs(source: &Source, config: &Config, report: &mut Report) {
    for kind in ["job", "job_http"] {
        for dir in sorted_dirs(&source.work().join(kind)).unwrap_or_default() {
            let why = format!(
                "a working directory is not copied; svc's is {} (set dir_work to keep using \
                 this one)",
                config.main.dir_lib().join(kind).join("<id>").display()
            );
            report.skip(&dir, &why);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names_of_every_release() {
        const SUCCESS: LogStatus = LogStatus::Finished(RunResult::Success);
        const FAIL: LogStatus = LogStatus::Finished(RunResult::Fail);
        assert_eq!(log_name("deploy.12.success"), Ok((12, SUCCESS)));
        assert_eq!(log_name("deploy.3.failed"), Ok((3, FAIL)));
        assert_eq!(log_name("deploy.3.fail"), Ok((3, FAIL)));
        assert_eq!(log_name("deploy.4.canceled"), Ok((4, FAIL)));
        assert_eq!(log_name("deploy.5"), Ok((5, FAIL)));
        assert_eq!(log_name("deploy.6.started"), Ok((6, LogStatus::Started)));
        assert_eq!(log_name("my.job.7.success"), Ok((7, SUCCESS)));
        assert!(log_name("deploy").is_err());
        assert!(log_name("deploy.x.success").is_err());
        assert!(log_name("deploy.2.weird").is_err());
        assert!(log_name(".1.success").is_err());
    }

    #[test]
    fn directories_match_ids_in_any_case_and_dash_or_underscore() {
        let ids = vec!["Deploy_Site".to_string(), "backup".to_string()];
        assert_eq!(id_for("deploy_site", &ids), Ok("Deploy_Site"));
        assert_eq!(id_for("deploy-site", &ids), Ok("Deploy_Site"));
        assert_eq!(id_for("BACKUP", &ids), Ok("backup"));
        assert!(id_for("other", &ids).is_err());
        let clash = vec!["a-b".to_string(), "a_b".to_string()];
        assert!(id_for("a_b", &clash).is_err());
    }

    #[test]
    fn upstream_state_in_both_forms() {
        let state = parse_state("2023-01-02T03:04:05Z\nfailed\n", "t").expect("two lines");
        assert_eq!(state.last_result, Some(RunResult::Fail));
        assert_eq!(
            state.last_run.map(|t| t.to_rfc3339()),
            Some("2023-01-02T03:04:05+00:00".to_string())
        );
        let paused = parse_state("2023-01-02T03:04:05Z\npaused\n", "t").expect("paused");
        assert!(paused.paused);
        let never = parse_state("0001-01-01T00:00:00Z\n\n", "t").expect("never ran");
        assert_eq!(never.last_run, None);
        let ours = parse_state(
            "last_run = \nstatus = success\ncounter = 4\npaused = false\n",
            "t",
        )
        .expect("svc's form");
        assert_eq!(ours.counter, 4);
        assert!(parse_state("garbage", "t").is_err());
    }

    #[test]
    fn the_main_section_is_renamed_and_dir_base_replaced() {
        let text =
            "; upstream\n[karajo]\nname = x\ndir_base = /srv/old\n\n[job \"a\"]\ncommand = true\n";
        let out = rewrite_main(
            text,
            "karajo",
            Path::new("/"),
            Path::new("/old/etc/karajo/karajo.conf"),
        );
        assert!(
            out.contains(
                "[svc]\nname = x\n# dir_base = /srv/old (before the migration)\ndir_base = /\n"
            ),
            "{out}"
        );
        assert!(out.contains("[job \"a\"]\ncommand = true\n"), "{out}");
        let without = rewrite_main(
            "[karajo]\nname = y\n[job \"b\"]\n",
            "karajo",
            Path::new("/new base"),
            Path::new("f"),
        );
        assert!(
            without.contains("[svc]\nname = y\ndir_base = /new base\n[job \"b\"]"),
            "{without}"
        );
        let quoted = rewrite_main("[svc]\n", "svc", Path::new("/a;b"), Path::new("f"));
        assert!(quoted.contains("dir_base = \"/a;b\"\n"), "{quoted}");
        let no_section = rewrite_main("", "karajo", Path::new("/n"), Path::new("f"));
        assert!(
            no_section.ends_with("[svc]\ndir_base = /n\n"),
            "{no_section}"
        );
    }

    #[test]
    fn the_rewrite_reads_the_main_file_as_the_parser_does() {
        let text = "[karajo] name = x\nlisten_address = 127.0.0.1:1\n\
                    dir_base = /srv/\\\n  old\n[job \"a\"]\ncommand = true\n";
        let out = rewrite_main(text, "karajo", Path::new("/new"), Path::new("f"));
        assert!(
            out.contains(
                "[svc]\nname = x\nlisten_address = 127.0.0.1:1\n# dir_base = /srv/\\\n\
                 # old (before the migration)\ndir_base = /new\n[job \"a\"]\ncommand = true\n"
            ),
            "{out}"
        );
        // Read back: one main section, whose only dir_base is the new one.
        let sections = config::main_sections(&out, "svc");
        assert_eq!(sections.len(), 1, "{out}");
        let lines: Vec<&str> = out.lines().collect();
        let dir_bases: Vec<&str> = sections[0]
            .dir_base
            .iter()
            .flat_map(|&(first, last)| &lines[first - 1..last])
            .copied()
            .collect();
        assert_eq!(dir_bases, ["dir_base = /new"], "{out}");

        // dir_base on the header's line, and a main section with nothing but its header
        // on the same line as the next one.
        let on_header = rewrite_main(
            "[Karajo] dir_base = /old\n",
            "karajo",
            Path::new("/n"),
            Path::new("f"),
        );
        assert!(
            on_header.ends_with("[svc]\n# dir_base = /old (before the migration)\ndir_base = /n\n"),
            "{on_header}"
        );
        let bare = rewrite_main(
            "[karajo] [job \"a\"]\n",
            "karajo",
            Path::new("/n"),
            Path::new("f"),
        );
        assert!(
            bare.ends_with("[svc]\ndir_base = /n\n[job \"a\"]\n"),
            "{bare}"
        );
    }

    #[test]
    fn only_the_files_loading_reads_are_taken_from_job_d() {
        let old = tempfile::tempdir().expect("tempdir");
        let new = tempfile::tempdir().expect("tempdir");
        let write = |rel: &str, text: &str| {
            let path = old.path().join(rel);
            fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            fs::write(&path, text).expect("write");
        };
        write("etc/karajo/karajo.conf", "[karajo]\nname = old\n");
        write(
            "etc/karajo/job.d/a.conf",
            "[job \"a\"]\npath = /a\ncommand = true\n",
        );
        write("etc/karajo/job.d/.a.conf.swp", "an editor's swap file");
        write(
            "etc/karajo/job.d/.hidden.conf",
            "[job \"h\"]\npath = /h\ncommand = true\n",
        );
        write(
            "etc/karajo/job.d/old.conf/b.conf",
            "[job \"b\"]\npath = /b\ncommand = true\n",
        );
        let config_file = new.path().join("etc/svc/svc.conf");
        let report = migrate(old.path(), &config_file).expect("the migration goes on");
        let job_d = new.path().join("etc/svc/job.d");
        let mut names: Vec<String> = fs::read_dir(&job_d)
            .expect("the new job.d")
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        assert_eq!(names, ["a.conf"]);
        for name in [".a.conf.swp", ".hidden.conf", "old.conf"] {
            let path = old.path().join("etc/karajo/job.d").join(name);
            let line = format!("not taken: {}: ", path.display());
            assert!(
                report.lines.iter().any(|l| l.starts_with(&line)),
                "{line:?} in {:#?}",
                report.lines
            );
        }
        assert_eq!(report.skipped, 3, "{:#?}", report.lines);
    }

    #[test]
    fn the_base_comes_from_the_config_path() {
        assert_eq!(
            destination_base(Path::new("/etc/svc/svc.conf")).ok(),
            Some(PathBuf::from("/"))
        );
        assert_eq!(
            destination_base(Path::new("/tmp/x/etc/svc/svc.conf")).ok(),
            Some(PathBuf::from("/tmp/x"))
        );
        assert!(destination_base(Path::new("/tmp/svc.conf")).is_err());
        assert!(destination_base(Path::new("/tmp/etc/other/svc.conf")).is_err());
    }
}
