//! Helpers the integration tests share: running the `mcpsim` binary, finding
//! scenario files, scratch paths. Each test crate uses a part of them.
#![allow(dead_code)]

pub mod harness;
pub mod live;
pub mod mutant;
pub mod verdicts;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `mcpsim` binary from the package root.
pub fn mcpsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcpsim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs")
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A scratch file path for test area `area` (the directory exists).
pub fn tmp(area: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(area);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The bundled scenarios (`scenarios/*.toml` and `scenarios/streamable-http/*.toml`,
/// not the regressions), by paths relative to the package root, sorted.
pub fn bundled_scenarios() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths: Vec<PathBuf> = ["scenarios", "scenarios/streamable-http", "scenarios/replicas"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap().map(move |e| Path::new(d).join(e.unwrap().file_name())))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
}

/// The bundled stateless-http scenarios (`scenarios/stateless-http/*.toml`), relative, sorted.
pub fn stateless_scenarios() -> Vec<PathBuf> {
    toml_files_under("scenarios/stateless-http")
}

/// Every `.toml` file below `dir` (relative to the package root), sorted.
pub fn toml_files_under(dir: &str) -> Vec<PathBuf> {
    fn walk(abs: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(abs).unwrap() {
            let e = e.unwrap();
            let (a, r) = (e.path(), rel.join(e.file_name()));
            if a.is_dir() {
                walk(&a, &r, out);
            } else if a.extension().is_some_and(|x| x == "toml") {
                out.push(r);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), Path::new(dir), &mut out);
    out.sort();
    out
}

/// Asserts `text` against the snapshot `snapshots/<area>/<name>.snap` (areas:
/// `report/<dialect>`, `matrix`, `precision`, `malformed`), with
/// `description` written above it when given.
pub fn snapshot(area: &str, name: &str, text: &str, description: Option<&str>) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots").join(area));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    if let Some(d) = description {
        settings.set_description(d);
    }
    settings.bind(|| insta::assert_snapshot!(name, text));
}
