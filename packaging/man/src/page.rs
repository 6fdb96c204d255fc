//! One manual page from a clap command: clap's own sections, then the caller's, before
//! the closing VERSION section, in the order man-pages(7) gives.

use std::io::{self, Write};

use clap_mangen::roff::{Roff, bold, roman};

/// The page of `command` in section 8, with `extra` (EXIT STATUS, FILES, ...) after the
/// options and subcommands.
pub fn render(command: clap::Command, extra: &Roff) -> io::Result<String> {
    // Hidden subcommands are not documented; without a visible one there is no
    // SUBCOMMANDS section and the synopsis does not mention them.
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
    add(extra.render());
    add(section(clap_mangen::Man::render_version_section)?);
    Ok(page)
}

/// A `.TP` entry: `tag` in bold, then `text`.
pub fn entry(roff: &mut Roff, tag: &str, text: &str) {
    roff.control("TP", []);
    roff.text([bold(tag)]);
    roff.text([roman(text)]);
}

/// The documentation the packages install, named by SEE ALSO: the directory, since the
/// .deb compresses the files in it (README.md.gz) and the .rpm does not.
pub const INSTALLED_DOCS: [&str; 1] = ["/usr/share/doc/svc/ (README, docs/install)"];
