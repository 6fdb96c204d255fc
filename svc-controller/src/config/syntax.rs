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
#[path = "syntax_tests.rs"]
mod tests;
