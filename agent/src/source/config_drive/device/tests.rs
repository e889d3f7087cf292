use super::*;

#[test]
fn blkid_export_is_parsed_with_escapes() {
    let output = "DEVNAME=/dev/vda1\nLABEL=my\\ root\nTYPE=ext4\nUUID=1\n\nDEVNAME=/dev/sr0\nLABEL=config-2\nTYPE=iso9660\n\nLABEL=orphan\n";
    assert_eq!(
        parse_blkid_export(output),
        vec![
            BlockDevice { devname: "/dev/vda1".into(), fs_type: "ext4".into(), label: "my root".into() },
            BlockDevice { devname: "/dev/sr0".into(), fs_type: "iso9660".into(), label: "config-2".into() },
        ]
    );
}

#[test]
fn proc_mounts_paths_are_unescaped() {
    assert_eq!(unescape_mounts("/run/a\\040b\\011c\\134d"), "/run/a b\tc\\d");
    assert_eq!(unescape_mounts("/plain\\9x\\"), "/plain\\9x\\");
    let dir = tempfile::tempdir().unwrap();
    let mounts = dir.path().join("mounts");
    fs::write(&mounts, "/dev/sr01 /wrong iso9660 ro 0 0\n/dev/sr0 /media/config\\0402 iso9660 ro 0 0\n").unwrap();
    assert_eq!(mounted_at("s", &mounts, "/dev/sr0").unwrap(), Some(PathBuf::from("/media/config 2")));
    assert_eq!(mounted_at("s", &mounts, "/dev/vdb").unwrap(), None);
    assert!(matches!(mounted_at("s", &dir.path().join("absent"), "/dev/sr0"), Err(SourceError::ReadFile { .. })));
}
