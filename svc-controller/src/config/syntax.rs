//! The git-config syntax of the configuration files, all of it.
//!
//! What `git config --file` reads, with one extension (`_` in key names, which upstream's
//! files use throughout, as in `max_job_running`):
//!
//! - Sections: `[svc]`, `[job "NAME"]`, `[job.http "NAME"]`, `[notif "NAME"]`, the legacy
//!   `[hook "NAME"]` and (in `user.conf`) `[user "NAME"]`. The section word is
//!   case-insensitive; the quoted NAME is kept exactly, with `\"` and `\\` (and `\` before
//!   any other character) unescaped. A key line may follow the header on the same line.
//! - `key = value`: the key is case-insensitive (returned lower-cased), a letter followed by
//!   letters, digits, `-` or `_`. A bare `key` (no `=`) has no value: a boolean true.
//! - Values: leading and trailing blanks dropped, inner ones kept; `"..."` quotes (any part
//!   of a value; removed) keep blanks, `;` and `#`; outside quotes `;` or `#` starts a
//!   comment; escapes `\"`, `\\`, `\n`, `\t`, `\b`; a `\` at the end of a line continues the
//!   value on the next one. Any other escape, or a quote still open at the end of the line,
//!   is an error.
//! - `#` or `;` starts a comment anywhere outside a value's quotes.
//!
//! gix-config was weighed and not used: it follows git in refusing `_` in key names, so it
//! cannot read upstream's files (every other key has one), and it brings some thirty crates
//! of repository machinery. rust-ini reads `:` as a separator, merges a bare key into the
//! next line's key and reports no line numbers. The tests below are a corpus written from
//! git's documentation, and a differential test runs the same files through `git config`.

/// The kind of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SectionKind {
    /// `[svc]`.
    Main,
    /// `[job "NAME"]`.
    Job,
    /// Legacy `[hook "NAME"]`, loaded as a job.
    Hook,
    /// `[job.http "NAME"]`.
    JobHttp,
    /// `[user "NAME"]`, only valid in `user.conf`.
    User,
    /// `[notif "NAME"]`: where a job's notifications go.
    Notif,
}

/// One section and its entries in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Section {
    /// Header text as written between the brackets, trimmed, e.g. `job "backup"`.
    pub header: String,
    pub kind: SectionKind,
    /// The quoted name, unescaped; empty for `[svc]`.
    pub name: String,
    /// 1-based line of the header.
    pub line: usize,
    pub entries: Vec<Entry>,
}

/// One `key = value` line (or lines, when the value is continued).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// Lower-cased key.
    pub key: String,
    /// The value with quotes, escapes and comments resolved; `None` for a bare key.
    pub value: Option<String>,
    /// 1-based line of the key.
    pub line: usize,
    /// 1-based line the value ends on: `line`, or a later one when it is continued.
    pub last_line: usize,
}

/// A line that does not parse, or (as a warning) one that parses but likely not as meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SyntaxError {
    pub line: usize,
    /// Header of the enclosing (or offending) section.
    pub section: Option<String>,
    pub key: Option<String>,
    pub value: Option<String>,
    /// Starts with `line N: `.
    pub message: String,
}

/// A file's sections, its errors, and its warnings.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    pub sections: Vec<Section>,
    pub errors: Vec<SyntaxError>,
    pub warnings: Vec<SyntaxError>,
}

/// Splits `text` into sections. Keeps going after errors, each of which skips the rest of
/// its line; the entries of a section whose header is invalid are skipped without further
/// errors.
pub(super) fn parse(text: &str) -> Parsed {
    parse_with_main_word(text, "svc")
}

/// [`parse`], reading a section `[main_word]` (lower-case) as the main section too.
fn parse_with_main_word(text: &str, main_word: &str) -> Parsed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut parser = Parser {
        text: text.as_bytes(),
        main_word,
        pos: 0,
        line: 1,
        parsed: Parsed::default(),
        current_header: None,
        in_valid_section: false,
    };
    parser.run();
    parser.parsed
}

/// Where a main section is in a file, by 1-based lines, as [`main_sections`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MainSection {
    /// The line of the header, which may hold a key after the `]`.
    pub header: usize,
    /// The last line of its last entry; `header` when it has none.
    pub end: usize,
    /// The first and last line of each of its `dir_base` entries.
    pub dir_base: Vec<(usize, usize)>,
}

/// The main sections of `text` as the configuration reads them, with upstream's
/// `[word]` (lower-case) taken as `[svc]` too: for rewriting a main file line by line
/// (`migrate`) where the parser sees its sections and keys, keys on a header's line and
/// continued values included.
pub(crate) fn main_sections(text: &str, word: &str) -> Vec<MainSection> {
    parse_with_main_word(text, word)
        .sections
        .into_iter()
        .filter(|section| section.kind == SectionKind::Main)
        .map(|section| MainSection {
            header: section.line,
            end: section
                .entries
                .last()
                .map_or(section.line, |entry| entry.last_line),
            dir_base: section
                .entries
                .iter()
                .filter(|entry| entry.key == "dir_base")
                .map(|entry| (entry.line, entry.last_line))
                .collect(),
        })
        .collect()
}

/// `value` written so that [`parse`] (and git-config) reads it back exactly: as it is
/// when it can be, else in double quotes with `"`, `\`, newlines and tabs escaped (a `;`
/// or `#` outside quotes would start a comment, outer blanks would be dropped, and quotes
/// and backslashes would be taken as syntax). For files svc writes (`migrate`) and
/// tests.
pub fn quote_value(value: &str) -> String {
    let plain = !value.contains(['"', '\\', ';', '#', '\n', '\t']) && value.trim() == value;
    if plain {
        return value.to_string();
    }
    let mut quoted = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// Blanks as git counts them (C `isspace` but the newline, which ends a line).
fn is_blank(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | 0x0b | 0x0c)
}

fn is_key_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'
}

fn is_section_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.'
}

/// Why a value did not parse.
enum ValueError {
    UnknownEscape(char),
    OpenQuote,
}

struct Parser<'a> {
    text: &'a [u8],
    /// The word of the main section besides `svc`.
    main_word: &'a str,
    pos: usize,
    /// 1-based line of `pos`.
    line: usize,
    parsed: Parsed,
    /// The last header seen, valid or not.
    current_header: Option<String>,
    /// False after an invalid header: its entries are ignored.
    in_valid_section: bool,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn run(&mut self) {
        loop {
            while self.peek().is_some_and(is_blank) {
                self.pos += 1;
            }
            match self.peek() {
                None => break,
                Some(b'\n') => {
                    self.pos += 1;
                    self.line += 1;
                }
                Some(b'#' | b';') => self.skip_line(),
                Some(b'[') => self.header(),
                Some(byte) if byte.is_ascii_alphabetic() => self.entry(),
                Some(_) => {
                    let rest = self.rest_of_line();
                    let (key, value) = split_key_value(&rest);
                    let message = if key.is_empty() {
                        "missing key before '='".to_string()
                    } else {
                        invalid_key_message(&key)
                    };
                    self.entry_error(key, value, &message);
                }
            }
        }
    }

    /// The text from `pos` to the end of the line, without moving.
    fn rest_of_line(&self) -> String {
        let rest = &self.text[self.pos..];
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end]).trim().to_string()
    }

    /// Moves to the end of the line (its newline is left for the main loop).
    fn skip_line(&mut self) {
        while self.peek().is_some_and(|b| b != b'\n') {
            self.pos += 1;
        }
    }

    fn error(&mut self, key: Option<String>, value: Option<String>, message: &str) {
        let error = SyntaxError {
            line: self.line,
            section: self.current_header.clone(),
            key,
            value,
            message: format!("line {}: {message}", self.line),
        };
        self.parsed.errors.push(error);
    }

    /// A bad key line: recorded unless it sits in a section already reported as bad.
    fn entry_error(&mut self, key: String, value: Option<String>, message: &str) {
        if self.current_header.is_none() || self.in_valid_section {
            self.error(Some(key), value, message);
        }
        self.skip_line();
    }

    /// `[...]`, at `pos`.
    fn header(&mut self) {
        let raw = self.rest_of_line();
        let raw_inner = raw.strip_prefix('[').unwrap_or(&raw);
        let fallback_header = raw_inner
            .split_once(']')
            .map_or(raw_inner, |(inner, _)| inner)
            .trim()
            .to_string();
        let line = self.line;
        match self.header_parts() {
            Ok((header, word, name)) => {
                self.current_header = Some(header.clone());
                let word = if word == self.main_word { "svc" } else { &word };
                match section_kind(&header, word, name.as_deref()) {
                    Ok(kind) => {
                        self.in_valid_section = true;
                        self.parsed.sections.push(Section {
                            header,
                            kind,
                            name: name.unwrap_or_default(),
                            line,
                            entries: Vec::new(),
                        });
                    }
                    Err(message) => {
                        self.error(None, None, &message);
                        self.in_valid_section = false;
                    }
                }
            }
            Err(message) => {
                self.current_header = Some(fallback_header);
                self.error(None, None, &message);
                self.in_valid_section = false;
                self.skip_line();
            }
        }
    }

    /// Reads `[word]` or `[word "name"]` and returns (header text, lower-cased word, name).
    fn header_parts(&mut self) -> Result<(String, String, Option<String>), String> {
        let start = self.pos + 1;
        self.pos = start;
        while self.peek().is_some_and(is_section_byte) {
            self.pos += 1;
        }
        let word = String::from_utf8_lossy(&self.text[start..self.pos]).to_ascii_lowercase();
        let unclosed = "a section header must end with ']'";
        match self.peek() {
            Some(b']') => {
                self.pos += 1;
                let header = String::from_utf8_lossy(&self.text[start..self.pos - 1]);
                return Ok((header.trim().to_string(), word, None));
            }
            Some(b' ' | b'\t') => {}
            None | Some(b'\n') => return Err(unclosed.into()),
            Some(other) => {
                return Err(format!(
                    "unexpected {:?} in a section name (letters, digits, '-' and '.'; a name \
                     goes in quotes: [job \"NAME\"])",
                    char::from(other)
                ));
            }
        }
        while self.peek().is_some_and(|b| b == b' ' || b == b'\t') {
            self.pos += 1;
        }
        if self.peek() != Some(b'"') {
            return Err("the name after the section word must be in double quotes".into());
        }
        self.pos += 1;
        let mut name = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\n') => return Err("the name must end with '\"'".into()),
                Some(b'"') => break,
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        None | Some(b'\n') => return Err("the name must end with '\"'".into()),
                        Some(escaped) => name.push(escaped),
                    }
                }
                Some(byte) => name.push(byte),
            }
            self.pos += 1;
        }
        self.pos += 1;
        if self.peek() != Some(b']') {
            return Err("a section header must end with ']' right after the name's '\"'".into());
        }
        self.pos += 1;
        let header = String::from_utf8_lossy(&self.text[start..self.pos - 1]);
        let name = String::from_utf8(name).map_err(|_| "the name is not valid UTF-8")?;
        Ok((header.trim().to_string(), word, Some(name)))
    }

    /// `key`, `key = value` or a bad key, at `pos` (an ASCII letter).
    fn entry(&mut self) {
        let line = self.line;
        let start = self.pos;
        while self.peek().is_some_and(is_key_byte) {
            self.pos += 1;
        }
        let key = String::from_utf8_lossy(&self.text[start..self.pos]).to_ascii_lowercase();
        while self.peek().is_some_and(|b| is_blank(b) && b != b'\r') {
            self.pos += 1;
        }
        let value = match self.peek() {
            None | Some(b'\n') => None,
            Some(b'\r') if self.text.get(self.pos + 1) == Some(&b'\n') => None,
            Some(b'=') => {
                self.pos += 1;
                match self.value(&key) {
                    Ok(value) => Some(value),
                    Err(error) => {
                        let message = match error {
                            ValueError::UnknownEscape(c) => format!(
                                "unknown escape '\\{c}' (a value knows \\\", \\\\, \\n, \\t \
                                 and \\b; write \\\\ for a backslash)"
                            ),
                            ValueError::OpenQuote => {
                                "a '\"' is not closed before the end of the line".to_string()
                            }
                        };
                        self.entry_error(key, None, &message);
                        return;
                    }
                }
            }
            Some(b'#' | b';') => {
                let message = "a comment after a key with no value; write 'key = true' \
                               before the comment";
                self.entry_error(key, None, message);
                return;
            }
            Some(_) => {
                self.pos = start;
                let (key, value) = split_key_value(&self.rest_of_line());
                self.entry_error(key.clone(), value, &invalid_key_message(&key));
                return;
            }
        };
        let entry = Entry {
            key,
            value,
            line,
            last_line: self.line,
        };
        match self.parsed.sections.last_mut() {
            Some(section) if self.in_valid_section => section.entries.push(entry),
            Some(_) => {}
            None if self.current_header.is_some() => {}
            None => {
                let error = SyntaxError {
                    line,
                    section: None,
                    message: format!("line {line}: key outside a section"),
                    key: Some(entry.key),
                    value: entry.value,
                };
                self.parsed.errors.push(error);
            }
        }
    }

    /// The value after `=`, up to the end of its (last) line, which is left unread.
    fn value(&mut self, key: &str) -> Result<String, ValueError> {
        let mut out: Vec<u8> = Vec::new();
        let mut quoted = false;
        let mut in_comment = false;
        // Where the value ends if only blanks follow: set at a blank outside quotes,
        // cleared by anything else.
        let mut trim_at: Option<usize> = None;
        while let Some(byte) = self.peek() {
            if byte == b'\n' {
                if quoted {
                    return Err(ValueError::OpenQuote);
                }
                break;
            }
            self.pos += 1;
            if in_comment {
                continue;
            }
            if byte == b'\r' && self.peek() == Some(b'\n') && !quoted {
                continue;
            }
            if is_blank(byte) && !quoted {
                trim_at.get_or_insert(out.len());
                if !out.is_empty() {
                    out.push(byte);
                }
                continue;
            }
            if !quoted && (byte == b'#' || byte == b';') {
                in_comment = true;
                let before = self.pos.checked_sub(2).map(|at| self.text[at]);
                let glued = before.is_some_and(|b| !is_blank(b) && b != b'"');
                if glued && !out.is_empty() && trim_at.is_none() {
                    self.warn_glued_comment(key, byte);
                }
                continue;
            }
            trim_at = None;
            match byte {
                b'\\' => {
                    let escaped = self.peek();
                    self.pos += 1;
                    match escaped {
                        // A `\` at the very end of the file continues into nothing.
                        None => break,
                        Some(b'\n') => self.line += 1,
                        Some(b'\r') if self.peek() == Some(b'\n') => {
                            self.pos += 1;
                            self.line += 1;
                        }
                        Some(b'n') => out.push(b'\n'),
                        Some(b't') => out.push(b'\t'),
                        Some(b'b') => out.push(0x08),
                        Some(b'\\') => out.push(b'\\'),
                        Some(b'"') => out.push(b'"'),
                        Some(_) => {
                            self.pos -= 1;
                            let c = char_at(self.text, self.pos);
                            return Err(ValueError::UnknownEscape(c));
                        }
                    }
                }
                b'"' => quoted = !quoted,
                other => out.push(other),
            }
        }
        if let Some(at) = trim_at {
            out.truncate(at);
        }
        // Only whole UTF-8 sequences of the input, and ASCII, were copied.
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn warn_glued_comment(&mut self, key: &str, marker: u8) {
        let marker = char::from(marker);
        let warning = SyntaxError {
            line: self.line,
            section: self.current_header.clone(),
            key: Some(key.to_string()),
            value: None,
            message: format!(
                "line {}: the value ends at '{marker}', which starts a comment; put the \
                 value in double quotes to keep the rest",
                self.line
            ),
        };
        self.parsed.warnings.push(warning);
    }
}

/// The character starting at byte `at` of `text` (which is UTF-8).
fn char_at(text: &[u8], at: usize) -> char {
    let end = (at + 4).min(text.len());
    let chunk = String::from_utf8_lossy(&text[at..end]);
    chunk.chars().next().unwrap_or('?')
}

/// Splits a bad line at its first `=` for the error's key and value.
fn split_key_value(line: &str) -> (String, Option<String>) {
    match line.split_once('=') {
        Some((key, value)) => (key.trim().to_string(), Some(value.trim().to_string())),
        None => (line.to_string(), None),
    }
}

fn invalid_key_message(key: &str) -> String {
    format!(
        "invalid key {key:?} (a key is a letter followed by letters, digits, '_' or '-'; \
         a value needs 'key = value')"
    )
}

/// The kind of a valid header, or the message for an unknown one.
fn section_kind(header: &str, word: &str, name: Option<&str>) -> Result<SectionKind, String> {
    let expected = "expected [svc], [job \"NAME\"], [job.http \"NAME\"], [notif \"NAME\"] or, in \
                    user.conf, [user \"NAME\"]";
    let kind = match word {
        "svc" => SectionKind::Main,
        "job" => SectionKind::Job,
        "job.http" => SectionKind::JobHttp,
        "hook" => SectionKind::Hook,
        "user" => SectionKind::User,
        "notif" => SectionKind::Notif,
        _ => return Err(format!("unknown section [{header}]; {expected}")),
    };
    match (kind, name) {
        (SectionKind::Main, None) => Ok(kind),
        (SectionKind::Main, Some(_)) => Err(format!("section [{header}] takes no name: [svc]")),
        (_, None) => Err(format!(
            "section [{header}] needs a quoted name: [{word} \"NAME\"]"
        )),
        (_, Some(name)) if name.trim().is_empty() => Err(format!("section [{header}]: empty name")),
        (_, Some(_)) => Ok(kind),
    }
}

#[cfg(test)]
mod tests {
    //! A corpus written from git-config(1) ("CONFIGURATION FILE": syntax, subsections,
    //! values, escapes, continuation, booleans), each bad input with its line and key, and
    //! a differential test against `git config --file F --list`.

    use super::*;

    /// (section header, name, key, value) of every entry, in file order.
    fn entries(text: &str) -> Vec<(String, String, String, Option<String>)> {
        let parsed = parse(text);
        assert_eq!(parsed.errors, vec![], "{text:?}");
        let mut out = Vec::new();
        for section in parsed.sections {
            for entry in section.entries {
                let header = section.header.clone();
                out.push((header, section.name.clone(), entry.key, entry.value));
            }
        }
        out
    }

    /// The value of the only entry of `[svc]` written as `line`.
    fn value_of(line: &str) -> Option<String> {
        let all = entries(&format!("[svc]\n{line}\n"));
        assert_eq!(all.len(), 1, "{line:?}");
        all[0].3.clone()
    }

    #[test]
    fn a_quoted_value_reads_back_as_it_was() {
        for value in [
            "plain",
            "/var/lib/svc",
            "a;b#c",
            " padded\t",
            "say \"hi\"",
            "back\\slash",
            "two\nlines",
            "",
        ] {
            let line = format!("k = {}", quote_value(value));
            assert_eq!(value_of(&line).as_deref(), Some(value), "{line:?}");
        }
        assert_eq!(
            quote_value("/var/lib/svc"),
            "/var/lib/svc",
            "as it is when it can be"
        );
    }

    fn errors(text: &str) -> Vec<SyntaxError> {
        parse(text).errors
    }

    #[test]
    fn comments_blank_lines_and_indentation() {
        let text = "\u{feff}# comment\n  ; indented comment\n\n\t[svc]   # after a header\n\
                    \t name = x ; trailing\n";
        let parsed = parse(text);
        assert_eq!(parsed.errors, vec![]);
        assert_eq!(parsed.sections.len(), 1);
        assert_eq!(parsed.sections[0].line, 4);
        let entry = &parsed.sections[0].entries[0];
        assert_eq!(
            (entry.key.as_str(), entry.value.as_deref()),
            ("name", Some("x"))
        );
        assert_eq!(entry.line, 5);
    }

    #[test]
    fn sections_are_case_insensitive_and_names_are_kept() {
        let text = "[SVC]\n[JOB \"My Job\"]\nA=1\n[Job.HTTP \"h\"]\nb=2\n[hook \"old\"]\n\
                    c=3\n[User \"ann\"]\nd=4\n[Notif \"mail\"]\ne=5\n";
        let parsed = parse(text);
        assert_eq!(parsed.errors, vec![]);
        let kinds: Vec<_> = parsed.sections.iter().map(|s| s.kind).collect();
        use SectionKind::*;
        assert_eq!(kinds, vec![Main, Job, JobHttp, Hook, User, Notif]);
        assert_eq!(parsed.sections[1].header, "JOB \"My Job\"");
        assert_eq!(parsed.sections[1].name, "My Job");
        assert_eq!(parsed.sections[1].entries[0].key, "a");
        assert_eq!(parsed.sections[2].name, "h");
    }

    #[test]
    fn subsection_names_unescape_quote_and_backslash_and_drop_other_backslashes() {
        let parsed = parse("[job \"a \\\"b\\\" c\\\\d\\e\"]\nx = 1\n");
        assert_eq!(parsed.errors, vec![]);
        assert_eq!(parsed.sections[0].name, "a \"b\" c\\de");
    }

    #[test]
    fn a_key_may_follow_the_header_on_its_line() {
        let all = entries("[svc] name = x\n[job \"j\"] command = true # c\n");
        assert_eq!(all[0].2, "name");
        assert_eq!(all[1].3.as_deref(), Some("true"));
    }

    #[test]
    fn keys_are_case_insensitive_and_may_hold_underscores() {
        let all = entries("[svc]\nMax_Job_Running = 2\nhttp-timeout=3\n");
        assert_eq!(all[0].2, "max_job_running");
        assert_eq!(all[1].2, "http-timeout");
    }

    #[test]
    fn blanks_around_a_value_go_and_inner_ones_stay() {
        assert_eq!(value_of("k =   a  b\t c   ").as_deref(), Some("a  b\t c"));
        assert_eq!(value_of("k=a").as_deref(), Some("a"));
        assert_eq!(value_of("k = a = b").as_deref(), Some("a = b"));
    }

    #[test]
    fn quotes_keep_blanks_and_comment_markers_and_are_removed() {
        assert_eq!(value_of("k = \"  a  \"").as_deref(), Some("  a  "));
        assert_eq!(
            value_of("command = \"for f in *.log; do gzip $f; done\"").as_deref(),
            Some("for f in *.log; do gzip $f; done")
        );
        assert_eq!(value_of("k = a\" b \"c").as_deref(), Some("a b c"));
        assert_eq!(
            value_of("k = \"#not\" # a comment").as_deref(),
            Some("#not")
        );
        assert_eq!(value_of("k = \"\"").as_deref(), Some(""));
        assert_eq!(
            value_of("k = 'single' quotes").as_deref(),
            Some("'single' quotes")
        );
    }

    #[test]
    fn comment_markers_outside_quotes_end_the_value() {
        assert_eq!(value_of("k = a ; b").as_deref(), Some("a"));
        assert_eq!(value_of("k = a # b").as_deref(), Some("a"));
        assert_eq!(value_of("k = ;").as_deref(), Some(""));
    }

    #[test]
    fn a_comment_glued_to_a_value_is_warned_about() {
        let parsed = parse("[svc]\nk = make; make install\nj = a ; fine\nq = \"a\";x\n");
        assert_eq!(parsed.errors, vec![]);
        assert_eq!(parsed.sections[0].entries[0].value.as_deref(), Some("make"));
        assert_eq!(parsed.warnings.len(), 1, "{:?}", parsed.warnings);
        assert!(
            parsed.warnings[0]
                .message
                .starts_with("line 2: the value ends at ';'")
        );
        assert_eq!(parsed.warnings[0].section.as_deref(), Some("svc"));
    }

    #[test]
    fn escapes() {
        assert_eq!(
            value_of(r#"k = a\"b\\c\nd\te\bf"#).as_deref(),
            Some("a\"b\\c\nd\te\u{8}f")
        );
        assert_eq!(
            value_of(r#"k = "in \"quotes\"""#).as_deref(),
            Some("in \"quotes\"")
        );
        // An escaped blank at the end is not trimmed: `\t` is content.
        assert_eq!(value_of(r"k = a\t").as_deref(), Some("a\t"));
    }

    #[test]
    fn a_backslash_at_the_end_of_a_line_continues_the_value() {
        let text = "[svc]\nk = one \\\n  two\\\r\nthree\nnext = 1\nlast = end\\";
        let parsed = parse(text);
        assert_eq!(parsed.errors, vec![]);
        let entries = &parsed.sections[0].entries;
        assert_eq!(entries[0].value.as_deref(), Some("one   twothree"));
        assert_eq!(entries[0].line, 2);
        assert_eq!(entries[1].line, 5, "lines after a continuation are counted");
        assert_eq!(entries[0].last_line, 4, "the value ends on its third line");
        assert_eq!(entries[1].last_line, 5);
        assert_eq!(entries[2].value.as_deref(), Some("end"));
        // Inside quotes too.
        assert_eq!(
            entries_of("[svc]\nk = \"a \\\n b\"\n"),
            vec![Some("a  b".to_string())]
        );
    }

    fn entries_of(text: &str) -> Vec<Option<String>> {
        entries(text).into_iter().map(|e| e.3).collect()
    }

    #[test]
    fn bare_keys_empty_values_and_repeated_keys() {
        let all = entries_of("[svc]\nflag\nempty =\nblank =   \ncommand = a\ncommand = b\n");
        assert_eq!(
            all,
            vec![
                None,
                Some(String::new()),
                Some(String::new()),
                Some("a".into()),
                Some("b".into())
            ]
        );
    }

    #[test]
    fn crlf_line_endings() {
        let all = entries("[svc]\r\nname = x \r\nflag\r\n[job \"j\"]\r\ncommand = \"a;b\"\r\n");
        assert_eq!(all[0].3.as_deref(), Some("x"));
        assert_eq!(all[1].3, None);
        assert_eq!(all[2].3.as_deref(), Some("a;b"));
    }

    #[test]
    fn non_ascii_values_pass_through() {
        assert_eq!(
            value_of("k = \"héllo wörld\" ✓").as_deref(),
            Some("héllo wörld ✓")
        );
    }

    /// (input, line of the error, key the error names, start of its message after `line N: `)
    const BAD: &[(&str, usize, Option<&str>, &str)] = &[
        ("[svc]\nk = a\\qb\n", 2, Some("k"), "unknown escape '\\q'"),
        ("[svc]\nk = \"open\n", 2, Some("k"), "a '\"' is not closed"),
        (
            "[svc]\nk = \"a \\\nb\nnext = 1\n",
            3,
            Some("k"),
            "a '\"' is not closed",
        ),
        (
            "[svc]\nk = one \\\n two \\z\n",
            3,
            Some("k"),
            "unknown escape '\\z'",
        ),
        (
            "[svc\nk = v\n",
            1,
            None,
            "a section header must end with ']'",
        ),
        ("[job \"x\nk = v\n", 1, None, "the name must end with '\"'"),
        (
            "[job \"x\" ]\nk = v\n",
            1,
            None,
            "a section header must end with ']' right after",
        ),
        (
            "[job x]\nk = v\n",
            1,
            None,
            "the name after the section word must be in double",
        ),
        (
            "[job_x]\nk = v\n",
            1,
            None,
            "unexpected '_' in a section name",
        ),
        ("[foo]\nk = v\n", 1, None, "unknown section [foo]"),
        (
            "[job]\nk = v\n",
            1,
            None,
            "section [job] needs a quoted name",
        ),
        (
            "[notif]\nk = v\n",
            1,
            None,
            "section [notif] needs a quoted name",
        ),
        (
            "[svc \"x\"]\nk = v\n",
            1,
            None,
            "section [svc \"x\"] takes no name",
        ),
        (
            "[job \"\"]\nk = v\n",
            1,
            None,
            "section [job \"\"]: empty name",
        ),
        (
            "[job.backup]\nk = v\n",
            1,
            None,
            "unknown section [job.backup]",
        ),
        ("orphan = 1\n", 1, Some("orphan"), "key outside a section"),
        ("[svc]\n= v\n", 2, Some(""), "missing key before '='"),
        ("[svc]\n1abc = 2\n", 2, Some("1abc"), "invalid key \"1abc\""),
        (
            "[svc]\nwith space = 3\n",
            2,
            Some("with space"),
            "invalid key \"with space\"",
        ),
        ("[svc]\nk.x = 3\n", 2, Some("k.x"), "invalid key \"k.x\""),
        (
            "[svc]\nflag # c\n",
            2,
            Some("flag"),
            "a comment after a key with no value",
        ),
    ];

    #[test]
    fn each_bad_input_is_one_error_with_its_line_and_key() {
        for (text, line, key, message) in BAD {
            let errors = errors(text);
            assert_eq!(errors.len(), 1, "{text:?}: {errors:?}");
            let error = &errors[0];
            assert_eq!(error.line, *line, "{text:?}");
            assert_eq!(error.key.as_deref(), *key, "{text:?}");
            let expected = format!("line {line}: {message}");
            assert!(
                error.message.starts_with(&expected),
                "{text:?}: {}",
                error.message
            );
        }
    }

    #[test]
    fn parsing_goes_on_after_an_error() {
        let text = "[svc]\nbad = \\q\ngood = 1\n[nope]\nskipped = 1\n[job \"j\"]\nok = 2\n";
        let parsed = parse(text);
        let lines: Vec<usize> = parsed.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![2, 4]);
        assert_eq!(parsed.sections.len(), 2);
        assert_eq!(parsed.sections[0].entries.len(), 1);
        assert_eq!(parsed.sections[0].entries[0].key, "good");
        assert_eq!(parsed.sections[1].entries[0].key, "ok");
        assert_eq!(parsed.errors[0].section.as_deref(), Some("svc"));
    }

    /// Files that git reads too (no `_` in keys, only section words git accepts), compared
    /// entry by entry with what `git config --file F --list --null` prints.
    const AGREED_WITH_GIT: &[&str] = &[
        "[svc]\nname = x ; c\nflag\nempty =\n",
        "[job \"My Job\"]\ncommand = \"for f in *.log; do gzip $f; done\"\n\
         command = a\" b \"c # two\n",
        "[job \"a \\\"b\\\" c\\\\d\"]\nk = a\\\"b\\\\c\\nd\\te\n",
        "[SVC]\nName = one \\\n  two\\\r\nthree\nnext = \"  padded  \"\n",
        "\u{feff}; c\n\t[job.http \"h\"]   # c\n\tHTTP-URL =   a  b\t c   \n",
        "[svc] inline = yes\n[job \"j\"] k = v\n",
        "[svc]\nk = \"#not\" # a comment\nq = 'single' quotes\nu = héllo ✓\n",
    ];

    /// `git config --file F --list --null` on `text`.
    fn git_list(dir: &std::path::Path, name: &str, text: &str) -> std::process::Output {
        let git = std::env::var_os("GIT").unwrap_or_else(|| "git".into());
        let file = dir.join(name);
        std::fs::write(&file, text).expect("write the sample");
        std::process::Command::new(&git)
            .args(["config", "--file"])
            .arg(&file)
            .args(["--list", "--null"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run git ({git:?}): {e}; install git"))
    }

    #[test]
    fn git_refuses_the_bad_syntax_too() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        // The entries of BAD that are git's syntax (not svc's sections or `_` in keys).
        let of_git = BAD.iter().filter(|(text, ..)| {
            !text.contains("[foo]")
                && !text.contains("[job]")
                && !text.contains("[notif]")
                && !text.contains("[svc \"x\"]")
                && !text.contains("[job \"\"]")
                && !text.contains("[job.backup]")
                && !text.contains("[job_x]")
                && !text.starts_with("orphan")
        });
        let mut count = 0;
        for (index, (text, ..)) in of_git.enumerate() {
            let output = git_list(dir.path(), &format!("bad{index}.conf"), text);
            assert!(!output.status.success(), "git read {text:?}: {output:?}");
            count += 1;
        }
        assert_eq!(count, 13);
    }

    #[test]
    fn agrees_with_git_config() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (index, text) in AGREED_WITH_GIT.iter().enumerate() {
            let output = git_list(dir.path(), &format!("{index}.conf"), text);
            assert!(
                output.status.success(),
                "git refused sample {index}: {output:?}"
            );
            let listed = String::from_utf8(output.stdout).expect("git prints UTF-8 here");
            let from_git: Vec<(String, Option<String>)> = listed
                .split_terminator('\0')
                .map(|item| match item.split_once('\n') {
                    Some((key, value)) => (key.to_string(), Some(value.to_string())),
                    None => (item.to_string(), None),
                })
                .collect();
            let parsed = parse(text);
            assert_eq!(parsed.errors, vec![], "sample {index}");
            let ours: Vec<(String, Option<String>)> = parsed
                .sections
                .iter()
                .flat_map(|section| {
                    let word = section.header.split(' ').next().unwrap_or_default();
                    let prefix = if section.name.is_empty() {
                        word.to_ascii_lowercase()
                    } else {
                        format!("{}.{}", word.to_ascii_lowercase(), section.name)
                    };
                    section
                        .entries
                        .iter()
                        .map(move |e| (format!("{prefix}.{}", e.key), e.value.clone()))
                })
                .collect();
            assert_eq!(ours, from_git, "sample {index}: {text:?}");
        }
    }
}
