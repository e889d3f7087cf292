//! Heat-shaped metadata for standalone agents: deployment entries as Heat's
//! `format_software_config` writes them, signalling over HTTP to a test receiver, and the journal
//! files an agent leaves in its state dir (and any JSON file: `read_json`), read the way a test
//! inspects them.

use std::path::Path;

use serde_json::{Value, json};

/// A `script` deployment `id` running `script` that POSTs its result to `signal_url`.
pub fn script_deployment(id: &str, script: &str, signal_url: &str) -> Value {
    deployment(id, "script", json!(script), signal_url)
}

/// A deployment `id` of hook group `group` (an empty config) that POSTs to `signal_url`.
pub fn hook_deployment(id: &str, group: &str, signal_url: &str) -> Value {
    deployment(id, group, json!(""), signal_url)
}

fn deployment(id: &str, group: &str, config: Value, signal_url: &str) -> Value {
    json!({
        "id": id,
        "name": id,
        "group": group,
        "creation_time": "2024-05-01T10:00:00Z",
        "config": config,
        "options": null,
        "inputs": [
            {"name": "deploy_action", "type": "String", "value": "CREATE"},
            {"name": "deploy_signal_transport", "type": "String", "value": "TEMP_URL_SIGNAL"},
            {"name": "deploy_signal_id", "type": "String", "value": signal_url},
            {"name": "deploy_signal_verb", "type": "String", "value": "POST"}
        ],
        "outputs": []
    })
}

/// A metadata document holding `deployments`.
pub fn document(deployments: &[Value]) -> Value {
    json!({"deployments": deployments})
}

/// Every `*.json` entry in `state_dir/journal`, parsed (panics on one that does not parse: a torn
/// or corrupt entry). Files whose names start with `.` (temp files) are not entries.
pub fn journal_entries(state_dir: &Path) -> Vec<Value> {
    let dir = state_dir.join("journal");
    let Ok(listing) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut entries = Vec::new();
    for item in listing.flatten() {
        let name = item.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let Ok(bytes) = std::fs::read(item.path()) else { continue };
        let entry: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|error| panic!("journal entry {} does not parse ({error})", item.path().display()));
        entries.push(entry);
    }
    entries
}

/// Whether a journal entry records a signal the receiver acknowledged with a 2xx.
pub fn delivered(entry: &Value) -> bool {
    entry["signal"]["delivered_at"].is_u64()
}

/// The JSON file at `path`; panics (naming the file) when it is unreadable or not JSON.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: not JSON ({error}): {text}", path.display()))
}
