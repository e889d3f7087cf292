//! The binaries under test: `anneal-agent` and `anneal-shim` next to the running bench executable
//! (`target/<profile>/`), built first by `cargo build [--release] -p anneal-agent -p anneal-shim`
//! so that a run never measures stale binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{BenchError, BenchResult};

/// Where the binaries are and which profile built them.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub agent: PathBuf,
    pub shim: PathBuf,
    /// This bench executable (scenario 5 starts it again as its `floor-server`).
    pub bench: PathBuf,
    /// `release` or `debug`: the profile of this bench executable and of the binaries.
    pub profile: String,
}

impl Binaries {
    /// The command that builds the binaries for this profile.
    pub fn build_command(profile: &str) -> String {
        let release = if profile == "release" { " --release" } else { "" };
        format!("cargo build{release} -p anneal-agent -p anneal-shim")
    }

    /// Builds them with `cargo` (the path cargo gave in `$CARGO`, or `cargo`) when `build` is
    /// set, then checks both exist.
    pub fn locate(cargo: Option<&Path>, build: bool) -> BenchResult<Binaries> {
        let executable = std::env::current_exe()
            .map_err(|source| BenchError::Process { what: "the bench executable's path".into(), source })?;
        let directory = executable
            .parent()
            .ok_or_else(|| BenchError::Failed("the bench executable has no directory".into()))?
            .to_path_buf();
        let profile = directory.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        if build {
            run_build(cargo, &profile)?;
        }
        let binaries = Binaries {
            agent: directory.join("anneal-agent"),
            shim: directory.join("anneal-shim"),
            bench: executable.clone(),
            profile,
        };
        for path in [&binaries.agent, &binaries.shim] {
            if !path.is_file() {
                return Err(BenchError::Failed(format!(
                    "{} is missing: build it with `{}` (or run without --no-build)",
                    path.display(),
                    Binaries::build_command(&binaries.profile)
                )));
            }
        }
        Ok(binaries)
    }
}

fn run_build(cargo: Option<&Path>, profile: &str) -> BenchResult<()> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut command = Command::new(cargo.unwrap_or(Path::new("cargo")));
    command.current_dir(&workspace).args(["build", "-p", "anneal-agent", "-p", "anneal-shim"]);
    if profile == "release" {
        command.arg("--release");
    }
    let status =
        command.status().map_err(|source| BenchError::Process { what: Binaries::build_command(profile), source })?;
    if !status.success() {
        return Err(BenchError::Failed(format!("`{}` failed: {status}", Binaries::build_command(profile))));
    }
    Ok(())
}
