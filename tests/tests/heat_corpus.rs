//! Real Heat templates through `anneal-shim template validate`: every template the corpus rule
//! picks (tests/tests/corpus_support: software-config templates of openstack-heat's
//! heat_integrationtests and unit tests, heat-tempest-plugin and tripleo-heat-templates 18.0.0,
//! 5.3.13 (newton) and 2.2.0 (mitaka), fetched from PyPI by tests/peers/corpus.sh) is validated
//! first unchanged, then with our environment files (tests/fixtures/corpus/*.yaml: the one-line
//! fixes the shim's refusals name; for mitaka's and newton's templates after the release's own
//! resource registry, as TripleO deploys them), and classified as accepted unchanged, accepted with our
//! environment, or rejected with its first problem.
//!
//! The outcomes are compared with tests/fixtures/corpus/expected.txt; any difference fails the
//! test, which prints the whole table, the counts and the rejection reasons grouped. When the
//! shim learns something new the expectations are rewritten with
//! `ANNEAL_CORPUS_UPDATE=1 cargo nextest run -p anneal-tests --test heat_corpus --no-capture`,
//! which prints the lines that changed.

mod corpus_support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anneal_tests::shim_binary;
use corpus_support::{corpus_dir, fixtures_dir, select};

const EXPECTED_FILE: &str = "expected.txt";
const UPDATE_VARIABLE: &str = "ANNEAL_CORPUS_UPDATE";

/// What the shim made of one template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Unchanged,
    WithEnvironment,
    /// The first problem of the run with our environments.
    Rejected(String),
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Unchanged => "unchanged",
            Outcome::WithEnvironment => "environment",
            Outcome::Rejected(_) => "rejected",
        }
    }

    /// Whether `self` (what the shim did) is what the expectation line says.
    fn matches(&self, expected: &Expected) -> bool {
        match (self, expected) {
            (Outcome::Rejected(reason), Expected::Rejected(substring)) => reason.contains(substring.as_str()),
            (actual, expected) => actual.label() == expected.label(),
        }
    }
}

/// One line of expected.txt: `PATH | unchanged`, `PATH | environment` or
/// `PATH | rejected | SUBSTRING OF THE FIRST PROBLEM`.
#[derive(Debug)]
enum Expected {
    Unchanged,
    WithEnvironment,
    Rejected(String),
}

impl Expected {
    fn label(&self) -> &'static str {
        match self {
            Expected::Unchanged => "unchanged",
            Expected::WithEnvironment => "environment",
            Expected::Rejected(_) => "rejected",
        }
    }
}

/// The resource registry a TripleO release deploys its templates with: TripleO's
/// `OS::TripleO::*` types mapped to the tree's own templates. Mitaka ships it as a plain file;
/// newton's is Jinja, rendered by tests/peers/corpus.sh as tripleo-common renders it.
const TRIPLEO_REGISTRIES: &[(&str, &str)] = &[
    ("tripleo-heat-templates-mitaka/", "tripleo-heat-templates-mitaka/overcloud-resource-registry-puppet.yaml"),
    ("tripleo-heat-templates-newton/", "tripleo-heat-templates-newton/overcloud-resource-registry-puppet.yaml"),
];

/// Our environments for a template: the release's own registry for TripleO's (as TripleO
/// deploys them), then the infrastructure mapping for all, TripleO's stubs for TripleO's
/// templates, the agent-install stub for heat-tempest-plugin's.
fn environments(corpus: &Path, template: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for (tree, registry) in TRIPLEO_REGISTRIES {
        if template.starts_with(tree) {
            paths.push(corpus.join(registry));
        }
    }
    let mut files = vec!["infrastructure.yaml"];
    if template.starts_with("tripleo-heat-templates") {
        files.push("tripleo.yaml");
    }
    if template.contains("heat-tempest-plugin/") {
        files.push("tempest.yaml");
    }
    paths.extend(files.into_iter().map(|file| fixtures_dir().join(file)));
    paths.into_iter().map(|path| path.to_string_lossy().into_owned()).collect()
}

/// `template validate --template FILE [-e ENV]...`: `None` when accepted, else the first
/// problem (the cache dir's path replaced by `<corpus>` so that it reads the same anywhere).
fn validate(corpus: &Path, template: &str, environments: &[String]) -> Option<String> {
    let path = corpus.join(template);
    let mut command = Command::new(shim_binary());
    command.args(["template", "validate", "--template"]).arg(&path);
    for environment in environments {
        command.args(["-e", environment]);
    }
    let output = command.output().expect("run anneal-shim template validate");
    if output.status.success() {
        return None;
    }
    let stderr = String::from_utf8_lossy(&output.stderr).replace(&corpus.to_string_lossy().into_owned(), "<corpus>");
    // A list of problems follows an "is not valid" line; other failures are one line.
    let first = stderr
        .lines()
        .find_map(|line| line.strip_prefix("  - "))
        .or_else(|| stderr.lines().next())
        .unwrap_or("no message");
    Some(first.trim().to_owned())
}

fn classify(corpus: &Path, template: &str) -> Outcome {
    if validate(corpus, template, &[]).is_none() {
        return Outcome::Unchanged;
    }
    match validate(corpus, template, &environments(corpus, template)) {
        None => Outcome::WithEnvironment,
        Some(reason) => Outcome::Rejected(reason),
    }
}

/// `classify` for every template, on as many threads as the machine has cores (each is one or
/// two `anneal-shim` processes; a few hundred templates).
fn classify_all(corpus: &Path, templates: &[String]) -> BTreeMap<String, Outcome> {
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let chunk = templates.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = templates
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter().map(|template| (template.clone(), classify(corpus, template))).collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|worker| worker.join().expect("a classifying thread")).collect()
    })
}

fn read_expected(path: &Path) -> BTreeMap<String, Expected> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut expected = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.splitn(3, " | ").collect();
        let outcome = match fields.as_slice() {
            [_, "unchanged"] => Expected::Unchanged,
            [_, "environment"] => Expected::WithEnvironment,
            [_, "rejected", reason] => Expected::Rejected((*reason).to_owned()),
            _ => panic!("{}:{}: not `PATH | OUTCOME [| REASON]`: {line}", path.display(), number + 1),
        };
        expected.insert(fields[0].to_owned(), outcome);
    }
    expected
}

fn expected_text(outcomes: &BTreeMap<String, Outcome>) -> String {
    let mut text = String::from(
        "# What `anneal-shim template validate` makes of each template of the real-template corpus\n\
         # (tests/tests/heat_corpus.rs): PATH (under tests/peers/.cache/corpus) | unchanged |\n\
         # environment (accepted with tests/fixtures/corpus/*.yaml, after the release's own resource\n\
         # registry for TripleO mitaka's and newton's) | rejected | a substring of the first problem.\n\
         # Regenerate: ANNEAL_CORPUS_UPDATE=1 cargo nextest run -p anneal-tests --test heat_corpus --no-capture\n",
    );
    for (template, outcome) in outcomes {
        match outcome {
            Outcome::Rejected(reason) => writeln!(text, "{template} | rejected | {reason}"),
            other => writeln!(text, "{template} | {}", other.label()),
        }
        .expect("write to a string");
    }
    text
}

/// The table, the counts and the rejection reasons grouped (the resource name and line taken
/// out, so that one missing feature is one group).
fn report(outcomes: &BTreeMap<String, Outcome>) -> String {
    let mut text = String::from("template | outcome | first problem\n");
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (template, outcome) in outcomes {
        *counts.entry(outcome.label()).or_default() += 1;
        let reason = match outcome {
            Outcome::Rejected(reason) => reason.as_str(),
            _ => "",
        };
        writeln!(text, "{template} | {} | {reason}", outcome.label()).expect("write to a string");
        if !reason.is_empty() {
            *reasons.entry(reason_group(reason)).or_default() += 1;
        }
    }
    let count = |label| counts.get(label).copied().unwrap_or(0);
    writeln!(
        text,
        "\n{} templates: {} accepted unchanged, {} accepted with our environment, {} rejected",
        outcomes.len(),
        count("unchanged"),
        count("environment"),
        count("rejected")
    )
    .expect("write to a string");
    for (reason, count) in reasons {
        writeln!(text, "  {count} rejected: {reason}").expect("write to a string");
    }
    text
}

fn reason_group(reason: &str) -> String {
    let reason = match reason.strip_prefix("resource ") {
        Some(rest) => rest.split_once(": ").map_or(rest, |(_, message)| message),
        None => reason,
    };
    let reason = match reason.rfind(" (line ") {
        Some(position) if reason.ends_with(')') => &reason[..position],
        _ => reason,
    };
    reason.to_owned()
}

/// Lines only in `old` (`-`) and only in `new` (`+`).
fn line_diff(old: &str, new: &str) -> String {
    let removed = old.lines().filter(|line| !new.lines().any(|other| other == *line)).map(|line| format!("- {line}"));
    let added = new.lines().filter(|line| !old.lines().any(|other| other == *line)).map(|line| format!("+ {line}"));
    removed.chain(added).collect::<Vec<_>>().join("\n")
}

#[test]
fn real_templates_are_accepted_unchanged_or_with_our_environment_or_rejected_as_expected() {
    let corpus = corpus_dir();
    let templates = select(&corpus);
    assert!(templates.len() >= 20, "the corpus rule picks the software-config templates: {templates:?}");
    let outcomes = classify_all(&corpus, &templates);
    let table = report(&outcomes);
    println!("{table}");
    let expected_path = fixtures_dir().join(EXPECTED_FILE);
    if std::env::var_os(UPDATE_VARIABLE).is_some_and(|value| value == "1") {
        let old = std::fs::read_to_string(&expected_path).unwrap_or_default();
        let new = expected_text(&outcomes);
        std::fs::write(&expected_path, &new).expect("rewrite the expectations");
        println!("{} rewritten:\n{}", expected_path.display(), line_diff(&old, &new));
        return;
    }
    let expected = read_expected(&expected_path);
    let mut differences = Vec::new();
    for (template, outcome) in &outcomes {
        match expected.get(template) {
            None => differences.push(format!("{template}: not in {EXPECTED_FILE} (now {outcome:?})")),
            Some(wanted) if !outcome.matches(wanted) => {
                differences.push(format!("{template}: expected {wanted:?}, now {outcome:?}"));
            }
            Some(_) => {}
        }
    }
    for template in expected.keys().filter(|template| !outcomes.contains_key(*template)) {
        differences.push(format!("{template}: in {EXPECTED_FILE} but no longer picked by the corpus rule"));
    }
    assert!(
        differences.is_empty(),
        "the corpus outcomes differ from {}:\n{}\n\n{table}\nIf the change is intended, regenerate with \
         {UPDATE_VARIABLE}=1 cargo nextest run -p anneal-tests --test heat_corpus --no-capture",
        expected_path.display(),
        differences.join("\n")
    );
}

#[test]
fn the_corpus_rule_picks_software_config_templates_only() {
    let picked = "heat_template_version: wallaby\nresources:\n  c:\n    type: \"OS::Heat::SoftwareConfig\"\n";
    assert!(corpus_support::is_software_config_template(picked));
    let environment = "resource_registry:\n  Heat::InstallConfigAgent: OS::Heat::SoftwareConfig\n";
    assert!(!corpus_support::is_software_config_template(environment), "an environment is not a template");
    let other = "heat_template_version: wallaby\nresources:\n  n:\n    type: OS::Heat::None\n";
    assert!(!corpus_support::is_software_config_template(other), "no software-config type");
    let nested = "heat_template_version: 2016-04-08\nresources:\n  d:\n    type: OS::Heat::SoftwareDeploymentGroupX\n";
    assert!(!corpus_support::is_software_config_template(nested), "a type is matched whole");
}

/// TripleO's extraconfig templates take the server and the timeouts as parameters without a
/// default; validate checks the rest of the template with a placeholder that a real value
/// could be (not an empty server name, not a zero timeout).
#[test]
fn validate_checks_a_template_whose_server_and_timeout_are_parameters_without_values() {
    let dir = tempfile::tempdir().expect("temp dir");
    let template = dir.path().join("per-server.yaml");
    let text = "heat_template_version: wallaby\nparameters:\n  server: {type: string}\n  timeout: {type: number}\n\
                resources:\n  config: {type: OS::Heat::SoftwareConfig, properties: {group: script, config: 'true'}}\n  \
                deployment:\n    type: OS::Heat::SoftwareDeployment\n    properties: {config: {get_resource: config}, \
                server: {get_param: server}}\n  handle: {type: OS::Heat::WaitConditionHandle}\n  wait:\n    \
                type: OS::Heat::WaitCondition\n    properties: {handle: {get_resource: handle}, timeout: {get_param: timeout}}\n";
    std::fs::write(&template, text).expect("write the template");
    let output = Command::new(shim_binary())
        .args(["template", "validate", "--template"])
        .arg(&template)
        .output()
        .expect("run anneal-shim template validate");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "accepted without values for server and timeout: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("server (string): (no value)"), "{stdout}");
}
