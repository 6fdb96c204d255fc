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
