//! The config drive from a directory (`path`), and from a device found and mounted by fake
//! `blkid`, `mount` and `umount` programs (the real ones need a vfat or iso9660 file system in
//! the kernel and root).

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::config::ConfigDriveSourceConfig;
use crate::error_chain;

fn write(root: &Path, relative: &str, contents: &[u8]) {
    let path = root.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, contents).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
}

/// A drive as Nova writes it (trimmed).
fn drive() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, META_DATA, br#"{"uuid": "83679162", "hostname": "vm-1", "meta": {"role": "web"}}"#);
    write(root, VENDOR_DATA, br#"{"static": {}}"#);
    write(root, USER_DATA, b"#cloud-config\nruncmd: []\n");
    write(root, EC2_META_DATA, br#"{"instance-id": "i-00000001", "local-ipv4": "10.0.0.5"}"#);
    write(root, "openstack/content/0000", b"a file the drive carries");
    dir
}

fn expected() -> Value {
    json!({
        "instance-id": "i-00000001",
        "local-ipv4": "10.0.0.5",
        "openstack": {
            "meta_data": {"uuid": "83679162", "hostname": "vm-1", "meta": {"role": "web"}},
            "vendor_data": {"static": {}},
            "user_data": "#cloud-config\nruncmd: []\n",
        },
    })
}

fn path_source(path: &Path) -> ConfigDriveSource {
    let config = ConfigDriveSourceConfig { path: Some(path.to_path_buf()), label: "config-2".to_string() };
    ConfigDriveSource::new("source[0] config-drive".to_string(), &config)
}

async fn fetch(source: &ConfigDriveSource) -> Result<Fetched, SourceError> {
    source.fetch(&CancellationToken::new()).await
}

#[tokio::test]
async fn a_mounted_drive_is_read() {
    let drive = drive();
    assert_eq!(fetch(&path_source(drive.path())).await.unwrap(), Fetched::Document(expected()));
}

#[tokio::test]
async fn optional_files_may_be_missing_and_binary_user_data_is_left_out() {
    let drive = drive();
    fs::remove_file(drive.path().join(EC2_META_DATA)).unwrap();
    fs::remove_file(drive.path().join(VENDOR_DATA)).unwrap();
    write(drive.path(), USER_DATA, &[0x1f, 0x8b, 0x08, 0xff]);
    let expected =
        json!({"openstack": {"meta_data": {"uuid": "83679162", "hostname": "vm-1", "meta": {"role": "web"}}}});
    assert_eq!(fetch(&path_source(drive.path())).await.unwrap(), Fetched::Document(expected));
}

#[tokio::test]
async fn a_missing_directory_is_an_empty_document() {
    let dir = tempfile::tempdir().unwrap();
    let source = path_source(&dir.path().join("absent"));
    assert_eq!(fetch(&source).await.unwrap(), Fetched::Document(json!({})));
}

#[tokio::test]
async fn a_directory_without_meta_data_is_not_a_drive() {
    let dir = tempfile::tempdir().unwrap();
    let error = fetch(&path_source(dir.path())).await.unwrap_err();
    assert!(matches!(error, SourceError::BadFile { .. }), "{error:?}");
    assert!(error.to_string().ends_with("not a config drive: it has no openstack/latest/meta_data.json"), "{error}");
}

#[tokio::test]
async fn files_others_may_write_are_refused() {
    let drive = drive();
    let source = path_source(drive.path());
    let vendor = drive.path().join(VENDOR_DATA);
    fs::set_permissions(&vendor, fs::Permissions::from_mode(0o666)).unwrap();
    let error = fetch(&source).await.unwrap_err();
    assert!(matches!(error, SourceError::Unsafe { .. }), "{error:?}");
    assert!(error.to_string().contains("is group- and world-writable (mode 0666)"), "{error}");
    fs::set_permissions(&vendor, fs::Permissions::from_mode(0o644)).unwrap();
    let latest = drive.path().join("openstack/latest");
    fs::set_permissions(&latest, fs::Permissions::from_mode(0o775)).unwrap();
    let error = fetch(&source).await.unwrap_err();
    assert!(error.to_string().contains("is group-writable"), "{error}");
    fs::set_permissions(&latest, fs::Permissions::from_mode(0o755)).unwrap();
    write(drive.path(), META_DATA, b"[1]");
    assert!(matches!(fetch(&source).await, Err(SourceError::NotObject { found: "array", .. })));
}

/// Fake programs in a private directory, logging their arguments to `calls`.
struct Fakes {
    dir: tempfile::TempDir,
    mount_parent: tempfile::TempDir,
}

impl Fakes {
    fn new() -> Fakes {
        Fakes { dir: tempfile::tempdir().unwrap(), mount_parent: tempfile::tempdir().unwrap() }
    }

    fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn calls(&self) -> String {
        fs::read_to_string(self.dir.path().join("calls")).unwrap_or_default()
    }

    /// blkid printing `listing`, mount copying `drive` into its last argument, umount emptying
    /// the directory; /proc/mounts with `mounts`.
    fn tools(&self, listing: &str, drive: &Path, mounts: &str) -> Tools {
        let calls = self.dir.path().join("calls");
        let calls = calls.display();
        let proc_mounts = self.dir.path().join("mounts");
        fs::write(&proc_mounts, mounts).unwrap();
        Tools {
            blkid: self.script("blkid", &format!("echo \"blkid $*\" >> {calls}\nprintf '{listing}'")),
            mount: self.script(
                "mount",
                &format!("echo \"mount $*\" >> {calls}\nfor last; do :; done\ncp -R {}/. \"$last\"", drive.display()),
            ),
            umount: self.script("umount", &format!("echo \"umount $*\" >> {calls}\nrm -rf \"$2\"/*")),
            proc_mounts,
            mount_parent: self.mount_parent.path().to_path_buf(),
            timeout: Duration::from_secs(10),
            kill_grace: Duration::from_millis(200),
        }
    }

    fn leftovers(&self) -> usize {
        fs::read_dir(self.mount_parent.path()).unwrap().count()
    }
}

const LISTING: &str = "DEVNAME=/dev/vda1\\nLABEL=cloudimg-rootfs\\nTYPE=ext4\\n\\n\
                       DEVNAME=/dev/vdb\\nLABEL=config-2\\nTYPE=ext4\\n\\n\
                       DEVNAME=/dev/sr0\\nUUID=2026-11-24\\nLABEL=config-2\\nTYPE=iso9660\\n";

fn device_source(tools: Tools) -> ConfigDriveSource {
    let config = ConfigDriveSourceConfig { path: None, label: "config-2".to_string() };
    ConfigDriveSource::new("source[0] config-drive".to_string(), &config).with_tools(tools)
}

#[tokio::test]
async fn the_labelled_device_is_mounted_read_only_read_and_unmounted() {
    let drive = drive();
    let fakes = Fakes::new();
    let source = device_source(fakes.tools(LISTING, drive.path(), "/dev/vda1 / ext4 rw 0 0\n"));
    assert_eq!(fetch(&source).await.unwrap(), Fetched::Document(expected()));
    let calls = fakes.calls();
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 3, "{calls}");
    assert_eq!(lines[0], "blkid -o export");
    let parent = fakes.mount_parent.path().display().to_string();
    let mount = lines[1].strip_prefix("mount -o ro,nosuid,nodev,noexec -t iso9660 /dev/sr0 ").unwrap();
    assert!(mount.starts_with(&format!("{parent}/config-2-")), "{calls}");
    assert_eq!(lines[2], format!("umount -l {mount}"));
    assert_eq!(fakes.leftovers(), 0, "the mount directory is removed");
}

#[tokio::test]
async fn an_already_mounted_device_is_read_where_it_is() {
    let drive = drive();
    let parent = tempfile::tempdir().unwrap();
    let mounted = parent.path().join("config drive");
    fs::rename(drive.path(), &mounted).unwrap();
    let fakes = Fakes::new();
    let mounts = format!(
        "/dev/vda1 / ext4 rw 0 0\n/dev/sr0 {} iso9660 ro 0 0\n",
        mounted.display().to_string().replace(' ', "\\040")
    );
    let source = device_source(fakes.tools(LISTING, Path::new("/nonexistent"), &mounts));
    assert_eq!(fetch(&source).await.unwrap(), Fetched::Document(expected()));
    assert_eq!(fakes.calls(), "blkid -o export\n", "neither mount nor umount ran");
}

#[tokio::test]
async fn no_drive_is_an_empty_document() {
    let fakes = Fakes::new();
    // A config-2 label on a file system a drive does not use, and another label.
    let listing = "DEVNAME=/dev/vdb\\nLABEL=config-2\\nTYPE=ext4\\n\\nDEVNAME=/dev/sr0\\nLABEL=config-3\\nTYPE=vfat\\n";
    let source = device_source(fakes.tools(listing, Path::new("/nonexistent"), ""));
    assert_eq!(fetch(&source).await.unwrap(), Fetched::Document(json!({})));
    // blkid's exit status 2: no device identified at all.
    let mut tools = fakes.tools("", Path::new("/nonexistent"), "");
    tools.blkid = fakes.script("blkid", "exit 2");
    assert_eq!(fetch(&device_source(tools)).await.unwrap(), Fetched::Document(json!({})));
    assert!(!fakes.calls().contains("mount"), "{}", fakes.calls());
}

#[tokio::test]
async fn a_failing_mount_is_reported_and_cleaned_up() {
    let fakes = Fakes::new();
    let mut tools = fakes.tools(LISTING, Path::new("/nonexistent"), "");
    tools.mount = fakes.script("mount", "echo 'mount: unknown filesystem type iso9660' >&2\nexit 32");
    let error = fetch(&device_source(tools.clone())).await.unwrap_err();
    assert!(matches!(error, SourceError::Command { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "source[0] config-drive: {}: exited with status 32: mount: unknown filesystem type iso9660",
            tools.mount.display()
        )
    );
    assert!(!fakes.calls().contains("umount"), "nothing was mounted: {}", fakes.calls());
    assert_eq!(fakes.leftovers(), 0);
}

#[tokio::test]
async fn a_hanging_program_is_killed_at_its_deadline() {
    let fakes = Fakes::new();
    let drive = drive();
    let mut tools = fakes.tools(LISTING, drive.path(), "");
    tools.mount = fakes.script("mount", "sleep 30");
    tools.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let error = fetch(&device_source(tools)).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(error_chain(&error).ends_with("did not finish within 0.3 s; killed"), "{}", error_chain(&error));
    // The timed-out mount may have mounted: umount ran, and the directory is gone.
    assert!(fakes.calls().contains("umount -l "), "{}", fakes.calls());
    assert_eq!(fakes.leftovers(), 0);
}

#[tokio::test]
async fn blkid_failures_and_odd_devices_are_errors() {
    let fakes = Fakes::new();
    let mut tools = fakes.tools("", Path::new("/nonexistent"), "");
    tools.blkid = fakes.script("blkid", "echo 'blkid: broken' >&2\nexit 4");
    let error = fetch(&device_source(tools)).await.unwrap_err();
    assert!(error.to_string().ends_with("exited with status 4: blkid: broken"), "{error}");
    let tools = fakes.tools("DEVNAME=-oremount\\nLABEL=config-2\\nTYPE=vfat\\n", Path::new("/nonexistent"), "");
    let error = fetch(&device_source(tools)).await.unwrap_err();
    assert!(error.to_string().ends_with("reported a device name outside /dev: \"-oremount\""), "{error}");
}

#[tokio::test]
async fn shutdown_during_a_mount_still_unmounts() {
    let fakes = Fakes::new();
    let mut tools = fakes.tools(LISTING, Path::new("/nonexistent"), "");
    tools.mount = fakes.script("mount", "sleep 30");
    let source = device_source(tools);
    let shutdown = CancellationToken::new();
    let cancel = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    assert_eq!(source.fetch(&shutdown).await.unwrap(), Fetched::Cancelled);
    assert!(fakes.calls().contains("umount -l "), "{}", fakes.calls());
    assert_eq!(fakes.leftovers(), 0);
}
