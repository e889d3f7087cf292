//! Where the binaries under test are: `anneal-agent` and `anneal-shim` in the target dir next to
//! the running test executable (`<target>/<profile>/deps/<test>` → `<target>/<profile>/<binary>`).
//! `scripts/test` builds them first; when one is missing the panic names the command that does.

use std::path::PathBuf;

/// The command that builds both binaries the end-to-end tests run.
pub const BUILD_COMMAND: &str = "cargo build -p anneal-agent -p anneal-shim";

/// The absolute path of `anneal-agent`.
pub fn agent_binary() -> PathBuf {
    binary("anneal-agent")
}

/// The absolute path of `anneal-shim`.
pub fn shim_binary() -> PathBuf {
    binary("anneal-shim")
}

fn binary(name: &str) -> PathBuf {
    let executable = std::env::current_exe().expect("the test executable's path");
    let mut directory = executable.parent().expect("the test executable's directory").to_path_buf();
    if directory.ends_with("deps") {
        directory.pop();
    }
    let path = directory.join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the binaries under test first with `{BUILD_COMMAND}` (scripts/test does)",
        path.display()
    );
    path
}
