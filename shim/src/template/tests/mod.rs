//! Unit tests of the template module, one file per concern.

mod budget;
mod cfn;
mod conditions;
mod environment;
mod evaluate;
mod expr;
mod functions;
mod graph;
mod nested;
mod one_pass;
mod parameters;
mod parse;
mod resource_types;
mod structured;
mod validate;
mod yaml;
mod yaql;

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Template, parse_template};

/// Parses a template that the test expects to be valid.
fn template(text: &str) -> Template {
    match parse_template(text) {
        Ok(template) => template,
        Err(error) => panic!("template should parse: {error}"),
    }
}

/// The problems of a template expected to be rejected by `parse_template`.
fn parse_problems(text: &str) -> Vec<String> {
    match parse_template(text) {
        Ok(_) => panic!("template should be rejected"),
        Err(error) => error.problems(),
    }
}

fn values(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs.iter().map(|(name, value)| ((*name).to_owned(), value.clone())).collect()
}

fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect()
}

/// Asserts that some problem contains `needle`, showing all problems otherwise.
fn assert_problem(problems: &[String], needle: &str) {
    assert!(problems.iter().any(|problem| problem.contains(needle)), "no problem contains {needle:?}: {problems:#?}");
}
