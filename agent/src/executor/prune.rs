//! Journal retention in the executor: removes the entries (with their script and output files)
//! of deployments that left the metadata and owe nothing, once the retention period passed (see
//! docs/journal.md, "Retention"). The executor does it because it holds the journal's entries and
//! the current metadata, and no entry it removes may be running or waiting for delivery.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::time::Duration;

use anneal_protocol::Deployment;
use tracing::{info, warn};

use super::Executor;
use crate::journal::retention;

impl Executor {
    /// Removes what retention gives up at `now`; returns how many entries went. `deployments` must
    /// be everything the metadata lists (every source has a document): an id missing from an
    /// incomplete view may still be listed, and removing its entry would run it again.
    pub(crate) fn prune(&mut self, deployments: &[Deployment], retention: Option<Duration>, now: u64) -> usize {
        let listed: HashSet<&str> = deployments.iter().map(|deployment| deployment.id.as_str()).collect();
        let mut expired: Vec<String> = self
            .entries
            .values()
            .filter(|entry| retention::expired(entry, listed.contains(entry.id.as_str()), now, retention))
            .map(|entry| entry.id.clone())
            .collect();
        expired.sort();
        let mut removed = 0;
        for id in expired {
            let Some(entry) = self.entries.get(&id) else { continue };
            // The files first, the entry last: a crash in between leaves an entry that is
            // removed again next time, never files that nothing would remove.
            for file in self.runner.run_files(&entry.deployment) {
                match fs::remove_file(&file) {
                    Ok(()) => {}
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                    Err(error) => warn!(path = %file.display(), error = %error, "cannot remove a run's file"),
                }
            }
            match self.journal.remove(&id) {
                Ok(()) => {
                    self.entries.remove(&id);
                    removed += 1;
                }
                Err(error) => {
                    warn!(deployment_id = %id, error = %crate::error_chain(&error), "cannot remove a journal entry")
                }
            }
        }
        if removed > 0 {
            info!(removed, "journal entries of departed deployments removed after the retention period");
        }
        removed
    }
}

#[cfg(test)]
mod tests;
