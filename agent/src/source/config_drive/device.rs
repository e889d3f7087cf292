//! Finding the config drive's block device and reading it, as os-collect-config's config_drive
//! module does: `blkid -o export` lists the devices, the first labelled `label` with a vfat or
//! iso9660 file system is the drive; where `/proc/mounts` shows it mounted already it is read
//! there, else it is mounted read-only (and nosuid, nodev, noexec) on a fresh private directory,
//! read, unmounted (`umount -l`) and the directory removed. The programs are run through
//! `hook::process` (own process group, deadline, TERM then KILL, reaped); their paths are a field
//! (`Tools`) so tests can put fakes there.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::read_drive;
use crate::hook::Ending;
use crate::hook::process::{ProcessError, ProcessSpec, run_process};
use crate::source::{Fetched, SourceError};

/// The file systems a config drive is made with (Nova writes iso9660 or vfat).
const DRIVE_TYPES: [&str; 2] = ["vfat", "iso9660"];
/// The most output kept from one program; blkid's listing of a VM's devices is a few kilobytes.
const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// The environment of the programs: nothing of the agent's own.
const PROGRAM_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// The programs and files the device mode uses, and the limits on each program run.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    pub(crate) blkid: PathBuf,
    pub(crate) mount: PathBuf,
    pub(crate) umount: PathBuf,
    pub(crate) proc_mounts: PathBuf,
    /// Where the private mount directory is made.
    pub(crate) mount_parent: PathBuf,
    pub(crate) timeout: Duration,
    pub(crate) kill_grace: Duration,
}

impl Default for Tools {
    fn default() -> Tools {
        // These paths hold the programs on merged-/usr and split systems alike.
        Tools {
            blkid: PathBuf::from("/sbin/blkid"),
            mount: PathBuf::from("/bin/mount"),
            umount: PathBuf::from("/bin/umount"),
            proc_mounts: PathBuf::from("/proc/mounts"),
            mount_parent: PathBuf::from("/run"),
            timeout: Duration::from_secs(30),
            kill_grace: Duration::from_secs(2),
        }
    }
}

/// A block device as `blkid -o export` describes it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct BlockDevice {
    devname: String,
    fs_type: String,
    label: String,
}

/// How a program run ended.
enum Ran {
    Exited { code: i64, stdout: String, stderr: String },
    Cancelled,
}

/// Finds the drive and reads it; no drive is an empty document.
pub(super) async fn fetch(
    source_name: &str,
    label: &str,
    tools: &Tools,
    shutdown: &CancellationToken,
) -> Result<Fetched, SourceError> {
    let Some(device) = find_device(source_name, label, tools, shutdown).await? else {
        return Ok(Fetched::Document(Value::Object(Map::new())));
    };
    if shutdown.is_cancelled() {
        return Ok(Fetched::Cancelled);
    }
    if let Some(mountpoint) = mounted_at(source_name, &tools.proc_mounts, &device.devname)? {
        tracing::debug!(source = %source_name, device = %device.devname, mountpoint = %mountpoint.display(), "config drive is mounted already");
        return read_drive(source_name, &mountpoint).map(Fetched::Document);
    }
    mount_and_read(source_name, &device, tools, shutdown).await
}

/// The first device labelled `label` with a config drive's file system.
async fn find_device(
    source_name: &str,
    label: &str,
    tools: &Tools,
    shutdown: &CancellationToken,
) -> Result<Option<BlockDevice>, SourceError> {
    let args = ["-o", "export"].map(OsString::from);
    let output = match run(source_name, tools, &tools.blkid, &args, shutdown).await? {
        Ran::Cancelled => return Ok(None),
        // blkid exits 2 when it identified no device at all.
        Ran::Exited { code: 2, .. } => return Ok(None),
        Ran::Exited { code: 0, stdout, .. } => stdout,
        Ran::Exited { code, stderr, .. } => return Err(failed(source_name, &tools.blkid, code, &stderr)),
    };
    let device = parse_blkid_export(&output)
        .into_iter()
        .find(|device| device.label == label && DRIVE_TYPES.contains(&device.fs_type.as_str()));
    match &device {
        Some(device) if !device.devname.starts_with("/dev/") => Err(SourceError::Command {
            source_name: source_name.to_string(),
            program: tools.blkid.clone(),
            reason: format!("reported a device name outside /dev: {:?}", device.devname),
        }),
        Some(device) => {
            tracing::debug!(source = %source_name, device = %device.devname, fs_type = %device.fs_type, "found the config drive");
            Ok(Some(device.clone()))
        }
        None => {
            tracing::debug!(source = %source_name, label, "no config drive device");
            Ok(None)
        }
    }
}

/// Mounts the drive read-only on a new private directory, reads it, and unmounts it whatever
/// happened (a cancelled or timed-out mount may still have mounted it).
async fn mount_and_read(
    source_name: &str,
    device: &BlockDevice,
    tools: &Tools,
    shutdown: &CancellationToken,
) -> Result<Fetched, SourceError> {
    let dir = tempfile::Builder::new()
        .prefix("config-2-")
        .tempdir_in(&tools.mount_parent)
        .map_err(|source| SourceError::ReadFile {
            source_name: source_name.to_string(),
            path: tools.mount_parent.clone(),
            source,
        })?
        // Removed by hand, and only once unmounted: a recursive removal must never reach into
        // the drive.
        .keep();
    let args: Vec<OsString> = vec![
        "-o".into(),
        "ro,nosuid,nodev,noexec".into(),
        "-t".into(),
        device.fs_type.clone().into(),
        device.devname.clone().into(),
        dir.clone().into(),
    ];
    let mounted = run(source_name, tools, &tools.mount, &args, shutdown).await;
    let (result, maybe_mounted) = match mounted {
        Ok(Ran::Exited { code: 0, .. }) => (read_drive(source_name, &dir).map(Fetched::Document), true),
        Ok(Ran::Exited { code, stderr, .. }) => (Err(failed(source_name, &tools.mount, code, &stderr)), false),
        Ok(Ran::Cancelled) => (Ok(Fetched::Cancelled), true),
        Err(error) => (Err(error), true),
    };
    if maybe_mounted {
        unmount(source_name, tools, &dir).await;
    }
    if let Err(error) = fs::remove_dir(&dir) {
        tracing::warn!(source = %source_name, dir = %dir.display(), %error, "cannot remove the config drive's mount directory");
    }
    result
}

/// `umount -l DIR`, even during shutdown (a fresh token): leaving the drive mounted would leave
/// a mount behind on every poll.
async fn unmount(source_name: &str, tools: &Tools, dir: &Path) {
    let args = [OsString::from("-l"), dir.as_os_str().to_owned()];
    match run(source_name, tools, &tools.umount, &args, &CancellationToken::new()).await {
        Ok(Ran::Exited { code: 0, .. }) => {}
        Ok(Ran::Exited { code, stderr, .. }) => {
            let error = failed(source_name, &tools.umount, code, &stderr);
            tracing::warn!(source = %source_name, error = %crate::error_chain(&error), "cannot unmount the config drive");
        }
        Ok(Ran::Cancelled) => {}
        Err(error) => {
            tracing::warn!(source = %source_name, error = %crate::error_chain(&error), "cannot unmount the config drive");
        }
    }
}

/// Runs `program args` to its end or its deadline; `Cancelled` on shutdown.
async fn run(
    source_name: &str,
    tools: &Tools,
    program: &Path,
    args: &[OsString],
    shutdown: &CancellationToken,
) -> Result<Ran, SourceError> {
    let env = [("PATH".to_string(), PROGRAM_PATH.to_string()), ("LC_ALL".to_string(), "C".to_string())];
    let spec = ProcessSpec {
        program,
        args,
        env: &env,
        cwd: Path::new("/"),
        stdin: None,
        timeout: tools.timeout,
        kill_grace: tools.kill_grace,
        max_output_bytes: MAX_OUTPUT_BYTES,
        drain_after_exit: Duration::from_secs(1),
        run_marker: None,
    };
    let command_error =
        |reason: String| SourceError::Command { source_name: source_name.to_string(), program: program.into(), reason };
    let output = match run_process(spec, shutdown, |_| {}).await {
        Ok(output) => output,
        Err(ProcessError::Cancelled { .. }) => return Ok(Ran::Cancelled),
        Err(error) => return Err(command_error(crate::error_chain(&error))),
    };
    if let Ending::TimedOut { after } = output.ending {
        return Err(command_error(format!("did not finish within {} s; killed", after.as_secs_f32())));
    }
    if output.stdout.dropped > 0 {
        return Err(command_error(format!("printed more than {MAX_OUTPUT_BYTES} bytes")));
    }
    Ok(Ran::Exited { code: output.status_code, stdout: output.stdout.text(), stderr: output.stderr.text() })
}

fn failed(source_name: &str, program: &Path, code: i64, stderr: &str) -> SourceError {
    let stderr: String = stderr.trim().chars().take(300).map(|c| if c.is_control() { ' ' } else { c }).collect();
    SourceError::Command {
        source_name: source_name.to_string(),
        program: program.to_path_buf(),
        reason: format!("exited with status {code}: {stderr}"),
    }
}

/// `blkid -o export`: one `KEY=value` per line, devices separated by a blank line, special
/// characters in values escaped with a backslash.
fn parse_blkid_export(output: &str) -> Vec<BlockDevice> {
    output
        .split("\n\n")
        .map(|block| {
            let mut device = BlockDevice::default();
            for (key, value) in block.lines().filter_map(|line| line.split_once('=')) {
                let value = unescape_blkid(value);
                match key {
                    "DEVNAME" => device.devname = value,
                    "TYPE" => device.fs_type = value,
                    "LABEL" => device.label = value,
                    _ => {}
                }
            }
            device
        })
        .filter(|device| !device.devname.is_empty())
        .collect()
}

fn unescape_blkid(value: &str) -> String {
    let mut unescaped = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => unescaped.extend(chars.next()),
            c => unescaped.push(c),
        }
    }
    unescaped
}

/// Where `/proc/mounts` shows `devname` mounted, if anywhere.
fn mounted_at(source_name: &str, proc_mounts: &Path, devname: &str) -> Result<Option<PathBuf>, SourceError> {
    let mounts = fs::read_to_string(proc_mounts).map_err(|source| SourceError::ReadFile {
        source_name: source_name.to_string(),
        path: proc_mounts.to_path_buf(),
        source,
    })?;
    Ok(mounts.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let device = fields.next()?;
        let mountpoint = fields.next()?;
        (device == devname).then(|| PathBuf::from(unescape_mounts(mountpoint)))
    }))
}

/// `/proc/mounts` writes space, tab, newline and backslash in paths as `\NNN` (octal).
fn unescape_mounts(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let octal = bytes.get(index + 1..index + 4).filter(|digits| digits.iter().all(|d| (b'0'..=b'7').contains(d)));
        match (bytes[index], octal) {
            (b'\\', Some(digits)) => {
                out.push(digits.iter().fold(0u8, |value, digit| value.wrapping_mul(8).wrapping_add(digit - b'0')));
                index += 4;
            }
            (byte, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
