//! The limits every stack is held to (`EngineConfig`, set by `anneal-shim serve`): its
//! evaluation budget, its resources (Heat's `max_resources_per_stack`), the bytes its
//! deployments may publish to servers' documents (`published`) and how long a create, update or
//! delete given no timeout of its own may take (Heat's `stack_action_timeout`).

use crate::template::MaxResources;

/// The limits of a stack (`EngineConfig`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub evaluation_budget: usize,
    pub max_resources: MaxResources,
    pub max_deployment_bytes: MaxDeploymentBytes,
    pub stack_action_timeout: StackActionTimeout,
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

/// Heat's default `stack_action_timeout`, in seconds: an hour.
pub const STACK_ACTION_TIMEOUT_SECS: u64 = 3600;

/// How long a stack's create or update without a timeout of its own, and any delete, may take
/// before the stack fails (Heat's `stack_action_timeout`, which `Stack.timeout_secs` falls back
/// to when the stack has no `timeout_mins`). At least one second: Heat's 0 would fail every
/// stack at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackActionTimeout(u64);

impl Default for StackActionTimeout {
    fn default() -> StackActionTimeout {
        StackActionTimeout(STACK_ACTION_TIMEOUT_SECS)
    }
}

impl StackActionTimeout {
    pub fn from_secs(secs: u64) -> Result<StackActionTimeout, String> {
        match secs {
            0 => Err("a stack action timeout must be at least 1 second".into()),
            secs => Ok(StackActionTimeout(secs)),
        }
    }

    pub fn millis(&self) -> u64 {
        self.0.saturating_mul(1000)
    }

    /// When an action started at `now` (unix milliseconds) with `timeout_secs` of its own, or
    /// else this default, must be over.
    pub fn due_at(&self, now: u64, timeout_secs: Option<u64>) -> u64 {
        let millis = timeout_secs.map_or(self.millis(), |secs| secs.saturating_mul(1000));
        now.saturating_add(millis)
    }
}

/// The seconds, as the option is written (clap's default for `serve`).
impl std::fmt::Display for StackActionTimeout {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}", self.0)
    }
}

impl std::str::FromStr for StackActionTimeout {
    type Err = String;

    fn from_str(text: &str) -> Result<StackActionTimeout, String> {
        let secs: u64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number of seconds"))?;
        StackActionTimeout::from_secs(secs)
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

    #[test]
    fn the_stack_action_timeout_is_a_positive_number_of_seconds() {
        assert_eq!("3600".parse(), Ok(StackActionTimeout::default()));
        assert_eq!(StackActionTimeout::default().to_string(), "3600", "as serve --help shows it");
        assert_eq!(" 60 ".parse::<StackActionTimeout>().map(|timeout| timeout.millis()), Ok(60_000));
        assert_eq!("0".parse::<StackActionTimeout>(), Err("a stack action timeout must be at least 1 second".into()));
        assert_eq!("-1".parse::<StackActionTimeout>(), Err("\"-1\" is not a number of seconds".into()));
        assert_eq!("1h".parse::<StackActionTimeout>(), Err("\"1h\" is not a number of seconds".into()));
        let timeout = StackActionTimeout::default();
        assert_eq!(timeout.due_at(1_000, None), 3_601_000, "no timeout of its own: the default");
        assert_eq!(timeout.due_at(1_000, Some(60)), 61_000, "its own timeout wins");
        assert_eq!(timeout.due_at(u64::MAX, Some(u64::MAX)), u64::MAX);
    }
}
