//! `template validate`: the checks `stack create` gets from the engine, run locally on the
//! template, its environments and the files it names, with no server (as `openstack
//! orchestration template validate`). Server names are not checked (no registry here), and a
//! parameter without a value is not an error (Heat's validate does not ask for values either).

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Map, Value, json};

use super::cli::TemplateValidateArgs;
use super::commands::parameter_map;
use super::{ClientError, ExitStatus, files, write};
use crate::template::{self, Environment, Template};

/// Prints the parameters and the resolved resources, or fails with every problem found.
pub fn validate_template(args: &TemplateValidateArgs, out: &mut dyn Write) -> Result<ExitStatus, ClientError> {
    let given = parameter_map(&args.params)?;
    let assembled = files::assemble(&args.template, &args.environments)?;
    let invalid = |problems| ClientError::InvalidTemplate { path: args.template.clone(), problems };
    let environment = Environment::from_value(&assembled.environment).map_err(invalid)?;
    template::check_files(&assembled.files).map_err(invalid)?;
    let (parsed, _) = template::parse_template_in(&assembled.template, &environment, &assembled.files)
        .map_err(|error| invalid(error.problems()))?;
    let texts = template::parameter_texts(&parsed, &environment, &given);
    let (flat, problems) = check(&parsed, &texts, &environment, &assembled.files);
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    write(out, &report(&parsed, &flat.unwrap_or_else(|| parsed.clone()), &texts, args.json))?;
    Ok(ExitStatus::Success)
}

/// Parameter and validation problems together; parameters without a value get a placeholder
/// of their type so the rest of the template is still checked.
/// Also returns the template with its nested stacks expanded, when it has some.
fn check(
    parsed: &Template,
    texts: &BTreeMap<String, String>,
    environment: &Environment,
    files: &Map<String, Value>,
) -> (Option<Template>, Vec<String>) {
    let mut placeholders = parsed.clone();
    let mut unset = Vec::new();
    for (name, parameter) in &mut placeholders.parameters {
        if parameter.default.is_none() && !texts.contains_key(name) {
            parameter.default = Some(template::parameter_placeholder(parameter.kind));
            parameter.constraints.clear();
            unset.push(format!("parameter \"{name}\""));
        }
    }
    match template::resolve_parameters(&placeholders, texts) {
        Err(problems) => (None, problems),
        Ok(mut parameters) => {
            for (pseudo, value) in
                [("OS::stack_name", "validate"), ("OS::stack_id", "validate"), ("OS::project_id", "anneal")]
            {
                parameters.insert(pseudo.to_owned(), json!(value));
            }
            let flat = match template::expand_nested(&placeholders, environment, files, &parameters) {
                Ok(flat) => flat,
                Err(problems) => return (None, problems),
            };
            let checked = flat.as_ref().unwrap_or(&placeholders);
            let problems = template::validate(checked, &parameters, &|_| true).err().unwrap_or_default();
            let problems = template::locate_problems(checked, problems);
            (flat, problems)
        }
    }
}

fn report(parsed: &Template, flat: &Template, texts: &BTreeMap<String, String>, as_json: bool) -> String {
    let parameters: Vec<Value> = parsed
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
        let value = json!({"parameters": parameters, "resources": resources});
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
    text
}
