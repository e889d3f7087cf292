//! The checks on resource properties against their schemas (`schemas.rs`; see docs/templates.md
//! "Resources"): unknown and missing properties, value kinds and allowed values where
//! parameters make them knowable, config/handle references, registered servers, wait-condition
//! bounds, and the config I/O and component lists.

use serde_json::Value;

use super::checks::{Context, Partial};
use super::evaluate::{kind_name, render};
use super::expr::Expr;
use super::schemas::{
    CHARACTER_CLASS_FIELDS, CHARACTER_SEQUENCE_FIELDS, COMPONENT_CONFIG_FIELDS, Field, INPUT_FIELDS, Kind,
    MAX_RANDOM_LENGTH, MAX_WAIT_SECS, MIME_PART_FIELDS, OUTPUT_FIELDS, schema,
};
use super::{ParameterType, Resource, ResourceType};

/// Every property problem of one resource.
pub(super) fn check(context: &Context, name: &str, resource: &Resource, problems: &mut Vec<String>) {
    if resource.kind == ResourceType::None {
        return;
    }
    let fields = schema(resource.kind);
    // Each property is evaluated once (`value_of_type` reads them again): every evaluation
    // is charged to the check's budget.
    let mut partials: Vec<(&str, Partial)> = Vec::with_capacity(resource.properties.len());
    for (property, expr) in &resource.properties {
        let prefix = format!("resource {name}: property \"{property}\"");
        let Some(field) = fields.iter().find(|field| field.name == property) else {
            problems.push(format!("resource {name}: unknown property \"{property}\" for {}", resource.kind.name()));
            continue;
        };
        let partial = context.partial(&prefix, expr, problems);
        let hidden = context.reads_hidden(expr);
        check_value(&prefix, field, &partial, hidden, problems);
        let checked = Checked { context, resource: name, prefix: &prefix, expr, partial: &partial, hidden };
        checked.special(resource.kind, property, problems);
        partials.push((property, partial));
    }
    for field in fields.iter().filter(|field| field.required) {
        let value = resource.properties.iter().find(|(property, _)| property == field.name);
        if value.is_none_or(|(_, expr)| matches!(expr, Expr::Literal(Value::Null))) {
            problems.push(format!("resource {name}: missing required property \"{}\"", field.name));
        }
    }
    if resource.kind == ResourceType::RandomString {
        random_string_length(context, name, resource, problems);
    }
    if resource.kind == ResourceType::Value {
        value_of_type(context, (name, resource), &partials, problems);
    }
}

/// OS::Heat::Value: a `value` known before creation must be of its `type` (Heat validates the
/// property as one of that type); a computed one is checked when the resource is created.
fn value_of_type(
    context: &Context,
    (name, resource): (&str, &Resource),
    partials: &[(&str, Partial)],
    problems: &mut Vec<String>,
) {
    let known = |property: &str| match partials.iter().find(|(name, _)| *name == property) {
        Some((_, Partial::Known(value))) => Some(value.clone()),
        _ => None,
    };
    let (Some(Value::String(kind)), Some(value)) = (known("type"), known("value")) else { return };
    // An unknown `type` is the schema check's problem, reported once there.
    if ParameterType::parse(&kind).is_none() {
        return;
    }
    if let Err(problem) = super::value_as_type(Some(&kind), value) {
        let hidden = resource.property("value").is_some_and(|expr| context.reads_hidden(expr));
        let problem = if hidden { super::value_type::hidden_refusal(&kind) } else { problem };
        problems.push(format!("resource {name}: property \"value\": {problem}"));
    }
}

/// As heat.engine.resources.openstack.heat.random_string.RandomString.validate: the class and
/// sequence minimums must fit in `length` (default 32; classes default to one lettersdigits).
fn random_string_length(context: &Context, name: &str, resource: &Resource, problems: &mut Vec<String>) {
    let mut ignored = Vec::new();
    let mut known = |property: &str| resource.property(property).map(|expr| context.partial("", expr, &mut ignored));
    let length = match known("length") {
        None => 32,
        Some(Partial::Known(value)) => match integer(&value) {
            Some(length) => length,
            None => return,
        },
        Some(_) => return,
    };
    let sum = |property: &str, default: i64| -> Option<i64> {
        let Some(partial) = resource.property(property).map(|expr| context.partial("", expr, &mut Vec::new())) else {
            return Some(default);
        };
        let Partial::Known(Value::Array(items)) = partial else { return None };
        items.iter().map(|item| item.get("min").map_or(Some(1), integer)).sum()
    };
    let (Some(classes), Some(sequences)) = (sum("character_classes", 1), sum("character_sequences", 0)) else {
        return;
    };
    if classes + sequences > length {
        problems.push(format!(
            "resource {name}: Length property cannot be smaller than combined character class and character \
             sequence minimums"
        ));
    }
}

/// One property value under check, with what the special checks need.
struct Checked<'a> {
    context: &'a Context<'a>,
    resource: &'a str,
    prefix: &'a str,
    expr: &'a Expr,
    partial: &'a Partial,
    hidden: bool,
}

impl Checked<'_> {
    fn special(&self, kind: ResourceType, property: &str, problems: &mut Vec<String>) {
        match (property, kind) {
            ("config", kind) if kind.is_deployment() => self.reference(ResourceType::is_config, "config", problems),
            ("handle", ResourceType::WaitCondition) => {
                self.reference(|kind| *kind == ResourceType::WaitConditionHandle, "handle", problems)
            }
            ("server", _) => self.server(problems),
            // A name no server is registered under is the server the stack creates (as Heat's
            // DeployedServer creates its identity); it must be a name a server can have.
            ("name", ResourceType::DeployedServer) => {
                if let Some(Value::String(name)) = self.partial.known()
                    && !name.is_empty()
                    && !(self.context.is_registered_server)(name)
                    && !super::servers::is_valid_server_name(name)
                {
                    let shown = if self.hidden { "(hidden)".to_owned() } else { format!("{name:?}") };
                    problems.push(format!(
                        "resource {}: server name {shown} must be 1-64 characters of [A-Za-z0-9._-] not starting with '.'",
                        self.resource
                    ));
                }
            }
            ("servers", _) => {
                for (_, server) in self.partial.entries().unwrap_or_default() {
                    if let Some(server) = server.known() {
                        self.server_name(server, problems);
                    }
                }
            }
            ("timeout", _) => self.bounded(1, MAX_WAIT_SECS, problems),
            ("length", _) => self.bounded(1, MAX_RANDOM_LENGTH, problems),
            ("parts", _) => self.items(property, MIME_PART_FIELDS, problems),
            ("character_classes", _) => self.items(property, CHARACTER_CLASS_FIELDS, problems),
            ("character_sequences", _) => self.items(property, CHARACTER_SEQUENCE_FIELDS, problems),
            ("count", _) => self.bounded(1, i64::MAX, problems),
            ("inputs", _) => self.items(property, INPUT_FIELDS, problems),
            ("outputs", _) => self.items(property, OUTPUT_FIELDS, problems),
            ("configs", _) => {
                self.items(property, COMPONENT_CONFIG_FIELDS, problems);
                self.component_actions(problems);
            }
            _ => {}
        }
    }

    /// `config` and `handle` must be `{get_resource: X}` with X of the right type.
    fn reference(&self, accepts: fn(&ResourceType) -> bool, property: &str, problems: &mut Vec<String>) {
        let expected = if property == "config" {
            "a config resource (OS::Heat::SoftwareConfig, OS::Heat::StructuredConfig or OS::Heat::SoftwareComponent)"
        } else {
            "an OS::Heat::WaitConditionHandle"
        };
        match self.expr {
            // Absent in effect; `handle` is then reported as missing.
            Expr::Literal(Value::Null) => {}
            Expr::GetResource(target) => match self.context.resource(target) {
                Some(resource) if !accepts(&resource.kind) => problems.push(format!(
                    "{}: \"{target}\" is an {}, not {expected}",
                    self.prefix,
                    resource.kind.name()
                )),
                // An unknown resource is reported by the reference check.
                _ => {}
            },
            _ => problems.push(format!("{}: {property} must be {{get_resource: <{expected}>}}", self.prefix)),
        }
    }

    fn server(&self, problems: &mut Vec<String>) {
        if let Expr::GetResource(target) = self.expr {
            // `{get_resource: <an OS::Heat::DeployedServer>}` is that server's name.
            if self.context.resource(target).is_some_and(|resource| resource.kind != ResourceType::DeployedServer) {
                problems.push(format!(
                    "{}: must be the name of a registered server or an OS::Heat::DeployedServer, not \"{target}\"",
                    self.prefix
                ));
            }
            return;
        }
        if let Some(server) = self.partial.known() {
            self.server_name(server, problems);
        }
    }

    fn server_name(&self, server: &Value, problems: &mut Vec<String>) {
        let resource = self.resource;
        let name = match server {
            Value::String(name) => name.clone(),
            Value::Number(_) | Value::Bool(_) => render(server),
            // Null is reported as missing; other kinds by the kind check.
            _ => return,
        };
        if name.is_empty() {
            problems.push(format!("resource {resource}: the server name is empty"));
        } else if (self.context.is_registered_server)(&name) {
        } else if self.hidden {
            problems.push(format!("resource {resource}: the server named by a hidden parameter is not registered"));
        } else {
            problems.push(format!(
                "resource {resource}: server \"{name}\" is not registered (anneal-shim server add {name})"
            ));
        }
    }

    fn bounded(&self, min: i64, max: i64, problems: &mut Vec<String>) {
        let Some(value) = self.partial.known().and_then(integer) else { return };
        if value < min || value > max {
            let range = if max == i64::MAX { format!("at least {min}") } else { format!("between {min} and {max}") };
            problems.push(format!("{}: must be {range}", self.prefix));
        }
    }

    /// Each item of a list property must be a map with the given keys.
    fn items(&self, property: &str, fields: &[Field], problems: &mut Vec<String>) {
        let Some(items) = self.partial.items() else { return };
        if property == "configs" && items.is_empty() {
            problems.push(format!("{}: needs at least one entry", self.prefix));
        }
        for (position, item) in items.iter().enumerate() {
            let prefix = format!("resource {}: property \"{property}[{position}]\"", self.resource);
            let Some(entries) = item.entries() else {
                if let Partial::Known(value) = item {
                    problems.push(format!("{prefix}: must be a map, not {}", kind_name(value)));
                }
                continue;
            };
            for (key, value) in &entries {
                match fields.iter().find(|field| field.name == key) {
                    Some(field) => {
                        let prefix = format!("{prefix} key \"{key}\"");
                        check_value(&prefix, field, value, self.hidden, problems);
                        random_string_item(&prefix, key, value, problems);
                    }
                    None => problems.push(format!("{prefix}: unknown key \"{key}\"")),
                }
            }
            for field in fields.iter().filter(|field| field.required) {
                let value = entries.iter().find(|(key, _)| key == field.name).map(|(_, value)| value);
                if value.is_none_or(|value| matches!(value, Partial::Known(Value::Null))) {
                    problems.push(format!("{prefix}: missing required key \"{}\"", field.name));
                }
            }
        }
    }

    /// A component action may appear in only one `configs` entry.
    fn component_actions(&self, problems: &mut Vec<String>) {
        let mut seen: Vec<String> = Vec::new();
        let mut repeated: Vec<String> = Vec::new();
        for item in self.partial.items().unwrap_or_default() {
            let Some(entries) = item.entries() else { continue };
            let actions = match entries.iter().find(|(key, _)| key == "actions") {
                None => vec!["CREATE".to_owned(), "UPDATE".to_owned()],
                Some((_, Partial::Known(Value::Array(actions)))) => {
                    actions.iter().filter_map(Value::as_str).map(str::to_owned).collect()
                }
                Some(_) => continue,
            };
            for action in actions {
                if seen.contains(&action) {
                    if !repeated.contains(&action) {
                        repeated.push(action);
                    }
                } else {
                    seen.push(action);
                }
            }
        }
        for action in repeated {
            problems.push(format!("{}: action \"{action}\" appears in more than one entry", self.prefix));
        }
    }
}

/// RandomString's per-item bounds: a `min` in 1..=512 and a non-empty `sequence`.
fn random_string_item(prefix: &str, key: &str, value: &Partial, problems: &mut Vec<String>) {
    match (key, value.known()) {
        ("min", Some(min)) if integer(min).is_some_and(|min| !(1..=MAX_RANDOM_LENGTH).contains(&min)) => {
            problems.push(format!("{prefix}: must be between 1 and {MAX_RANDOM_LENGTH}"));
        }
        ("sequence", Some(Value::String(sequence))) if sequence.is_empty() => {
            problems.push(format!("{prefix}: must not be empty"));
        }
        _ => {}
    }
}

/// Kind and allowed-value check of one (partially) known value.
fn check_value(prefix: &str, field: &Field, value: &Partial, hidden: bool, problems: &mut Vec<String>) {
    if let Some(expected) = kind_problem(field.kind, value) {
        problems.push(format!("{prefix}: must be {expected}"));
        return;
    }
    if field.allowed.is_empty() {
        return;
    }
    let candidates = match (field.kind, value) {
        (Kind::List, _) => value.items().unwrap_or_default(),
        (_, Partial::Known(_)) => vec![value.clone()],
        _ => Vec::new(),
    };
    for candidate in candidates {
        let Partial::Known(candidate) = candidate else { continue };
        let text = render(&candidate);
        if !field.allowed.contains(&text.as_str()) {
            let shown = if hidden { "the value".to_owned() } else { format!("\"{text}\"") };
            problems.push(format!("{prefix}: {shown} is not one of {}", field.allowed.join(", ")));
        }
    }
}

/// What the value should have been, when its kind is known and wrong.
fn kind_problem(kind: Kind, value: &Partial) -> Option<&'static str> {
    let ok = match (kind, value) {
        (Kind::Any, _) | (_, Partial::Unknown) => true,
        // Heat stringifies scalars given for a string property, and reads null as absent.
        (Kind::String, Partial::Known(value)) => !value.is_array() && !value.is_object(),
        (Kind::String, _) => false,
        (Kind::Map, Partial::Map(_)) | (Kind::List, Partial::List(_)) => true,
        (Kind::Map, Partial::Known(value)) => value.is_object() || value.is_null(),
        (Kind::List, Partial::Known(value)) => value.is_array() || value.is_null(),
        (Kind::Integer, Partial::Known(value)) => value.is_null() || integer(value).is_some(),
        (Kind::Boolean, Partial::Known(value)) => value.is_null() || boolean(value).is_some(),
        _ => false,
    };
    if ok {
        return None;
    }
    Some(match kind {
        Kind::String => "a string",
        Kind::Map => "a map",
        Kind::List => "a list",
        Kind::Integer => "an integer",
        Kind::Boolean => "a boolean",
        Kind::Any => "a value",
    })
}

/// An integer, or a string holding one (Heat's Integer property accepts both).
fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(number) => {
            number.as_i64().or_else(|| number.as_f64().filter(|float| float.fract() == 0.0).map(|float| float as i64))
        }
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// A boolean as Heat's Boolean property reads it (`strutils.bool_from_string`, strict).
fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::String(text) => match text.trim().to_ascii_lowercase().as_str() {
            "1" | "t" | "true" | "on" | "y" | "yes" => Some(true),
            "0" | "f" | "false" | "off" | "n" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}
