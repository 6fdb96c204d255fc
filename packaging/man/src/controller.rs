//! `svc-controller(8)`: clap's sections from `svc_controller::daemon::Cli`, completed with
//! exit status, signals, files and environment.

use std::io;

use clap::CommandFactory as _;
use clap_mangen::roff::{Roff, bold, italic, roman};
use svc_controller::daemon::Cli;

use crate::page::{INSTALLED_DOCS, entry, render};

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
                "FILES",
                "ENVIRONMENT",
                "\"SEE ALSO\"",
                "VERSION"
            ]
        );
    }
}
