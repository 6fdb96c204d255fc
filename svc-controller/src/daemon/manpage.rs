//! The manual page `svc-controller(8)`, generated from the clap definition with
//! `clap_mangen` and completed with the sections clap knows nothing about (exit status,
//! signals, files, environment). Printed by the hidden `man-page` subcommand; the
//! packaging script compresses it into `/usr/share/man/man8/svc-controller.8.gz`.

use std::io::{self, Write};

use clap::CommandFactory as _;
use clap_mangen::roff::{Roff, bold, italic, roman};

use super::Cli;

/// Writes the complete manual page (roff) to `out`.
pub fn render(out: &mut dyn Write) -> io::Result<()> {
    out.write_all(page()?.as_bytes())
}

/// The page as text: clap's sections, then ours before the closing VERSION section, as
/// man-pages(7) orders them.
fn page() -> io::Result<String> {
    let command = Cli::command();
    // Hidden subcommands (tools for packaging) are not documented; without a visible one
    // there is no SUBCOMMANDS section and the synopsis does not mention them.
    let visible_subcommands = command.get_subcommands().any(|sub| !sub.is_hide_set());
    let man = clap_mangen::Man::new(command)
        .section("8")
        .manual("System Manager's Manual")
        .source(concat!("svc ", env!("CARGO_PKG_VERSION")));
    // Each `render_*` (and `Roff::render`) starts with the same apostrophe definitions;
    // the page keeps the first.
    let preamble = Roff::new().render();
    let mut page = String::new();
    let mut add = |text: String| {
        let body = match text.strip_prefix(&preamble) {
            Some(body) if !page.is_empty() => body,
            _ => text.as_str(),
        };
        page.push_str(body);
    };
    let section = |render: fn(&clap_mangen::Man, &mut dyn Write) -> io::Result<()>| {
        let mut buffer = Vec::new();
        render(&man, &mut buffer)?;
        String::from_utf8(buffer).map_err(io::Error::other)
    };
    add(section(clap_mangen::Man::render_title)?);
    add(section(clap_mangen::Man::render_name_section)?);
    let synopsis = section(clap_mangen::Man::render_synopsis_section)?;
    if visible_subcommands {
        add(synopsis);
    } else {
        add(synopsis.replace(" [\\fIsubcommands\\fR]", ""));
    }
    add(section(clap_mangen::Man::render_description_section)?);
    add(section(clap_mangen::Man::render_options_section)?);
    if visible_subcommands {
        add(section(clap_mangen::Man::render_subcommands_section)?);
    }
    add(extra_sections().render());
    add(section(clap_mangen::Man::render_version_section)?);
    Ok(page)
}

/// A `.TP` entry: `tag` in bold, then `text`.
fn entry(roff: &mut Roff, tag: &str, text: &str) {
    roff.control("TP", []);
    roff.text([bold(tag)]);
    roff.text([roman(text)]);
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
        "/run/svc/",
        "Job state files and the runner socket (/var/run is /run).",
    );
    entry(
        &mut roff,
        "/var/lib/svc/",
        "Working directories of jobs, webhook request bodies, replay stores.",
    );
    roff.text([
        roman("All paths are below "),
        italic("dir_base"),
        roman(" (default /), which the main file may change."),
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
        bold("systemctl"),
        roman("(1), "),
        bold("systemd.exec"),
        roman("(5), /usr/share/doc/svc/README.md, /usr/share/doc/svc/install.md"),
    ]);
    roff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_page_has_the_options_and_the_extra_sections() {
        let mut out = Vec::new();
        render(&mut out).expect("render");
        let text = String::from_utf8(out).expect("utf-8");
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
