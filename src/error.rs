//! User errors: a small error type with a kind enum (exit codes in the CLI).
//!
//! Violations are never errors (they are data in the report), and harness
//! bugs are asserts; see docs/design.md §5.

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong, which decides the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A scenario file is invalid (exit 3).
    Scenario,
    /// The command line asks for something that does not exist (exit 2).
    Usage,
    /// Reading or writing a file failed, or the harness broke (exit 4).
    Io,
    /// A live server process does not speak the scenario's dialect (exit 2;
    /// `run` over a directory skips the scenario instead).
    Dialect,
}

/// Where in a file an error is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file the error is in.
    pub path: PathBuf,
    /// The line, from 1; 0 when the error is about the whole file.
    pub line: usize,
    /// The column in characters, from 1; 0 when the error is about the whole file.
    pub column: usize,
    /// The source line and how many characters the caret underlines.
    pub excerpt: Option<(String, usize)>,
}

/// A user error: its kind, its message and, for a scenario file, where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What went wrong; decides the exit code.
    pub kind: ErrorKind,
    /// What went wrong, in words.
    pub message: String,
    /// Where in a scenario file, if the error is in one.
    pub location: Option<Location>,
}

/// A result whose error is an [`Error`] unless told otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` with no location.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), location: None }
    }
    /// A usage error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }
    /// An I/O or harness error (exit 4).
    pub fn io(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Io, message)
    }
    /// A scenario error at a byte range of `source` (the caret underlines it).
    pub fn scenario_at(
        path: &Path,
        source: &str,
        span: Option<std::ops::Range<usize>>,
        message: impl Into<String>,
    ) -> Self {
        let location = match span {
            Some(span) => {
                let start = span.start.min(source.len());
                let (line, column) = line_col(source, start);
                let text = source.lines().nth(line - 1).unwrap_or("").to_string();
                let rest = text.chars().count().saturating_sub(column - 1);
                let len = source.get(start..span.end.min(source.len())).map_or(1, |s| s.chars().count());
                let underline = len.clamp(1, rest.max(1));
                Location { path: path.to_path_buf(), line, column, excerpt: Some((text, underline)) }
            }
            None => Location { path: path.to_path_buf(), line: 0, column: 0, excerpt: None },
        };
        Self { kind: ErrorKind::Scenario, message: message.into(), location: Some(location) }
    }

    /// The process exit code for this error (docs/design.md §5).
    pub fn exit_code(&self) -> i32 {
        match self.kind {
            ErrorKind::Usage | ErrorKind::Dialect => 2,
            ErrorKind::Scenario => 3,
            ErrorKind::Io => 4,
        }
    }
}

/// 1-based line and column of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(l) if l.line > 0 => {
                write!(f, "{}:{}:{}: {}", l.path.display(), l.line, l.column, self.message)?;
                if let Some((text, underline)) = &l.excerpt {
                    let n = l.line.to_string();
                    let pad = " ".repeat(n.len());
                    write!(
                        f,
                        "\n{pad} |\n{n} | {text}\n{pad} | {}{}",
                        " ".repeat(l.column - 1),
                        "^".repeat(*underline)
                    )?;
                }
                Ok(())
            }
            Some(l) => write!(f, "{}: {}", l.path.display(), self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// The candidate closest to `word`, if it is close enough to be a typo.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    let candidates: Vec<&str> = candidates.into_iter().collect();
    let close = candidates.iter().map(|c| (edit_distance(word, c), *c)).filter(|(d, _)| *d <= limit).min();
    // A truncated name (`think` for `think_time`) is a typo too.
    close
        .map(|(_, c)| c)
        .or_else(|| (word.len() >= 3).then(|| candidates.iter().copied().find(|c| c.starts_with(word))).flatten())
}

/// Levenshtein distance.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for j in 0..b.len() {
            let cur = row[j + 1];
            row[j + 1] = if ca == b[j] { prev } else { 1 + prev.min(row[j]).min(row[j + 1]) };
            prev = cur;
        }
    }
    row[b.len()]
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_catch_typos_only() {
        assert_eq!(did_you_mean("latncy", ["latency", "tick"]), Some("latency"));
        assert_eq!(did_you_mean("conect", ["connect", "reset"]), Some("connect"));
        assert_eq!(did_you_mean("frobnicate", ["connect", "reset"]), None);
        assert_eq!(did_you_mean("think", ["name", "think_time"]), Some("think_time"));
    }

    #[test]
    fn line_col_is_one_based() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        let e = Error::scenario_at(Path::new("x.toml"), "a\nbcd", Some(3..5), "bad");
        assert_eq!(e.to_string(), "x.toml:2:2: bad\n  |\n2 | bcd\n  |  ^^");
        assert_eq!(e.exit_code(), 3);
    }
}
