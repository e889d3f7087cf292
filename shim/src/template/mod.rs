//! HOT templates, the software-config subset: parsing (YAML or JSON text to `Template`),
//! parameter typing and constraints, the intrinsic functions (`Expr`), and validation into a
//! dependency-ordered `Plan`. Pure: no I/O, no clock, no store; the engine supplies parameter
//! values, registered server names and, at run time, resource values through `Scope`.

mod checks;
mod environment;
mod environment_files;
mod evaluate;
mod expr;
mod failure_budget;
mod fields;
mod graph;
mod hot;
mod hot_parameters;
mod nested;
mod parameters;
mod pipeline;
mod policy;
mod properties;
mod provider;
mod schemas;
mod servers;
mod snippet;
mod stored;
mod structured;
mod type_names;
mod validate;
mod value_type;
pub mod yaml;

#[cfg(test)]
mod tests;

use serde_json::Value;

pub use checks::{HIDDEN_REFUSED, PSEUDO_PARAMETERS};
pub use environment::{
    Environment, EnvironmentError, MAX_FILES, MAX_FILES_BYTES, check_files, deep_update, parameter_texts,
    parse_environment,
};
pub use environment_files::{MAX_ENVIRONMENT_FILES, merge_environment_files, parameter_types};
pub use evaluate::{ParameterScope, kind_name, render};
pub use expr::budget::{Budget, EVALUATION_BUDGET, over_budget_message, value_bytes};
pub use expr::functions;
pub use expr::{ALL_ATTRIBUTES, Dialect, EvalError, Expr, Names, Reference, Scope, UNSUPPORTED_FUNCTIONS};
pub use failure_budget::FailureBudget;
pub use hot::{
    MAX_TEMPLATE_BYTES, SUPPORTED_VERSIONS, parse_stored_template, parse_template, parse_template_in,
    raise_template_limit,
};
pub use nested::{
    Expansion, Limits as ExpansionLimits, MAX_EXPANDED_NODES, MAX_NESTED_DEPTH, MAX_RESOURCES, MaxResources,
    NestedError, expand as expand_nested, expand_within as expand_nested_within, short_id,
};
pub use parameters::resolve_parameters;
pub use pipeline::{Checked, MAX_PROBLEMS, Request as CheckRequest, Servers, check_template};
pub use policy::{Batching, Policies, resolve_deletion_policy};
pub use provider::{GROUP_TYPE, NestedDefinition, NestedKind, is_template_name};
pub use servers::{
    AddressError, MAX_GENERATED_SERVER_NAME, SERVER_ATTRIBUTES, ServerAddresses, check_server_attributes,
    generated_server_name, is_valid_server_name,
};
pub use snippet::{SnippetResource, evaluate_snippet, evaluate_snippet_with_resources};
pub use stored::{is_flattened, text as flattened_text};
pub use structured::substitute_inputs;
pub use validate::{Plan, PlanNode, apply_conditions, validate};
pub use value_type::{hidden_refusal, parameter_placeholder, value_as_type};
pub use yaml::YamlError;

/// A parsed template. Declaration order is kept: it breaks ties in the plan and orders output.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub version: String,
    pub description: Option<String>,
    pub parameters: Vec<(String, Parameter)>,
    pub resources: Vec<(String, Resource)>,
    pub outputs: Vec<(String, Output)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    pub kind: ParameterType,
    pub default: Option<Value>,
    pub description: Option<String>,
    /// A secret: its value is never shown in errors (and the engine masks it in the API).
    pub hidden: bool,
    /// An update may not change its value (heat.engine.parameters.Parameters.immutable_params_modified).
    pub immutable: bool,
    pub constraints: Vec<Constraint>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParameterType {
    String,
    Number,
    Json,
    CommaDelimitedList,
    Boolean,
}

/// A parameter constraint. `description`, when given, is the error message (as in Heat).
/// Serialized only into the stored run-time conversion of a nested parameter
/// (`nested::convert`), which checks it when the value is known.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Constraint {
    Length {
        min: Option<u64>,
        max: Option<u64>,
        description: Option<String>,
    },
    Range {
        min: Option<f64>,
        max: Option<f64>,
        description: Option<String>,
    },
    AllowedValues {
        values: Vec<Value>,
        description: Option<String>,
    },
    AllowedPattern {
        pattern: String,
        description: Option<String>,
    },
    /// A `custom_constraint` (e.g. `nova.server`): checked where the shim knows what it names
    /// (registered servers, in `validate`), otherwise accepted (docs/templates.md "Parameters").
    Custom {
        name: String,
        description: Option<String>,
    },
}

/// Custom constraints whose value must name a server registered with `server add`.
pub const SERVER_CONSTRAINTS: &[&str] = &["nova.server"];

#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub kind: ResourceType,
    pub properties: Vec<(String, Expr)>,
    pub depends_on: Vec<String>,
    /// `condition` (2016-10-14+), names inlined: when false, the resource is not in the plan.
    pub condition: Option<Expr>,
    /// 1-based line of the resource's name in the template text.
    pub line: usize,
    /// A provider template or ResourceGroup (`kind` is then a placeholder): `expand_nested`
    /// replaces it by the resources it holds before the template is validated.
    pub nested: Option<Box<NestedDefinition>>,
    /// `deletion_policy` and `update_policy`, as the engine acts on them.
    pub policies: Policies,
    /// A resource of a flattened nested stack or ResourceGroup: that stack's `<name>/<id>`
    /// (a deployment's `deploy_stack_id`, as Heat's `stack_path()`), as an expression of the
    /// root's parameters; `None` for the root stack's own resources.
    pub stack: Option<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    SoftwareConfig,
    SoftwareDeployment,
    SoftwareDeploymentGroup,
    SoftwareComponent,
    StructuredConfig,
    StructuredDeployment,
    /// `OS::Heat::StructuredDeploymentGroup`: a SoftwareDeploymentGroup whose members are
    /// StructuredDeployments (`input_key`, `input_values_validate`).
    StructuredDeploymentGroup,
    WaitConditionHandle,
    WaitCondition,
    /// `OS::Heat::None`: accepts any properties, does nothing, every attribute is null.
    None,
    /// `OS::Heat::Value`: its `value` property as its `value` attribute.
    Value,
    /// `OS::Heat::RandomString`: a secret generated once at create.
    RandomString,
    /// `OS::Heat::DeployedServer`: a server registered with `server add`, named by its `name`
    /// property or else the resource name; its id is that server name.
    DeployedServer,
    /// `OS::Heat::CloudConfig`: its `cloud_config` map as `#cloud-config` YAML.
    CloudConfig,
    /// `OS::Heat::MultipartMime`: its parts as a MIME multipart message.
    MultipartMime,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub description: Option<String>,
    pub value: Expr,
}

/// Why a template text could not be parsed into a `Template`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TemplateError {
    #[error("the template is {size} bytes, over the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    #[error(transparent)]
    Yaml(#[from] YamlError),
    /// The text is well-formed YAML but not an acceptable HOT template; one entry per problem.
    #[error("{}", problems.join("; "))]
    Invalid { problems: Vec<String> },
}

impl Template {
    pub fn parameter(&self, name: &str) -> Option<&Parameter> {
        self.parameters.iter().find(|(declared, _)| declared == name).map(|(_, parameter)| parameter)
    }

    pub fn resource(&self, name: &str) -> Option<&Resource> {
        self.resources.iter().find(|(declared, _)| declared == name).map(|(_, resource)| resource)
    }

    /// Declared parameters marked `immutable` whose value differs between `old` and `new`
    /// (both resolved), in declaration order; a parameter the old stack lacked never counts.
    pub fn immutable_changes(
        &self,
        old: &serde_json::Map<String, Value>,
        new: &std::collections::BTreeMap<String, Value>,
    ) -> Vec<String> {
        let changed = |name: &String| old.get(name).is_some_and(|before| Some(before) != new.get(name));
        self.parameters
            .iter()
            .filter(|(name, parameter)| parameter.immutable && changed(name))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Names of the hidden parameters, whose values the API must mask.
    pub fn hidden_parameters(&self) -> Vec<String> {
        self.parameters.iter().filter(|(_, parameter)| parameter.hidden).map(|(name, _)| name.clone()).collect()
    }
}

impl Resource {
    /// A property's expression, if the template sets it.
    pub fn property(&self, name: &str) -> Option<&Expr> {
        self.properties.iter().find(|(property, _)| property == name).map(|(_, expr)| expr)
    }
}

impl TemplateError {
    /// The problems as separate messages, for `ServiceError::Template`.
    pub fn problems(&self) -> Vec<String> {
        match self {
            TemplateError::Invalid { problems } => problems.clone(),
            other => vec![other.to_string()],
        }
    }
}

impl ParameterType {
    /// The HOT spelling (`comma_delimited_list`).
    pub fn name(&self) -> &'static str {
        match self {
            ParameterType::String => "string",
            ParameterType::Number => "number",
            ParameterType::Json => "json",
            ParameterType::CommaDelimitedList => "comma_delimited_list",
            ParameterType::Boolean => "boolean",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        [
            ParameterType::String,
            ParameterType::Number,
            ParameterType::Json,
            ParameterType::CommaDelimitedList,
            ParameterType::Boolean,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
    }
}

impl Constraint {
    pub fn description(&self) -> Option<&str> {
        match self {
            Constraint::Length { description, .. }
            | Constraint::Range { description, .. }
            | Constraint::AllowedValues { description, .. }
            | Constraint::AllowedPattern { description, .. }
            | Constraint::Custom { description, .. } => description.as_deref(),
        }
    }
}

impl ResourceType {
    pub const ALL: [ResourceType; 15] = [
        ResourceType::SoftwareConfig,
        ResourceType::SoftwareDeployment,
        ResourceType::SoftwareDeploymentGroup,
        ResourceType::SoftwareComponent,
        ResourceType::StructuredConfig,
        ResourceType::StructuredDeployment,
        ResourceType::StructuredDeploymentGroup,
        ResourceType::WaitConditionHandle,
        ResourceType::WaitCondition,
        ResourceType::None,
        ResourceType::Value,
        ResourceType::RandomString,
        ResourceType::DeployedServer,
        ResourceType::CloudConfig,
        ResourceType::MultipartMime,
    ];

    /// Heat's deprecated type names still registered, and the type each stands for (as
    /// heat.engine.resources.openstack.heat.software_deployment.SoftwareDeployments and
    /// structured_config.StructuredDeployments).
    pub const ALIASES: [(&'static str, ResourceType); 2] = [
        ("OS::Heat::SoftwareDeployments", ResourceType::SoftwareDeploymentGroup),
        ("OS::Heat::StructuredDeployments", ResourceType::StructuredDeploymentGroup),
    ];

    /// The Heat type name, e.g. `OS::Heat::SoftwareConfig`.
    pub fn name(&self) -> &'static str {
        match self {
            ResourceType::SoftwareConfig => "OS::Heat::SoftwareConfig",
            ResourceType::SoftwareDeployment => "OS::Heat::SoftwareDeployment",
            ResourceType::SoftwareDeploymentGroup => "OS::Heat::SoftwareDeploymentGroup",
            ResourceType::SoftwareComponent => "OS::Heat::SoftwareComponent",
            ResourceType::StructuredConfig => "OS::Heat::StructuredConfig",
            ResourceType::StructuredDeployment => "OS::Heat::StructuredDeployment",
            ResourceType::StructuredDeploymentGroup => "OS::Heat::StructuredDeploymentGroup",
            ResourceType::WaitConditionHandle => "OS::Heat::WaitConditionHandle",
            ResourceType::WaitCondition => "OS::Heat::WaitCondition",
            ResourceType::None => "OS::Heat::None",
            ResourceType::Value => "OS::Heat::Value",
            ResourceType::RandomString => "OS::Heat::RandomString",
            ResourceType::DeployedServer => "OS::Heat::DeployedServer",
            ResourceType::CloudConfig => "OS::Heat::CloudConfig",
            ResourceType::MultipartMime => "OS::Heat::MultipartMime",
        }
    }

    /// The type a name stands for: its own name, or a deprecated alias Heat still registers.
    pub fn parse(name: &str) -> Option<Self> {
        ResourceType::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .or_else(|| ResourceType::ALIASES.iter().find(|(alias, _)| *alias == name).map(|(_, kind)| *kind))
    }

    /// Whether `get_attr` may name any attribute (`OS::Heat::None` answers null to all, as
    /// heat.engine.resources.openstack.heat.none_resource.NoneResource.get_attribute).
    pub fn accepts_any_attribute(&self) -> bool {
        *self == ResourceType::None
    }

    /// A config resource a deployment can point at with `config: {get_resource: ...}`.
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            ResourceType::SoftwareConfig
                | ResourceType::StructuredConfig
                | ResourceType::SoftwareComponent
                | ResourceType::CloudConfig
                | ResourceType::MultipartMime
        )
    }

    /// A deployment (single server) or a deployment group.
    pub fn is_deployment(&self) -> bool {
        matches!(
            self,
            ResourceType::SoftwareDeployment
                | ResourceType::StructuredDeployment
                | ResourceType::SoftwareDeploymentGroup
                | ResourceType::StructuredDeploymentGroup
        )
    }

    /// A deployment group (`servers` instead of `server`), and the type of its members.
    pub fn group_member(&self) -> Option<ResourceType> {
        match self {
            ResourceType::SoftwareDeploymentGroup => Some(ResourceType::SoftwareDeployment),
            ResourceType::StructuredDeploymentGroup => Some(ResourceType::StructuredDeployment),
            _ => None,
        }
    }

    /// What `get_attr: [resource]` shows (heat.engine.stk_defn.ResourceProxy.FnGetAtts): the
    /// type's attribute schema without `show`, as Heat 27 has it (tests/tests/heat_cfn.rs asks
    /// Heat). A deployment's outputs and a group's singular member attributes are not in it;
    /// neither are the Nova attributes the shim adds to a DeployedServer.
    pub fn all_attributes(&self) -> &'static [&'static str] {
        match self {
            ResourceType::SoftwareDeployment | ResourceType::StructuredDeployment => {
                &["deploy_stdout", "deploy_stderr", "deploy_status_code"]
            }
            ResourceType::SoftwareDeploymentGroup | ResourceType::StructuredDeploymentGroup => {
                &["deploy_stdouts", "deploy_stderrs", "deploy_status_codes"]
            }
            ResourceType::DeployedServer => &["name", "os_collect_config"],
            other => other.base_attributes(),
        }
    }

    /// Attributes every resource of this type has; deployments also have their config's
    /// declared outputs (see `validate`).
    pub fn base_attributes(&self) -> &'static [&'static str] {
        match self {
            ResourceType::SoftwareConfig
            | ResourceType::StructuredConfig
            | ResourceType::SoftwareComponent
            | ResourceType::CloudConfig
            | ResourceType::MultipartMime => &["config"],
            ResourceType::SoftwareDeployment | ResourceType::StructuredDeployment => {
                &["deploy_stdout", "deploy_stderr", "deploy_status_code"]
            }
            // As SoftwareDeploymentGroup._member_attribute_name: the plurals and each member's;
            // and anneal's `failed_members` (the members a failure budget tolerated).
            ResourceType::SoftwareDeploymentGroup | ResourceType::StructuredDeploymentGroup => &[
                "deploy_stdouts",
                "deploy_stderrs",
                "deploy_status_codes",
                "deploy_stdout",
                "deploy_stderr",
                "deploy_status_code",
                "failed_members",
            ],
            ResourceType::WaitConditionHandle => &["endpoint", "curl_cli", "token", "signal"],
            ResourceType::WaitCondition => &["data"],
            ResourceType::None => &[],
            ResourceType::Value | ResourceType::RandomString => &["value"],
            // Heat's Nova server attributes that `server add` registers (template/servers.rs).
            ResourceType::DeployedServer => servers::SERVER_ATTRIBUTES,
        }
    }
}
