//! The evaluation budget and `max_resources_per_stack` (docs/templates.md "Limits"): the sum of
//! many results each under the per-result cap, copies made without any function, the nested
//! stacks' definitions and the outputs are all charged to one budget; every resource (the
//! template's own, nested, group members) is counted against the resource limit.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::template::evaluate::MAX_RESULT_BYTES;
use crate::template::{
    Budget, CheckRequest, Checked, EVALUATION_BUDGET, Environment, EvalError, Expr, MaxResources, ParameterScope,
    Servers, Template, check_template, over_budget_message, value_bytes,
};

/// `template validate`'s check of `text` (no registry) within `max_resources` and `budget`.
fn check(
    text: &str,
    given: &[(&str, &str)],
    max_resources: MaxResources,
    budget: usize,
) -> Result<Checked, Vec<String>> {
    let given: BTreeMap<String, String> =
        given.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
    let texts = |_: &Template| given.clone();
    check_template(CheckRequest {
        text,
        environment: &Environment::default(),
        environment_problems: Vec::new(),
        files: &Map::new(),
        texts: &texts,
        pseudo: &[("OS::stack_name", json!("s")), ("OS::stack_id", json!("sid"))],
        servers: Servers::Offline,
        max_resources,
        evaluation_budget: budget,
    })
}

fn refused(text: &str, given: &[(&str, &str)], max_resources: MaxResources, budget: usize) -> Vec<String> {
    match check(text, given, max_resources, budget) {
        Ok(checked) => panic!("should be refused: {:?}", checked.plan),
        Err(problems) => problems,
    }
}

#[test]
fn the_sum_of_results_under_the_cap_is_refused_past_the_budget() {
    let parameters = BTreeMap::from([("p".to_owned(), json!("x".repeat(100)))]);
    // Twenty results of 400 bytes, each far under the 16 MiB cap: 8,000 bytes in all.
    let expr = Expr::from_json(&json!(vec![
        json!({"str_replace": {"template": "$p$p$p$p", "params": {"$p": {"get_param": "p"}}}});
        20
    ]))
    .expect("an expression");
    const { assert!(400 < MAX_RESULT_BYTES) };
    let capped_only = expr.evaluate(&ParameterScope::new(&parameters)).expect("each result is under the cap");
    assert!(value_bytes(&capped_only) > 8_000);
    let budget = Budget::new(4_000);
    let scope = ParameterScope { parameters: &parameters, budget: Some(&budget) };
    assert_eq!(expr.evaluate(&scope), Err(EvalError::OverBudget { limit: 4_000 }));
    // Charged as produced: what was spent never passes the limit, nothing is built after it.
    assert!(budget.used() <= 4_000 && budget.used() > 3_000, "{}", budget.used());
    assert_eq!(EvalError::OverBudget { limit: 4_000 }.to_string(), over_budget_message(4_000));
    assert!(over_budget_message(64 << 20).contains("67108864 bytes (64 MiB)"));
}

#[test]
fn copies_of_a_parameter_count_without_any_function() {
    let parameters = BTreeMap::from([("p".to_owned(), json!("y".repeat(1_000)))]);
    let expr = Expr::from_json(&json!(vec![json!({"get_param": "p"}); 50])).expect("an expression");
    let budget = Budget::new(20_000);
    let scope = ParameterScope { parameters: &parameters, budget: Some(&budget) };
    assert_eq!(expr.evaluate(&scope), Err(EvalError::OverBudget { limit: 20_000 }));
    let budget = Budget::new(60_000);
    let scope = ParameterScope { parameters: &parameters, budget: Some(&budget) };
    assert!(expr.evaluate(&scope).is_ok());
    assert!(budget.used() > 50_000, "every copy is charged: {}", budget.used());
}

/// Resources and outputs each producing `bytes` from a parameter (the reviewer's shape, small).
fn values_and_outputs(resources: usize, outputs: usize) -> String {
    let value = "{str_replace: {template: \"$p$p$p$p\", params: {\"$p\": {get_param: big}}}}";
    let mut text = String::from("heat_template_version: 2018-08-31\nparameters:\n  big: {type: string}\nresources:\n");
    for index in 0..resources {
        text.push_str(&format!("  v{index}:\n    type: OS::Heat::Value\n    properties: {{value: {value}}}\n"));
    }
    text.push_str("outputs:\n");
    for index in 0..outputs {
        text.push_str(&format!("  o{index}: {{value: {value}}}\n"));
    }
    text
}

#[test]
fn resources_and_outputs_share_the_checks_budget() {
    let big = "z".repeat(1_000);
    let given = [("big", big.as_str())];
    // Each resource or output makes 4,000 bytes (and copies 1,000): 20,000 allow three of them,
    // whatever they are, not six.
    assert!(check(&values_and_outputs(2, 1), &given, MaxResources::default(), 20_000).is_ok());
    for (resources, outputs) in [(6, 0), (0, 6), (3, 3)] {
        let problems = refused(&values_and_outputs(resources, outputs), &given, MaxResources::default(), 20_000);
        let over: Vec<&String> =
            problems.iter().filter(|problem| problem.contains("over the evaluation budget")).collect();
        assert_eq!(over.len(), 1, "the budget is reported once: {problems:?}");
        assert!(over[0].contains("more than 20000 bytes"), "{problems:?}");
    }
    let problems = refused(&values_and_outputs(0, 6), &given, MaxResources::default(), 20_000);
    assert!(problems[0].starts_with("output o"), "the output is named: {problems:?}");
}

#[test]
fn nested_copies_are_charged_to_the_same_budget() {
    let group = |count: usize| {
        format!(
            "heat_template_version: 2018-08-31\nresources:\n  g:\n    type: OS::Heat::ResourceGroup\n    properties:\n      \
             count: {count}\n      resource_def: {{type: OS::Heat::Value, properties: {{value: \"{}\"}}}}\n",
            "w".repeat(1_000)
        )
    };
    let checked = check(&group(5), &[], MaxResources::default(), 100_000).expect("five copies fit");
    assert!(checked.expansion_bytes > 5_000, "the copies were charged: {}", checked.expansion_bytes);
    assert_eq!(checked.resources, 6, "the group and its members");
    let problems = refused(&group(200), &[], MaxResources::default(), 100_000);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("the nested stacks' definitions are over the evaluation budget"), "{problems:?}");
    assert!(check(&group(200), &[], MaxResources::default(), EVALUATION_BUDGET).is_ok());
}

fn flat(resources: usize) -> String {
    let mut text = String::from("heat_template_version: 2018-08-31\nresources:\n");
    for index in 0..resources {
        text.push_str(&format!("  r{index}: {{type: OS::Heat::None}}\n"));
    }
    text
}

#[test]
fn every_resource_of_a_flat_template_counts_against_max_resources_per_stack() {
    let problems = refused(&flat(1_001), &[], MaxResources::default(), EVALUATION_BUDGET);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("Request limit exceeded: Maximum resources per stack exceeded."), "{problems:?}");
    assert!(problems[0].contains("1001 resources") && problems[0].contains("the limit is 1000"), "{problems:?}");
    assert!(problems[0].contains("--max-resources-per-stack"), "the option is named: {problems:?}");
    assert!(check(&flat(1_000), &[], MaxResources::default(), EVALUATION_BUDGET).is_ok());
    assert!(check(&flat(1_001), &[], MaxResources(Some(1_001)), EVALUATION_BUDGET).is_ok());
    assert!(check(&flat(1_001), &[], MaxResources::from_option(-1).expect("-1"), EVALUATION_BUDGET).is_ok());
    assert!(MaxResources::from_option(-2).is_err());
    assert_eq!("-1".parse::<MaxResources>(), Ok(MaxResources(None)), "the command line's form");
    assert_eq!(" 20000 ".parse::<MaxResources>(), Ok(MaxResources(Some(20_000))));
    assert!("lots".parse::<MaxResources>().is_err());
}

#[test]
fn deployment_group_members_known_from_parameters_count_as_heats_nested_stack() {
    let group = |servers: &str| {
        format!(
            "heat_template_version: 2018-08-31\nresources:\n  config: {{type: OS::Heat::SoftwareConfig, properties: \
             {{group: script, config: x}}}}\n  group:\n    type: OS::Heat::SoftwareDeploymentGroup\n    properties: \
             {{config: {{get_resource: config}}, servers: {servers}}}\n"
        )
    };
    let three = group("{a: s1, b: s2, c: s3}");
    let checked = check(&three, &[], MaxResources(Some(5)), EVALUATION_BUDGET).expect("2 resources and 3 members");
    assert_eq!(checked.resources, 2, "members are counted again when the group expands, not stored here");
    let problems = refused(&three, &[], MaxResources(Some(4)), EVALUATION_BUDGET);
    assert!(problems.iter().any(|problem| problem.contains("The stack would have 5 resources")), "{problems:?}");
}

#[test]
fn value_bytes_is_the_json_text_plus_a_cost_per_item() {
    assert_eq!(value_bytes(&json!("abc")), 5);
    assert_eq!(value_bytes(&json!(12345)), 5);
    assert_eq!(value_bytes(&Value::Null), 4);
    assert!(value_bytes(&json!(["a", "b"])) > json!(["a", "b"]).to_string().len() + 16);
}
