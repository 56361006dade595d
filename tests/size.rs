//! The house's size limits (issue #51, docs/design.md §9): no file under
//! src/ over 650 lines, and at most 12 functions over 80 lines, unit tests
//! included. The code is rustfmt's, so a function's body ends at the first
//! line that closes it at its own indentation.

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 650;
const MAX_FN_LINES: usize = 80;
const MAX_LONG_FNS: usize = 12;

fn sources(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            sources(&e.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|x| x == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The name of the function a line declares, if it declares one.
fn declares(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for word in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(word).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let name = &rest[..rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len())];
    (!name.is_empty()).then_some(name)
}

/// Each function of `text` with a body: (name, first line, lines).
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = declares(line) else { continue };
        let indent = &line[..line.len() - line.trim_start().len()];
        // The signature ends at a line ending `{` (a body) or `;` (none).
        let Some(open) = (i..lines.len()).find(|&j| {
            let l = lines[j].trim_end();
            l.ends_with('{') || l.ends_with(';') || l.ends_with('}')
        }) else {
            continue;
        };
        if !lines[open].trim_end().ends_with('{') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = (open + 1..lines.len()).find(|&j| lines[j] == close) {
            out.push((name.to_string(), i + 1, end - i + 1));
        }
    }
    out
}

#[test]
fn the_counter_measures_a_function_from_its_signature_to_its_closing_brace() {
    let text = "fn a() {\n    x;\n}\n\nimpl T {\n    pub(crate) fn b(\n        y: u8,\n    ) -> u8 {\n        y\n    }\n    fn c();\n}\n";
    assert_eq!(functions(text), [("a".to_string(), 1, 3), ("b".to_string(), 6, 5)]);
}

#[test]
fn no_file_is_too_long_and_few_functions_are() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut long_files = Vec::new();
    let mut long_fns = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(src.parent().unwrap()).unwrap().display().to_string();
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            long_files.push(format!("{rel}: {n} lines"));
        }
        for (name, line, len) in functions(&text) {
            if len > MAX_FN_LINES {
                long_fns.push((len, format!("{rel}:{line} {name}: {len} lines")));
            }
        }
    }
    long_fns.sort_by_key(|f| std::cmp::Reverse(f.0));
    let listed: Vec<&str> = long_fns.iter().map(|(_, s)| s.as_str()).collect();
    assert!(files.len() > 50, "found only {} files", files.len());
    assert!(long_files.is_empty(), "files over {MAX_FILE_LINES} lines (split them):\n{}", long_files.join("\n"));
    assert!(
        long_fns.len() <= MAX_LONG_FNS,
        "{} functions over {MAX_FN_LINES} lines, at most {MAX_LONG_FNS} allowed:\n{}",
        long_fns.len(),
        listed.join("\n")
    );
}
