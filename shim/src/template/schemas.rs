//! Property schemas of the resource types, as Heat declares them in
//! `heat/engine/resources/openstack/heat/*.py` (and OS::Nova::Server's property names, which a
//! DeployedServer accepts): which properties exist, which are required, their kinds and allowed
//! values. The checks that read them are `properties.rs`'s.

use super::ResourceType;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    String,
    Map,
    List,
    Integer,
    Boolean,
    Any,
}

/// One property (or one key of a list item) and what it accepts.
pub(super) struct Field {
    pub(super) name: &'static str,
    pub(super) required: bool,
    pub(super) kind: Kind,
    /// Allowed strings (for a list: allowed items); empty means any.
    pub(super) allowed: &'static [&'static str],
}

pub(super) const fn field(name: &'static str, kind: Kind) -> Field {
    Field { name, required: false, kind, allowed: &[] }
}

pub(super) const fn required(name: &'static str, kind: Kind) -> Field {
    Field { name, required: true, kind, allowed: &[] }
}

pub(super) const fn one_of(name: &'static str, kind: Kind, allowed: &'static [&'static str]) -> Field {
    Field { name, required: false, kind, allowed }
}

pub(super) const ACTIONS: &[&str] = &["CREATE", "UPDATE", "DELETE", "SUSPEND", "RESUME"];
pub(super) const DEPLOYMENT_TRANSPORTS: &[&str] =
    &["CFN_SIGNAL", "TEMP_URL_SIGNAL", "HEAT_SIGNAL", "ZAQAR_SIGNAL", "NO_SIGNAL"];
pub(super) const HANDLE_TRANSPORTS: &[&str] =
    &["TOKEN_SIGNAL", "CFN_SIGNAL", "TEMP_URL_SIGNAL", "HEAT_SIGNAL", "ZAQAR_SIGNAL", "NO_SIGNAL"];
pub(super) const IO_TYPES: &[&str] = &["String", "Number", "CommaDelimitedList", "Json", "Boolean"];
/// Longest wait condition timeout Heat accepts, in seconds.
pub(super) const MAX_WAIT_SECS: i64 = 43_200;

pub(super) const SOFTWARE_CONFIG: &[Field] = &[
    field("group", Kind::String),
    field("config", Kind::String),
    field("options", Kind::Map),
    field("inputs", Kind::List),
    field("outputs", Kind::List),
];
pub(super) const STRUCTURED_CONFIG: &[Field] = &[
    field("group", Kind::String),
    field("config", Kind::Map),
    field("options", Kind::Map),
    field("inputs", Kind::List),
    field("outputs", Kind::List),
];
pub(super) const SOFTWARE_COMPONENT: &[Field] = &[
    required("configs", Kind::List),
    field("options", Kind::Map),
    field("inputs", Kind::List),
    field("outputs", Kind::List),
];
pub(super) const SOFTWARE_DEPLOYMENT: &[Field] = &[
    field("config", Kind::Any),
    required("server", Kind::String),
    field("input_values", Kind::Map),
    one_of("actions", Kind::List, ACTIONS),
    field("name", Kind::String),
    one_of("signal_transport", Kind::String, DEPLOYMENT_TRANSPORTS),
];
pub(super) const STRUCTURED_DEPLOYMENT: &[Field] = &[
    field("config", Kind::Any),
    required("server", Kind::String),
    field("input_values", Kind::Map),
    one_of("actions", Kind::List, ACTIONS),
    field("name", Kind::String),
    one_of("signal_transport", Kind::String, DEPLOYMENT_TRANSPORTS),
    field("input_key", Kind::String),
    one_of("input_values_validate", Kind::String, &["LAX", "STRICT"]),
];
pub(super) const DEPLOYMENT_GROUP: &[Field] = &[
    field("config", Kind::Any),
    required("servers", Kind::Map),
    field("input_values", Kind::Map),
    one_of("actions", Kind::List, ACTIONS),
    field("name", Kind::String),
    one_of("signal_transport", Kind::String, DEPLOYMENT_TRANSPORTS),
];
/// structured_config.StructuredDeploymentGroup: the group's and StructuredDeployment's own.
pub(super) const STRUCTURED_DEPLOYMENT_GROUP: &[Field] = &[
    field("config", Kind::Any),
    required("servers", Kind::Map),
    field("input_values", Kind::Map),
    one_of("actions", Kind::List, ACTIONS),
    field("name", Kind::String),
    one_of("signal_transport", Kind::String, DEPLOYMENT_TRANSPORTS),
    field("input_key", Kind::String),
    one_of("input_values_validate", Kind::String, &["LAX", "STRICT"]),
];
pub(super) const WAIT_CONDITION_HANDLE: &[Field] = &[one_of("signal_transport", Kind::String, HANDLE_TRANSPORTS)];
pub(super) const WAIT_CONDITION: &[Field] =
    &[required("handle", Kind::Any), required("timeout", Kind::Integer), field("count", Kind::Integer)];

pub(super) const DEPLOYED_SERVER: &[Field] = &[
    field("name", Kind::String),
    field("metadata", Kind::Map),
    one_of(
        "software_config_transport",
        Kind::String,
        &["POLL_SERVER_CFN", "POLL_SERVER_HEAT", "POLL_TEMP_URL", "ZAQAR_MESSAGE"],
    ),
    field("deployment_swift_data", Kind::Map),
    // OS::Nova::Server's other properties (heat.engine.resources.openstack.nova.server), kept
    // and ignored so that a server mapped to DeployedServer by an environment works unchanged.
    field("image", Kind::Any),
    field("flavor", Kind::Any),
    field("block_device_mapping", Kind::Any),
    field("block_device_mapping_v2", Kind::Any),
    field("flavor_update_policy", Kind::Any),
    field("image_update_policy", Kind::Any),
    field("key_name", Kind::Any),
    field("admin_user", Kind::Any),
    field("availability_zone", Kind::Any),
    field("security_groups", Kind::Any),
    field("networks", Kind::Any),
    field("scheduler_hints", Kind::Any),
    field("user_data_format", Kind::Any),
    field("user_data", Kind::Any),
    field("reservation_id", Kind::Any),
    field("config_drive", Kind::Any),
    field("diskConfig", Kind::Any),
    field("personality", Kind::Any),
    field("admin_pass", Kind::Any),
    field("user_data_update_policy", Kind::Any),
    field("tags", Kind::Any),
];
pub(super) const CLOUD_CONFIG: Field = field("cloud_config", Kind::Map);
pub(super) const MULTIPART_MIME: &[Field] = &[field("parts", Kind::List), field("group", Kind::String)];
/// A part's keys; `type: multipart` splices in the parts of the message its config is.
pub(super) const MIME_PART_FIELDS: &[Field] = &[
    required("config", Kind::String),
    field("filename", Kind::String),
    one_of("type", Kind::String, &["text", "multipart"]),
    field("subtype", Kind::String),
];
/// heat.engine.hot.parameters.HOTParamSchema.TYPES, the types `OS::Heat::Value` accepts.
pub(super) const VALUE_TYPES: &[&str] = &["string", "number", "comma_delimited_list", "json", "boolean"];
pub(super) const VALUE: &[Field] = &[required("value", Kind::Any), one_of("type", Kind::String, VALUE_TYPES)];
/// heat.common.password_gen.CHARACTER_CLASSES.
pub(super) const CHARACTER_CLASSES: &[&str] =
    &["lettersdigits", "letters", "lowercase", "uppercase", "digits", "hexdigits", "octdigits"];
pub(super) const RANDOM_STRING: &[Field] = &[
    field("length", Kind::Integer),
    one_of("sequence", Kind::String, CHARACTER_CLASSES),
    field("character_classes", Kind::List),
    field("character_sequences", Kind::List),
    field("salt", Kind::String),
];
pub(super) const CHARACTER_CLASS_FIELDS: &[Field] =
    &[one_of("class", Kind::String, CHARACTER_CLASSES), field("min", Kind::Integer)];
pub(super) const CHARACTER_SEQUENCE_FIELDS: &[Field] =
    &[required("sequence", Kind::String), field("min", Kind::Integer)];
/// Longest random string Heat generates (RandomString's `length` range, and each `min`'s).
pub(super) const MAX_RANDOM_LENGTH: i64 = 512;

pub(super) const INPUT_FIELDS: &[Field] = &[
    required("name", Kind::String),
    field("description", Kind::String),
    one_of("type", Kind::String, IO_TYPES),
    field("default", Kind::Any),
    field("replace_on_change", Kind::Boolean),
];
pub(super) const OUTPUT_FIELDS: &[Field] = &[
    required("name", Kind::String),
    field("description", Kind::String),
    one_of("type", Kind::String, IO_TYPES),
    field("error_output", Kind::Boolean),
];
pub(super) const COMPONENT_CONFIG_FIELDS: &[Field] =
    &[field("actions", Kind::List), field("config", Kind::String), required("tool", Kind::String)];

pub(super) fn schema(kind: ResourceType) -> &'static [Field] {
    match kind {
        ResourceType::SoftwareConfig => SOFTWARE_CONFIG,
        ResourceType::StructuredConfig => STRUCTURED_CONFIG,
        ResourceType::SoftwareComponent => SOFTWARE_COMPONENT,
        ResourceType::SoftwareDeployment => SOFTWARE_DEPLOYMENT,
        ResourceType::StructuredDeployment => STRUCTURED_DEPLOYMENT,
        ResourceType::SoftwareDeploymentGroup => DEPLOYMENT_GROUP,
        ResourceType::StructuredDeploymentGroup => STRUCTURED_DEPLOYMENT_GROUP,
        ResourceType::WaitConditionHandle => WAIT_CONDITION_HANDLE,
        ResourceType::WaitCondition => WAIT_CONDITION,
        ResourceType::Value => VALUE,
        ResourceType::RandomString => RANDOM_STRING,
        ResourceType::DeployedServer => DEPLOYED_SERVER,
        ResourceType::CloudConfig => &[CLOUD_CONFIG],
        ResourceType::MultipartMime => MULTIPART_MIME,
        // Accepts any properties (none_resource.NoneResource has an empty, unchecked schema).
        ResourceType::None => &[],
    }
}
