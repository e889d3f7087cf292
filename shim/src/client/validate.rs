//! `template validate`: the checks `stack create` gets from the engine, run locally on the
//! template, its environments and the files it names, with no server (as `openstack
//! orchestration template validate`). Server names are not checked (no registry here), and a
//! parameter without a value is not an error (Heat's validate does not ask for values either).
//! What the template was accepted with (duplicate keys, read as Heat reads them) is printed as
//! warnings: after the report, or after the problems of a template that does not pass.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Value, json};

use super::cli::TemplateValidateArgs;
use super::commands::parameter_map;
use super::{ClientError, ExitStatus, files, write};
use crate::template::{self, Environment, Template};

/// Prints the parameters and the resolved resources, or fails with every problem found.
pub fn validate_template(args: &TemplateValidateArgs, out: &mut dyn Write) -> Result<ExitStatus, ClientError> {
    let given = parameter_map(&args.params)?;
    let assembled = files::assemble(&args.template, &args.environments)?;
    let invalid = |problems| ClientError::InvalidTemplate { path: args.template.clone(), problems };
    // The warnings of a template that does not pass are listed after its problems.
    let invalid_warned = |mut problems: Vec<String>| {
        let warnings = template::yaml::parse_with_warnings(&assembled.template).map(|document| document.warnings());
        problems.extend(warnings.unwrap_or_default().into_iter().map(|warning| format!("warning: {warning}")));
        invalid(problems)
    };
    template::check_files(&assembled.files).map_err(invalid)?;
    // As the server reads what `stack create` sends: the environment files merged onto the
    // parameters given, Heat's way (a file's parameter wins over `--param`).
    let (environment, environment_problems, given) = if assembled.environment_files.is_empty() {
        let (environment, problems) = Environment::from_value_collecting(&assembled.environment);
        (environment, problems, given)
    } else {
        let types = template::parameter_types(&assembled.template, &assembled.files);
        let merged = template::merge_environment_files(&assembled.environment_files, &assembled.files, &given, &types)
            .map_err(|problem| invalid(vec![problem]))?;
        let (environment, problems) = Environment::from_value_collecting(&Value::Object(merged));
        (environment, problems, BTreeMap::new())
    };
    let texts = |parsed: &Template| template::parameter_texts(parsed, &environment, &given);
    let pseudo = [
        ("OS::stack_name", json!("validate")),
        ("OS::stack_id", json!("validate")),
        ("OS::project_id", json!("anneal")),
    ];
    let checked = template::check_template(template::CheckRequest {
        text: &assembled.template,
        environment: &environment,
        environment_problems,
        files: &assembled.files,
        texts: &texts,
        pseudo: &pseudo,
        servers: template::Servers::Offline,
        max_resources: args.max_resources_per_stack,
        evaluation_budget: template::EVALUATION_BUDGET,
    })
    .map_err(invalid_warned)?;
    let flat = checked.expanded.as_ref().unwrap_or(&checked.parsed);
    write(out, &report(&checked, flat, args.json))?;
    Ok(ExitStatus::Success)
}

fn report(checked: &template::Checked, flat: &Template, as_json: bool) -> String {
    let texts = &checked.texts;
    let parameters: Vec<Value> = checked
        .parsed
        .parameters
        .iter()
        .map(|(name, parameter)| {
            let value = match (texts.get(name), &parameter.default) {
                (Some(_), _) | (None, Some(_)) if parameter.hidden => json!("******"),
                (Some(text), _) => json!(text),
                (None, Some(default)) => default.clone(),
                (None, None) => Value::Null,
            };
            json!({"name": name, "type": parameter.kind.name(), "value": value,
                   "description": parameter.description})
        })
        .collect();
    let resources: Vec<Value> = flat
        .resources
        .iter()
        .map(|(name, resource)| json!({"name": name, "type": resource.kind.name(), "line": resource.line}))
        .collect();
    if as_json {
        let value = json!({"parameters": parameters, "resources": resources, "warnings": checked.warnings});
        return format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default());
    }
    let mut text = String::from("parameters:\n");
    for parameter in &parameters {
        let value = match &parameter["value"] {
            Value::Null => "(no value)".to_owned(),
            other => other.to_string(),
        };
        text.push_str(&format!(
            "  {} ({}): {value}\n",
            parameter["name"].as_str().unwrap_or(""),
            parameter["type"].as_str().unwrap_or("")
        ));
    }
    text.push_str("resources:\n");
    for (name, resource) in &flat.resources {
        text.push_str(&format!("  {name}: {} (line {})\n", resource.kind.name(), resource.line));
    }
    if !checked.warnings.is_empty() {
        text.push_str("warnings:\n");
        for warning in &checked.warnings {
            text.push_str(&format!("  {warning}\n"));
        }
    }
    text
}
