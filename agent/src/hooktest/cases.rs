//! The deployments `hook-test GROUP --check` runs, built in code so every run checks the same
//! thing: each is a document as Heat publishes it (the `deploy_*` inputs Heat derives, inputs and
//! outputs with Heat's keys), with a short name. The config language of an arbitrary group is
//! unknown here, so only groups that run a script (`script`, `Heat::Ungrouped`, `component`) get
//! configs that do something, and with them what the result must be; every other group gets a
//! neutral config (an empty string, or an empty map for the groups whose config is a map).

use anneal_protocol::deployment::UNGROUPED;
use anneal_protocol::{Deployment, Input, Options, OutputDecl};
use serde_json::{Map, Value, json};

/// The per-case deadline of the `timeout` case, short so the check stays quick.
pub(crate) const SHORT_TIMEOUT_SECS: u64 = 2;

/// Groups of heat-agents' hooks whose config is a map, not text.
const MAP_CONFIG_GROUPS: [&str; 6] = ["cfn-init", "docker-cmd", "docker-compose", "hiera", "json-file", "kubelet"];

/// One deployment of the check.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub(crate) name: &'static str,
    /// What the case exercises, one line.
    pub(crate) about: &'static str,
    pub(crate) deployment: Deployment,
    /// What the result must be; only known when the config is a script the case wrote.
    pub(crate) expect: Option<Expect>,
}

/// The result a script case's config produces under any hook that follows the script protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expect {
    /// The script's exit status, which becomes `deploy_status_code`.
    pub(crate) status_code: i64,
    /// The outputs the script writes to `${heat_outputs_path}.<name>`.
    pub(crate) outputs: &'static [&'static str],
    /// The script outlives its deadline on purpose.
    pub(crate) timed_out: bool,
}

/// What a case is made of before the config is chosen for the group.
struct Spec {
    name: &'static str,
    about: &'static str,
    action: &'static str,
    options: Options,
    inputs: Vec<Input>,
    outputs: Vec<OutputDecl>,
    script: &'static str,
    expect: Expect,
}

/// Whether `group` runs its config as a script (so the cases' scripts are the config).
pub(crate) fn runs_scripts(group: &str) -> bool {
    matches!(group, "script" | "component") || group == UNGROUPED
}

/// How the config is given to `group`, for the report.
pub(crate) fn config_description(group: &str) -> &'static str {
    if group == "component" {
        "a #!/bin/sh script per case, as the config of a component entry (tool script) for every action"
    } else if runs_scripts(group) {
        "a #!/bin/sh script per case (the script hook's config language)"
    } else if MAP_CONFIG_GROUPS.contains(&group) {
        "an empty map (the checker does not know this group's config language)"
    } else {
        "an empty string (the checker does not know this group's config language)"
    }
}

/// Every case, with configs for `group`, in the order they run.
pub(crate) fn cases(group: &str) -> Vec<Case> {
    specs().into_iter().map(|spec| build(group, spec)).collect()
}

fn build(group: &str, spec: Spec) -> Case {
    let (config, expect) = if group == "component" {
        (component_config(spec.script), Some(spec.expect))
    } else if runs_scripts(group) {
        (Value::String(spec.script.to_string()), Some(spec.expect))
    } else if MAP_CONFIG_GROUPS.contains(&group) {
        (Value::Object(Map::new()), None)
    } else {
        (Value::String(String::new()), None)
    };
    let mut inputs = derived_inputs(spec.name, spec.action);
    inputs.extend(spec.inputs);
    let deployment = Deployment {
        id: format!("hook-test-check-{}", spec.name),
        name: Some(format!("check-{}", spec.name)),
        group: group.to_string(),
        creation_time: Some("2024-01-01T00:00:00Z".to_string()),
        config,
        options: spec.options,
        inputs,
        outputs: spec.outputs,
        extra: Map::new(),
    };
    Case { name: spec.name, about: spec.about, deployment, expect }
}

/// A component config whose one entry runs `script` with the script tool for every action.
fn component_config(script: &str) -> Value {
    json!({"configs": [{
        "actions": ["CREATE", "UPDATE", "DELETE", "SUSPEND", "RESUME"],
        "tool": "script",
        "config": script,
    }]})
}

/// The inputs Heat adds to every deployment (`_build_derived_inputs`), for a deployment that
/// does not signal (hook-test sends nothing).
fn derived_inputs(name: &str, action: &str) -> Vec<Input> {
    let derived = |input: &str, description: &str, value: &str| {
        let mut extra = Map::new();
        extra.insert("description".into(), Value::String(description.into()));
        Input {
            name: input.into(),
            declared_type: Some("String".into()),
            value: Some(Value::String(value.into())),
            extra,
        }
    };
    vec![
        derived("deploy_server_id", "ID of the server being deployed to", "4a6ec5e1-0f2b-4b7e-9c55-5d4c3f2a1b00"),
        derived("deploy_action", "Name of the current action being deployed", action),
        derived(
            "deploy_stack_id",
            "ID of the stack this deployment belongs to",
            "hook-test/1d8a6a4e-3c41-4f0e-8a36-2f5b0c9d7e11",
        ),
        derived("deploy_resource_name", "Name of this deployment resource in the stack", &format!("check_{name}")),
        derived(
            "deploy_signal_transport",
            "How the server should signal to heat with the deployment output values.",
            "NO_SIGNAL",
        ),
    ]
}

/// A template input as Heat publishes it; `value` `None` leaves the key out.
fn input(name: &str, kind: &str, value: Option<Value>) -> Input {
    let mut extra = Map::new();
    extra.insert("description".into(), Value::String(format!("{kind} input of hook-test --check")));
    extra.insert("default".into(), Value::Null);
    extra.insert("replace_on_change".into(), Value::Bool(false));
    Input { name: name.into(), declared_type: Some(kind.into()), value, extra }
}

/// A declared output as Heat publishes it.
fn output(name: &str, error_output: bool) -> OutputDecl {
    let mut extra = Map::new();
    extra.insert("type".into(), Value::String("String".into()));
    extra.insert("description".into(), Value::String(format!("output {name} of hook-test --check")));
    OutputDecl { name: name.into(), error_output, extra }
}

/// `options` with the keys of `value` (a JSON object), as a template's deployment sets them.
fn options(value: Value) -> Options {
    serde_json::from_value(value).unwrap_or_default()
}

const fn ok(outputs: &'static [&'static str]) -> Expect {
    Expect { status_code: 0, outputs, timed_out: false }
}

fn specs() -> Vec<Spec> {
    let mut specs = vec![
        Spec {
            name: "create",
            about: "deploy_action CREATE, options null, one String input, one declared output",
            action: "CREATE",
            options: Options::default(),
            inputs: vec![input("greeting", "String", Some(json!("hello")))],
            outputs: vec![output("result", false)],
            script: "#!/bin/sh\necho \"deploy_action=$deploy_action greeting=$greeting\"\n\
                     printf '%s' \"$greeting from $deploy_action\" > \"$heat_outputs_path.result\"\n",
            expect: ok(&["result"]),
        },
        Spec {
            name: "input-types",
            about: "inputs of every Heat type (String, Number, Boolean, Json, CommaDelimitedList), one without value, unicode",
            action: "CREATE",
            options: Options::default(),
            inputs: typed_inputs(),
            outputs: vec![output("result", false)],
            script: "#!/bin/sh\nfor name in a_string a_number a_float a_boolean a_json a_list no_value unicode; do\n\
                     \x20 eval \"value=\\${$name-(unset)}\"\n  printf '%s=%s\\n' \"$name\" \"$value\"\ndone\n\
                     printf '%s|%s|%s' \"$a_number\" \"$a_boolean\" \"$unicode\" > \"$heat_outputs_path.result\"\n",
            expect: ok(&["result"]),
        },
        Spec {
            name: "outputs",
            about: "two declared outputs written, an error_output declared but absent (success)",
            action: "CREATE",
            options: Options::default(),
            inputs: Vec::new(),
            outputs: vec![output("first", false), output("second", false), output("failure", true)],
            script: "#!/bin/sh\nprintf 'first value' > \"$heat_outputs_path.first\"\n\
                     printf 'line one\\nline two\\n' > \"$heat_outputs_path.second\"\necho wrote first and second\n",
            expect: ok(&["first", "second"]),
        },
        Spec {
            name: "error-output",
            about: "an error_output output written with exit status 0: Heat marks it FAILED",
            action: "CREATE",
            options: Options::default(),
            inputs: Vec::new(),
            outputs: vec![output("result", false), output("failure", true)],
            script: "#!/bin/sh\necho reporting a failure through an error output\n\
                     printf 'disk full' > \"$heat_outputs_path.failure\"\n",
            expect: ok(&["failure"]),
        },
    ];
    specs.extend(failing_specs());
    specs.extend(action_specs());
    specs
}

fn typed_inputs() -> Vec<Input> {
    vec![
        input("a_string", "String", Some(json!("two words"))),
        input("a_number", "Number", Some(json!(42))),
        input("a_float", "Number", Some(json!(1.5))),
        input("a_boolean", "Boolean", Some(json!(true))),
        input("a_json", "Json", Some(json!({"key": "value", "list": [1, 2]}))),
        input("a_list", "CommaDelimitedList", Some(json!(["a", "b", "c"]))),
        input("no_value", "String", None),
        input("unicode", "String", Some(json!("h\u{e9}llo \u{2603} \u{65e5}\u{672c}"))),
    ]
}

fn failing_specs() -> Vec<Spec> {
    vec![
        Spec {
            name: "failure",
            about: "the config fails (exit status 3, text on stderr)",
            action: "CREATE",
            options: Options::default(),
            inputs: Vec::new(),
            outputs: vec![output("result", false)],
            script: "#!/bin/sh\necho about to fail\necho something went wrong >&2\nexit 3\n",
            expect: Expect { status_code: 3, outputs: &[], timed_out: false },
        },
        Spec {
            name: "plain-stdout",
            about: "the config prints text that is not JSON on stdout and stderr",
            action: "CREATE",
            options: Options::default(),
            inputs: Vec::new(),
            outputs: vec![output("result", false)],
            script: "#!/bin/sh\necho 'this is not JSON {'\necho 'stderr is free text too' >&2\n\
                     printf ok > \"$heat_outputs_path.result\"\n",
            expect: ok(&["result"]),
        },
        Spec {
            name: "timeout",
            about: "options.timeout 2: the config overruns its deadline and is killed",
            action: "CREATE",
            options: options(json!({"timeout": SHORT_TIMEOUT_SECS})),
            inputs: Vec::new(),
            outputs: vec![output("result", false)],
            script: "#!/bin/sh\necho sleeping past the deadline\nsleep 30\necho never printed\n",
            expect: Expect { status_code: 124, outputs: &[], timed_out: true },
        },
    ]
}

/// The later actions of a deployment's life (the config sees them in `deploy_action`).
fn action_specs() -> Vec<Spec> {
    let script =
        "#!/bin/sh\necho \"action $deploy_action\"\nprintf '%s' \"$deploy_action\" > \"$heat_outputs_path.result\"\n";
    vec![
        Spec {
            name: "update",
            about: "deploy_action UPDATE, options set (a key the hook does not know)",
            action: "UPDATE",
            options: options(json!({"purpose": "set by hook-test --check"})),
            inputs: vec![input("greeting", "String", Some(json!("hello again")))],
            outputs: vec![output("result", false)],
            script,
            expect: ok(&["result"]),
        },
        Spec {
            name: "delete",
            about: "deploy_action DELETE, options null",
            action: "DELETE",
            options: Options::default(),
            inputs: Vec::new(),
            outputs: vec![output("result", false)],
            script,
            expect: ok(&["result"]),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use anneal_protocol::deployment::is_safe_id;

    #[test]
    fn names_and_ids_are_unique_and_safe() {
        let all = cases("script");
        let mut names: Vec<&str> = all.iter().map(|case| case.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert!(all.iter().all(|case| is_safe_id(&case.deployment.id)));
    }

    #[test]
    fn every_heat_input_type_and_action_is_exercised() {
        let all = cases("puppet");
        let types: Vec<&str> =
            all.iter().flat_map(|case| case.deployment.inputs.iter().map(Input::input_type)).collect();
        for kind in ["String", "Number", "Boolean", "Json", "CommaDelimitedList"] {
            assert!(types.contains(&kind), "{kind}");
        }
        let actions: Vec<&str> = all.iter().filter_map(|case| case.deployment.input_str("deploy_action")).collect();
        for action in ["CREATE", "UPDATE", "DELETE"] {
            assert!(actions.contains(&action), "{action}");
        }
        assert!(all.iter().any(|case| case.deployment.inputs.iter().any(|input| input.value.is_none())));
        assert!(all.iter().any(|case| case.deployment.outputs.iter().any(|output| output.error_output)));
        assert!(all.iter().any(|case| case.deployment.options.timeout == Some(SHORT_TIMEOUT_SECS)));
    }

    #[test]
    fn configs_follow_the_group() {
        assert!(cases("script").iter().all(|case| case.expect.is_some()
            && case.deployment.config.as_str().is_some_and(|text| text.starts_with("#!/bin/sh\n"))));
        assert!(cases("my-tool").iter().all(|case| case.expect.is_none() && case.deployment.config == json!("")));
        assert!(cases("json-file").iter().all(|case| case.deployment.config == json!({})));
        let component = cases("component");
        let resolved = component[0].deployment.resolve_component().unwrap().unwrap();
        assert_eq!(resolved.group, "script");
        assert!(resolved.config.as_str().unwrap().starts_with("#!"));
        assert!(cases(UNGROUPED).iter().all(|case| case.expect.is_some()));
    }

    #[test]
    fn a_deployment_serialises_with_heats_keys() {
        let case = &cases("script")[0];
        let document = serde_json::to_value(&case.deployment).unwrap();
        assert_eq!(document["inputs"][1]["name"], "deploy_action");
        assert_eq!(document["inputs"][1]["type"], "String");
        assert_eq!(document["outputs"][0]["error_output"], false);
        assert_eq!(document["options"], json!({}));
    }
}
