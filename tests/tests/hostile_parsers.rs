//! The hostile corpus in process, where that is cheaper than a process per case: the template
//! parser and validator over every template case, the agent's config loader over every config
//! case, and the deployment reader over every metadata case, each expecting the manifest's
//! error. Also the corpus's own bookkeeping (every file has a manifest entry and the other way
//! round), and the replay of the fuzz corpora through the fuzz targets' own checks
//! (`fuzz/src/lib.rs`, included here so that stable CI runs exactly what the fuzzer ran). And
//! the YAML reader against Heat's own template loader (`yaml_differential`): duplicate keys,
//! merge keys and libyaml's leniency on quoted scalars.

mod hostile_support;
mod yaml_differential;

#[path = "../../fuzz/src/lib.rs"]
mod fuzz_checks;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anneal_protocol::deployment::deployments_from_document;
use anneal_shim::template::{Environment, expand_nested, parse_template, resolve_parameters, validate};
use hostile_support::{Case, cases, corpus_dir, load, manifest};
use serde_json::Value;

/// The issue asks for at least this many committed cases.
const MINIMUM_CASES: usize = 200;

#[test]
fn every_corpus_file_has_a_manifest_entry_and_the_corpus_is_large_enough() {
    let listed: BTreeSet<String> = manifest().keys().cloned().collect();
    let mut found = BTreeSet::new();
    for target in std::fs::read_dir(corpus_dir()).expect("corpus dir") {
        let target = target.expect("corpus entry").path();
        if !target.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&target).expect("target dir") {
            let file = file.expect("case file").path();
            let relative = file.strip_prefix(corpus_dir()).expect("inside the corpus");
            found.insert(relative.display().to_string());
        }
    }
    let unlisted: Vec<&String> = found.difference(&listed).collect();
    let missing: Vec<&String> = listed.difference(&found).collect();
    assert!(unlisted.is_empty(), "case files without a manifest entry: {unlisted:?}");
    assert!(missing.is_empty(), "manifest entries without a file: {missing:?}");
    assert!(found.len() >= MINIMUM_CASES, "only {} hostile cases", found.len());
}

#[test]
fn every_template_case_is_refused_by_the_parser_or_validator_with_its_error() {
    let mut problems = Vec::new();
    for case in cases("template") {
        let given: BTreeMap<String, String> = case
            .expect
            .get("parameters")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(name, value)| (name.clone(), value.as_str().unwrap_or_default().to_string()))
            .collect();
        let outcome = template_problems(&case.text(), &given);
        match outcome {
            Ok(()) => problems.push(format!("{}: accepted", case.name)),
            Err(found) if !found.iter().any(|problem| problem.contains(case.error())) => {
                problems.push(format!("{}: {found:?} does not mention {:?}", case.name, case.error()));
            }
            Err(_) => {}
        }
    }
    assert!(problems.is_empty(), "template cases:\n{}", problems.join("\n"));
}

/// What `stack create` runs before it touches the store, with `vm1` the only registered server.
fn template_problems(text: &str, given: &BTreeMap<String, String>) -> Result<(), Vec<String>> {
    let template = parse_template(text).map_err(|error| error.problems())?;
    let parameters = resolve_parameters(&template, given)?;
    // Nested stacks and groups are expanded first, as the engine does (no files: a case that
    // needs one is refused for its absence).
    let flat = expand_nested(&template, &Environment::default(), &serde_json::Map::new(), &parameters)?;
    validate(flat.as_ref().unwrap_or(&template), &parameters, &|name| name == "vm1").map(|_| ())
}

/// Writes a config case to `dir` as the agent test does and loads it with `config::load`.
fn load_config_case(dir: &Path, case: &Case) -> Result<(), String> {
    let path: PathBuf = dir.join("agent.toml");
    let bytes = if case.name.ends_with(".bin") {
        case.bytes.clone()
    } else {
        case.text().replace("{state_dir}", &dir.join("state").display().to_string()).into_bytes()
    };
    std::fs::write(&path, bytes).expect("write config");
    let mode = u32::from_str_radix(case.field("mode"), 8).unwrap_or(0o600);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    anneal_agent::config::load(&path).map(|_| ()).map_err(|error| anneal_agent::error_chain(&error))
}

#[test]
fn every_invalid_agent_config_case_is_refused_by_the_loader_with_its_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut problems = Vec::new();
    // Cases with another exit code are valid configs that fail later (when used).
    for case in cases("agent_config").iter().filter(|case| case.expect.get("exit").is_none()) {
        match load_config_case(dir.path(), case) {
            Ok(()) => problems.push(format!("{}: accepted", case.name)),
            Err(error) if !error.contains(case.error()) => {
                problems.push(format!("{}: {error:.300} does not mention {:?}", case.name, case.error()));
            }
            Err(_) => {}
        }
    }
    assert!(problems.is_empty(), "config cases:\n{}", problems.join("\n"));
}

#[test]
fn every_metadata_case_is_rejected_whole_or_entry_by_entry() {
    let mut problems = Vec::new();
    for case in cases("metadata") {
        let document = serde_json::from_slice::<Value>(&case.bytes).ok().filter(Value::is_object);
        match (case.field("expect"), document) {
            ("document", None) => {}
            // Only the sources enforce the size limit; the document itself is well-formed.
            ("document", Some(_)) if case.error().contains("larger than the limit") => {}
            ("entry", Some(document)) => {
                let (accepted, rejected) = deployments_from_document(&document);
                if !accepted.is_empty() || !rejected.iter().any(|rejection| rejection.reason.contains(case.error())) {
                    let reasons: Vec<&str> =
                        rejected.iter().take(3).map(|rejection| rejection.reason.as_str()).collect();
                    problems.push(format!("{}: accepted {}, rejected {reasons:?}", case.name, accepted.len()));
                }
            }
            (expect, document) => {
                problems.push(format!("{}: expected {expect}, parsed: {}", case.name, document.is_some()))
            }
        }
    }
    assert!(problems.is_empty(), "metadata cases:\n{}", problems.join("\n"));
}

/// A fuzz target: its name, its check, and the hostile directories whose cases it also takes.
type Target = (&'static str, fn(&[u8]), &'static [&'static str]);

const TARGETS: [Target; 8] = [
    ("deployments", fuzz_checks::deployments, &["metadata"]),
    ("template", fuzz_checks::template, &["template"]),
    ("environment", fuzz_checks::environment, &["template"]),
    ("nested", fuzz_checks::nested, &["template"]),
    ("signal_body", fuzz_checks::signal_body, &["api_body", "signal_result"]),
    ("agent_config", fuzz_checks::agent_config, &["agent_config"]),
    ("signal_engine", fuzz_checks::signal_engine, &["api_body"]),
    ("self_config", fuzz_checks::self_config, &["metadata"]),
];

/// Every file of the fuzz corpora and crash dirs (`fuzz/corpus/<target>`, `fuzz/artifacts/<target>`,
/// both present when the fuzzer ran here; the committed seeds otherwise) and every hostile case
/// of the matching kind, through the fuzz target's checks: none may panic.
#[test]
fn fuzz_corpora_and_hostile_cases_replay_through_the_fuzz_checks() {
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut replayed = 0;
    for (target, check, hostile_dirs) in TARGETS {
        for dir in [fuzz_dir.join("corpus").join(target), fuzz_dir.join("artifacts").join(target)] {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries {
                let path = entry.expect("corpus entry").path();
                if path.is_file() {
                    check(&std::fs::read(&path).expect("corpus file"));
                    replayed += 1;
                }
            }
        }
        for hostile in hostile_dirs {
            for case in cases(hostile) {
                check(&load(&corpus_dir().join(&case.name)));
                replayed += 1;
            }
        }
    }
    assert!(replayed >= MINIMUM_CASES, "only {replayed} inputs replayed");
}
