//! The `anneal-shim` binary: parses the command line, reads the environment (ANNEAL_TOKEN,
//! ANNEAL_URL, ANNEAL_LOG), sets up logging, runs `serve` (wired in `serve.rs`) or a client
//! command, and maps the outcome to an exit code. See docs/cli.md.

mod serve;

use std::process::ExitCode;

use anneal_runtime::{LOG_FILTER_VARIABLE, init_logging};
use anneal_shim::api::tls::TlsFiles;
use anneal_shim::client::{self, Cli, ClientCommand, ClientContext, Command, TemplateCommand};
use anneal_shim::{error_chain, store};
use clap::{CommandFactory, FromArgMatches};

/// The blocking pool's size: a full group-commit batch plus a few for the sweeper and clients.
const BLOCKING_THREADS: usize = store::BATCH_LIMIT + 8;

fn main() -> ExitCode {
    let cli = parse_command_line();
    init_logging(std::env::var(LOG_FILTER_VARIABLE).ok().as_deref(), cli.log_format);
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Every engine operation runs on the blocking pool, and the store runs them one at a time
    // (group commit, batches of up to 64). Threads beyond that would only queue, each with a
    // stack and a malloc arena of its own: tokio's default of 512 let 10,000 first polls of a
    // fleet start about 200 of them.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("anneal-shim: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match cli.command {
        Command::Serve {
            listen,
            db,
            public_url,
            tls_cert,
            tls_key,
            metrics_token_file,
            retention,
            max_resources_per_stack,
            max_deployment_bytes_per_stack,
            stack_action_timeout_secs,
        } => {
            let environment_token = std::env::var("ANNEAL_TOKEN").ok();
            let tls = tls_cert.zip(tls_key).map(|(cert, key)| TlsFiles { cert, key });
            let args = serve::ServeArgs {
                listen,
                database_url: db,
                public_url,
                tls,
                environment_token,
                metrics_token_file,
                retention,
                max_resources: max_resources_per_stack,
                max_deployment_bytes: max_deployment_bytes_per_stack,
                stack_action_timeout: stack_action_timeout_secs,
            };
            runtime.block_on(serve::serve(args))
        }
        Command::Server { command } => runtime.block_on(client_main(command.into())),
        Command::Stack { command } => runtime.block_on(client_main(command.into())),
        Command::Template { command: TemplateCommand::Validate(args) } => {
            match client::validate_template(&args, &mut std::io::stdout()) {
                Ok(status) => ExitCode::from(status.code()),
                Err(error) => {
                    eprintln!("anneal-shim: {}", error.report());
                    ExitCode::from(error.exit_code())
                }
            }
        }
    }
}

/// The command line, with `--version` naming the database schema this build reads and writes
/// besides its release and commit (docs/upgrading.md says which release brought which schema).
fn parse_command_line() -> Cli {
    let version = format!(
        "{} (commit {}; database schema {} on SQLite, {} on PostgreSQL)",
        env!("CARGO_PKG_VERSION"),
        env!("ANNEAL_COMMIT"),
        store::SqliteStore::schema_version(),
        store::PgStore::schema_version()
    );
    // Once per process: clap keeps a `&'static str`.
    let version: &'static str = Box::leak(version.into_boxed_str());
    let matches = Cli::command().version(version).get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

async fn client_main(command: ClientCommand) -> ExitCode {
    let context =
        ClientContext::new(command.connection(), std::env::var("ANNEAL_URL").ok(), std::env::var("ANNEAL_TOKEN").ok());
    let mut stdout = std::io::stdout();
    match client::run(command, context, &mut stdout).await {
        Ok(status) => ExitCode::from(status.code()),
        Err(error) => {
            eprintln!("anneal-shim: {}", error.report());
            ExitCode::from(error.exit_code())
        }
    }
}

fn fail(code: u8, error: &dyn std::error::Error) -> ExitCode {
    eprintln!("anneal-shim: {}", error_chain(error));
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use anneal_shim::engine::StackActionTimeout;
    use clap::Parser;

    use super::*;

    /// `serve`'s --stack-action-timeout-secs as clap reads it.
    fn stack_action_timeout(flags: &[&str]) -> Result<StackActionTimeout, clap::Error> {
        let arguments = ["anneal-shim", "serve"].into_iter().chain(flags.iter().copied());
        match Cli::try_parse_from(arguments)?.command {
            Command::Serve { stack_action_timeout_secs, .. } => Ok(stack_action_timeout_secs),
            other => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn serve_takes_a_stack_action_timeout_of_at_least_one_second() {
        assert_eq!(stack_action_timeout(&[]).unwrap(), StackActionTimeout::default(), "Heat's 3600");
        let set = stack_action_timeout(&["--stack-action-timeout-secs", "60"]).unwrap();
        assert_eq!(set, StackActionTimeout::from_secs(60).unwrap());
        for refused in ["0", "-1", "1h"] {
            let error = stack_action_timeout(&["--stack-action-timeout-secs", refused]).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{refused}: {error}");
        }
    }
}
