//! Which hook runs a deployment: heat-config's lookup (the group sanitised to `[A-Za-z0-9_-]`,
//! the first existing `<dir>/<name>` in the hooks dirs, existence only), then the built-in
//! `script` hook and anneal-hooks' built-ins (ansible, puppet, ...), then the groups that are skipped rather than waited for. A hook found that
//! someone other than root or the agent's user owns or may write (the file, what it links to, or
//! a directory above either) is refused, never run (see docs/security.md).

use std::path::PathBuf;

use anneal_protocol::Deployment;
use anneal_protocol::deployment::UNGROUPED;
use serde_json::Value;

use super::HookChoice;
use crate::fsutil::check_trusted_path;

/// The group heat-config whitelists: os-apply-config applies its metadata itself (bug 1715497).
const OS_APPLY_CONFIG: &str = "os-apply-config";

/// heat-config's hook file name for a group: every character outside `[A-Za-z0-9_-]` dropped
/// (`Heat::Ungrouped` becomes `HeatUngrouped`).
pub(crate) fn sanitise_group(group: &str) -> String {
    group.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').collect()
}

/// The first existing `<dir>/<sanitised group>` in `hooks_dirs`.
pub(crate) fn find_hook(hooks_dirs: &[PathBuf], group: &str) -> Option<PathBuf> {
    let name = sanitise_group(group);
    // An empty name would make the directory itself the "hook".
    if name.is_empty() {
        return None;
    }
    hooks_dirs.iter().map(|dir| dir.join(&name)).find(|candidate| candidate.exists())
}

/// The hook for a component-resolved deployment.
pub(crate) fn choose(hooks_dirs: &[PathBuf], deployment: &Deployment) -> HookChoice {
    if let Some(path) = find_hook(hooks_dirs, &deployment.group) {
        // The hooks dir too: whoever may write it could swap a hook that is a symbolic link.
        let dir = path.parent().unwrap_or(&path);
        return match check_trusted_path(dir).and_then(|()| check_trusted_path(&path)) {
            Ok(()) => HookChoice::External(path),
            Err(problem) => HookChoice::Unsafe { group: deployment.group.clone(), problem },
        };
    }
    let group = deployment.group.as_str();
    if group == UNGROUPED && is_script(&deployment.config) {
        return HookChoice::Builtin(anneal_hooks::Builtin::Script);
    }
    if let Some(builtin) = anneal_hooks::Builtin::from_group(group) {
        return HookChoice::Builtin(builtin);
    }
    if group == OS_APPLY_CONFIG {
        return HookChoice::Skip {
            reason: "group os-apply-config is applied by os-apply-config itself, not by a hook (skipped, as heat-config does)"
                .into(),
        };
    }
    HookChoice::Missing { group: group.to_string(), searched: hooks_dirs.iter().map(PathBuf::clone).collect() }
}

/// An ungrouped config is run as a script when it looks like one.
fn is_script(config: &Value) -> bool {
    config.as_str().is_some_and(|text| text.starts_with("#!"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::testing::{deployment, settings, shell_script};
    use serde_json::json;

    fn choose_for(dirs: &[PathBuf], group: &str, config: Value) -> HookChoice {
        choose(dirs, &deployment(json!({"id": "d1", "group": group, "config": config})))
    }

    #[test]
    fn sanitising_keeps_only_safe_characters() {
        assert_eq!(sanitise_group("Heat::Ungrouped"), "HeatUngrouped");
        assert_eq!(sanitise_group("../../bin/sh"), "binsh");
        assert_eq!(sanitise_group("docker-cmd_2"), "docker-cmd_2");
        assert_eq!(sanitise_group("pupp\u{e9}t"), "puppt");
    }

    #[test]
    fn first_directory_with_the_hook_wins() {
        let root = tempfile::tempdir().unwrap();
        let dirs = settings(root.path()).hooks_dirs;
        let second = shell_script(&dirs[1], "puppet", "exit 0");
        assert_eq!(choose_for(&dirs, "puppet", json!("")), HookChoice::External(second));
        let first = shell_script(&dirs[0], "puppet", "exit 0");
        assert_eq!(choose_for(&dirs, "puppet", json!("")), HookChoice::External(first));
    }

    #[test]
    fn missing_directories_are_passed_over() {
        let root = tempfile::tempdir().unwrap();
        let existing = settings(root.path()).hooks_dirs[1].clone();
        let dirs = vec![root.path().join("absent"), existing.clone()];
        let hook = shell_script(&existing, "ansible", "exit 0");
        assert_eq!(choose_for(&dirs, "ansible", json!("")), HookChoice::External(hook));
    }

    #[test]
    fn existence_is_enough_like_heat_config() {
        let root = tempfile::tempdir().unwrap();
        let dirs = settings(root.path()).hooks_dirs;
        std::fs::write(dirs[0].join("salt"), "not executable").unwrap();
        assert_eq!(choose_for(&dirs, "salt", json!("")), HookChoice::External(dirs[0].join("salt")));
    }

    #[test]
    fn sanitised_name_is_looked_up() {
        let root = tempfile::tempdir().unwrap();
        let dirs = settings(root.path()).hooks_dirs;
        let hook = shell_script(&dirs[0], "HeatUngrouped", "exit 0");
        assert_eq!(choose_for(&dirs, "Heat::Ungrouped", json!("not a script")), HookChoice::External(hook));
    }

    #[test]
    fn script_is_built_in_unless_installed() {
        let root = tempfile::tempdir().unwrap();
        let dirs = settings(root.path()).hooks_dirs;
        assert_eq!(choose_for(&dirs, "script", json!("#!/bin/sh")), HookChoice::Builtin(anneal_hooks::Builtin::Script));
        let installed = shell_script(&dirs[1], "script", "exit 0");
        assert_eq!(choose_for(&dirs, "script", json!("#!/bin/sh")), HookChoice::External(installed));
    }

    #[test]
    fn ungrouped_scripts_are_built_in_other_ungrouped_configs_are_missing() {
        let root = tempfile::tempdir().unwrap();
        let dirs = settings(root.path()).hooks_dirs;
        assert_eq!(
            choose_for(&dirs, UNGROUPED, json!("#!/bin/bash\necho hi")),
            HookChoice::Builtin(anneal_hooks::Builtin::Script)
        );
        let missing = choose_for(&dirs, UNGROUPED, json!({"files": {}}));
        assert_eq!(missing, HookChoice::Missing { group: UNGROUPED.into(), searched: dirs.clone() });
        let not_script = choose_for(&dirs, UNGROUPED, json!("echo hi"));
        assert!(matches!(not_script, HookChoice::Missing { .. }));
    }

    #[test]
    fn os_apply_config_is_skipped() {
        let root = tempfile::tempdir().unwrap();
        let dirs = settings(root.path()).hooks_dirs;
        let choice = choose_for(&dirs, "os-apply-config", json!({}));
        assert!(matches!(choice, HookChoice::Skip { reason } if reason.contains("os-apply-config")));
    }

    #[test]
    fn unknown_group_is_missing_with_the_searched_dirs() {
        let root = tempfile::tempdir().unwrap();
        let dirs = settings(root.path()).hooks_dirs;
        let choice = choose_for(&dirs, "no-such-tool", json!(""));
        assert_eq!(choice, HookChoice::Missing { group: "no-such-tool".into(), searched: dirs });
    }

    #[test]
    fn a_hook_someone_else_could_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let dirs = settings(root.path()).hooks_dirs;
        let hook = shell_script(&dirs[0], "puppet", "exit 0");
        let set_mode = |path: &std::path::Path, mode| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        set_mode(&hook, 0o775);
        let HookChoice::Unsafe { group, problem } = choose_for(&dirs, "puppet", json!("")) else { panic!() };
        assert_eq!(group, "puppet");
        assert_eq!(
            problem.to_string(),
            format!("{} is group-writable (mode 0775); refusing to use it", hook.display())
        );
        set_mode(&hook, 0o755);
        set_mode(&dirs[0], 0o777);
        let choice = choose_for(&dirs, "puppet", json!(""));
        assert!(matches!(&choice, HookChoice::Unsafe { problem, .. } if problem.path == dirs[0]), "{choice:?}");
        set_mode(&dirs[0], 0o755);
        if crate::fsutil::effective_uid() == 0 {
            std::os::unix::fs::chown(&hook, Some(65534), None).unwrap();
            let choice = choose_for(&dirs, "puppet", json!(""));
            let HookChoice::Unsafe { problem, .. } = choice else { panic!("{choice:?}") };
            assert_eq!(problem.problem, "is owned by uid 65534, not by root");
        }
    }

    #[test]
    fn a_group_that_sanitises_to_nothing_never_picks_a_directory() {
        let root = tempfile::tempdir().unwrap();
        let dirs = settings(root.path()).hooks_dirs;
        assert!(matches!(choose_for(&dirs, "::", json!("")), HookChoice::Missing { .. }));
        assert_eq!(find_hook(&dirs, ""), None);
    }
}
