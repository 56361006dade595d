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

/// Within a layer, the modules of the two dialect families (docs/design.md
/// §7) do not import each other: (layer, stateful modules, stateless modules).
const FAMILIES: &[(&str, &[&str], &[&str])] = &[
    ("client", &["legacy", "streamable", "session"], &["stateless"]),
    ("server", &["engine", "rmcp"], &["stateless", "rmcp_stateless"]),
    ("check", &["observe"], &["stateless"]),
    ("report", &["words"], &["stateless_words"]),
    ("hunt", &["generate"], &["stateless"]),
];

/// The files of module `module` of `layer`: `src/layer/module.rs`, or every file under `src/layer/module/`.
fn module_files(src: &Path, layer: &str, module: &str) -> Vec<std::path::PathBuf> {
    let dir = src.join(layer).join(module);
    let mut files = Vec::new();
    if dir.is_dir() {
        sources(&dir, &mut files);
    } else {
        let file = src.join(layer).join(format!("{module}.rs"));
        assert!(file.is_file(), "no module {layer}::{module}");
        files.push(file);
    }
    files
}

/// The modules of `layer` that `file` (under `src/layer/`) names, as
/// `crate::layer::m`, or through `super` up to the layer's root, with or
/// without braces.
fn siblings_named(src: &Path, layer: &str, file: &Path) -> BTreeSet<String> {
    let depth = file.strip_prefix(src.join(layer)).unwrap().components().count();
    let is_mod = file.file_name().is_some_and(|n| n == "mod.rs");
    // src/layer/x.rs and src/layer/x/mod.rs reach the root by one `super`.
    let supers = if is_mod { depth - 1 } else { depth };
    let mut prefixes = vec![format!("crate::{layer}::")];
    if supers > 0 {
        prefixes.push("super::".repeat(supers));
    }
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = BTreeSet::new();
    for line in text.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
        for prefix in &prefixes {
            for (i, _) in line.match_indices(prefix.as_str()) {
                // `super::` inside a longer `super::super::` is not this prefix.
                if line[..i].ends_with("super::") {
                    continue;
                }
                let rest = &line[i + prefix.len()..];
                let ident =
                    |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
                if let Some(inner) = rest.strip_prefix('{') {
                    let inner = &inner[..inner.find('}').unwrap_or(inner.len())];
                    out.extend(inner.split(',').map(|p| ident(p.trim())).filter(|n| !n.is_empty()));
                } else {
                    out.insert(ident(rest));
                }
            }
        }
    }
    out
}

#[test]
fn the_two_dialect_families_of_a_layer_do_not_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    let mut checked = 0;
    for (layer, stateful, stateless) in FAMILIES {
        for (mine, theirs) in [(stateful, stateless), (stateless, stateful)] {
            for module in mine.iter() {
                for f in module_files(&src, layer, module) {
                    checked += 1;
                    for named in siblings_named(&src, layer, &f) {
                        if theirs.contains(&named.as_str()) {
                            problems.push(format!("{} ({layer}::{module}) imports {layer}::{named}", f.display()));
                        }
                    }
                }
            }
        }
    }
    assert!(checked >= 12, "only {checked} files checked");
    assert!(problems.is_empty(), "a family imports the other:\n{}", problems.join("\n"));
}

/// The test above finds what it looks for: a reference through `super`, and one in braces.
#[test]
fn a_reference_across_the_families_is_seen() {
    let dir = std::env::temp_dir().join(format!("mcpsim-layers-{}", std::process::id()));
    let layer_dir = dir.join("client");
    std::fs::create_dir_all(layer_dir.join("nested")).unwrap();
    std::fs::write(layer_dir.join("legacy.rs"), "use super::stateless::X;\n// super::quiet\n").unwrap();
    std::fs::write(
        layer_dir.join("nested/deep.rs"),
        "use crate::client::{session, stateless};\nuse super::super::conn;\n",
    )
    .unwrap();
    let legacy = siblings_named(&dir, "client", &layer_dir.join("legacy.rs"));
    let deep = siblings_named(&dir, "client", &layer_dir.join("nested/deep.rs"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(legacy, BTreeSet::from(["stateless".to_string()]));
    assert_eq!(deep, BTreeSet::from(["session".into(), "stateless".into(), "conn".into()]));
}

/// Each layer chooses by dialect once (docs/design.md §7): one `match` arm
/// naming stateless-http per layer, and none in the layers that only ask
/// the family. (The compiler proves the rest: the one `match` has no
/// wildcard arm, so a new dialect fails there.)
#[test]
fn each_layer_chooses_its_dialect_in_one_place() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let choosers = ["scenario", "client", "server", "check", "hunt", "report", "live", "bin"];
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut arms: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        // Unit tests (an inline `mod tests`, or a file under a `tests` module) may name dialects as they like.
        if f.components().any(|c| c.as_os_str() == "tests") {
            continue;
        }
        let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let arm = line.trim_start();
            let arm = arm.strip_prefix("| ").unwrap_or(arm);
            if arm.starts_with("Dialect::StatelessHttp =>") || arm.contains("| Dialect::StatelessHttp =>") {
                let rel = f.strip_prefix(&src).unwrap();
                let layer =
                    rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
                arms.entry(layer).or_default().push(format!("{}:{}", rel.display(), n + 1));
            }
        }
    }
    for layer in choosers {
        let found = arms.remove(layer).unwrap_or_default();
        assert_eq!(found.len(), 1, "layer {layer} should choose by dialect once, at: {found:?}");
    }
    assert!(arms.is_empty(), "layers that choose by dialect but should ask the family: {arms:?}");
}
