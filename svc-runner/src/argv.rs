//! Commands that need no shell: plain words run directly, saving a `/bin/sh` start per
//! command (about half the cost of running `/bin/true` through it).
//!
//! A command is run without the shell only when the shell would do nothing but split it
//! on spaces and look its first word up in `PATH`: every character is a letter, a digit
//! or one of `_ - . / , : + @ % =`, words are separated by spaces only, the first word
//! is no builtin, keyword or assignment. Anything else (quotes, `$`, globs, `~`,
//! redirections, `;`, `&`, `|`, comments, tabs, newlines, non-ASCII) goes to
//! `/bin/sh -c` as before. A direct start that fails because the program is missing or
//! not executable is retried through the shell, so the messages and exit codes (127,
//! 126) stay the shell's; and `PWD` is exported, as the shell does.

/// Shell builtins and keywords: run by the shell itself, or with a meaning the program
/// of the same name may not have (`cd`, `exit`, `pwd -L`, `echo` with escapes ...).
const SHELL_WORDS: &[&str] = &[
    "!", ".", ":", "[", "[[", "{", "}", "alias", "bg", "break", "case", "cd", "command",
    "continue", "do", "done", "echo", "elif", "else", "esac", "eval", "exec", "exit", "export",
    "false", "fc", "fg", "fi", "for", "function", "getopts", "hash", "if", "in", "jobs", "kill",
    "local", "newgrp", "printf", "pwd", "read", "readonly", "return", "select", "set", "shift",
    "source", "test", "then", "time", "times", "trap", "true", "type", "ulimit", "umask",
    "unalias", "unset", "until", "wait", "while",
];

fn plain_char(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, '_' | '-' | '.' | '/' | ',' | ':' | '+' | '@' | '%' | '=')
}

/// The program and its arguments when `command` needs no shell; `None` otherwise.
pub fn plain_words(command: &str) -> Option<Vec<&str>> {
    if !command.chars().all(|c| c == ' ' || plain_char(c)) {
        return None;
    }
    let words: Vec<&str> = command.split(' ').filter(|w| !w.is_empty()).collect();
    let first = *words.first()?;
    if first.contains('=') || SHELL_WORDS.contains(&first) {
        return None;
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_commands_are_split_on_spaces() {
        assert_eq!(plain_words("/bin/true"), Some(vec!["/bin/true"]));
        assert_eq!(
            plain_words("  rsync -a --delete /srv/a/ backup@host:/b  "),
            Some(vec!["rsync", "-a", "--delete", "/srv/a/", "backup@host:/b"])
        );
        assert_eq!(
            plain_words("make -C /src install PREFIX=/usr"),
            Some(vec!["make", "-C", "/src", "install", "PREFIX=/usr"])
        );
        assert_eq!(plain_words("date +%s"), Some(vec!["date", "+%s"]));
    }

    #[test]
    fn anything_the_shell_would_change_goes_to_the_shell() {
        for command in [
            "",
            "   ",
            "echo hi",
            "true",
            "cd /tmp",
            "exit 3",
            "FOO=bar env",
            "ls *.log",
            "ls ~/x",
            "echo $HOME",
            "printf 'a b'",
            "a \"b c\"",
            "a > out",
            "a < in",
            "a | b",
            "a; b",
            "a && b",
            "a & ",
            "a # comment",
            "a\tb",
            "a\nb",
            "a `b`",
            "a $(b)",
            "a\\ b",
            "if true",
            "a [x]",
            "a {b,c}",
            "a ?",
            "a !",
            "tëst",
        ] {
            assert_eq!(plain_words(command), None, "{command:?}");
        }
    }
}
