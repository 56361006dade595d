//! User errors: a small error type with a kind enum (exit codes in the CLI).
//!
//! Violations are never errors (they are data in the report), and harness
//! bugs are asserts; see DESIGN.md §5.

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
}

/// Where in a file an error is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub location: Option<Location>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), location: None }
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }
    pub fn io(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Io, message)
    }
    /// A scenario error at a byte offset of `source`.
    pub fn scenario_at(path: &Path, source: &str, offset: Option<usize>, message: impl Into<String>) -> Self {
        let location = offset.map(|o| {
            let (line, column) = line_col(source, o);
            Location { path: path.to_path_buf(), line, column }
        });
        let location = location.or_else(|| Some(Location { path: path.to_path_buf(), line: 0, column: 0 }));
        Self { kind: ErrorKind::Scenario, message: message.into(), location }
    }

    /// The process exit code for this error (DESIGN.md §5).
    pub fn exit_code(&self) -> i32 {
        match self.kind {
            ErrorKind::Usage => 2,
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
            Some(l) if l.line > 0 => write!(f, "{}:{}:{}: {}", l.path.display(), l.line, l.column, self.message),
            Some(l) => write!(f, "{}: {}", l.path.display(), self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_is_one_based() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        let e = Error::scenario_at(Path::new("x.toml"), "a\nb", Some(2), "bad");
        assert_eq!(e.to_string(), "x.toml:2:1: bad");
        assert_eq!(e.exit_code(), 3);
    }
}
