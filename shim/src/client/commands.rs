//! One function per client command: checks what can be checked locally (parameters, the
//! template file), makes the API call, and prints the result as a table, the API's JSON or an
//! agent config; `--wait` hands over to `wait`. Local problems are found before the admin token
//! is read or the network is touched.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::cli::{
    AgentConfigFormat, ClientCommand, GraphFormat, ListArgs, Param, ResourceCommand, ServerAddArgs, ServerCommand,
    ServerDeleteArgs, ServerRotateTokenArgs, StackCancelArgs, StackCommand, StackDeleteArgs, StackGraphArgs,
    StackReadArgs, StackWriteArgs,
};
use super::http::AdminClient;
use super::wait::{WaitRequest, wait_for_stack};
use super::{ClientContext, ClientError, ExitStatus, decode, failures, files, formats, plan, pretty, render, write};
use crate::graph::StackGraph;
use crate::model::{
    Action, AddServer, Event, RotateToken, RotatedCredentials, ServerCredentials, ServerSummary, StackDetail,
    StackEnvironment, StackOutput, StackRequest, StackSummary, StackTemplate,
};

/// `run` with the `--wait` poll interval as a parameter (tests poll faster).
pub(crate) async fn execute(
    command: ClientCommand,
    context: &ClientContext,
    interval: Duration,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    match command {
        ClientCommand::Server(ServerCommand::Add(args)) => server_add(&args, context, out).await,
        ClientCommand::Server(ServerCommand::List(args)) => server_list(&args, context, out).await,
        ClientCommand::Server(ServerCommand::Delete(args)) => server_delete(&args, context, out).await,
        ClientCommand::Server(ServerCommand::RotateToken(args)) => server_rotate_token(&args, context, out).await,
        ClientCommand::Stack(StackCommand::Create(args)) => {
            let options = WriteOptions { disable_rollback: Some(!args.enable_rollback), existing: false };
            stack_write(&args.write, Action::Create, options, context, interval, out).await
        }
        ClientCommand::Stack(StackCommand::Update(args)) => {
            let disable_rollback = args.rollback.disable_rollback();
            let options = WriteOptions { disable_rollback, existing: args.existing };
            stack_write(&args.write, Action::Update, options, context, interval, out).await
        }
        ClientCommand::Stack(StackCommand::Cancel(args)) => stack_cancel(&args, context, interval, out).await,
        ClientCommand::Stack(StackCommand::Delete(args)) => stack_delete(&args, context, interval, out).await,
        ClientCommand::Stack(StackCommand::Show(args)) => stack_show(&args, context, out).await,
        ClientCommand::Stack(StackCommand::List(args)) => stack_list(&args, context, out).await,
        ClientCommand::Stack(StackCommand::Events(args)) => stack_events(&args, context, out).await,
        ClientCommand::Stack(StackCommand::Outputs(args)) => stack_outputs(&args, context, out).await,
        ClientCommand::Stack(StackCommand::Graph(args)) => stack_graph(&args, context, out).await,
        ClientCommand::Stack(StackCommand::Template(args)) => stack_template(&args, context, out).await,
        ClientCommand::Stack(StackCommand::Environment(args)) => stack_environment(&args, context, out).await,
        ClientCommand::Stack(StackCommand::Failures(args)) => failures::stack_failures(&args, context, out).await,
        ClientCommand::Stack(StackCommand::Resource(ResourceCommand::MarkUnhealthy(args))) => {
            failures::mark_unhealthy(&args, context, out).await
        }
    }
}

async fn server_add(
    args: &ServerAddArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let client = AdminClient::new(context)?;
    let mut networks = BTreeMap::<String, Vec<String>>::new();
    for (network, address) in &args.networks {
        networks.entry(network.clone()).or_default().push(address.clone());
    }
    let body = to_value(&AddServer { name: args.name.clone(), addresses: args.addresses.clone(), networks });
    let value = client.request(Method::POST, &["v1", "servers"], Some(&body)).await?;
    let ca = client.trusted_ca();
    let text = match args.format {
        AgentConfigFormat::Json => pretty(&value),
        AgentConfigFormat::Toml => {
            formats::agent_config_with_token_note(&decode::<ServerCredentials>(value, "servers")?, ca)
        }
        AgentConfigFormat::CloudInit => formats::cloud_init(&decode::<ServerCredentials>(value, "servers")?, ca),
    };
    write(out, &text)?;
    Ok(ExitStatus::Success)
}

/// `POST /v1/servers/{name}/token`: the new credentials, printed as `server add` prints them,
/// and until when the old token works.
async fn server_rotate_token(
    args: &ServerRotateTokenArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let client = AdminClient::new(context)?;
    let body = to_value(&RotateToken { grace_secs: args.grace_secs });
    let value = client.request(Method::POST, &["v1", "servers", &args.name, "token"], Some(&body)).await?;
    if args.format == AgentConfigFormat::Json {
        write(out, &pretty(&value))?;
        return Ok(ExitStatus::Success);
    }
    let rotated = decode::<RotatedCredentials>(value, "servers")?;
    let mut text = match args.format {
        AgentConfigFormat::CloudInit => formats::cloud_init(&rotated.credentials, client.trusted_ca()),
        AgentConfigFormat::Toml | AgentConfigFormat::Json => {
            formats::agent_config_with_token_note(&rotated.credentials, client.trusted_ca())
        }
    };
    text.push_str(&format!(
        "# the previous token works until {}; a running agent re-reads its token file after that\n",
        render::printable(&rotated.previous_token_expires_at)
    ));
    write(out, &text)?;
    Ok(ExitStatus::Success)
}

async fn server_list(args: &ListArgs, context: &ClientContext, out: &mut dyn Write) -> Result<ExitStatus, ClientError> {
    let value = AdminClient::new(context)?.get(&["v1", "servers"]).await?;
    let text =
        if args.json { pretty(&value) } else { render::server_list(&decode::<Vec<ServerSummary>>(value, "servers")?) };
    write(out, &text)?;
    Ok(ExitStatus::Success)
}

/// `DELETE /v1/servers/{name}` (204, no body); a 404 or 409 is an `Api` error with the API's message.
async fn server_delete(
    args: &ServerDeleteArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    AdminClient::new(context)?.request(Method::DELETE, &["v1", "servers", &args.name], None).await?;
    write(out, &format!("server {} deleted\n", render::printable(&args.name)))?;
    Ok(ExitStatus::Success)
}

/// `stack create` (POST, 201) and `stack update` (PUT, 202).
/// What `stack create` and `stack update` add to the request beyond `StackWriteArgs`.
struct WriteOptions {
    disable_rollback: Option<bool>,
    existing: bool,
}

async fn stack_write(
    args: &StackWriteArgs,
    action: Action,
    options: WriteOptions,
    context: &ClientContext,
    interval: Duration,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let request = match (&args.template, options.existing) {
        (None, true) if !args.environments.is_empty() => {
            let message = "stack update --existing takes -e only with --template".to_string();
            return Err(ClientError::Usage { message });
        }
        // The stored template, environment and files are the server's; only parameters go.
        (None, true) => StackRequest {
            parameters: parameter_map(&args.params)?,
            timeout_secs: args.timeout,
            ..StackRequest::default()
        },
        (None, false) => {
            let message = format!("stack {action} needs --template FILE", action = action_word(action));
            return Err(ClientError::Usage { message });
        }
        (Some(template), _) => stack_request(args, template, action)?,
    };
    let request = StackRequest { disable_rollback: options.disable_rollback, existing: options.existing, ..request };
    if args.print_request {
        write(out, &pretty(&to_value(&request)))?;
        return Ok(ExitStatus::Success);
    }
    let client = AdminClient::new(context)?;
    if args.dry_run {
        let shown = plan::Shown { show_nested: args.show_nested, json: args.json };
        return plan::preview(&client, &args.name, action, &to_value(&request), shown, out).await;
    }
    let body = to_value(&request);
    let value = match action {
        Action::Update => client.request(Method::PUT, &["v1", "stacks", &args.name], Some(&body)).await?,
        _ => client.request(Method::POST, &["v1", "stacks"], Some(&body)).await?,
    };
    let follow = Follow { stack: &args.name, action, wait: args.wait, timeout: args.timeout, json: args.json };
    answer_or_wait(&client, value, &follow, interval, out).await
}

/// What a stack command that started an action prints next.
struct Follow<'a> {
    stack: &'a str,
    action: Action,
    wait: bool,
    timeout: Option<u64>,
    json: bool,
}

/// The API's answer (a stack summary) as one line or JSON; with `wait`, the wait for `action`
/// to end instead (`wait_for_stack`).
async fn answer_or_wait(
    client: &AdminClient,
    value: Value,
    follow: &Follow<'_>,
    interval: Duration,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    if !follow.wait {
        let text =
            if follow.json { pretty(&value) } else { render::stack_line(&decode::<StackSummary>(value, "stacks")?) };
        write(out, &text)?;
        return Ok(ExitStatus::Success);
    }
    let wait = WaitRequest {
        stack: follow.stack,
        action: follow.action,
        timeout: follow.timeout.map(Duration::from_secs),
        interval,
        json: follow.json,
        live: std::io::stderr().is_terminal(),
    };
    wait_for_stack(client, &wait, out).await
}

fn action_word(action: Action) -> &'static str {
    if action == Action::Create { "create" } else { "update" }
}

/// The request body: the template file's text and the parameters (each name at most once).
pub(crate) fn stack_request(
    args: &StackWriteArgs,
    template: &std::path::Path,
    action: Action,
) -> Result<StackRequest, ClientError> {
    let parameters = parameter_map(&args.params)?;
    let assembled = files::assemble(template, &args.environments)?;
    Ok(StackRequest {
        name: (action == Action::Create).then(|| args.name.clone()),
        template: assembled.template,
        parameters,
        timeout_secs: args.timeout,
        environment: assembled.environment,
        files: assembled.files,
        environment_files: assembled.environment_files,
        disable_rollback: None,
        existing: false,
    })
}

/// A repeated name is refused: which value was meant is unclear (heatclient makes it a list).
pub(crate) fn parameter_map(params: &[Param]) -> Result<BTreeMap<String, String>, ClientError> {
    let mut parameters = BTreeMap::new();
    for param in params {
        if parameters.insert(param.name.clone(), param.value.clone()).is_some() {
            return Err(ClientError::DuplicateParameter { name: param.name.clone() });
        }
    }
    Ok(parameters)
}

/// `POST /v1/stacks/{name}/cancel` (202); with --wait, until the rollback ends.
async fn stack_cancel(
    args: &StackCancelArgs,
    context: &ClientContext,
    interval: Duration,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let client = AdminClient::new(context)?;
    let body = serde_json::json!({"rollback": !args.no_rollback});
    let value = client.request(Method::POST, &["v1", "stacks", &args.name, "cancel"], Some(&body)).await?;
    let follow =
        Follow { stack: &args.name, action: Action::Rollback, wait: args.wait, timeout: args.timeout, json: args.json };
    answer_or_wait(&client, value, &follow, interval, out).await
}

async fn stack_delete(
    args: &StackDeleteArgs,
    context: &ClientContext,
    interval: Duration,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let client = AdminClient::new(context)?;
    let value = client.request(Method::DELETE, &["v1", "stacks", &args.name], None).await?;
    if !args.wait {
        write(out, &render::stack_line(&decode::<StackSummary>(value, "stacks")?))?;
        return Ok(ExitStatus::Success);
    }
    let wait = WaitRequest {
        stack: &args.name,
        action: Action::Delete,
        timeout: args.timeout.map(Duration::from_secs),
        interval,
        json: false,
        live: std::io::stderr().is_terminal(),
    };
    wait_for_stack(&client, &wait, out).await
}

async fn stack_show(
    args: &StackReadArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let value = AdminClient::new(context)?.get(&["v1", "stacks", &args.name]).await?;
    let text = if args.json { pretty(&value) } else { render::stack_detail(&decode::<StackDetail>(value, "stacks")?) };
    write(out, &text)?;
    Ok(ExitStatus::Success)
}

async fn stack_list(args: &ListArgs, context: &ClientContext, out: &mut dyn Write) -> Result<ExitStatus, ClientError> {
    let value = AdminClient::new(context)?.get(&["v1", "stacks"]).await?;
    let text =
        if args.json { pretty(&value) } else { render::stack_list(&decode::<Vec<StackSummary>>(value, "stacks")?) };
    write(out, &text)?;
    Ok(ExitStatus::Success)
}

/// How many events `stack events` asks for per request.
pub(crate) const EVENTS_PAGE: usize = 500;

async fn stack_events(
    args: &StackReadArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let value = Value::Array(all_events(&AdminClient::new(context)?, &args.name).await?);
    let text = if args.json { pretty(&value) } else { render::events(&decode::<Vec<Event>>(value, "events")?) };
    write(out, &text)?;
    Ok(ExitStatus::Success)
}

/// `GET /v1/stacks/{name}/graph`, drawn in the format asked for.
async fn stack_graph(
    args: &StackGraphArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let value = AdminClient::new(context)?.get(&["v1", "stacks", &args.name, "graph"]).await?;
    let text = match args.format {
        GraphFormat::Json => pretty(&value),
        GraphFormat::Dot => crate::graph::to_dot(&decode::<StackGraph>(value, "stacks/{name}/graph")?),
        GraphFormat::Svg => crate::graph::to_svg(&decode::<StackGraph>(value, "stacks/{name}/graph")?),
    };
    write(out, &text)?;
    Ok(ExitStatus::Success)
}

/// Every event of the stack, oldest first, following the pages of the events route
/// (`?limit=&marker=`; see docs/http-api.md). A server that does not page (it answers more than
/// the limit) gives everything in its first answer.
async fn all_events(client: &AdminClient, name: &str) -> Result<Vec<Value>, ClientError> {
    let segments = ["v1", "stacks", name, "events"];
    let mut events: Vec<Value> = Vec::new();
    let mut marker: Option<u64> = None;
    loop {
        let mut query = vec![("limit", EVENTS_PAGE.to_string())];
        query.extend(marker.map(|marker| ("marker", marker.to_string())));
        let page = decode::<Vec<Value>>(client.get_query(&segments, &query).await?, "stacks/{name}/events")?;
        let full = page.len() == EVENTS_PAGE;
        let last = page.last().and_then(|event| event.get("id")).and_then(Value::as_u64);
        events.extend(page);
        // A short page is the last; so is one that does not move past the marker (no paging).
        match last {
            Some(last) if full && marker.is_none_or(|marker| last > marker) => marker = Some(last),
            _ => return Ok(events),
        }
    }
}

/// There is no outputs endpoint: the outputs are part of `GET /v1/stacks/{name}`.
async fn stack_outputs(
    args: &StackReadArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let value = AdminClient::new(context)?.get(&["v1", "stacks", &args.name]).await?;
    let outputs = value.get("outputs").cloned().unwrap_or(Value::Null);
    let text =
        if args.json { pretty(&outputs) } else { render::outputs(&decode::<Vec<StackOutput>>(outputs, "stacks")?) };
    write(out, &text)?;
    Ok(ExitStatus::Success)
}

/// `GET /v1/stacks/{name}/template`: the text exactly as stored (no newline added), so that
/// `stack template web > t.yaml` gives back the file that was sent.
async fn stack_template(
    args: &StackReadArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let value = AdminClient::new(context)?.get(&["v1", "stacks", &args.name, "template"]).await?;
    let text = match args.json {
        true => pretty(&value),
        false => decode::<StackTemplate>(value, "stacks/{name}/template")?.template,
    };
    write(out, &text)?;
    Ok(ExitStatus::Success)
}

/// `GET /v1/stacks/{name}/environment`: already a Heat environment, printed as JSON (which an
/// environment file may be) with or without `--json`.
async fn stack_environment(
    args: &StackReadArgs,
    context: &ClientContext,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let value = AdminClient::new(context)?.get(&["v1", "stacks", &args.name, "environment"]).await?;
    let environment = decode::<StackEnvironment>(value, "stacks/{name}/environment")?;
    write(out, &pretty(&to_value(&environment)))?;
    Ok(ExitStatus::Success)
}

/// Model types always serialise (string keys, no non-finite floats).
fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
