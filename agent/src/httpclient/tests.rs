use std::fs;

use super::*;
use crate::config::{HttpSourceConfig, LocalSourceConfig};

/// A PEM certificate of a new private CA.
fn ca_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).unwrap().pem()
}

fn http(ca_file: Option<PathBuf>) -> SourceConfig {
    SourceConfig::Http(HttpSourceConfig {
        urls: vec!["https://127.0.0.1:9/m".to_string()],
        token_file: None,
        ca_file,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(5),
        long_poll: Duration::from_secs(60),
        self_configure: false,
    })
}

fn config(sources: Vec<SourceConfig>) -> Config {
    let mut config =
        crate::config::parse("[[source]]\nkind = \"local\"\npath = \"/l\"\n", Path::new("/a.toml")).unwrap();
    config.sources = sources;
    config
}

#[test]
fn every_configured_ca_file_is_a_root() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one.pem"), dir.path().join("two.pem"));
    fs::write(&one, ca_pem()).unwrap();
    fs::write(&two, ca_pem() + &ca_pem()).unwrap();
    let local = SourceConfig::Local(LocalSourceConfig { path: "/l".into(), self_configure: false });
    let roots = TrustRoots::from_config(&config(vec![http(Some(one.clone())), local, http(None), http(Some(two))]));
    let roots = roots.unwrap();
    assert_eq!(roots.len(), 3);
    let roots = roots.with_files("--ca-file", &[one]).unwrap();
    assert_eq!(roots.len(), 4);
    build(Duration::from_secs(1), None, &roots).unwrap();
}

#[test]
fn ca_files_that_cannot_be_used_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.pem");
    fs::write(&bad, "not a certificate").unwrap();
    let error = TrustRoots::from_config(&config(vec![http(None), http(Some(bad.clone()))])).unwrap_err();
    assert_eq!(error.to_string(), format!("source[1] http: CA file {}: no PEM certificate found", bad.display()));
    let missing = dir.path().join("missing.pem");
    let error = TrustRoots::default().with_files("--ca-file", std::slice::from_ref(&missing)).unwrap_err();
    assert!(matches!(&error, CaFileError::Read { key, path, .. } if key == "--ca-file" && *path == missing));
    assert_eq!(error.to_string(), format!("--ca-file: cannot read CA file {}", missing.display()));
}

#[test]
fn the_built_in_roots_stand_in_only_for_a_missing_system_store() {
    assert!(super::builtin_roots_unless(true).is_empty());
    let built_in = super::builtin_roots_unless(false);
    assert!(built_in.len() > 100, "the Mozilla roots: {}", built_in.len());
}
