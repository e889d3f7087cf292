//! The real-template corpus of tests/tests/heat_corpus.rs and heat_corpus_stacks.rs: where
//! tests/peers/corpus.sh unpacked it (git-ignored tests/peers/.cache/corpus) and the rule that
//! picks the templates to run, so that a new release of a package is picked the same way.
//!
//! The rule: a YAML file of one of the `SOURCES` that is a HOT template (a top-level
//! `heat_template_version`) and declares at least one resource of a `SOFTWARE_CONFIG_TYPES`
//! type. It is read as text, not parsed, so a template the shim cannot parse is still picked
//! (and reported as rejected).

#![allow(dead_code, reason = "shared by heat_corpus.rs and heat_corpus_stacks.rs, each uses part of it")]

use std::path::{Path, PathBuf};

/// The resource types that make a template part of the corpus: software configs, their
/// deployments, wait conditions and the server they bind to.
pub const SOFTWARE_CONFIG_TYPES: &[&str] = &[
    "OS::Heat::SoftwareConfig",
    "OS::Heat::SoftwareDeployment",
    "OS::Heat::SoftwareDeployments",
    "OS::Heat::StructuredConfig",
    "OS::Heat::StructuredDeployment",
    "OS::Heat::StructuredDeployments",
    "OS::Heat::SoftwareDeploymentGroup",
    "OS::Heat::SoftwareComponent",
    "OS::Heat::WaitCondition",
    "OS::Heat::WaitConditionHandle",
    "OS::Heat::CloudConfig",
    "OS::Heat::MultipartMime",
    "OS::Heat::DeployedServer",
];

/// One tree of the corpus: every `.yaml` file under `root` (relative to the corpus dir), minus
/// the subtrees in `excluded` and Jinja templates (`.j2.yaml`: TripleO renders them into HOT
/// with its own tool first; they are not Heat templates yet).
pub struct Source {
    pub root: &'static str,
    pub excluded: &'static [&'static str],
}

/// heat_integrationtests, Heat's unit tests (heat/tests) and heat-tempest-plugin's functional
/// tests hold their templates as Python strings (corpus.sh writes them out under embedded/); the
/// plugin's scenario templates are files. TripleO: the whole tree as its process-templates.py
/// renders it (the Jinja templates, such as extraconfig/all_nodes/swap.j2.yaml, become HOT
/// files), so that extraconfig/, puppet/extraconfig/, deployed-server/, ci/ and the top-level
/// config-download-*.yaml are all seen; tools/ is left out: its nic_config_convert_samples are
/// inputs of a conversion script's tests whose get_file paths point where the originals lived,
/// so Heat cannot load them either. The mitaka and newton trees are whole as released (no Jinja
/// yet in mitaka; newton's is rendered by tripleo-common at deploy time, so only its plain
/// templates are run).
pub const SOURCES: &[Source] = &[
    Source { root: "embedded/heat/heat_integrationtests", excluded: &[] },
    Source { root: "embedded/heat-unit-tests/heat/tests", excluded: &[] },
    Source { root: "embedded/heat-tempest-plugin/heat_tempest_plugin/tests", excluded: &[] },
    Source { root: "heat-tempest-plugin/heat_tempest_plugin/tests/scenario/templates", excluded: &[] },
    Source { root: "tripleo-heat-templates-rendered", excluded: &["tools", "releasenotes", "zuul.d"] },
    Source { root: "tripleo-heat-templates-mitaka", excluded: &["tools"] },
    Source { root: "tripleo-heat-templates-newton", excluded: &["tools", "releasenotes", "zuul.d"] },
];

/// The corpus dir, after checking that corpus.sh finished (its markers are there).
pub fn corpus_dir() -> PathBuf {
    let cache = anneal_tests::peers::cache(&[
        "corpus/heat",
        "corpus/heat-unit-tests",
        "corpus/heat-tempest-plugin",
        "corpus/tripleo-heat-templates",
        "corpus/tripleo-heat-templates-mitaka",
        "corpus/tripleo-heat-templates-newton",
    ]);
    let corpus = cache.join("corpus");
    let embedded = std::fs::read_dir(corpus.join("embedded"))
        .map(|entries| entries.flatten().any(|entry| entry.file_name().to_string_lossy().starts_with(".complete-")));
    assert!(
        embedded.unwrap_or(false),
        "{}/embedded is incomplete: run tests/peers/corpus.sh (tests/peers/setup.sh runs it)",
        corpus.display()
    );
    corpus
}

/// The templates the rule picks, as paths relative to `corpus`, sorted.
pub fn select(corpus: &Path) -> Vec<String> {
    let mut picked = Vec::new();
    for source in SOURCES {
        let root = corpus.join(source.root);
        let mut files = Vec::new();
        walk(&root, &mut files);
        for file in files {
            let relative = file.strip_prefix(&root).expect("under its root");
            if source.excluded.iter().any(|excluded| relative.starts_with(excluded)) {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if is_software_config_template(&text) {
                let path = file.strip_prefix(corpus).expect("under the corpus");
                picked.push(path.to_string_lossy().into_owned());
            }
        }
    }
    picked.sort();
    picked
}

fn walk(directory: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(directory) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            walk(&path, files);
        } else if name.ends_with(".yaml") && !name.ends_with(".j2.yaml") {
            files.push(path);
        }
    }
}

/// A top-level `heat_template_version` line and a `type: <software config type>` line.
pub fn is_software_config_template(text: &str) -> bool {
    let text = text.trim_start_matches('\u{feff}');
    let is_hot = text.lines().any(|line| line.starts_with("heat_template_version:"));
    let declares = text.lines().filter_map(|line| line.trim().strip_prefix("type:")).any(|kind| {
        let kind = kind.split('#').next().unwrap_or_default().trim().trim_matches(|c| c == '"' || c == '\'');
        SOFTWARE_CONFIG_TYPES.contains(&kind)
    });
    is_hot && declares
}

/// The fixtures of ours the corpus tests use (environments, expectations).
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/corpus")
}
