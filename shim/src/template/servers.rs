//! The attributes of an `OS::Heat::DeployedServer` (and so of an `OS::Nova::Server` an
//! environment maps to it) that come from what `server add` registered: `name`, `networks`,
//! `addresses`, `first_address`, `accessIPv4`, `accessIPv6`, with Nova's shapes as
//! heat.engine.resources.openstack.nova.server.Server._resolve_attribute gives them. Validation
//! refuses a `get_attr` of one the named server has nothing registered for, naming the
//! attribute and the option that registers it; the engine resolves them when the server binds.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::checks::Context;
use super::expr::Expr;
use super::{ResourceType, Template};

/// Every attribute a DeployedServer offers (`os_collect_config` is the engine's: the agent's
/// settings, which need the shim's URL). Heat's Nova attributes the shim cannot know
/// (`instance_name`, `console_urls`, `tags`) are not among them.
pub const SERVER_ATTRIBUTES: &[&str] =
    &["name", "networks", "addresses", "first_address", "accessIPv4", "accessIPv6", "os_collect_config"];

/// The longest name Heat gives a server it names (`max_server_name_length`, whose default and
/// maximum is 53: heat.common.config, heat.engine.resources.server_base.BaseServer).
pub const MAX_GENERATED_SERVER_NAME: usize = 53;

/// Whether `name` may name a server (`server add`'s rule): 1 to 64 characters of
/// `[A-Za-z0-9._-]`, not starting with `.`.
pub fn is_valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"._-".contains(&byte))
        && !name.starts_with('.')
}

/// The name Heat gives a DeployedServer without a `name` (BaseServer._server_name →
/// Resource.physical_resource_name): `<stack name>-<resource name>-<short id>`, reduced to
/// `MAX_GENERATED_SERVER_NAME` characters as Resource.reduce_physical_resource_name reduces it
/// (the first two characters, `-`, then the end). Characters a server name cannot hold become
/// `-`, so the name is always a valid one.
pub fn generated_server_name(stack_name: &str, resource_name: &str, short_id: &str) -> String {
    let full = format!("{}-{resource_name}-{short_id}", stack_name.trim_end_matches('*'));
    let name: String = full
        .chars()
        .map(|character| if character.is_ascii_alphanumeric() || "._-".contains(character) { character } else { '-' })
        .collect();
    let limit = MAX_GENERATED_SERVER_NAME;
    if name.len() <= limit {
        return name;
    }
    // ASCII only by now: byte offsets are character offsets.
    format!("{}-{}", &name[..2], &name[name.len() - (limit - 3)..])
}

/// At most this many networks, and addresses in all, per server: a registration, not a dump.
pub const MAX_SERVER_ADDRESSES: usize = 64;
/// The longest network name (Neutron's limit).
pub const MAX_NETWORK_NAME_BYTES: usize = 255;

/// What `server add` registered of a server's addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerAddresses {
    /// `--address`: addresses on no named network, in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<IpAddr>,
    /// `--network NET=IP`: addresses per network, each list in the order given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub networks: BTreeMap<String, Vec<IpAddr>>,
}

/// Why a registration's addresses are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("address {text:?} is not an IPv4 or IPv6 address")]
    NotAnAddress { text: String },
    #[error("network name {name:?} must be 1-{MAX_NETWORK_NAME_BYTES} bytes without control characters")]
    BadNetworkName { name: String },
    #[error("network {name:?} has no address")]
    EmptyNetwork { name: String },
    #[error("more than {MAX_SERVER_ADDRESSES} addresses")]
    TooMany,
}

impl ServerAddresses {
    /// Parses a registration's texts; addresses are kept in their canonical spelling.
    pub fn parse(addresses: &[String], networks: &BTreeMap<String, Vec<String>>) -> Result<Self, AddressError> {
        let total = addresses.len() + networks.values().map(Vec::len).sum::<usize>();
        if total > MAX_SERVER_ADDRESSES || networks.len() > MAX_SERVER_ADDRESSES {
            return Err(AddressError::TooMany);
        }
        let parse =
            |text: &String| text.parse::<IpAddr>().map_err(|_| AddressError::NotAnAddress { text: text.clone() });
        let mut parsed =
            ServerAddresses { addresses: addresses.iter().map(parse).collect::<Result<_, _>>()?, ..Self::default() };
        for (name, items) in networks {
            if name.is_empty() || name.len() > MAX_NETWORK_NAME_BYTES || name.chars().any(char::is_control) {
                return Err(AddressError::BadNetworkName { name: name.clone() });
            }
            if items.is_empty() {
                return Err(AddressError::EmptyNetwork { name: name.clone() });
            }
            parsed.networks.insert(name.clone(), items.iter().map(parse).collect::<Result<_, _>>()?);
        }
        Ok(parsed)
    }

    /// The stored form (`ServerRow::addresses`); anything unreadable counts as nothing registered.
    pub fn from_stored(value: &Value) -> Self {
        serde_json::from_value(value.clone()).unwrap_or_default()
    }

    pub fn to_stored(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| json!({}))
    }

    /// The value of `attribute` for the server registered as `server`, or why it has none.
    /// `os_collect_config` and unknown names are not answered here.
    pub fn attribute(&self, server: &str, attribute: &str) -> Result<Value, String> {
        let missing_network =
            || format!("no network address registered for server {server} (anneal-shim server add --network NET=IP)");
        match attribute {
            "name" => Ok(json!(server)),
            "networks" if !self.networks.is_empty() => Ok(Value::Object(
                self.networks.iter().map(|(name, items)| (name.clone(), json!(texts(items)))).collect(),
            )),
            "addresses" if !self.networks.is_empty() => Ok(Value::Object(
                self.networks
                    .iter()
                    .map(|(name, items)| (name.clone(), items.iter().map(nova_address).collect()))
                    .collect(),
            )),
            "networks" | "addresses" => Err(missing_network()),
            "first_address" => self.first_address().map(|address| json!(address.to_string())).ok_or_else(|| {
                format!("no address registered for server {server} (anneal-shim server add --address IP)")
            }),
            "accessIPv4" => self.access(server, IpAddr::is_ipv4, "IPv4"),
            "accessIPv6" => self.access(server, IpAddr::is_ipv6, "IPv6"),
            other => Err(format!("attribute {other} is not registered by anneal-shim")),
        }
    }

    /// Every attribute this registration answers, as the engine stores them on the node.
    pub fn attributes(&self, server: &str) -> Map<String, Value> {
        SERVER_ATTRIBUTES
            .iter()
            .filter_map(|name| self.attribute(server, name).ok().map(|value| ((*name).to_owned(), value)))
            .collect()
    }

    /// As heat.engine.clients.os.nova.NovaClientPlugin.server_to_ipaddress: the first address of
    /// the first network with one, networks in reverse name order; else the first `--address`.
    fn first_address(&self) -> Option<IpAddr> {
        let on_network = self.networks.values().rev().find_map(|items| items.first().copied());
        on_network.or_else(|| self.addresses.first().copied())
    }

    fn access(&self, server: &str, family: fn(&IpAddr) -> bool, name: &str) -> Result<Value, String> {
        let found = self.addresses.iter().find(|address| family(address));
        found.map(|address| json!(address.to_string())).ok_or_else(|| {
            format!("no {name} address registered for server {server} (anneal-shim server add --address IP)")
        })
    }
}

fn texts(items: &[IpAddr]) -> Vec<String> {
    items.iter().map(IpAddr::to_string).collect()
}

/// One entry of Nova's `addresses` map: the address and its IP version.
fn nova_address(address: &IpAddr) -> Value {
    json!({"addr": address.to_string(), "version": if address.is_ipv4() { 4 } else { 6 }})
}

/// Every `get_attr` of a DeployedServer attribute its registered server cannot answer, each
/// named with where it is read. `servers` gives a registered server's addresses (`None`: not
/// registered, which `validate` reports). A server whose name depends on a resource is not
/// checked here; its attributes resolve to null when it binds.
pub fn check_server_attributes(
    template: &Template,
    parameters: &BTreeMap<String, Value>,
    servers: &dyn Fn(&str) -> Option<ServerAddresses>,
) -> Vec<String> {
    let context = Context::new(template, parameters, &|_| true);
    let mut problems = Vec::new();
    let places = template.resources.iter().flat_map(|(name, resource)| {
        resource
            .properties
            .iter()
            .map(move |(property, expr)| (format!("resource {name}: property \"{property}\""), expr))
    });
    let outputs = template.outputs.iter().map(|(name, output)| (format!("output {name}"), &output.value));
    for (place, expr) in places.chain(outputs) {
        check_expression(&context, &place, expr, servers, &mut problems);
    }
    problems
}

fn check_expression(
    context: &Context,
    place: &str,
    expr: &Expr,
    servers: &dyn Fn(&str) -> Option<ServerAddresses>,
    problems: &mut Vec<String>,
) {
    for reference in expr.references() {
        let Some(attribute) = reference.attribute.as_deref() else { continue };
        let Some(target) = context.resource(&reference.resource) else { continue };
        if target.kind != ResourceType::DeployedServer || attribute == "os_collect_config" {
            continue;
        }
        let server = match target.property("name") {
            None => reference.resource.clone(),
            Some(expr) => match context.partial("", expr, &mut Vec::new()).known() {
                Some(Value::String(name)) if !name.is_empty() => name.clone(),
                _ => continue,
            },
        };
        let Some(addresses) = servers(&server) else { continue };
        if SERVER_ATTRIBUTES.contains(&attribute)
            && let Err(reason) = addresses.attribute(&server, attribute)
        {
            problems
                .push(format!("{place}: get_attr: resource {}: attribute {attribute}: {reason}", reference.resource));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_follow_heats_physical_resource_name() {
        assert_eq!(generated_server_name("overcloud", "server", "abcdefghijkl"), "overcloud-server-abcdefghijkl");
        // Heat's reduction: the first two characters, '-', the last 50.
        let long = generated_server_name("overcloud-Controller-x2kq4wzdyvk5-0-ab3ghtbn3ihk", "server", "mnopqrstuvwx");
        assert_eq!(long.len(), MAX_GENERATED_SERVER_NAME);
        assert_eq!(long, "ov-er-x2kq4wzdyvk5-0-ab3ghtbn3ihk-server-mnopqrstuvwx");
        assert!(is_valid_server_name(&generated_server_name("s", "a b/c", "x")));
        assert_eq!(generated_server_name("s", "a b", "x"), "s-a-b-x");
    }

    fn registered() -> ServerAddresses {
        let networks = BTreeMap::from([
            ("ctlplane".to_owned(), vec!["192.0.2.10".to_owned(), "2001:db8::10".to_owned()]),
            ("storage".to_owned(), vec!["198.51.100.7".to_owned()]),
        ]);
        ServerAddresses::parse(&["203.0.113.5".to_owned(), "2001:DB8:0::5".to_owned()], &networks).unwrap()
    }

    #[test]
    fn attributes_have_novas_shapes() {
        let attributes = registered().attributes("web1");
        assert_eq!(attributes["name"], json!("web1"));
        assert_eq!(
            attributes["networks"],
            json!({"ctlplane": ["192.0.2.10", "2001:db8::10"], "storage": ["198.51.100.7"]})
        );
        assert_eq!(
            attributes["addresses"]["ctlplane"],
            json!([{"addr": "192.0.2.10", "version": 4}, {"addr": "2001:db8::10", "version": 6}])
        );
        // server_to_ipaddress walks the networks in reverse name order.
        assert_eq!(attributes["first_address"], json!("198.51.100.7"));
        assert_eq!(attributes["accessIPv4"], json!("203.0.113.5"));
        assert_eq!(attributes["accessIPv6"], json!("2001:db8::5"), "canonical spelling");
        assert!(!attributes.contains_key("os_collect_config"));
    }

    #[test]
    fn missing_attributes_name_the_option_that_registers_them() {
        let only_address = ServerAddresses::parse(&["192.0.2.1".to_owned()], &BTreeMap::new()).unwrap();
        assert_eq!(only_address.attribute("db", "first_address"), Ok(json!("192.0.2.1")));
        let error = only_address.attribute("db", "networks").unwrap_err();
        assert!(error.contains("server db") && error.contains("--network NET=IP"), "{error}");
        let error = only_address.attribute("db", "accessIPv6").unwrap_err();
        assert!(error.contains("no IPv6 address") && error.contains("--address"), "{error}");
        let error = ServerAddresses::default().attribute("db", "first_address").unwrap_err();
        assert_eq!(error, "no address registered for server db (anneal-shim server add --address IP)");
    }

    #[test]
    fn hostile_registrations_are_refused() {
        let none = BTreeMap::new();
        assert!(matches!(
            ServerAddresses::parse(&["10.0.0.300".into()], &none),
            Err(AddressError::NotAnAddress { .. })
        ));
        let many: Vec<String> = (0..=MAX_SERVER_ADDRESSES).map(|index| format!("10.0.0.{}", index % 250)).collect();
        assert_eq!(ServerAddresses::parse(&many, &none), Err(AddressError::TooMany));
        for name in ["", "a\nb", &"n".repeat(MAX_NETWORK_NAME_BYTES + 1)] {
            let networks = BTreeMap::from([(name.to_owned(), vec!["10.0.0.1".to_owned()])]);
            assert!(matches!(ServerAddresses::parse(&[], &networks), Err(AddressError::BadNetworkName { .. })));
        }
        let empty = BTreeMap::from([("net".to_owned(), Vec::new())]);
        assert!(matches!(ServerAddresses::parse(&[], &empty), Err(AddressError::EmptyNetwork { .. })));
    }

    #[test]
    fn stored_form_round_trips_and_garbage_reads_as_nothing() {
        let addresses = registered();
        assert_eq!(ServerAddresses::from_stored(&addresses.to_stored()), addresses);
        assert_eq!(ServerAddresses::from_stored(&json!({})), ServerAddresses::default());
        assert_eq!(ServerAddresses::from_stored(&json!({"networks": 3})), ServerAddresses::default());
    }

    #[test]
    fn validation_names_each_attribute_a_registered_server_cannot_answer() {
        let template = crate::template::parse_template(
            "heat_template_version: 2018-08-31
parameters:
  host: {type: string, default: db}
resources:
  web1: {type: OS::Heat::DeployedServer}
  db: {type: OS::Heat::DeployedServer, properties: {name: {get_param: host}}}
  later: {type: OS::Heat::DeployedServer, properties: {name: {get_attr: [web1, name]}}}
  value:
    type: OS::Heat::Value
    properties:
      value: [{get_attr: [web1, first_address]}, {get_attr: [db, networks, ctlplane]}, {get_attr: [later, networks]}]
outputs:
  v6: {value: {get_attr: [web1, accessIPv6]}}
  config: {value: {get_attr: [db, os_collect_config]}}
",
        )
        .unwrap();
        let parameters = BTreeMap::from([("host".to_owned(), json!("db"))]);
        let servers = |name: &str| match name {
            "web1" => Some(ServerAddresses::parse(&["192.0.2.1".to_owned()], &BTreeMap::new()).unwrap()),
            "db" => Some(ServerAddresses::default()),
            _ => None,
        };
        let problems = check_server_attributes(&template, &parameters, &servers);
        assert_eq!(
            problems,
            [
                "resource value: property \"value\": get_attr: resource db: attribute networks: no network address \
                 registered for server db (anneal-shim server add --network NET=IP)",
                "output v6: get_attr: resource web1: attribute accessIPv6: no IPv6 address registered for server \
                 web1 (anneal-shim server add --address IP)",
            ]
        );
    }
}
