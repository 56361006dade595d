//! The crate's layers stay one-way: each module imports only the modules on
//! lower rows of the diagram in the crate docs (`src/lib.rs`).

use std::collections::BTreeSet;
use std::path::Path;

/// Rows from the bottom up; a module may import modules of lower rows only.
const ROWS: &[&[&str]] = &[
    &["quiet"],
    &["clock", "net"],
    &["vocab", "inbox", "seed", "error", "wire", "watchdog"],
    &["scenario", "store"],
    &["trace"],
    &["server", "client"],
    &["world"],
    &["check", "live"],
    &["report"],
    &["run"],
    &["hunt"],
];

fn row(module: &str) -> usize {
    ROWS.iter().position(|r| r.contains(&module)).unwrap_or_else(|| panic!("module {module} is in no row"))
}

fn sources(path: &Path, out: &mut Vec<std::path::PathBuf>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            sources(&e.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|x| x == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The crate modules a file names as `crate::x` (outside comments).
fn imports(file: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = BTreeSet::new();
    for line in text.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
        for (i, _) in line.match_indices("crate::") {
            let rest = &line[i + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn every_module_imports_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for module in ROWS.iter().flat_map(|r| r.iter()).filter(|m| **m != "run") {
        let mut files = Vec::new();
        let dir = src.join(module);
        sources(if dir.is_dir() { &dir } else { &src }, &mut files);
        if !dir.is_dir() {
            files = vec![src.join(format!("{module}.rs"))];
        }
        for f in &files {
            for used in imports(f) {
                if used == *module {
                    continue;
                }
                if row(&used) >= row(module) {
                    problems.push(format!("{} ({module}) imports crate::{used}", f.display()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "upward or sideways imports:\n{}", problems.join("\n"));
}
