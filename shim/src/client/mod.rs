//! The CLI's client side: the clap types of the whole command line (`cli`), and the `server ...`
//! and `stack ...` commands, which talk to a running shim over its HTTP API (`http`), print
//! tables or the API's JSON (`render`), agent configs (`formats`) and `--wait` progress (`wait`).
//! It never reads environment variables or exits the process: `main.rs` passes `ANNEAL_URL` and
//! `ANNEAL_TOKEN` in through `ClientContext` and maps the result to an exit code. The admin
//! token is a secret: it is never printed or logged.

pub mod cli;
mod commands;
mod failures;
mod files;
pub mod formats;
mod http;
mod live;
mod plan;
pub mod render;
mod validate;
mod wait;

#[cfg(test)]
mod tests;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use cli::{Cli, ClientCommand, Command, ConnectionArgs, LogFormat, ServerCommand, StackCommand, TemplateCommand};
pub use validate::validate_template;

/// How often `--wait` polls the stack.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Where and how to reach the API, resolved by `main.rs` from the flags and the environment.
#[derive(Clone)]
pub struct ClientContext {
    /// Base URL of the API (`--url`, else `ANNEAL_URL`, else `http://127.0.0.1:8080`).
    pub url: String,
    /// `ANNEAL_TOKEN`: wins over the token file when set.
    pub token: Option<String>,
    pub token_file: PathBuf,
    /// `--tls-ca`: a CA to trust for an https URL (and to put in printed agent configs).
    pub ca_file: Option<PathBuf>,
}

impl ClientContext {
    /// `--url` wins over `ANNEAL_URL` (`environment_url`); an empty `ANNEAL_TOKEN` counts as unset.
    pub fn new(
        connection: &ConnectionArgs,
        environment_url: Option<String>,
        environment_token: Option<String>,
    ) -> ClientContext {
        let url = connection
            .url
            .clone()
            .or(environment_url.filter(|url| !url.trim().is_empty()))
            .unwrap_or_else(|| cli::DEFAULT_URL.to_string());
        let token = environment_token.map(|token| token.trim().to_string()).filter(|token| !token.is_empty());
        ClientContext { url, token, token_file: connection.token_file.clone(), ca_file: connection.tls_ca.clone() }
    }
}

impl fmt::Debug for ClientContext {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("ClientContext")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("token_file", &self.token_file)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// How a command that ran to its end went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exit 0.
    Success,
    /// Exit 1: the stack ended FAILED, or `--wait` timed out (the reason was printed).
    Failed,
    /// Exit 2: `--dry-run`'s plan has changes (Terraform's `-detailed-exitcode`).
    Changes,
}

impl ExitStatus {
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failed => 1,
            ExitStatus::Changes => 2,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot use {url:?} as the API URL: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot read the admin token file {path} (or set ANNEAL_TOKEN)")]
    ReadTokenFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot use the admin token file {path}: {reason}")]
    BadToken { path: PathBuf, reason: String },
    #[error("cannot read the CA file {path}")]
    ReadCa {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot use the CA file {path}: {reason}")]
    BadCa { path: PathBuf, reason: String },
    #[error("cannot read template file {path}")]
    ReadTemplate {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read environment file {path}")]
    ReadEnvironment {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("environment file {path}")]
    BadEnvironment {
        path: PathBuf,
        #[source]
        source: crate::template::EnvironmentError,
    },
    #[error("environment file {path}: {reason}")]
    Unsupported { path: PathBuf, reason: String },
    #[error("cannot read {path} (get_file \"{key}\")")]
    ReadFile {
        key: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("get_file \"{key}\": {scheme} URLs are not fetched; use a path relative to the template")]
    RemoteFile { key: String, scheme: String },
    #[error("the template names more than {limit} files with get_file")]
    TooManyFiles { limit: usize },
    /// `template validate` found problems; `report` lists them.
    #[error("template {path} is not valid")]
    InvalidTemplate { path: PathBuf, problems: Vec<String> },
    #[error("parameter {name} is given more than once")]
    DuplicateParameter { name: String },
    /// A flag another flag needs, or that is not taken with it.
    #[error("{message}")]
    Usage { message: String },
    #[error("cannot build the HTTP client")]
    BuildClient {
        #[source]
        source: reqwest::Error,
    },
    #[error("cannot reach anneal-shim at {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("cannot complete the request to {url}: {reason}")]
    Request { url: String, reason: String },
    /// The API answered with an error: its `error.message` (and `error.problems` for templates).
    #[error("{message}")]
    Api { status: u16, message: String, problems: Vec<String> },
    #[error("cannot understand the response from {url}: {reason}")]
    Response { url: String, reason: String },
    #[error("cannot write the output")]
    Output {
        #[source]
        source: io::Error,
    },
}

impl ClientError {
    /// 2 for usage and local configuration problems (bad URL, token, CA or template file, repeated
    /// parameter); 1 for everything that involved the server (unreachable, error answers).
    pub fn exit_code(&self) -> u8 {
        match self {
            ClientError::InvalidUrl { .. }
            | ClientError::ReadTokenFile { .. }
            | ClientError::BadToken { .. }
            | ClientError::ReadCa { .. }
            | ClientError::BadCa { .. }
            | ClientError::ReadTemplate { .. }
            | ClientError::ReadEnvironment { .. }
            | ClientError::BadEnvironment { .. }
            | ClientError::Unsupported { .. }
            | ClientError::ReadFile { .. }
            | ClientError::RemoteFile { .. }
            | ClientError::TooManyFiles { .. }
            | ClientError::DuplicateParameter { .. }
            | ClientError::Usage { .. } => 2,
            ClientError::BuildClient { .. }
            | ClientError::Connect { .. }
            | ClientError::Request { .. }
            | ClientError::Api { .. }
            | ClientError::Response { .. }
            | ClientError::Output { .. }
            | ClientError::InvalidTemplate { .. } => 1,
        }
    }

    /// The whole message for a human: the error, its causes joined with ": ", and one
    /// `  - problem` line per template problem the server listed.
    pub fn report(&self) -> String {
        let mut text = render::printable(&crate::error_chain(self));
        if let ClientError::Api { problems, .. } | ClientError::InvalidTemplate { problems, .. } = self {
            for problem in problems {
                text.push_str("\n  - ");
                text.push_str(&render::printable(problem));
            }
        }
        text
    }

    /// The API said 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ClientError::Api { status: 404, .. })
    }

    fn read_template(path: &Path, source: io::Error) -> ClientError {
        ClientError::ReadTemplate { path: path.to_path_buf(), source }
    }
}

/// Runs one client command against the API at `context.url`, printing its result on `out`.
/// `Ok(Failed)` means the command ran but the stack FAILED or `--wait` timed out (exit 1);
/// `Err` carries `exit_code()` and a `report()` for stderr.
pub async fn run(
    command: ClientCommand,
    context: ClientContext,
    out: &mut impl io::Write,
) -> Result<ExitStatus, ClientError> {
    commands::execute(command, &context, POLL_INTERVAL, out).await
}

/// Writes and flushes at once, so `--wait` progress shows as it happens.
fn write(out: &mut dyn io::Write, text: &str) -> Result<(), ClientError> {
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|source| ClientError::Output { source })
}

/// An API answer as `T`; an answer of another shape is a `Response` error naming the route.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    endpoint: &str,
) -> Result<T, ClientError> {
    serde_json::from_value(value).map_err(|error| ClientError::Response {
        url: format!("/v1/{endpoint}"),
        reason: format!("unexpected JSON shape: {error}"),
    })
}

/// JSON as the commands print it: indented, with a final newline.
pub(crate) fn pretty(value: &serde_json::Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    format!("{text}\n")
}
