//! Loading the configuration: the main file, then the files of `job.d` and `job_http.d`
//! and `user.conf`, each section handed to its loader, every problem collected, and the
//! names jobs give each other checked once all is read.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::job_http_section::HTTP_JOB_KEYS;
use super::job_model::{HttpJobConfig, JobConfig};
use super::job_section::{ChainRef, JOB_KEYS};
use super::main_section::{MAIN_KEYS, read_main};
use super::model::{Config, ConfigError, ConfigIssue, MainConfig, NotifConfig};
use super::notif_section::NOTIF_KEYS;
use super::section_reader::{KeyKind, NamedAt, new_issue};
use super::syntax::{self, Section, SectionKind};
use super::users_section::{USER_KEYS, load_users};

/// Every key each section takes, by section word (`svc`, `job`, `job.http`, `notif`), for
/// the documentation, which must name them all.
pub fn known_keys() -> Vec<(&'static str, Vec<&'static str>)> {
    let names = |keys: &[(&'static str, KeyKind)]| keys.iter().map(|(k, _)| *k).collect();
    vec![
        ("svc", names(MAIN_KEYS)),
        ("job", names(JOB_KEYS)),
        ("job.http", names(HTTP_JOB_KEYS)),
        ("notif", names(NOTIF_KEYS)),
        ("user", names(USER_KEYS)),
    ]
}

/// Where an ID or a path was first defined, for duplicate messages.
#[derive(Debug, Clone)]
pub(super) struct Origin {
    /// The ID as configured.
    pub(super) id: String,
    pub(super) file: PathBuf,
    pub(super) header: String,
}

/// A name a job lists that is checked once every file is read (what it names may be
/// defined in a later file than the job), and where it was written.
#[derive(Debug)]
pub(super) struct LaterRef {
    pub(super) key: &'static str,
    pub(super) named: NamedAt,
    pub(super) file: PathBuf,
    pub(super) header: String,
}

impl LaterRef {
    /// An error about this name, at the key and value that wrote it.
    pub(super) fn issue(&self, message: String) -> ConfigIssue {
        new_issue(
            &self.file,
            Some(&self.header),
            Some(self.key),
            Some(&self.named.value),
            message,
        )
    }
}

/// The environment variables a `$NAME` value reads.
pub(super) type EnvLookup<'e> = &'e dyn Fn(&str) -> Option<String>;

/// Builds jobs and JobHttps from sections, file after file, and detects duplicates.
pub(super) struct Loader<'m> {
    pub(super) main: &'m MainConfig,
    pub(super) env: EnvLookup<'m>,
    /// What commands must not write or read ([`MainConfig::sandbox_protected_paths`]),
    /// worked out once: with thousands of jobs, once per job was a tenth of the start-up.
    pub(super) protected: Vec<(PathBuf, &'static str)>,
    pub(super) errors: Vec<ConfigIssue>,
    pub(super) warnings: Vec<ConfigIssue>,
    pub(super) jobs: Vec<JobConfig>,
    pub(super) http_jobs: Vec<HttpJobConfig>,
    /// Lower-cased ID → where it was first defined.
    job_ids: HashMap<String, Origin>,
    http_job_ids: HashMap<String, Origin>,
    pub(super) paths: HashMap<String, Origin>,
    pub(super) notifs: Vec<NotifConfig>,
    /// Notif name → where it was first defined.
    pub(super) notif_names: HashMap<String, Origin>,
    /// The notifs each job names.
    pub(super) notif_refs: Vec<LaterRef>,
    /// The jobs each job starts when it ends.
    pub(super) chain_refs: Vec<ChainRef>,
}

impl<'m> Loader<'m> {
    fn new(main: &'m MainConfig, env: EnvLookup<'m>) -> Self {
        Loader {
            main,
            env,
            protected: main.sandbox_protected_paths(),
            errors: Vec::new(),
            warnings: Vec::new(),
            jobs: Vec::new(),
            http_jobs: Vec::new(),
            job_ids: HashMap::new(),
            http_job_ids: HashMap::new(),
            paths: HashMap::new(),
            notifs: Vec::new(),
            notif_names: HashMap::new(),
            notif_refs: Vec::new(),
            chain_refs: Vec::new(),
        }
    }

    /// Reads one file and loads its sections; problems are recorded.
    fn load_file(&mut self, file: &Path) {
        let text = match read_text(file) {
            Ok(text) => text,
            Err(message) => {
                self.errors.push(new_issue(file, None, None, None, message));
                return;
            }
        };
        let parsed = syntax::parse(&text);
        self.errors.extend(syntax_issues(file, parsed.errors));
        self.warnings.extend(syntax_issues(file, parsed.warnings));
        self.load_sections(file, &parsed.sections, false);
    }

    fn load_sections(&mut self, file: &Path, sections: &[Section], is_main: bool) {
        for section in sections {
            match section.kind {
                SectionKind::Main if is_main => {}
                SectionKind::Main => self.errors.push(new_issue(
                    file,
                    Some(&section.header),
                    None,
                    None,
                    format!(
                        "line {}: [svc] belongs in the main file {}",
                        section.line,
                        self.main.file.display()
                    ),
                )),
                SectionKind::Job | SectionKind::Hook => self.load_job(file, section),
                SectionKind::JobHttp => self.load_http_job(file, section),
                SectionKind::Notif => self.load_notif(file, section),
                SectionKind::User => self.errors.push(new_issue(
                    file,
                    Some(&section.header),
                    None,
                    None,
                    format!(
                        "line {}: [user \"NAME\"] sections belong in {}",
                        section.line,
                        self.main.user_conf().display()
                    ),
                )),
            }
        }
    }

    /// The job ID of `section`, recorded; a duplicate within the namespace is a problem,
    /// and so is one that differs only by case (IDs are looked up in any case).
    pub(super) fn register_id(&mut self, file: &Path, section: &Section, http: bool) -> String {
        let id = job_id_from_name(&section.name);
        let ids = if http {
            &mut self.http_job_ids
        } else {
            &mut self.job_ids
        };
        if let Some(first) = ids.get(&id.to_ascii_lowercase()) {
            let what = if http { "JobHttp" } else { "job" };
            let same = if first.id == id {
                "the same ID".to_string()
            } else {
                format!("the ID {:?}, the same but for case", first.id)
            };
            let message = format!(
                "line {}: duplicate {what} ID {id:?}: [{}] in {} has {same}",
                section.line,
                first.header,
                first.file.display()
            );
            self.errors
                .push(new_issue(file, Some(&section.header), None, None, message));
        } else {
            ids.insert(
                id.to_ascii_lowercase(),
                Origin {
                    id: id.clone(),
                    file: file.to_path_buf(),
                    header: section.header.clone(),
                },
            );
        }
        id
    }
}

pub(super) fn syntax_issues(
    file: &Path,
    errors: Vec<syntax::SyntaxError>,
) -> impl Iterator<Item = ConfigIssue> + '_ {
    errors.into_iter().map(move |e| {
        new_issue(
            file,
            e.section.as_deref(),
            e.key.as_deref(),
            e.value.as_deref(),
            e.message,
        )
    })
}

/// Reads a whole file as UTF-8 text; the error is the issue message.
pub(super) fn read_text(file: &Path) -> Result<String, String> {
    let bytes = fs::read(file).map_err(|e| format!("cannot read the file: {e}"))?;
    String::from_utf8(bytes).map_err(|e| format!("the file is not valid UTF-8: {e}"))
}

/// Regular files (symbolic links followed) named `*.conf` and not starting with `.` in
/// `dir`, sorted by name. A missing directory has none.
fn conf_files(dir: &Path, errors: &mut Vec<ConfigIssue>) -> Vec<PathBuf> {
    match fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            errors.push(new_issue(
                dir,
                None,
                None,
                None,
                format!("cannot read: {e}"),
            ));
            return Vec::new();
        }
        Ok(meta) if !meta.is_dir() => {
            errors.push(new_issue(dir, None, None, None, "not a directory"));
            return Vec::new();
        }
        Ok(_) => {}
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            let message = format!("cannot list the directory: {e}");
            errors.push(new_issue(dir, None, None, None, message));
            return Vec::new();
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                let message = format!("cannot list the directory: {e}");
                errors.push(new_issue(dir, None, None, None, message));
                continue;
            }
        };
        let path = entry.path();
        if is_conf_file(&path) {
            files.push(path);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    files
}

/// Whether `path`, an entry of `job.d` or `job_http.d`, is a file that [`load`] reads: a
/// name ending in `.conf` and not starting with `.`, and a regular file (symbolic links
/// followed) or an entry that cannot be looked at (a dangling link, an unreadable one),
/// whose reading then reports the problem.
pub(crate) fn is_conf_file(path: &Path) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    let name = name.to_string_lossy();
    if name.starts_with('.') || !name.ends_with(".conf") {
        return false;
    }
    fs::metadata(path).map_or(true, |meta| meta.is_file())
}

/// Loads and validates the main file at `path` and the `job.d` / `job_http.d` files below
/// its `dir_base`.
///
/// A relative `dir_base` is taken relative to the directory holding the main file;
/// relative `dir_public`, `runner_path` and job `dir_work` values are taken relative to
/// `dir_base`. Job files are read in name order (hidden files and names not ending in
/// `.conf` are ignored); a missing directory holds no jobs. Every problem in every file is
/// returned at once; deprecated names load and are listed in [`Config::warnings`].
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with_env(path, &|name| std::env::var(name).ok())
}

/// [`load`], reading `$NAME` values from `env` instead of the process environment.
pub(super) fn load_with_env(path: &Path, env: EnvLookup<'_>) -> Result<Config, ConfigError> {
    let text = match read_text(path) {
        Ok(text) => text,
        Err(message) => {
            return Err(ConfigError {
                issues: vec![new_issue(path, None, None, None, message)],
                warnings: Vec::new(),
            });
        }
    };
    let parsed = syntax::parse(&text);
    let sections = parsed.sections;
    let mut errors: Vec<ConfigIssue> = syntax_issues(path, parsed.errors).collect();
    let mut warnings: Vec<ConfigIssue> = syntax_issues(path, parsed.warnings).collect();

    let mut mains = sections.iter().filter(|s| s.kind == SectionKind::Main);
    let first_main = mains.next();
    for extra in mains {
        let first_line = first_main.map_or(0, |s| s.line);
        errors.push(new_issue(
            path,
            Some(&extra.header),
            None,
            None,
            format!(
                "line {}: duplicate section [svc] (first on line {first_line})",
                extra.line
            ),
        ));
    }
    let (main, base_ok) = read_main(path, first_main, env, &mut errors, &mut warnings);

    let mut loader = Loader::new(&main, env);
    loader.errors = errors;
    loader.warnings = warnings;
    loader.load_sections(path, &sections, true);

    let mut users = Vec::new();
    if base_ok {
        for dir in [main.dir_job_d(), main.dir_job_http_d()] {
            for file in conf_files(&dir, &mut loader.errors) {
                loader.load_file(&file);
            }
        }
        users = load_users(&main, &mut loader.errors, &mut loader.warnings);
        loader.check_notif_refs();
        loader.check_chains();
    }

    let Loader {
        errors,
        warnings,
        jobs,
        http_jobs,
        notifs,
        ..
    } = loader;
    if !errors.is_empty() {
        return Err(ConfigError {
            issues: errors,
            warnings,
        });
    }
    Ok(Config {
        main,
        jobs,
        http_jobs,
        users,
        notifs,
        warnings,
    })
}

/// The job ID for a job name: every character other than an ASCII letter, digit, `-` or
/// `_` (white space included) becomes `_`. Case is kept.
pub fn job_id_from_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "loader_tests.rs"]
mod tests;
