//! `svc-runner(8)`: clap's sections from `svc_runner::Cli`, completed with exit status
//! and the programs and documents it belongs with.

use std::io;

use clap::CommandFactory as _;
use clap_mangen::roff::{Roff, bold, roman};
use svc_runner::Cli;

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
        "The work was done and its result reported to the controller, whether the job \
         succeeded or failed. A fork server: the controller closed its socket and every \
         runner it forked has ended. With --probe-containment: the line saying how runs \
         are contained was printed.",
    );
    entry(
        &mut roff,
        "1",
        "The work could not be done (reported to the controller when possible). A fork \
         server: it could not go on serving (the reason is on standard error).",
    );
    entry(
        &mut roff,
        "2",
        "The handshake with the controller failed or the connection was lost.",
    );
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("svc-controller"),
        roman(format!("(8), {}", INSTALLED_DOCS.join(", "))),
    ]);
    roff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_page_has_the_option_and_its_sections() {
        let text = page().expect("render");
        for needle in [
            ".TH svc-runner 8",
            "\\-\\-socket",
            "EXIT STATUS",
            "svc\\-controller",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
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
                "\"EXIT STATUS\"",
                "\"SEE ALSO\"",
                "VERSION"
            ]
        );
    }
}
