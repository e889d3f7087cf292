//! The hook's environment: what a heat-agents hook finds in `os.environ` (the agent's hook
//! environment), from which it reads its settings (`HEAT_<HOOK>_*`) and which its tools inherit.

/// The variables a hook runs with, in order; a later duplicate wins, as in `os.environ`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookEnv {
    variables: Vec<(String, String)>,
}

impl HookEnv {
    pub fn new(variables: Vec<(String, String)>) -> HookEnv {
        HookEnv { variables }
    }

    /// `os.environ.get(name)`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.variables.iter().rev().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// `os.environ.get(name, default)`.
    pub fn get_or<'a>(&'a self, name: &str, default: &'a str) -> &'a str {
        self.get(name).unwrap_or(default)
    }

    /// `env = os.environ.copy(); env.update(extra)`: a tool's environment.
    pub fn with(&self, extra: &[(String, String)]) -> Vec<(String, String)> {
        let mut variables: Vec<(String, String)> = Vec::with_capacity(self.variables.len() + extra.len());
        for (key, value) in self.variables.iter().chain(extra) {
            match variables.iter_mut().find(|(existing, _)| existing == key) {
                Some(slot) => slot.1 = value.clone(),
                None => variables.push((key.clone(), value.clone())),
            }
        }
        variables
    }

    pub fn variables(&self) -> &[(String, String)] {
        &self.variables
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(key: &str, value: &str) -> (String, String) {
        (key.to_string(), value.to_string())
    }

    #[test]
    fn later_values_win_and_keep_the_first_position() {
        let env = HookEnv::new(vec![pair("PATH", "/bin"), pair("A", "1"), pair("A", "2")]);
        assert_eq!(env.get("A"), Some("2"));
        assert_eq!(env.get_or("B", "default"), "default");
        let merged = env.with(&[pair("PATH", "/usr/bin"), pair("C", "3")]);
        assert_eq!(merged, vec![pair("PATH", "/usr/bin"), pair("A", "2"), pair("C", "3")]);
    }
}
