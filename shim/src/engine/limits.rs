//! The limits every stack is held to (`EngineConfig`, set by `anneal-shim serve`): its
//! evaluation budget, its resources (Heat's `max_resources_per_stack`) and the bytes its
//! deployments may publish to servers' documents (`published`).

use crate::template::MaxResources;

/// The limits of a stack (`EngineConfig`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub evaluation_budget: usize,
    pub max_resources: MaxResources,
    pub max_deployment_bytes: MaxDeploymentBytes,
}

/// The default limit: a group of 1000 members of 128 KiB configs each.
pub const MAX_DEPLOYMENT_BYTES: u64 = 128 << 20;

/// The most bytes of entries one stack may have published at once; `None` for no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxDeploymentBytes(pub Option<u64>);

impl Default for MaxDeploymentBytes {
    fn default() -> MaxDeploymentBytes {
        MaxDeploymentBytes(Some(MAX_DEPLOYMENT_BYTES))
    }
}

impl MaxDeploymentBytes {
    /// From the option's value: a number of bytes, or -1 for no limit.
    pub fn from_option(value: i64) -> Result<MaxDeploymentBytes, String> {
        match value {
            -1 => Ok(MaxDeploymentBytes(None)),
            bytes if bytes >= 0 => Ok(MaxDeploymentBytes(u64::try_from(bytes).ok())),
            other => Err(format!("{other} is not a number of bytes (-1 for no limit)")),
        }
    }

    pub fn allows(&self, bytes: u64) -> bool {
        self.0.is_none_or(|limit| bytes <= limit)
    }

    /// Why `bytes` are refused: the limit, and where it is set.
    pub fn exceeded(&self, bytes: u64) -> String {
        let limit = self.0.unwrap_or(u64::MAX);
        format!(
            "the stack's deployments would publish {bytes} bytes to servers' documents, over its limit of {limit} bytes \
             ({} MiB; each deployment and group member stores its own copy of its config and inputs; \
             anneal-shim serve --max-deployment-bytes-per-stack sets the limit)",
            limit >> 20
        )
    }
}

impl std::str::FromStr for MaxDeploymentBytes {
    type Err = String;

    fn from_str(text: &str) -> Result<MaxDeploymentBytes, String> {
        let value: i64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number of bytes"))?;
        MaxDeploymentBytes::from_option(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_takes_bytes_or_minus_one_for_no_limit() {
        assert_eq!("134217728".parse(), Ok(MaxDeploymentBytes::default()));
        assert_eq!("-1".parse(), Ok(MaxDeploymentBytes(None)));
        assert_eq!(" 0 ".parse(), Ok(MaxDeploymentBytes(Some(0))));
        assert_eq!("-2".parse::<MaxDeploymentBytes>(), Err("-2 is not a number of bytes (-1 for no limit)".into()));
        assert_eq!("128M".parse::<MaxDeploymentBytes>(), Err("\"128M\" is not a number of bytes".into()));
        assert!(MaxDeploymentBytes(None).allows(u64::MAX));
        assert!(MaxDeploymentBytes(Some(10)).allows(10) && !MaxDeploymentBytes(Some(10)).allows(11));
    }
}
