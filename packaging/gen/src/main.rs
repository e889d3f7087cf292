//! `anneal-gen OUT_DIR`: writes the man pages (`man1/anneal-agent.1`, one per subcommand too,
//! e.g. `anneal-agent-once.1`) and the bash, zsh and fish completions of both binaries, made from
//! the same clap definitions the binaries parse with, so they cannot drift. scripts/package
//! installs them into the packages.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

fn main() -> anyhow::Result<()> {
    let out = std::env::args_os().nth(1).map(PathBuf::from).context("usage: anneal-gen OUT_DIR")?;
    generate(&out)
}

fn generate(out: &Path) -> anyhow::Result<()> {
    for command in [anneal_agent::cli::Cli::command(), anneal_shim::client::cli::Cli::command()] {
        write_man_pages(&command, &out.join("man1"))?;
        write_completions(command, &out.join("completions"))?;
    }
    Ok(())
}

/// The page of `command` and of each of its subcommands (`git`'s style: `anneal-shim-stack.1`).
fn write_man_pages(command: &clap::Command, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let command = command.clone().disable_help_subcommand(true);
    let mut pending = vec![(command.get_name().to_string(), command)];
    while let Some((name, command)) = pending.pop() {
        // `anneal-shim-stack-create.1` documents `anneal-shim stack create`.
        let program = name.split_once('-').map_or(name.clone(), |(first, rest)| match rest.split_once('-') {
            Some((binary, words)) => format!("{first}-{binary} {}", words.replace('-', " ")),
            None => name.clone(),
        });
        // clap names are `&'static str` (its `string` feature is off); a generator run is short.
        let static_name: &'static str = Box::leak(name.clone().into_boxed_str());
        let command = command.name(static_name).bin_name(program);
        let path = dir.join(format!("{name}.1"));
        let mut page = Vec::new();
        clap_mangen::Man::new(command.clone()).render(&mut page).with_context(|| format!("render {name}"))?;
        std::fs::write(&path, page).with_context(|| format!("write {}", path.display()))?;
        for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
            pending.push((format!("{name}-{}", sub.get_name()), sub.clone()));
        }
    }
    Ok(())
}

fn write_completions(mut command: clap::Command, dir: &Path) -> anyhow::Result<()> {
    let name = command.get_name().to_string();
    for (shell, sub) in [(Shell::Bash, "bash"), (Shell::Zsh, "zsh"), (Shell::Fish, "fish")] {
        let target = dir.join(sub);
        std::fs::create_dir_all(&target).with_context(|| format!("create {}", target.display()))?;
        clap_complete::generate_to(shell, &mut command, &name, &target)
            .with_context(|| format!("{sub} completions of {name}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_command_gets_a_page_and_every_shell_its_completions() {
        let out = std::env::temp_dir().join(format!("anneal-gen-test-{}", std::process::id()));
        super::generate(&out).expect("generates");
        for page in ["anneal-agent.1", "anneal-agent-once.1", "anneal-shim-stack-graph.1", "anneal-shim-serve.1"] {
            let text = std::fs::read_to_string(out.join("man1").join(page)).expect(page);
            assert!(text.starts_with(".ie \\n(.g .ds Aq"), "{page} is roff: {}", &text[..40.min(text.len())]);
        }
        let page = std::fs::read_to_string(out.join("man1/anneal-shim-stack-graph.1")).expect("page");
        assert!(page.contains("anneal\\-shim stack graph"), "{page}");
        for file in ["bash/anneal-agent.bash", "zsh/_anneal-shim", "fish/anneal-shim.fish"] {
            let text = std::fs::read_to_string(out.join("completions").join(file)).expect(file);
            assert!(text.contains("once") || text.contains("stack"), "{file}");
        }
        std::fs::remove_dir_all(&out).expect("clean up");
    }
}
