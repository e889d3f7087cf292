//! A stack request as the engine takes it: checked against the template language and the
//! registered servers (`check`, what create, update, preview and rollback all run), and kept
//! as sent beside the stack (`record`): the request that started the current traversal and the
//! one before it, which a rollback converges back to and `stack template` prints.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::context::Context;
use super::error::EngineError;
use super::secrets;
use super::traversal::forward::Checked;
use crate::model::StackRequest;
use crate::store::{StackRow, StoredRequests};
use crate::template::{self, Template};

/// Parses and validates a stack request against the registered servers, every problem of the
/// template together (`template::check_template`); the pseudo parameters (`OS::stack_name`,
/// `OS::stack_id`, `OS::project_id`) are added to the resolved ones.
pub fn check(
    ctx: &mut Context<'_>,
    request: &StackRequest,
    name: &str,
    stack_id: &str,
) -> Result<Checked, EngineError> {
    template::check_files(&request.files).map_err(|problems| EngineError::Template { problems })?;
    let (environment, given, environment_problems) = request_environment(request)?;
    // Supplied text never carries a token placeholder into stored values (see `secrets`).
    let texts = |parsed: &Template| -> BTreeMap<String, String> {
        template::parameter_texts(parsed, &environment, &given)
            .iter()
            .map(|(name, value)| (name.clone(), secrets::neutralise(value).into_owned()))
            .collect()
    };
    let servers: BTreeMap<String, template::ServerAddresses> = ctx
        .tx
        .servers()?
        .into_iter()
        .map(|server| (server.name, template::ServerAddresses::from_stored(&server.addresses)))
        .collect();
    let lookup = |server: &str| servers.get(server).cloned();
    let pseudo =
        [("OS::stack_name", json!(name)), ("OS::stack_id", json!(stack_id)), ("OS::project_id", json!("anneal"))];
    let checked = template::check_template(template::CheckRequest {
        text: &request.template,
        environment: &environment,
        environment_problems,
        files: &request.files,
        texts: &texts,
        pseudo: &pseudo,
        servers: template::Servers::Registered(&lookup),
        max_resources: ctx.limits.max_resources,
        evaluation_budget: ctx.limits.evaluation_budget,
    })
    .map_err(|problems| EngineError::Template { problems })?;
    // Nested stacks and resource groups became ordinary resources; conditions are decided
    // (docs/templates.md, "Conditions").
    let stored_template = match checked.expanded.is_some() {
        true => template::flattened_text(&checked.template),
        false => checked.resolved.unwrap_or_else(|| request.template.clone()),
    };
    Ok(Checked {
        template: checked.template,
        parameters: checked.parameters,
        plan: checked.plan,
        resources: checked.resources,
        expansion_bytes: checked.expansion_bytes,
        stored_template,
    })
}

/// What `request_environment` gives.
type RequestEnvironment = (template::Environment, BTreeMap<String, String>, Vec<String>);

/// The request's environment, the parameter values given beside it and the environment's
/// problems (reported with the template's). With `environment_files`, as Heat: the merged
/// `environment` is ignored and the files are merged onto the request's `parameters`, so a
/// file's parameter wins over the request's own.
fn request_environment(request: &StackRequest) -> Result<RequestEnvironment, EngineError> {
    if request.environment_files.is_empty() {
        let (environment, problems) = template::Environment::from_value_collecting(&request.environment);
        return Ok((environment, request.parameters.clone(), problems));
    }
    let types = template::parameter_types(&request.template, &request.files);
    let merged =
        template::merge_environment_files(&request.environment_files, &request.files, &request.parameters, &types)
            .map_err(|problem| EngineError::Template { problems: vec![problem] })?;
    let (environment, problems) = template::Environment::from_value_collecting(&Value::Object(merged));
    Ok((environment, BTreeMap::new(), problems))
}

/// The stored requests of stack `name`, parsed. A stored text that no longer parses (it was
/// written by this engine, so only a damaged database has one) is an error naming the stack.
pub fn stored(ctx: &mut Context<'_>, name: &str) -> Result<(Option<StackRequest>, Option<StackRequest>), EngineError> {
    let stored = ctx.tx.stack_requests(name)?;
    let parse = |text: Option<String>, which: &str| -> Result<Option<StackRequest>, EngineError> {
        let Some(text) = text else { return Ok(None) };
        serde_json::from_str(&text).map(Some).map_err(|error| EngineError::Invalid {
            message: format!("stack {name}: the stored {which} request does not parse: {error}"),
        })
    };
    Ok((parse(stored.current, "current")?, parse(stored.previous, "previous")?))
}

/// An update's request with `existing` (Heat's PATCH): the stack's stored request, with what
/// `given` sets replacing it (template, environment, `environment_files`, timeout, rollback)
/// or adding to it (parameters and files, key by key). Without `existing`: `given` as it is.
pub fn with_existing(ctx: &mut Context<'_>, name: &str, given: StackRequest) -> Result<StackRequest, EngineError> {
    if !given.existing {
        return Ok(given);
    }
    let (current, _) = stored(ctx, name)?;
    let Some(mut base) = current else {
        return Err(EngineError::Invalid {
            message: format!(
                "stack {name} has no stored request to reuse (it was last created or updated by anneal-shim 0.2.0 or \
                 earlier): send the template"
            ),
        });
    };
    if !given.template.is_empty() {
        base.template = given.template;
    }
    if !given.environment.is_null() {
        base.environment = given.environment;
    }
    if !given.environment_files.is_empty() {
        base.environment_files = given.environment_files;
    }
    base.parameters.extend(given.parameters);
    base.files.extend(given.files);
    base.timeout_secs = given.timeout_secs.or(base.timeout_secs);
    base.disable_rollback = given.disable_rollback.or(base.disable_rollback);
    base.name = given.name;
    base.existing = false;
    Ok(base)
}

/// Heat's refusal of an update that changes an `immutable` parameter.
pub fn refuse_immutable_changes(existing: &StackRow, checked: &Checked) -> Result<(), EngineError> {
    let empty = serde_json::Map::new();
    let old = existing.parameters.as_object().unwrap_or(&empty);
    let changed = checked.template.immutable_changes(old, &checked.parameters);
    if changed.is_empty() {
        return Ok(());
    }
    // heat.common.exception.ImmutableParameterModified's text.
    let problem = format!("The following parameters are immutable and may not be updated: {}", changed.join(", "));
    Err(EngineError::Template { problems: vec![problem] })
}

/// Records `request` as the one the stack's new traversal started with; the one before becomes
/// the previous (a rollback's target) unless `keep_previous` is false, which a rollback passes:
/// after it there is nothing further back to return to, as in Heat.
pub fn record(
    ctx: &mut Context<'_>,
    name: &str,
    request: &StackRequest,
    keep_previous: bool,
) -> Result<(), EngineError> {
    let stored = ctx.tx.stack_requests(name)?;
    let text = serde_json::to_string(request)
        .map_err(|error| EngineError::Invalid { message: format!("stack {name}: request not storable: {error}") })?;
    let previous = if keep_previous { stored.current } else { None };
    ctx.tx.set_stack_requests(name, &StoredRequests { current: Some(text), previous })?;
    Ok(())
}
