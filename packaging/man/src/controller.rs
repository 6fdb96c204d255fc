//! `svc-controller(8)`: clap's sections from `svc_controller::daemon::Cli`, completed with
//! exit status, signals, files and environment.

use std::io;

use clap::CommandFactory as _;
use clap_mangen::roff::{Roff, bold, italic, roman};
use svc_controller::daemon::Cli;

use crate::page::{INSTALLED_DOCS, entry, render};

/// The README, whose configuration tables are the one description of every key.
const README: &str = include_str!("../../../README.md");

/// The sections of the configuration reference in the README, with their words.
const SECTIONS: [(&str, &str); 5] = [
    ("svc", "### `[svc]`"),
    ("job", "### `[job \"NAME\"]`"),
    ("job.http", "### `[job.http \"NAME\"]`"),
    ("notif", "### `[notif \"NAME\"]`"),
    ("user", "### `[user \"NAME\"]`"),
];

/// The rows `(keys, default, meaning)` of the table below `heading` in the README, with
/// Markdown's backticks and link targets taken out.
fn table_rows(heading: &str) -> Vec<(String, String, String)> {
    let Some(start) = README.find(heading) else {
        return Vec::new();
    };
    let plain = |cell: &str| {
        let mut text = cell.trim().replace('`', "");
        // [text](target) -> text
        while let (Some(open), Some(mid)) = (text.find('['), text.find("](")) {
            let Some(close) = text[mid..].find(')').map(|c| mid + c) else {
                break;
            };
            if open > mid {
                break;
            }
            text = format!(
                "{}{}{}",
                &text[..open],
                &text[open + 1..mid],
                &text[close + 1..]
            );
        }
        text
    };
    README[start + heading.len()..]
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .filter(|line| !line.starts_with("| key") && !line.starts_with("|---"))
        .filter_map(|line| {
            // Cells split at `|`; the meaning keeps any `|` of its own.
            let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
            let mut cells = inner.splitn(3, '|');
            let (keys, default, meaning) = (cells.next()?, cells.next()?, cells.next()?);
            let default = match plain(default) {
                text if text.is_empty() => "as described".to_string(),
                text => text,
            };
            Some((plain(keys), default, plain(meaning)))
        })
        .collect()
}

/// CONFIGURATION: every key of every section, from the README's tables.
fn configuration(roff: &mut Roff) {
    roff.control("SH", ["CONFIGURATION"]);
    roff.text([roman(
        "git-config syntax: sections [svc], [job \"NAME\"], [job.http \"NAME\"] and \
         [notif \"NAME\"], and [user \"NAME\"] in user.conf; keys are case-insensitive; \"#\" and \";\" start a comment outside \
         double quotes. The keys, with their defaults:",
    )]);
    for (word, heading) in SECTIONS {
        roff.control("SS", [format!("[{word}]").as_str()]);
        for (keys, default, meaning) in table_rows(heading) {
            entry(roff, &keys, &format!("{meaning} (default: {default})"));
        }
    }
}

/// The whole page (roff).
pub fn page() -> io::Result<String> {
    render(Cli::command(), &extra_sections())
}

fn extra_sections() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    entry(
        &mut roff,
        "0",
        "The configuration is valid (--check), or the service stopped after SIGTERM or SIGINT.",
    );
    entry(
        &mut roff,
        "1",
        "The service could not start or failed while running (for example, the listen \
         address is taken).",
    );
    entry(
        &mut roff,
        "78",
        "The configuration is invalid (EX_CONFIG). Every problem is printed with its file, \
         section, key and value. Nothing is started.",
    );

    roff.control("SH", ["SIGNALS"]);
    entry(
        &mut roff,
        "SIGHUP",
        "Reload the job definitions. Unchanged jobs keep their state; an invalid new \
         configuration is refused and the running one kept.",
    );
    entry(
        &mut roff,
        "SIGTERM, SIGINT",
        "Stop accepting requests and timers, end running executions (their whole process \
         group, recorded as failed), save state and exit 0 within 10 seconds.",
    );

    configuration(&mut roff);

    roff.control("SH", ["FILES"]);
    entry(
        &mut roff,
        "/etc/svc/svc.conf",
        "Main configuration file, section [svc].",
    );
    entry(
        &mut roff,
        "/etc/svc/job.d/*.conf",
        "Job definitions, sections [job \"NAME\"].",
    );
    entry(
        &mut roff,
        "/etc/svc/job_http.d/*.conf",
        "JobHttp definitions, sections [job.http \"NAME\"].",
    );
    entry(
        &mut roff,
        "/var/log/svc/job/ID/ID.COUNTER.STATUS",
        "One log per run; JobHttp logs under /var/log/svc/job_http/.",
    );
    entry(
        &mut roff,
        "/var/lib/svc/state/",
        "The packaged dir_state: job state, replay stores, the generated secret (secret, \
         mode 0600) and the lock that allows one controller at a time.",
    );
    entry(
        &mut roff,
        "/var/lib/svc/",
        "Working directories of jobs (job/ID), webhook request bodies (run/) and the \
         temporary directory of each run (tmp/ID.COUNTER, its TMPDIR).",
    );
    entry(
        &mut roff,
        "/run/svc/",
        "The runner socket (/var/run is /run).",
    );
    roff.text([
        roman("All paths are below "),
        italic("dir_base"),
        roman(" (default /), which the main file may change; state is below "),
        italic("dir_state"),
        roman(" (default $dir_base/var/run/svc)."),
    ]);

    roff.control("SH", ["ENVIRONMENT"]);
    entry(
        &mut roff,
        "RUST_LOG",
        "Log filter (for example debug or svc_controller=debug); wins over log_level.",
    );
    entry(
        &mut roff,
        "JOURNAL_STREAM",
        "Set by systemd: log lines then carry no time stamp of their own.",
    );
    entry(
        &mut roff,
        "NOTIFY_SOCKET, WATCHDOG_USEC",
        "Set by systemd for Type=notify and WatchdogSec=: readiness, reload and stop are \
         reported, and the watchdog is pinged at half its timeout.",
    );

    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("svc-runner"),
        roman("(8), "),
        bold("systemctl"),
        roman("(1), "),
        bold("systemd.exec"),
        roman(format!("(5), {}", INSTALLED_DOCS.join(", "))),
    ]);
    roff
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entry tags (the bold line after each `.TP`) of `.SS [word]` in the page's
    /// CONFIGURATION section, with roff's `\fB`, `\fR` and `\-` undone.
    fn configuration_tags(text: &str, word: &str) -> Vec<String> {
        let section = text
            .split("\n.SH ")
            .find(|part| part.starts_with("CONFIGURATION\n"))
            .unwrap_or_default();
        let subsection = section
            .split("\n.SS ")
            .find(|part| part.starts_with(&format!("[{word}]\n")))
            .unwrap_or_default();
        let lines: Vec<&str> = subsection.lines().collect();
        lines
            .windows(2)
            .filter(|pair| pair[0] == ".TP")
            .map(|pair| {
                pair[1]
                    .replace("\\fB", "")
                    .replace("\\fR", "")
                    .replace("\\-", "-")
            })
            .collect()
    }

    #[test]
    fn every_configuration_key_is_in_the_page() {
        let text = page().expect("render");
        for (word, keys) in svc_controller::config::known_keys() {
            let heading = SECTIONS
                .iter()
                .find(|(w, _)| *w == word)
                .map(|(_, h)| *h)
                .expect("a README section per word");
            let rows: Vec<String> = table_rows(heading).into_iter().map(|r| r.0).collect();
            for key in keys {
                assert!(
                    rows.iter()
                        .any(|row| row.split([',', '/', ' ']).any(|name| name.trim() == key)),
                    "[{word}] {key} is in no row of the README's table: {rows:?}"
                );
                let tags = configuration_tags(&text, word);
                assert!(
                    tags.iter()
                        .any(|tag| tag.split([',', '/', ' ']).any(|name| name.trim() == key)),
                    "[{word}] {key} is no entry of [{word}] in the page's CONFIGURATION: {tags:?}"
                );
            }
        }
    }

    #[test]
    fn man_page_has_the_options_and_the_extra_sections() {
        let text = page().expect("render");
        for needle in [
            ".TH svc-controller 8",
            "\\-\\-config",
            "\\-\\-check",
            "EXIT STATUS",
            "SIGHUP",
            "/etc/svc/svc.conf",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
        assert!(!text.contains("man\\-page"), "the hidden subcommand leaked");
        assert!(
            text.contains("hash\\-password"),
            "the hash-password subcommand is documented"
        );
        assert_eq!(text.matches(".ds Aq").count(), 2, "one apostrophe preamble");
        let sections: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix(".SH "))
            .collect();
        assert_eq!(
            sections,
            [
                "NAME",
                "SYNOPSIS",
                "DESCRIPTION",
                "OPTIONS",
                "SUBCOMMANDS",
                "\"EXIT STATUS\"",
                "SIGNALS",
                "CONFIGURATION",
                "FILES",
                "ENVIRONMENT",
                "\"SEE ALSO\"",
                "VERSION"
            ]
        );
    }
}
