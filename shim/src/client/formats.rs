//! What `server add` prints for a new server: a complete anneal-agent config (`agent.toml`,
//! with the keys and defaults of packaging/agent.toml.example and one `http` source pointing at
//! the server's metadata URL), or `#cloud-config` user data that installs that config and the
//! token and starts the agent. With `--tls-ca`, the source gets `ca_file = AGENT_CA_PATH`: the
//! cloud-config writes the CA's PEM there, the TOML says to copy it there. Pure text generation:
//! strings are escaped for TOML and YAML so a URL or name can never break the file's syntax.

use std::fmt::Write as _;

use crate::model::ServerCredentials;

/// Where the agent reads its config by default.
pub const AGENT_CONFIG_PATH: &str = "/etc/anneal/agent.toml";
/// The `token_file` of the generated http source.
pub const AGENT_TOKEN_PATH: &str = crate::model::AGENT_TOKEN_PATH;
/// The `ca_file` of the generated http source when a CA is given (`--tls-ca`).
pub const AGENT_CA_PATH: &str = "/etc/anneal/ca.pem";
/// The agent's `[agent]` defaults, written out so the file documents itself.
const AGENT_STATE_DIR: &str = "/var/lib/anneal";
const AGENT_HOOKS_DIRS: [&str; 3] =
    ["/usr/libexec/anneal/hooks", "/usr/libexec/heat-config/hooks", "/var/lib/heat-config/hooks"];
const AGENT_SERVICE: &str = "anneal-agent.service";

/// The CA certificate (PEM) an agent must trust to reach an HTTPS shim with a private CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedCa {
    /// Where the operator has it (named in the TOML's note).
    pub path: String,
    pub pem: String,
}

/// The agent config for this server (no token inside: the agent reads it from `AGENT_TOKEN_PATH`).
pub fn agent_config(credentials: &ServerCredentials, ca: Option<&TrustedCa>) -> String {
    let hooks_dirs: Vec<String> = AGENT_HOOKS_DIRS.iter().map(|dir| toml_string(dir)).collect();
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# {AGENT_CONFIG_PATH}: anneal-agent configuration for server {}, written by `anneal-shim server add`.",
        comment_text(&credentials.name)
    );
    text.push_str("[agent]\n");
    let _ = writeln!(text, "state_dir = {}", toml_string(AGENT_STATE_DIR));
    let _ = writeln!(text, "hooks_dirs = [{}]", hooks_dirs.join(", "));
    text.push_str("poll_interval_secs = 30\nhook_timeout_secs = 3600\nparallel = 1\n\n");
    text.push_str("# Metadata from anneal-shim (long-poll).\n[[source]]\nkind = \"http\"\n");
    if credentials.metadata_urls.len() > 1 {
        // Replicas: the agent fails over between them, in this order.
        let urls: Vec<String> = credentials.metadata_urls.iter().map(|url| toml_string(url)).collect();
        let _ = writeln!(text, "url = [{}]", urls.join(", "));
    } else {
        let _ = writeln!(text, "url = {}", toml_string(&credentials.metadata_url));
    }
    let _ = writeln!(text, "token_file = {}", toml_string(AGENT_TOKEN_PATH));
    if ca.is_some() {
        let _ = writeln!(text, "ca_file = {}", toml_string(AGENT_CA_PATH));
    }
    text
}

/// `server add --format toml`: the config, then how to install the token (shown only this once).
pub fn agent_config_with_token_note(credentials: &ServerCredentials, ca: Option<&TrustedCa>) -> String {
    let mut text = agent_config(credentials, ca);
    let _ = writeln!(text, "\n# token: write {} to {AGENT_TOKEN_PATH} (mode 0600)", comment_text(&credentials.token));
    if let Some(ca) = ca {
        let _ = writeln!(text, "# ca: copy {} to {AGENT_CA_PATH} (mode 0644)", comment_text(&ca.path));
    }
    text
}

/// `server add --format cloud-init`: user data writing the config and the token (both 0600)
/// and enabling the agent's systemd unit.
pub fn cloud_init(credentials: &ServerCredentials, ca: Option<&TrustedCa>) -> String {
    let mut text = String::from("#cloud-config\n");
    let _ = writeln!(
        text,
        "# anneal-agent for server {}, written by `anneal-shim server add`.",
        comment_text(&credentials.name)
    );
    text.push_str("write_files:\n");
    let _ = writeln!(
        text,
        "  - path: {AGENT_CONFIG_PATH}\n    owner: root:root\n    permissions: \"0600\"\n    content: |"
    );
    for line in agent_config(credentials, ca).lines() {
        if line.is_empty() {
            text.push('\n');
        } else {
            let _ = writeln!(text, "      {line}");
        }
    }
    let _ = writeln!(text, "  - path: {AGENT_TOKEN_PATH}\n    owner: root:root\n    permissions: \"0600\"");
    let _ = writeln!(text, "    content: {}", yaml_string(&format!("{}\n", credentials.token)));
    if let Some(ca) = ca {
        let _ = writeln!(text, "  - path: {AGENT_CA_PATH}\n    owner: root:root\n    permissions: \"0644\"");
        let _ = writeln!(text, "    content: {}", yaml_string(&ca.pem));
    }
    let _ = writeln!(text, "runcmd:\n  - [systemctl, enable, --now, {AGENT_SERVICE}]");
    text
}

/// A TOML basic string: `"` and `\` escaped, control characters as `\uXXXX`.
pub fn toml_string(text: &str) -> String {
    let mut result = String::with_capacity(text.len() + 2);
    result.push('"');
    for character in text.chars() {
        match character {
            '"' => result.push_str("\\\""),
            '\\' => result.push_str("\\\\"),
            character if character.is_control() => {
                let _ = write!(result, "\\u{:04X}", u32::from(character));
            }
            character => result.push(character),
        }
    }
    result.push('"');
    result
}

/// A YAML double-quoted scalar. JSON's string escapes are all valid in YAML double quotes.
fn yaml_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// Text inside a `#` comment must stay on its line.
fn comment_text(text: &str) -> String {
    super::render::printable(text)
}
