// The git commit a binary is built from, for `--version` (included by agent/build.rs and
// shim/build.rs). `ANNEAL_COMMIT` in the build's environment wins (a build from a source tarball
// has no .git); otherwise `git rev-parse`, and "unknown" when neither answers. Sets the
// compile-time variable ANNEAL_COMMIT.

fn emit_commit() {
    println!("cargo:rerun-if-env-changed=ANNEAL_COMMIT");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // A commit moves the branch HEAD names (or HEAD itself, when detached), not HEAD's file.
    let mut watched = vec![root.join(".git/HEAD"), root.join(".git/packed-refs")];
    if let Ok(head) = std::fs::read_to_string(root.join(".git/HEAD"))
        && let Some(branch) = head.trim().strip_prefix("ref: ")
    {
        watched.push(root.join(".git").join(branch));
    }
    for path in watched.iter().filter(|path| path.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let commit = std::env::var("ANNEAL_COMMIT").ok().filter(|commit| !commit.trim().is_empty()).or_else(|| {
        let output = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(&root)
            .output()
            .ok()?;
        let text = String::from_utf8(output.stdout).ok()?;
        (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
    });
    let commit: String = commit
        .unwrap_or_else(|| "unknown".to_string())
        .chars()
        .filter(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '.' | '+'))
        .take(40)
        .collect();
    println!("cargo:rustc-env=ANNEAL_COMMIT={commit}");
}
