//! What a resource `type` that is not one of ours means to the user: an infrastructure type
//! (`OS::Nova::Server`, `OS::Neutron::Port`, `AWS::EC2::Instance`, ...) that anneal-shim never
//! creates, with the one-line environment mapping that makes the template work unchanged
//! (docs/templates.md "Infrastructure types"), or a misspelling, with at most a few near
//! matches.

use super::ResourceType;
use super::value_type::shortened;

/// Types a Heat user maps to `OS::Heat::DeployedServer`: servers the software runs on.
const SERVER_TYPES: &[&str] = &["OS::Nova::Server", "AWS::EC2::Instance"];
/// Most near matches listed for an unknown type.
const MAX_SUGGESTIONS: usize = 3;
/// Longest name compared with ours (the longest is about 40 characters).
const SHOWN_NAME_LIMIT: usize = 64;

/// The problem text for an unknown `type` (without the line, which the caller adds).
pub(super) fn unknown_type(resource: &str, text: &str) -> String {
    // A hostile type name is echoed only in part.
    let shown = shortened(text);
    let text = shown.as_str();
    if SERVER_TYPES.contains(&text) {
        return format!(
            "resource {resource}: {text} is an infrastructure type anneal-shim does not create; bind it to a \
             server registered with `anneal-shim server add` with an environment (-e) holding \
             resource_registry: {{\"{text}\": OS::Heat::DeployedServer}}"
        );
    }
    if is_infrastructure(text) {
        return format!(
            "resource {resource}: {text} is an infrastructure type anneal-shim does not create; stub it out with \
             an environment (-e) holding resource_registry: {{\"{text}\": OS::Heat::None}}"
        );
    }
    let suggestions = near_matches(text);
    let hint = if suggestions.is_empty() && text.contains("::") {
        "not a type anneal-shim or Heat has: a custom type must be mapped in the environment's \
         resource_registry, to a supported type or to a template file (a provider template); see \
         docs/templates.md \"Resources\""
            .to_owned()
    } else if suggestions.is_empty() {
        "see docs/templates.md \"Resources\" for the supported types".to_owned()
    } else {
        format!("did you mean {}?", suggestions.join(", "))
    };
    format!("resource {resource}: unknown resource type \"{text}\" ({hint})")
}

/// The OpenStack services whose `OS::<service>::` types Heat registers (its
/// heat/engine/resources/openstack/ packages): anything else under `OS::` is a custom type.
const INFRASTRUCTURE_SERVICES: &[&str] = &[
    "Aodh",
    "Barbican",
    "Blazar",
    "Cinder",
    "Designate",
    "Glance",
    "Keystone",
    "Magnum",
    "Manila",
    "Mistral",
    "Monasca",
    "Neutron",
    "Nova",
    "Octavia",
    "Sahara",
    "Senlin",
    "Swift",
    "Trove",
    "Vitrage",
    "Zaqar",
    "Zun",
];

/// An OpenStack or CloudFormation type outside the software-config ones: `OS::X::Y` with X one
/// of the services Heat has types for, or an `AWS::` type other than CloudFormation's own.
fn is_infrastructure(text: &str) -> bool {
    let parts: Vec<&str> = text.split("::").collect();
    match parts.as_slice() {
        ["OS", service, name, ..] => INFRASTRUCTURE_SERVICES.contains(service) && !name.is_empty(),
        ["AWS", "CloudFormation", ..] => false,
        ["AWS", service, name] => !service.is_empty() && !name.is_empty(),
        _ => false,
    }
}

/// Our type names within a small edit distance of `text`, closest first.
fn near_matches(text: &str) -> Vec<&'static str> {
    let names = ResourceType::ALL.iter().map(ResourceType::name).chain(ResourceType::ALIASES.iter().map(|(a, _)| *a));
    // Long hostile names cost nothing: only names of a plausible length are compared.
    if text.len() > SHOWN_NAME_LIMIT {
        return Vec::new();
    }
    let lowered = text.to_ascii_lowercase();
    let mut scored: Vec<(usize, &'static str)> = names
        .map(|name| (distance(&lowered, &name.to_ascii_lowercase()), name))
        .filter(|(distance, name)| *distance <= name.len() / 4)
        .collect();
    scored.sort();
    scored.into_iter().take(MAX_SUGGESTIONS).map(|(_, name)| name).collect()
}

/// Levenshtein distance over bytes (the names compared are ASCII).
fn distance(left: &str, right: &str) -> usize {
    let right = right.as_bytes();
    let mut row: Vec<usize> = (0..=right.len()).collect();
    for (i, a) in left.bytes().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, b) in right.iter().enumerate() {
            let substitution = diagonal + usize::from(a != *b);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[right.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_type_names_the_deployed_server_mapping() {
        let message = unknown_type("web", "OS::Nova::Server");
        assert!(message.contains(r#"resource_registry: {"OS::Nova::Server": OS::Heat::DeployedServer}"#), "{message}");
    }

    #[test]
    fn other_infrastructure_types_name_the_none_mapping() {
        for kind in ["OS::Neutron::Port", "OS::Cinder::Volume", "AWS::EC2::EIP"] {
            let message = unknown_type("r", kind);
            assert!(message.contains(&format!("resource_registry: {{\"{kind}\": OS::Heat::None}}")), "{message}");
        }
    }

    #[test]
    fn a_custom_os_type_is_not_called_infrastructure() {
        let message = unknown_type("app", "OS::Test::WebAppConfig");
        assert!(!message.contains("infrastructure"), "{message}");
        assert!(message.contains("resource_registry") && message.contains("provider template"), "{message}");
        let message = unknown_type("handle", "AWS::CloudFormation::WaitConditionHandle");
        assert!(!message.contains("OS::Heat::None"), "{message}");
    }

    #[test]
    fn a_misspelling_lists_a_few_near_matches() {
        let message = unknown_type("r", "OS::Heat::SoftwareDeploymnet");
        assert!(message.contains("did you mean OS::Heat::SoftwareDeployment"), "{message}");
        assert!(!message.contains("OS::Heat::WaitCondition"), "{message}");
        let message = unknown_type("r", "Custom::Thing");
        assert!(!message.contains("did you mean"), "{message}");
        assert!(message.contains("must be mapped in the environment's resource_registry"), "{message}");
        assert!(unknown_type("r", &"x".repeat(100_000)).len() < 200);
    }
}
