//! The HOT functions beyond the reference functions (`get_param`, `get_resource`, `get_attr`,
//! `get_input`, `str_replace`, `list_join`, which `Expr` models directly): which name means
//! which function in which `heat_template_version`, as heat.engine.hot.template's template
//! classes register them, and the closed set `Function` that `Expr::Call` carries. What each
//! function computes is `apply.rs`; the `conditions` section and `if` are `conditions.rs`.

mod apply;
mod cfn;
pub mod conditions;
mod repeat;
mod url;
pub mod yaql;

pub use apply::apply;

use super::EvalError;

/// A `heat_template_version`, as the date of the template class Heat picks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(&'static str);

impl Version {
    pub const V2013_05_23: Version = Version("2013-05-23");
    pub const V2014_10_16: Version = Version("2014-10-16");
    pub const V2015_04_30: Version = Version("2015-04-30");
    pub const V2015_10_15: Version = Version("2015-10-15");
    pub const V2016_04_08: Version = Version("2016-04-08");
    pub const V2016_10_14: Version = Version("2016-10-14");
    pub const V2017_02_24: Version = Version("2017-02-24");
    pub const V2017_09_01: Version = Version("2017-09-01");
    pub const V2018_03_02: Version = Version("2018-03-02");
    pub const V2018_08_31: Version = Version("2018-08-31");
    pub const V2021_04_16: Version = Version("2021-04-16");
    pub const LATEST: Version = Version::V2021_04_16;

    /// The version a `heat_template_version` value names (dates and release aliases).
    pub fn parse(text: &str) -> Option<Version> {
        let version = match text {
            "2013-05-23" => Version::V2013_05_23,
            "2014-10-16" => Version::V2014_10_16,
            "2015-04-30" => Version::V2015_04_30,
            "2015-10-15" => Version::V2015_10_15,
            "2016-04-08" => Version::V2016_04_08,
            "2016-10-14" | "newton" => Version::V2016_10_14,
            "2017-02-24" | "ocata" => Version::V2017_02_24,
            "2017-09-01" | "pike" => Version::V2017_09_01,
            "2018-03-02" | "queens" => Version::V2018_03_02,
            "2018-08-31" | "rocky" => Version::V2018_08_31,
            "2021-04-16" | "wallaby" => Version::V2021_04_16,
            _ => return None,
        };
        Some(version)
    }

    pub fn date(&self) -> &'static str {
        self.0
    }

    /// The `conditions` section and `condition` keys exist from 2016-10-14 (HOTemplate20161014).
    pub fn has_conditions(&self) -> bool {
        *self >= Version::V2016_10_14
    }
}

/// A function `Expr::Call` applies to its evaluated arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// `repeat`; `with_maps`: `for_each` values may be maps (2016-10-14+); `permutations`
    /// accepted (2017-09-01+).
    Repeat {
        with_maps: bool,
        with_permutations: bool,
    },
    Digest,
    StrSplit,
    /// `str_replace_strict` (`empty_allowed`) and `str_replace_vstrict` (not).
    StrReplaceStrict {
        empty_allowed: bool,
    },
    MapMerge,
    MapReplace,
    ListConcat {
        unique: bool,
    },
    Contains,
    Filter,
    MakeUrl,
    Equals,
    Not,
    And,
    Or,
    /// The CloudFormation functions Heat accepts in HOT (`Fn::Select` until 2015-04-30, the
    /// others in 2013-05-23 only), as heat.engine.cfn.functions.
    Select,
    CfnJoin,
    CfnSplit,
    CfnReplace,
    Base64,
    /// `Fn::GetAZs` (2013-05-23): the availability zones; the shim's cloud has one, `nova`.
    GetAzs,
    /// `Fn::MemberListToMap` (2013-05-23): AWS-style `.member.N.Key=value` strings to a map.
    MemberListToMap,
    /// `str_replace` and `list_join` before 2015-10-15 (heat.engine.hot.functions.Replace and
    /// Join): params must be strings or numbers; one list, of strings.
    LegacyReplace,
    LegacyJoin,
    /// `yaql` (2016-10-14+), the subset in `yaql/`.
    Yaql,
    /// A provider property known only at run time, converted to its nested parameter's type
    /// (template::nested::convert). Only the stored form names it: no template can.
    NestedParameter,
    /// A nested attribute Heat refuses only when it is read (template::nested::convert).
    NestedFailure,
    /// Its argument, unchanged: marks a value the expansion inlined from a hidden parameter (a
    /// nested template's `hidden` one, a ResourceGroup member's), so that what is computed
    /// from it is masked as a `get_param` of a hidden parameter is. Only the stored form
    /// names it (`HIDDEN_VALUE`).
    HiddenValue,
}

/// The stored name of `Function::HiddenValue`.
pub const HIDDEN_VALUE: &str = "anneal::hidden";

/// What a single-key map's key means in a template of a given version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    Function(Function),
    /// A condition function (`equals`, `not`, `and`, `or`), only valid in a condition.
    Condition(Function),
    /// `if` (`nullable`: the false branch may be omitted, 2021-04-16+).
    If {
        nullable: bool,
    },
    /// `Ref` (2013-05-23): `get_resource` or `get_param`, by which the name is.
    Ref,
    /// Registered as heat.engine.hot.functions.Removed in this version.
    Removed,
    /// A HOT function this version does not have yet; `added` is the first version with it.
    NotYet {
        added: Version,
    },
    /// Known to Heat, not implemented here (the reason is the message).
    Refused(&'static str),
    /// Not a function name: the map is data.
    Data,
}

const CFN_2013_ONLY: &[&str] = &[
    "Fn::GetAZs",
    "Fn::Join",
    "Fn::Split",
    "Fn::Replace",
    "Fn::Base64",
    "Fn::MemberListToMap",
    "Fn::ResourceFacade",
    "Ref",
];

/// The meaning of `name` outside conditions in `version` (the reference functions are not
/// asked about: `Expr` handles them first).
pub fn meaning(name: &str, version: Version) -> Meaning {
    use Function as F;
    let since = |added: Version, function: Function| {
        if version >= added { Meaning::Function(function) } else { Meaning::NotYet { added } }
    };
    match name {
        "repeat" => since(
            Version::V2015_04_30,
            F::Repeat {
                with_maps: version >= Version::V2016_10_14,
                with_permutations: version >= Version::V2017_09_01,
            },
        ),
        "digest" => since(Version::V2015_04_30, F::Digest),
        "str_split" => since(Version::V2015_10_15, F::StrSplit),
        "map_merge" => since(Version::V2016_04_08, F::MapMerge),
        "map_replace" => since(Version::V2016_10_14, F::MapReplace),
        "if" if version >= Version::V2016_10_14 => Meaning::If { nullable: version >= Version::V2021_04_16 },
        "if" => Meaning::NotYet { added: Version::V2016_10_14 },
        "filter" => since(Version::V2017_02_24, F::Filter),
        "str_replace_strict" => since(Version::V2017_02_24, F::StrReplaceStrict { empty_allowed: true }),
        "str_replace_vstrict" => since(Version::V2017_09_01, F::StrReplaceStrict { empty_allowed: false }),
        "make_url" => since(Version::V2017_09_01, F::MakeUrl),
        "list_concat" => since(Version::V2017_09_01, F::ListConcat { unique: false }),
        "list_concat_unique" => since(Version::V2017_09_01, F::ListConcat { unique: true }),
        "contains" => since(Version::V2017_09_01, F::Contains),
        "equals" => condition_meaning(F::Equals, version),
        "not" => condition_meaning(F::Not, version),
        "and" => condition_meaning(F::And, version),
        "or" => condition_meaning(F::Or, version),
        "Fn::Select" if version < Version::V2015_10_15 => Meaning::Function(F::Select),
        "Fn::Select" => Meaning::Removed,
        _ if CFN_2013_ONLY.contains(&name) && version > Version::V2013_05_23 => Meaning::Removed,
        "Fn::Join" => Meaning::Function(F::CfnJoin),
        "Fn::Split" => Meaning::Function(F::CfnSplit),
        "Fn::Replace" => Meaning::Function(F::CfnReplace),
        "Fn::Base64" => Meaning::Function(F::Base64),
        "Fn::MemberListToMap" => Meaning::Function(F::MemberListToMap),
        "Ref" => Meaning::Ref,
        "Fn::GetAZs" => Meaning::Function(F::GetAzs),
        "Fn::ResourceFacade" => {
            Meaning::Refused("Fn::ResourceFacade is not supported outside a provider template (a nested stack)")
        }
        "resource_facade" => {
            Meaning::Refused("resource_facade is not supported outside a provider template (a nested stack)")
        }
        // Under resources and outputs the files pre-pass (environment.rs) has replaced it already.
        "get_file" => Meaning::Refused("get_file is only resolved under resources and outputs"),
        "get_server_attr" => Meaning::Refused("unsupported function get_server_attr"),
        "yaql" => since(Version::V2016_10_14, F::Yaql),
        _ if name.starts_with("Fn::") => Meaning::Refused("unsupported function"),
        _ => Meaning::Data,
    }
}

fn condition_meaning(function: Function, version: Version) -> Meaning {
    if version >= Version::V2016_10_14 {
        Meaning::Condition(function)
    } else {
        Meaning::NotYet { added: Version::V2016_10_14 }
    }
}

impl Function {
    /// The name the function is written with (the stored form).
    pub fn name(&self) -> &'static str {
        match self {
            Function::Repeat { .. } => "repeat",
            Function::Digest => "digest",
            Function::StrSplit => "str_split",
            Function::StrReplaceStrict { empty_allowed: true } => "str_replace_strict",
            Function::StrReplaceStrict { empty_allowed: false } => "str_replace_vstrict",
            Function::MapMerge => "map_merge",
            Function::MapReplace => "map_replace",
            Function::ListConcat { unique: false } => "list_concat",
            Function::ListConcat { unique: true } => "list_concat_unique",
            Function::Contains => "contains",
            Function::Filter => "filter",
            Function::MakeUrl => "make_url",
            Function::Equals => "equals",
            Function::Not => "not",
            Function::And => "and",
            Function::Or => "or",
            Function::Select => "Fn::Select",
            Function::CfnJoin => "Fn::Join",
            Function::CfnSplit => "Fn::Split",
            Function::CfnReplace => "Fn::Replace",
            Function::Base64 => "Fn::Base64",
            Function::GetAzs => "Fn::GetAZs",
            Function::MemberListToMap => "Fn::MemberListToMap",
            Function::LegacyReplace => "str_replace",
            Function::LegacyJoin => "list_join",
            Function::Yaql => "yaql",
            Function::NestedParameter => crate::template::nested::convert::NESTED_PARAMETER,
            Function::NestedFailure => crate::template::nested::convert::NESTED_FAILURE,
            Function::HiddenValue => HIDDEN_VALUE,
        }
    }
}

/// Most items `repeat`, `list_concat` or `str_split` may produce.
pub const MAX_LIST_ITEMS: usize = 100_000;

/// The error of a function given arguments it cannot take.
pub(super) fn invalid(message: impl Into<String>) -> EvalError {
    EvalError::Invalid { message: message.into() }
}

/// A `str_replace` error reworded for the function that used it (`str_replace_strict`, ...).
pub(super) fn rename(error: EvalError, name: &str) -> EvalError {
    match error {
        EvalError::Invalid { message } => invalid(message.replacen("str_replace", name, 1)),
        other => other,
    }
}
