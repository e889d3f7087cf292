//! The shim's plan against a real Heat's preview-update: the same stack
//! (tests/fixtures/real-heat/preview_stack.yaml, every deployment NO_SIGNAL so neither engine
//! needs an agent) is created once on Heat and once on a shim; then, for each update of `CASES`,
//! both are asked for the preview with the group members (Heat: `PUT
//! .../stacks/<name>/<id>/preview?show_nested=True`; the shim: `stack update --dry-run
//! --show-nested --json`), and the `resource_changes` are compared resource by resource, a member
//! under its group (`parent_resource`): the category and the type of each must be the same.
//! Where Heat's preview answers otherwise on purpose or by a Heat bug, docs/day-two.md
//! "Differences from Heat's preview" says so, and `heat_view` computes what Heat must then show
//! from the stack's template (as Heat returns it) and the case's parameters: the test holds the
//! documented differences as exactly as the agreements. Previews change nothing, so one stack
//! per engine serves every case.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use anneal_tests::real_heat::{fixture_template, unique_stack_name};
use anneal_tests::{HeatApi, RealHeat, Shim, StackRef};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

const FIXTURE: &str = "preview_stack.yaml";
/// The shim's name of the stack (Heat's is unique in the run).
const STACK: &str = "preview";
/// The servers the fixture's deployments name as plain strings: registered on the shim; Heat
/// takes any string as a deployment's server.
const SERVERS: [&str; 3] = ["vm2", "vm3", "vm4"];
/// A create of the fixture on either engine (no agent to wait for).
const CREATE_LIMIT: Duration = Duration::from_secs(120);

/// The updates compared: a name and the parameters that differ from the fixture's defaults.
const CASES: &[(&str, &[(&str, &str)])] = &[
    ("nothing changed", &[]),
    ("an input value", &[("message", "two")]),
    ("a config's script (the config replaced)", &[("script", "#!/bin/sh\necho two\n")]),
    ("a deployment added", &[("add_extra", "true")]),
    ("a deployment removed", &[("keep_doomed", "false")]),
    ("a group gains a member", &[("gain_member", "true")]),
    ("a group loses a member", &[("keep_member", "false")]),
    ("the members' input", &[("group_message", "two")]),
    ("a deployment's actions", &[("actions", "CREATE")]),
    ("a deployment moves to another server", &[("moved", "true")]),
    ("the deployed server's name", &[("server_name", "anneal-preview-vm9")]),
    ("the deployed server's metadata", &[("server_metadata", "two")]),
    ("the deployed server's transport", &[("transport", "POLL_SERVER_CFN")]),
    ("an OS::Heat::None's property", &[("note", "two")]),
    (
        "several at once",
        &[
            ("message", "two"),
            ("add_extra", "true"),
            ("keep_doomed", "false"),
            ("gain_member", "true"),
            ("moved", "true"),
        ],
    ),
];

/// Heat's five categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Category {
    Added,
    Deleted,
    Replaced,
    Updated,
    Unchanged,
}

const CATEGORIES: [(&str, Category); 5] = [
    ("added", Category::Added),
    ("deleted", Category::Deleted),
    ("replaced", Category::Replaced),
    ("updated", Category::Updated),
    ("unchanged", Category::Unchanged),
];

/// A resource of a preview: its parent (a group, for a member) and its name.
type Key = (Option<String>, String);
/// Every resource of a preview: its category and its type.
type Listing = BTreeMap<Key, (Category, String)>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_preview_resource_changes_match_heats_preview_update() {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let ((stack, template), (shim, path)) = tokio::join!(heat_stack(&api), shim_stack());
    let context = || format!("=== shim ===\n{}\n=== heat ===\n{}", shim.log_text(), heat.log_tail());
    for (case, parameters) in CASES {
        let on_heat = listing(&heat_preview(&api, &stack, parameters, true).await);
        let on_shim = listing(&shim_preview(&shim, &path, parameters, true).await);
        let changed: BTreeSet<&str> = parameters.iter().map(|(name, _)| *name).collect();
        let expected = heat_view(&on_shim, &template, &changed);
        println!("{case}: Heat {}\n  the shim {}", shown(&on_heat), shown(&on_shim));
        assert_eq!(on_heat, expected, "{case}: Heat's preview is the shim's plan as documented\n{}", context());
    }
    // Without show_nested, both list the top-level resources only.
    let gains: &[(&str, &str)] = &[("gain_member", "true")];
    let (on_heat, on_shim) =
        (heat_preview(&api, &stack, gains, false).await, shim_preview(&shim, &path, gains, false).await);
    let (on_heat, on_shim) = (listing(&on_heat), listing(&on_shim));
    assert!(on_shim.keys().all(|(parent, _)| parent.is_none()), "no member without show_nested: {on_shim:?}");
    let keys = |listing: &Listing| listing.keys().cloned().collect::<Vec<Key>>();
    assert_eq!(keys(&on_heat), keys(&on_shim), "the same top-level resources");
    assert_eq!(on_heat, heat_view(&on_shim, &template, &BTreeSet::from(["gain_member"])), "{}", context());
    api.delete_stack(&stack).await;
}

/// The fixture's stack on Heat, created and settled, and its template as Heat returns it.
async fn heat_stack(api: &HeatApi) -> (StackRef, Value) {
    let stack = api.create_stack(&unique_stack_name("preview"), &fixture_template(FIXTURE), &[]).await;
    let shown = api.wait_stack_settled(&stack, None, CREATE_LIMIT).await;
    assert_eq!(shown["stack_status"], "CREATE_COMPLETE", "Heat: {shown}");
    let (code, template) = api.call(Method::GET, &format!("stacks/{}/{}/template", stack.name, stack.id), None).await;
    assert_eq!(code, StatusCode::OK, "Heat's template of the stack: {template}");
    (stack, template)
}

/// The fixture's stack on a shim with the plain-string servers registered, created and
/// settled; the template's path for the previews.
async fn shim_stack() -> (Shim, PathBuf) {
    let shim = Shim::start().await;
    for server in SERVERS {
        shim.cli_ok(&["server", "add", server, "--format", "json"]).await;
    }
    let path = shim.write_template(FIXTURE, &fixture_template(FIXTURE));
    let template = path.display().to_string();
    let limit = CREATE_LIMIT.as_secs().to_string();
    shim.cli_ok(&["stack", "create", STACK, "--template", &template, "--wait", "--timeout", &limit]).await;
    assert_eq!(shim.stack_status(STACK).await, "CREATE_COMPLETE", "{}", shim.log_text());
    (shim, path)
}

/// Heat's `resource_changes` for the fixture with `parameters` (a PUT: the others default).
async fn heat_preview(api: &HeatApi, stack: &StackRef, parameters: &[(&str, &str)], nested: bool) -> Value {
    let query = if nested { "?show_nested=True" } else { "" };
    let path = format!("stacks/{}/{}/preview{query}", stack.name, stack.id);
    let parameters: Map<String, Value> =
        parameters.iter().map(|(name, value)| (name.to_string(), Value::from(*value))).collect();
    let body = json!({"template": fixture_template(FIXTURE), "parameters": parameters});
    let (code, answer) = api.call(Method::PUT, &path, Some(&body)).await;
    assert_eq!(code, StatusCode::OK, "Heat's preview with {parameters:?}: {answer}");
    answer["resource_changes"].clone()
}

/// The shim's `resource_changes` for the same update (`--dry-run`: exit 0 no change, 2 changes).
async fn shim_preview(shim: &Shim, path: &std::path::Path, parameters: &[(&str, &str)], nested: bool) -> Value {
    let template = path.display().to_string();
    let mut arguments = vec!["stack".to_string(), "update".into(), STACK.into(), "--template".into(), template];
    for (name, value) in parameters {
        arguments.extend(["--param".to_string(), format!("{name}={value}")]);
    }
    arguments.extend(["--dry-run".to_string(), "--json".into()]);
    if nested {
        arguments.push("--show-nested".into());
    }
    let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
    let output = shim.cli(&arguments).await;
    assert!(matches!(output.code, 0 | 2), "the shim's plan with {parameters:?}: {output:?}");
    let plan: Value = serde_json::from_str(&output.stdout).expect("the plan as JSON");
    plan["resource_changes"].clone()
}

/// A preview's resources by (parent, name); each listed once.
fn listing(changes: &Value) -> Listing {
    let mut listing = Listing::new();
    for (list, category) in CATEGORIES {
        for resource in changes[list].as_array().unwrap_or_else(|| panic!("no {list} list in {changes}")) {
            let parent = resource["parent_resource"].as_str().map(str::to_string);
            let name = resource["resource_name"].as_str().expect("a resource_name").to_string();
            let kind = resource["resource_type"].as_str().expect("a resource_type").to_string();
            let again = listing.insert((parent, name), (category, kind));
            assert!(again.is_none(), "a resource listed twice in {changes}");
        }
    }
    listing
}

/// What Heat's preview must show where the shim shows `shim`, by the differences docs/day-two.md
/// documents; a resource none of them concerns is shown as the shim shows it.
fn heat_view(shim: &Listing, template: &Value, changed: &BTreeSet<&str>) -> Listing {
    let mut view = Listing::new();
    for ((parent, name), (category, kind)) in shim {
        // A member is defined by its group's properties (`servers` gives its `server`).
        let definition = &template["resources"][parent.as_deref().unwrap_or(name)];
        let properties = definition["properties"].as_object().cloned().unwrap_or_default();
        let category = match category {
            Category::Updated | Category::Unchanged => {
                heat_category(*category, parent.is_some(), kind, &properties, changed)
            }
            category => *category,
        };
        view.insert((parent.clone(), name.clone()), (category, kind.clone()));
    }
    view
}

/// Heat's category of a resource (a member with `member`) the shim shows updated or unchanged.
fn heat_category(
    shim: Category,
    member: bool,
    kind: &str,
    properties: &Map<String, Value>,
    changed: &BTreeSet<&str>,
) -> Category {
    // Heat evaluates the new template in a stack whose resources have no ids yet: a reference
    // to another resource reads its name, which differs from the id stored, so the property
    // looks changed; a server cannot change in place.
    let server = if member { "servers" } else { "server" };
    if properties.get(server).is_some_and(references) {
        return Category::Replaced;
    }
    let reads_a_resource = properties.values().any(references);
    // Heat always updates a group's nested stack (StackResource._needs_update).
    let group = !member && kind.ends_with("DeploymentGroup");
    // Properties the shim accepts and ignores change nothing it does.
    let ignored = kind == "OS::Heat::DeployedServer" && reads_changed(properties, IGNORED, changed);
    if reads_a_resource || group || ignored { Category::Updated } else { shim }
}

/// A DeployedServer's properties the shim accepts and ignores (docs/templates.md).
const IGNORED: &[&str] = &["metadata", "software_config_transport", "deployment_swift_data"];

/// Whether a value reads another resource (`get_resource`, `get_attr`).
fn references(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.contains_key("get_resource") || map.contains_key("get_attr") || map.values().any(references)
        }
        Value::Array(items) => items.iter().any(references),
        _ => false,
    }
}

/// Whether one of `names` of `properties` reads (`get_param`) a parameter in `changed`.
fn reads_changed(properties: &Map<String, Value>, names: &[&str], changed: &BTreeSet<&str>) -> bool {
    fn parameters(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                match map.get("get_param") {
                    Some(Value::String(name)) => found.push(name.clone()),
                    Some(Value::Array(path)) => found.extend(path.first().and_then(Value::as_str).map(str::to_string)),
                    _ => {}
                }
                map.values().for_each(|value| parameters(value, found));
            }
            Value::Array(items) => items.iter().for_each(|value| parameters(value, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    names.iter().filter_map(|name| properties.get(*name)).for_each(|value| parameters(value, &mut found));
    found.iter().any(|name| changed.contains(name.as_str()))
}

/// A listing on one line, without the unchanged resources.
fn shown(listing: &Listing) -> String {
    let changed: Vec<String> = listing
        .iter()
        .filter(|(_, (category, _))| *category != Category::Unchanged)
        .map(|((parent, name), (category, _))| match parent {
            Some(parent) => format!("{parent}/{name}: {category:?}"),
            None => format!("{name}: {category:?}"),
        })
        .collect();
    format!("[{}]", changed.join(", "))
}
