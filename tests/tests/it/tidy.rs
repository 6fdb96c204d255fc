//! Tidy: the rules of the code's shape that review alone would not keep (rust-analyzer's
//! `tidy` tests are the model). Each test reads the sources and names every breach:
//!
//! - a module of `svc-controller` uses only its own layer and the layers below it (the
//!   order is the table in `svc-controller/src/lib.rs`);
//! - every source file is in ARCHITECTURE.md's code map (tests beside their module,
//!   `*_tests.rs` and `tests.rs`, excepted), the web UI's files included;
//! - no production source file is over 800 lines, but for the files listed in
//!   [`LARGE_FILES`], each at most as long as it is now (a ratchet: they only shrink);
//! - the integration tests are one binary (`tests/tests/it`);
//! - ARCHITECTURE.md is at most [`MAP_WORDS`] words, and each of its invariants names a
//!   test file that exists (or `.ci/run`), and every test function it names exists;
//! - no function is over 100 lines (clippy's `too_many_lines`, `clippy.toml`), and none is
//!   exempted from it (`expect` or `allow` of `clippy::too_many_lines`).

use std::path::{Path, PathBuf};

/// The layers of `svc-controller`, bottom first: each may use those before it.
const LAYERS: &[&str] = &[
    "util", "time", "security", "config", "store", "metrics", "cluster", "runner", "access",
    "engine", "notify", "http", "daemon",
];

/// Production files over 800 lines, with the most lines each may have: to be split, and
/// never to grow meanwhile.
const LARGE_FILES: &[(&str, usize)] = &[];

/// ARCHITECTURE.md's length: a newcomer reads it in about ten minutes.
const MAP_WORDS: usize = 2000;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lies in the workspace")
        .to_path_buf()
}

/// Every `.rs` file below `dir`, as paths relative to the workspace.
fn sources(dir: &str) -> Vec<String> {
    files_with(dir, &["rs"])
}

/// Every file below `dir` with one of `extensions`, as paths relative to the workspace.
fn files_with(dir: &str, extensions: &[&str]) -> Vec<String> {
    let root = workspace();
    let mut found = Vec::new();
    let mut pending = vec![root.join(dir)];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .extension()
                .is_some_and(|ext| extensions.iter().any(|wanted| ext == *wanted))
            {
                let relative = path.strip_prefix(&root).expect("below the root");
                found.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(workspace().join(relative))
        .unwrap_or_else(|err| panic!("cannot read {relative}: {err}"))
}

/// The layer a file of `svc-controller/src` belongs to: its first path segment.
fn layer_of(relative: &str) -> Option<&str> {
    let inside = relative.strip_prefix("svc-controller/src/")?;
    let first = inside.split('/').next()?;
    Some(first.strip_suffix(".rs").unwrap_or(first))
}

fn rank(layer: &str) -> Option<usize> {
    LAYERS.iter().position(|known| *known == layer)
}

/// The top modules a file's code names through `crate::` (comments left out).
fn used_layers(text: &str) -> Vec<(usize, String)> {
    let mut used = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                used.push((index + 1, name));
            }
            rest = after;
        }
    }
    used
}

#[test]
fn each_module_uses_only_its_layer_and_those_below() {
    let mut breaches = Vec::new();
    for file in sources("svc-controller/src") {
        let Some(layer) = layer_of(&file) else {
            continue;
        };
        if layer == "lib" || layer == "main" {
            continue;
        }
        let Some(own) = rank(layer) else {
            breaches.push(format!("{file}: `{layer}` is in no layer of LAYERS"));
            continue;
        };
        for (line, used) in used_layers(&read(&file)) {
            match rank(&used) {
                Some(other) if other > own => breaches.push(format!(
                    "{file}:{line}: layer `{layer}` uses `{used}`, a layer above it"
                )),
                Some(_) => {}
                None => breaches.push(format!("{file}:{line}: `crate::{used}` is no layer")),
            }
        }
    }
    assert!(breaches.is_empty(), "layering:\n{}", breaches.join("\n"));
}

#[test]
fn the_layers_are_the_crates_modules() {
    let lib = read("svc-controller/src/lib.rs");
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|line| {
            let line = line
                .strip_prefix("pub ")
                .or_else(|| line.strip_prefix("pub(crate) "))?;
            line.strip_prefix("mod ")?.strip_suffix(';')
        })
        .collect();
    assert_eq!(declared, LAYERS, "lib.rs declares the layers, in order");
}

fn is_test_file(file: &str) -> bool {
    let name = file.rsplit('/').next().unwrap_or(file);
    name == "tests.rs" || name.ends_with("_tests.rs") || file.starts_with("tests/tests/")
}

#[test]
fn every_source_file_is_in_the_code_map() {
    let map = read("ARCHITECTURE.md");
    let mut missing = Vec::new();
    for crate_dir in [
        "proto/src",
        "svc-controller/src",
        "svc-runner/src",
        "tests/src",
    ] {
        for file in sources(crate_dir) {
            if is_test_file(&file) {
                continue;
            }
            let inside = file.strip_prefix(&format!("{crate_dir}/")).unwrap_or(&file);
            if !map.contains(&format!("`{inside}`")) && !map.contains(&format!("`{file}`")) {
                missing.push(file);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "files missing from ARCHITECTURE.md's code map (as `path/in/src.rs`):\n{}",
        missing.join("\n")
    );
}

/// The web UI's files (`svc-controller/ui`, served as they are) are in the code map too,
/// as paths below `ui/`, and none is over 800 lines.
#[test]
fn every_ui_file_is_in_the_code_map_and_under_800_lines() {
    let map = read("ARCHITECTURE.md");
    let mut breaches = Vec::new();
    let files = files_with("svc-controller/ui", &["js", "html", "css", "svg", "json"]);
    assert!(
        files.iter().any(|file| file.ends_with("ui/main.js")),
        "{files:?}"
    );
    for file in files {
        let inside = file.trim_start_matches("svc-controller/ui/");
        if !map.contains(&format!("`{inside}`")) {
            breaches.push(format!("{file}: not in ARCHITECTURE.md's code map"));
        }
        let lines = read(&file).lines().count();
        if lines > 800 {
            breaches.push(format!("{file}: {lines} lines, at most 800"));
        }
    }
    assert!(breaches.is_empty(), "UI files:\n{}", breaches.join("\n"));
}

/// The lines of a file before its inline unit tests (`#[cfg(test)] mod tests {`).
fn production_lines(text: &str) -> usize {
    let end = text.find("#[cfg(test)]\nmod tests {").unwrap_or(text.len());
    text[..end].lines().count()
}

#[test]
fn no_production_file_is_over_800_lines_but_the_listed_ones_which_only_shrink() {
    let mut breaches = Vec::new();
    for crate_dir in [
        "proto/src",
        "svc-controller/src",
        "svc-runner/src",
        "tests/src",
    ] {
        for file in sources(crate_dir) {
            if is_test_file(&file) {
                continue;
            }
            let lines = production_lines(&read(&file));
            let limit = LARGE_FILES
                .iter()
                .find(|(listed, _)| *listed == file)
                .map_or(800, |(_, limit)| *limit);
            if lines > limit {
                breaches.push(format!("{file}: {lines} lines, at most {limit}"));
            }
        }
    }
    for (listed, _) in LARGE_FILES {
        let lines = production_lines(&read(listed));
        if lines <= 800 {
            breaches.push(format!(
                "{listed}: {lines} lines now: take it off LARGE_FILES"
            ));
        }
    }
    assert!(breaches.is_empty(), "file sizes:\n{}", breaches.join("\n"));
}

#[test]
fn no_function_is_over_100_lines_or_exempted() {
    let clippy = read("clippy.toml");
    assert!(
        clippy.contains("too-many-lines-threshold = 100"),
        "clippy.toml sets the threshold: {clippy}"
    );
    let cargo = read("Cargo.toml");
    assert!(
        cargo.contains("too_many_lines = \"warn\""),
        "the workspace's lints warn of long functions (and CI denies warnings)"
    );
    let mut marked = Vec::new();
    for dir in [
        "proto",
        "svc-controller",
        "svc-runner",
        "tests",
        "packaging/man",
    ] {
        for file in sources(dir) {
            // This file names the attributes it looks for.
            if file == "tests/tests/it/tidy.rs" {
                continue;
            }
            let text = read(&file);
            for (index, line) in text.lines().enumerate() {
                if line.contains("(clippy::too_many_lines") {
                    marked.push(format!("{file}:{}", index + 1));
                }
            }
        }
    }
    assert!(
        marked.is_empty(),
        "functions exempted from the 100-line limit: split them instead\n{}",
        marked.join("\n")
    );
}

#[test]
fn the_integration_tests_are_one_binary() {
    let entries: Vec<String> = std::fs::read_dir(workspace().join("tests/tests"))
        .expect("tests/tests")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        entries,
        ["it"],
        "every integration test is a module of tests/tests/it/main.rs (one binary links \
         the controller once)"
    );
}

/// The bullet items of ARCHITECTURE.md's "Invariants" section, each as one line.
fn invariants(map: &str) -> Vec<String> {
    let section = map
        .split("\n## Invariants")
        .nth(1)
        .expect("ARCHITECTURE.md has an \"Invariants\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut items: Vec<String> = Vec::new();
    for line in section.lines() {
        if let Some(start) = line.strip_prefix("- ") {
            items.push(start.to_string());
        } else if let (Some(item), true) = (items.last_mut(), line.starts_with("  ")) {
            item.push(' ');
            item.push_str(line.trim());
        }
    }
    items
}

/// What is wrong with one invariant's references: a test file (`name.rs` or a path
/// ending so) that no source file is, a test function (`a_snake_case_name` of four
/// words or more) that no source defines, or no test named at all.
fn invariant_breaches(item: &str, files: &[String], sources_text: &str) -> Vec<String> {
    let quoted: Vec<&str> = item.split('`').skip(1).step_by(2).collect();
    let mut breaches = Vec::new();
    let mut names_a_test = false;
    for name in &quoted {
        let name = name.trim_end_matches("'s");
        if name.ends_with(".rs") {
            let is_it = |file: &String| file == name || file.ends_with(&format!("/{name}"));
            if files.iter().any(is_it) {
                names_a_test = true;
            } else {
                breaches.push(format!("no file `{name}`"));
            }
        } else if name == ".ci/run" {
            names_a_test = true;
        } else if name.split('_').count() >= 4
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && !sources_text.contains(&format!("fn {name}("))
        {
            breaches.push(format!("no test function `{name}`"));
        }
    }
    if !names_a_test {
        breaches.push("names no test".to_string());
    }
    breaches
}

#[test]
fn the_architecture_map_is_short_and_its_invariants_name_real_tests() {
    let map = read("ARCHITECTURE.md");
    let words = map.split_whitespace().count();
    assert!(
        words <= MAP_WORDS,
        "ARCHITECTURE.md has {words} words, at most {MAP_WORDS}"
    );
    let mut files = Vec::new();
    for dir in ["proto", "svc-controller", "svc-runner", "tests"] {
        files.extend(sources(dir));
    }
    let sources_text: String = files.iter().map(|file| read(file)).collect();
    let items = invariants(&map);
    assert!(items.len() >= 10, "too few invariants read: {items:?}");
    let breaches: Vec<String> = items
        .iter()
        .flat_map(|item| {
            let head: String = item.chars().take(60).collect();
            invariant_breaches(item, &files, &sources_text)
                .into_iter()
                .map(move |breach| format!("\"{head}…\": {breach}"))
        })
        .collect();
    assert!(
        breaches.is_empty(),
        "ARCHITECTURE.md's invariants:\n{}",
        breaches.join("\n")
    );
}

#[test]
fn the_rules_catch_what_they_are_for() {
    // A use of a higher layer, in code, is seen; one in a comment is not.
    let used = used_layers("use crate::http::router; // crate::daemon in a comment\n");
    assert_eq!(used, vec![(1, "http".to_string())]);
    assert!(rank("config") < rank("engine"));
    assert_eq!(layer_of("svc-controller/src/engine/run.rs"), Some("engine"));
    assert_eq!(layer_of("svc-controller/src/daemon.rs"), Some("daemon"));
    assert!(is_test_file("svc-controller/src/access/login_tests.rs"));
    assert_eq!(production_lines("a\nb\n#[cfg(test)]\nmod tests {\n}\n"), 2);
    assert!(!is_test_file("svc-controller/src/access/login.rs"));
    // An invariant naming a missing file or function, or no test, is caught.
    let files = vec!["tests/tests/it/crash.rs".to_string()];
    let text = "fn a_crash_keeps_the_state() {}";
    let good = "Kept: `crash.rs` `a_crash_keeps_the_state`.";
    assert!(invariant_breaches(good, &files, text).is_empty());
    let renamed = "Kept: `crash.rs` `a_crash_keeps_all_state`.";
    assert_eq!(invariant_breaches(renamed, &files, text).len(), 1);
    assert_eq!(
        invariant_breaches("Kept: `gone.rs`.", &files, text).len(),
        2
    );
    assert_eq!(invariant_breaches("Kept by care.", &files, text).len(), 1);
    let map = "# A\n## Invariants\n\n- one\n  more\n- two\n## Next\n- not one\n";
    assert_eq!(invariants(map), ["one more", "two"]);
}
