//! `anneal-agent hooks`: the hooks built into the agent (anneal-hooks', `script` first), and for
//! each the installed hook file that runs instead, found the way a deployment's hook is found
//! (the first `<dir>/<group>` in `hooks_dirs`).

use std::path::PathBuf;

use crate::hook::lookup::find_hook;

/// One built-in hook and what runs for its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRow {
    pub group: &'static str,
    pub summary: &'static str,
    /// The hook file that overrides the built-in, if one is installed.
    pub overridden_by: Option<PathBuf>,
}

/// Every built-in, `script` first, with its override in `hooks_dirs`.
pub fn rows(hooks_dirs: &[PathBuf]) -> Vec<HookRow> {
    anneal_hooks::Builtin::ALL
        .into_iter()
        .map(|builtin| HookRow {
            group: builtin.group(),
            summary: builtin.summary(),
            overridden_by: find_hook(hooks_dirs, builtin.group()),
        })
        .collect()
}

/// The table `anneal-agent hooks` prints.
pub fn render(rows: &[HookRow]) -> String {
    let width = rows.iter().map(|row| row.group.len()).max().unwrap_or(5).max("GROUP".len());
    let mut text = format!("{:width$}  {:40}  {}\n", "GROUP", "RUNS", "WHAT IT DOES");
    for row in rows {
        let runs = match &row.overridden_by {
            Some(path) => path.display().to_string(),
            None => "built-in".to_string(),
        };
        text.push_str(&format!("{:width$}  {:40}  {}\n", row.group, runs, row.summary));
    }
    text
}

/// The same as JSON: `[{group, builtin: true, overridden_by: path|null, summary}]`.
pub fn render_json(rows: &[HookRow]) -> String {
    let list: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            serde_json::json!({
                "group": row.group,
                "overridden_by": row.overridden_by.as_ref().map(|path| path.display().to_string()),
                "summary": row.summary,
            })
        })
        .collect();
    format!("{}\n", serde_json::Value::Array(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installed_file_is_shown_as_overriding_its_built_in() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("a"), root.path().join("b")];
        std::fs::create_dir_all(&dirs[1]).unwrap();
        std::fs::write(dirs[1].join("puppet"), "#!/bin/sh\n").unwrap();
        let rows = rows(&dirs);
        assert_eq!(rows[0].group, "script");
        let groups: Vec<&str> = rows.iter().map(|row| row.group).collect();
        for group in ["ansible", "apply-config", "cfn-init", "chef", "docker-compose", "hiera", "json-file", "puppet"] {
            assert!(groups.contains(&group), "{group}");
        }
        let puppet = rows.iter().find(|row| row.group == "puppet").unwrap();
        assert_eq!(puppet.overridden_by.as_deref(), Some(dirs[1].join("puppet").as_path()));
        assert!(rows.iter().filter(|row| row.group != "puppet").all(|row| row.overridden_by.is_none()));
        let table = render(&rows);
        assert!(
            table
                .lines()
                .any(|line| line.starts_with("puppet") && line.contains(&dirs[1].join("puppet").display().to_string()))
        );
        assert!(table.lines().any(|line| line.starts_with("ansible") && line.contains("built-in")));
        let json: serde_json::Value = serde_json::from_str(&render_json(&rows)).unwrap();
        assert_eq!(json.as_array().unwrap().len(), rows.len());
    }
}
