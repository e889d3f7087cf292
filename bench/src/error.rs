//! `BenchError`: what went wrong in the harness itself (a process that would not start, a file,
//! an HTTP exchange, a peer that did not do its job). A missed target is never an error.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
    #[error("{what}: {source}")]
    Process { what: String, source: std::io::Error },
    #[error("{what}: {source}")]
    Http { what: String, source: reqwest::Error },
    #[error("{0}")]
    Failed(String),
}

/// Result of the harness's fallible steps.
pub type BenchResult<T> = Result<T, BenchError>;

/// Wraps an I/O error on `path`.
pub fn file_error(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::File { path: path.to_path_buf(), source }
}

/// Wraps an HTTP error of `what`.
pub fn http_error(what: &str) -> impl FnOnce(reqwest::Error) -> BenchError + '_ {
    move |source| BenchError::Http { what: what.to_string(), source }
}

/// Writes `text` to `path`.
pub fn write_file(path: &Path, text: &str) -> BenchResult<()> {
    std::fs::write(path, text).map_err(file_error(path))
}

/// Creates `path` and its parents.
pub fn create_dir(path: &Path) -> BenchResult<()> {
    std::fs::create_dir_all(path).map_err(file_error(path))
}
