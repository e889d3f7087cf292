//! The command line of `anneal-shim` as clap types: `serve` (run by `main.rs`) and the client
//! commands (`server ...`, `stack ...`) that `client::run` executes. Parsing only: nothing here
//! reads files, environment variables or the network.

use std::fmt;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `--log-format`: the one type both binaries share (see anneal-runtime).
pub use anneal_runtime::LogFormat;

use crate::engine::{MaxDeploymentBytes, StackActionTimeout};
use crate::template::MaxResources;

/// Where the client looks for the API when neither `--url` nor `ANNEAL_URL` says.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";
/// The admin token file `serve` writes next to its default database (`<db dir>/admin.token`).
pub const DEFAULT_TOKEN_FILE: &str = "/var/lib/anneal/admin.token";
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_DATABASE_URL: &str = "sqlite:///var/lib/anneal/shim.db";

#[derive(Debug, Parser)]
#[command(
    name = "anneal-shim",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("ANNEAL_COMMIT"), ")"),
    about = "Engine side of anneal: HOT software-config templates, the component graph, metadata and signals"
)]
pub struct Cli {
    /// Log line format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP API; prints where the admin token file is.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = DEFAULT_LISTEN)]
        listen: String,
        /// Database URL (sqlite:///path).
        #[arg(long, default_value = DEFAULT_DATABASE_URL)]
        db: String,
        /// Base URL agents use to reach this service [default: http://<listen>, https://<listen>
        /// with --tls-cert]. Repeat it to name the other replicas of a PostgreSQL database too:
        /// the first is this replica's own (in the documents it renders), and `server add` lists
        /// them all in the agent's config, which fails over between them.
        #[arg(long, value_name = "URL")]
        public_url: Vec<String>,
        /// Serve HTTPS with this certificate chain (PEM, leaf first); re-read on SIGHUP.
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The private key (PEM) of --tls-cert; re-read on SIGHUP.
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// A file (mode 0600) holding a token of at least 32 characters that opens GET /metrics
        /// and nothing else: give it to Prometheus instead of the admin token.
        #[arg(long, value_name = "FILE")]
        metrics_token_file: Option<PathBuf>,
        #[command(flatten)]
        retention: RetentionArgs,
        /// The most resources a stack may have (Heat's max_resources_per_stack): its own, the
        /// nested stacks' and resource groups', and deployment group members; -1 for no limit.
        #[arg(long, value_name = "N", default_value = "1000", allow_negative_numbers = true)]
        max_resources_per_stack: MaxResources,
        /// The most bytes a stack's deployments may publish to servers' documents (each
        /// deployment and group member holds its own copy of its config and inputs): 128 MiB by
        /// default; -1 for no limit.
        #[arg(long, value_name = "BYTES", default_value = "134217728", allow_negative_numbers = true)]
        max_deployment_bytes_per_stack: MaxDeploymentBytes,
        /// How long a stack create or update given no --timeout, and any stack delete, may take
        /// before the stack fails (Heat's stack_action_timeout), in seconds; at least 1.
        #[arg(long, value_name = "SECS", default_value_t = StackActionTimeout::default())]
        stack_action_timeout_secs: StackActionTimeout,
    },
    /// Register servers and print their agent configuration.
    Server {
        #[command(subcommand)]
        command: ServerCommand,
    },
    /// Create, update, delete and inspect stacks.
    Stack {
        #[command(subcommand)]
        command: StackCommand,
    },
    /// Check templates locally (no server needed).
    Template {
        #[command(subcommand)]
        command: TemplateCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum TemplateCommand {
    /// Check a template with its environments and files; print its parameters and resources
    /// (with their types after the resource_registry), or every problem (exit 1).
    Validate(TemplateValidateArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TemplateValidateArgs {
    /// The HOT template (YAML or JSON).
    #[arg(long, value_name = "FILE")]
    pub template: PathBuf,
    /// A Heat environment file; repeatable, later ones win.
    #[arg(short = 'e', long = "environment", value_name = "ENV")]
    pub environments: Vec<PathBuf>,
    /// A parameter value; repeatable.
    #[arg(long = "param", value_name = "K=V", value_parser = parse_param)]
    pub params: Vec<Param>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The most resources a stack may have, as `serve --max-resources-per-stack` (Heat's
    /// max_resources_per_stack); -1 for no limit.
    #[arg(long, value_name = "N", default_value = "1000", allow_negative_numbers = true)]
    pub max_resources_per_stack: MaxResources,
}

#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// Register a server and print its agent configuration (the token is shown only once).
    Add(ServerAddArgs),
    /// List registered servers.
    List(ListArgs),
    /// Remove a server and revoke its token (refused while a stack deploys to it).
    Delete(ServerDeleteArgs),
    /// Give a server a new token and print its agent configuration again; the old token keeps
    /// working for --grace-secs so the agent can be given the new one.
    RotateToken(ServerRotateTokenArgs),
}

#[derive(Debug, Subcommand)]
pub enum StackCommand {
    /// Create a stack from a HOT template.
    Create(StackCreateArgs),
    /// Update a stack with a new template and parameters.
    Update(StackUpdateArgs),
    /// Delete a stack.
    Delete(StackDeleteArgs),
    /// Cancel a create or update in progress: nothing new is published (running deployments
    /// finish), then the stack rolls back to what it ran before, or with --no-rollback stays
    /// FAILED.
    Cancel(StackCancelArgs),
    /// Show a stack: its resources with status and reason, then its outputs.
    Show(StackReadArgs),
    /// List stacks.
    List(ListArgs),
    /// Show a stack's events.
    Events(StackReadArgs),
    /// Show a stack's outputs.
    Outputs(StackReadArgs),
    /// Draw a stack's component graph: Graphviz DOT (render it with `dot -Tsvg`), a
    /// self-contained SVG, or the API's JSON.
    Graph(StackGraphArgs),
    /// Print the template the stack runs, as stored: the text sent, or the template the
    /// environment resolved, as JSON; `stack update --template` takes it back.
    Template(StackReadArgs),
    /// Print the parameter values the stack runs with as a Heat environment (JSON; hidden
    /// values as `******`).
    Environment(StackReadArgs),
    /// List the failed resources with their status reasons and, for deployments, the last ten
    /// lines of their runs' stdout and stderr (all of it with --long), as Heat's failures list.
    Failures(StackFailuresArgs),
    /// Act on one resource of a stack.
    #[command(subcommand)]
    Resource(ResourceCommand),
}

#[derive(Debug, Subcommand)]
pub enum ResourceCommand {
    /// Mark a deployment (or a group's member, `group/member`) unhealthy: it shows CHECK_FAILED
    /// and runs again on the next update (`stack update NAME --existing`).
    MarkUnhealthy(MarkUnhealthyArgs),
}

#[derive(Debug, Clone, Args)]
pub struct StackFailuresArgs {
    pub name: String,
    /// Show the runs' whole stdout and stderr and the whole status reasons.
    #[arg(long)]
    pub long: bool,
    /// Print the API's JSON (every output in full).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Args)]
pub struct MarkUnhealthyArgs {
    pub name: String,
    pub resource: String,
    /// Why (the status reason it shows).
    pub reason: Option<String>,
    /// Take the mark back.
    #[arg(long)]
    pub reset: bool,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

/// How much history `serve` keeps (see docs/http-api.md, "Retention"); 0 keeps everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct RetentionArgs {
    /// The newest events kept per stack (Heat's max_events_per_stack); 0 keeps all.
    #[arg(long, default_value_t = 1000)]
    pub max_events_per_stack: u64,
    /// How long the events of a deleted stack are kept after its last event; 0 keeps them.
    #[arg(long, default_value_t = 30 * 86_400)]
    pub deleted_stack_events_secs: u64,
    /// How long a superseded signal token is still answered as stale (2xx) rather than unknown
    /// (404); 0 keeps them all.
    #[arg(long, default_value_t = 30 * 86_400)]
    pub retired_signals_secs: u64,
}

/// How to reach the API; every client command takes these.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ConnectionArgs {
    /// Base URL of the anneal-shim API [default: $ANNEAL_URL, else http://127.0.0.1:8080].
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// File holding the admin token (ANNEAL_TOKEN, when set, wins).
    #[arg(long, value_name = "FILE", default_value = DEFAULT_TOKEN_FILE)]
    pub token_file: PathBuf,
    /// CA certificate (PEM) to trust for an https URL; `server add` and `server rotate-token`
    /// also put it in the agent config they print (as `ca_file`).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentConfigFormat {
    /// A complete /etc/anneal/agent.toml, then the token instruction as a comment.
    Toml,
    /// `#cloud-config` user data that installs the config and token and starts the agent.
    CloudInit,
    /// The API's JSON: name, token, metadata_url, request_url.
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ServerAddArgs {
    pub name: String,
    /// An IP address of the server on no named network (repeatable): its `accessIPv4` /
    /// `accessIPv6` attributes, and `first_address` when no --network is given.
    #[arg(long = "address", value_name = "IP")]
    pub addresses: Vec<String>,
    /// An IP address on a named network (repeatable): the `networks`, `addresses` and
    /// `first_address` attributes templates read.
    #[arg(long = "network", value_name = "NET=IP", value_parser = parse_network_address)]
    pub networks: Vec<(String, String)>,
    #[arg(long, value_enum, default_value_t = AgentConfigFormat::Toml)]
    pub format: AgentConfigFormat,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ServerRotateTokenArgs {
    pub name: String,
    /// How long the old token stays valid [default: 3600; at most a week].
    #[arg(long, value_name = "SECS")]
    pub grace_secs: Option<u64>,
    #[arg(long, value_enum, default_value_t = AgentConfigFormat::Toml)]
    pub format: AgentConfigFormat,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ServerDeleteArgs {
    pub name: String,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Print the API's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Args)]
pub struct StackWriteArgs {
    pub name: String,
    /// The HOT template (YAML or JSON); required but with `stack update --existing`.
    #[arg(long, value_name = "FILE")]
    pub template: Option<PathBuf>,
    /// A Heat environment file; repeatable, later ones win (merged as python-heatclient does).
    #[arg(short = 'e', long = "environment", value_name = "ENV")]
    pub environments: Vec<PathBuf>,
    /// A parameter value; repeatable. The value may contain '='. Wins over the environments.
    #[arg(long = "param", value_name = "K=V", value_parser = parse_param)]
    pub params: Vec<Param>,
    /// Ask the shim what the create or update would do and change nothing: resources added,
    /// deleted, replaced, updated and unchanged, and every deployment that would run (server,
    /// action, batch, changed inputs). Exit 0 for no change, 2 for changes, 1 for an error.
    #[arg(long, conflicts_with = "wait")]
    pub dry_run: bool,
    /// With --dry-run: list the deployment groups' members among the resource changes, each
    /// under its group (openstackclient's `stack update --dry-run --show-nested`).
    #[arg(long, requires = "dry_run")]
    pub show_nested: bool,
    /// Print the request body this command would send (template, merged environment,
    /// `environment_files`, files, parameters) as JSON and contact nothing: no shim or token is
    /// needed (what `--dry-run` did before plans).
    #[arg(long, conflicts_with_all = ["wait", "dry_run"])]
    pub print_request: bool,
    /// Wait until the stack is COMPLETE (exit 0) or FAILED (exit 1), showing progress.
    #[arg(long)]
    pub wait: bool,
    /// Stack timeout: the stack fails when it is not COMPLETE by then; also bounds --wait.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    /// Print the API's JSON (with --wait: the final stack, without progress lines).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Args)]
#[command(mut_arg("template", |template| template.required(true)))]
pub struct StackCreateArgs {
    #[command(flatten)]
    pub write: StackWriteArgs,
    /// Roll the stack back when the create fails (delete what it created) and keep that for
    /// its updates (Heat's disable_rollback false); without it a failure stays FAILED.
    #[arg(long)]
    pub enable_rollback: bool,
}

#[derive(Debug, Clone, Args)]
#[command(mut_arg("template", |template| template.required_unless_present("existing")))]
pub struct StackUpdateArgs {
    #[command(flatten)]
    pub write: StackWriteArgs,
    /// Whether a failed update (and later ones) rolls back to the stack's previous template,
    /// environment and parameters; keep: as the stack has it.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = RollbackMode::Keep)]
    pub rollback: RollbackMode,
    /// Start from the stack's stored template, environment, files and parameters (Heat's
    /// `--existing`): --param values are added to the stored ones, --template replaces it.
    /// Without anything else it re-runs exactly the deployments that failed.
    #[arg(long)]
    pub existing: bool,
}

/// `stack update --rollback`, as openstackclient spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RollbackMode {
    Enabled,
    Disabled,
    Keep,
}

impl RollbackMode {
    /// The request's `disable_rollback` (absent: the stack's own setting).
    pub fn disable_rollback(self) -> Option<bool> {
        match self {
            RollbackMode::Enabled => Some(false),
            RollbackMode::Disabled => Some(true),
            RollbackMode::Keep => None,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct StackCancelArgs {
    pub name: String,
    /// Stop without rolling back: the stack stays <ACTION>_FAILED "Stack <ACTION> cancelled".
    #[arg(long)]
    pub no_rollback: bool,
    /// Wait until the rollback is ROLLBACK_COMPLETE (exit 0) or ROLLBACK_FAILED (exit 1).
    #[arg(long, conflicts_with = "no_rollback")]
    pub wait: bool,
    /// Give up waiting after this long (exit 1).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    /// Print the API's JSON (with --wait: the final stack).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Args)]
pub struct StackDeleteArgs {
    pub name: String,
    /// Wait until the stack is gone (exit 0) or its delete FAILED (exit 1), showing progress.
    #[arg(long)]
    pub wait: bool,
    /// Give up waiting after this long (exit 1).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Args)]
pub struct StackReadArgs {
    pub name: String,
    /// Print the API's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Args)]
pub struct StackGraphArgs {
    pub name: String,
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    pub format: GraphFormat,
    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Graphviz DOT: deployments clustered by server, nodes filled by state.
    Dot,
    /// An SVG drawing laid out by anneal (no Graphviz needed).
    Svg,
    /// The API's JSON: nodes (kind, status, phase, server) and edges (get_attr, get_resource,
    /// depends_on, implicit).
    Json,
}

/// One `--param K=V`. Its `Debug` hides the value: it may be a hidden parameter (a password).
#[derive(Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub value: String,
}

impl fmt::Debug for Param {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("Param").field("name", &self.name).field("value", &"***").finish()
    }
}

/// Splits `K=V` at the first '=' (so the value may contain more); the name must not be empty.
pub fn parse_param(text: &str) -> Result<Param, String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err("expected K=V (a parameter name, '=', and its value)".to_string());
    };
    let name = name.trim();
    if name.is_empty() {
        return Err("the parameter name before '=' is empty".to_string());
    }
    Ok(Param { name: name.to_string(), value: value.to_string() })
}

/// The commands `client::run` executes (everything but `serve`).
#[derive(Debug)]
pub enum ClientCommand {
    Server(ServerCommand),
    Stack(StackCommand),
}

impl ClientCommand {
    /// The `--url` / `--token-file` given to this command, for `ClientContext::new`.
    pub fn connection(&self) -> &ConnectionArgs {
        match self {
            ClientCommand::Server(ServerCommand::Add(args)) => &args.connection,
            ClientCommand::Server(ServerCommand::Delete(args)) => &args.connection,
            ClientCommand::Server(ServerCommand::RotateToken(args)) => &args.connection,
            ClientCommand::Server(ServerCommand::List(args)) | ClientCommand::Stack(StackCommand::List(args)) => {
                &args.connection
            }
            ClientCommand::Stack(StackCommand::Create(args)) => &args.write.connection,
            ClientCommand::Stack(StackCommand::Update(args)) => &args.write.connection,
            ClientCommand::Stack(StackCommand::Delete(args)) => &args.connection,
            ClientCommand::Stack(StackCommand::Cancel(args)) => &args.connection,
            ClientCommand::Stack(
                StackCommand::Show(args)
                | StackCommand::Events(args)
                | StackCommand::Outputs(args)
                | StackCommand::Template(args)
                | StackCommand::Environment(args),
            ) => &args.connection,
            ClientCommand::Stack(StackCommand::Graph(args)) => &args.connection,
            ClientCommand::Stack(StackCommand::Failures(args)) => &args.connection,
            ClientCommand::Stack(StackCommand::Resource(ResourceCommand::MarkUnhealthy(args))) => &args.connection,
        }
    }
}

impl From<ServerCommand> for ClientCommand {
    fn from(command: ServerCommand) -> ClientCommand {
        ClientCommand::Server(command)
    }
}

impl From<StackCommand> for ClientCommand {
    fn from(command: StackCommand) -> ClientCommand {
        ClientCommand::Stack(command)
    }
}

/// `--network NET=IP`: split at the last `=` (a network name may contain one, an IP cannot).
fn parse_network_address(text: &str) -> Result<(String, String), String> {
    match text.rsplit_once('=') {
        Some((network, address)) if !network.is_empty() && !address.is_empty() => {
            Ok((network.to_owned(), address.to_owned()))
        }
        _ => Err(format!("expected NET=IP, got {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(arguments: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("anneal-shim").chain(arguments.iter().copied()))
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn param_splits_at_the_first_equals_sign() {
        assert_eq!(
            parse_param("url=http://x/?a=b").unwrap(),
            Param { name: "url".to_string(), value: "http://x/?a=b".to_string() }
        );
        assert_eq!(parse_param("empty=").unwrap(), Param { name: "empty".to_string(), value: String::new() });
        assert!(parse_param("novalue").unwrap_err().contains("K=V"));
        assert!(parse_param("=value").unwrap_err().contains("empty"));
    }

    #[test]
    fn param_debug_hides_the_value() {
        let param = Param { name: "db_password".to_string(), value: "s3cret".to_string() };
        let text = format!("{param:?}");
        assert!(text.contains("db_password") && !text.contains("s3cret"), "{text}");
    }

    #[test]
    fn stack_create_takes_repeated_params_wait_and_timeout() {
        let cli = parse(&[
            "stack",
            "create",
            "web",
            "--template",
            "t.yaml",
            "--param",
            "a=1",
            "--param",
            "b=x=y",
            "--wait",
            "--timeout",
            "30",
            "--url",
            "http://h:1",
        ])
        .unwrap();
        let Command::Stack { command: StackCommand::Create(create) } = cli.command else { panic!("not create") };
        assert!(!create.enable_rollback, "Heat's default: no rollback");
        let args = create.write;
        assert_eq!(args.name, "web");
        assert_eq!(args.template, Some(PathBuf::from("t.yaml")));
        let names: Vec<_> = args.params.iter().map(|param| (param.name.as_str(), param.value.as_str())).collect();
        assert_eq!(names, [("a", "1"), ("b", "x=y")]);
        assert!(args.wait && !args.json);
        assert_eq!(args.timeout, Some(30));
        assert_eq!(args.connection.url.as_deref(), Some("http://h:1"));
        assert_eq!(args.connection.token_file, PathBuf::from(DEFAULT_TOKEN_FILE));
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        for arguments in [
            &["stack", "create", "web"][..],
            &["stack", "create", "web", "--template", "t", "--param", "oops"],
            &["stack", "delete", "web", "--timeout", "0"],
            &["stack", "update", "web"],
            &["stack", "update", "web", "--rollback", "sometimes", "--existing"],
            &["server", "add", "web1", "--format", "yaml"],
            &["stack", "frobnicate"],
        ] {
            let error = parse(arguments).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{arguments:?}: {error}");
        }
    }

    #[test]
    fn server_add_formats_and_defaults() {
        let cli = parse(&["server", "add", "web1", "--format", "cloud-init"]).unwrap();
        let Command::Server { command: ServerCommand::Add(args) } = cli.command else { panic!("not add") };
        assert_eq!(args.format, AgentConfigFormat::CloudInit);
        assert_eq!(args.connection.url, None);
        let cli = parse(&["server", "add", "web1"]).unwrap();
        let Command::Server { command: ServerCommand::Add(args) } = cli.command else { panic!("not add") };
        assert_eq!(args.format, AgentConfigFormat::Toml);
    }

    #[test]
    fn server_delete_takes_a_name() {
        let cli = parse(&["server", "delete", "web1", "--url", "http://h:1"]).unwrap();
        let Command::Server { command: ServerCommand::Delete(args) } = cli.command else { panic!("not delete") };
        assert_eq!((args.name.as_str(), args.connection.url.as_deref()), ("web1", Some("http://h:1")));
        assert_eq!(parse(&["server", "delete"]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn serve_defaults_and_global_log_format() {
        let cli = parse(&["serve", "--log-format", "json"]).unwrap();
        assert_eq!(cli.log_format, LogFormat::Json);
        let Command::Serve { listen, db, public_url, retention, .. } = cli.command else { panic!("not serve") };
        assert_eq!((listen.as_str(), db.as_str(), public_url), (DEFAULT_LISTEN, DEFAULT_DATABASE_URL, vec![]));
        let defaults = RetentionArgs {
            max_events_per_stack: 1000,
            deleted_stack_events_secs: 30 * 86_400,
            retired_signals_secs: 30 * 86_400,
        };
        assert_eq!(retention, defaults);
        let cli = parse(&["serve", "--max-events-per-stack", "0", "--retired-signals-secs", "60"]).unwrap();
        let Command::Serve { retention, .. } = cli.command else { panic!("not serve") };
        assert_eq!((retention.max_events_per_stack, retention.retired_signals_secs), (0, 60));
        let cli = parse(&["stack", "list", "--json", "--log-format", "json", "--token-file", "/t"]).unwrap();
        assert_eq!(cli.log_format, LogFormat::Json);
        let Command::Stack { command } = cli.command else { panic!("not stack") };
        let client = ClientCommand::from(command);
        assert_eq!(client.connection().token_file, PathBuf::from("/t"));
    }

    #[test]
    fn tls_flags_come_in_pairs_and_rotation_takes_a_grace() {
        let cli = parse(&["serve", "--tls-cert", "/c.pem", "--tls-key", "/k.pem"]).unwrap();
        let Command::Serve { tls_cert, tls_key, .. } = cli.command else { panic!("not serve") };
        assert_eq!((tls_cert, tls_key), (Some(PathBuf::from("/c.pem")), Some(PathBuf::from("/k.pem"))));
        assert_eq!(parse(&["serve", "--tls-cert", "/c.pem"]).unwrap_err().exit_code(), 2);
        assert_eq!(parse(&["serve", "--tls-key", "/k.pem"]).unwrap_err().exit_code(), 2);
        let cli = parse(&["server", "rotate-token", "web1", "--grace-secs", "60", "--tls-ca", "/ca.pem"]).unwrap();
        let Command::Server { command: ServerCommand::RotateToken(args) } = cli.command else { panic!("not rotate") };
        assert_eq!((args.name.as_str(), args.grace_secs), ("web1", Some(60)));
        assert_eq!(args.connection.tls_ca, Some(PathBuf::from("/ca.pem")));
        assert_eq!(parse(&["server", "rotate-token"]).unwrap_err().exit_code(), 2);
    }
}
