use super::*;
use serde_json::json;

fn fixture(name: &str) -> Value {
    let path = format!("{}/../tests/fixtures/heat/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn heat_cfn_metadata_parses_with_every_field() {
    let (deployments, rejected) = deployments_from_document(&fixture("server-metadata-cfn.json"));
    assert!(rejected.is_empty());
    let deployment = &deployments[0];
    assert_eq!(deployment.id, "c4f1a2b3-0d9e-4f8a-b7c6-d5e4f3a2b1c0");
    assert_eq!(deployment.name.as_deref(), Some("10_deployment"));
    assert_eq!(deployment.options, Options::default(), "null options read as {{}}");
    assert_eq!(deployment.input_str("foo"), Some("fooooo"));
    assert_eq!(deployment.outputs[0].name, "result");
    match deployment.signal_transport() {
        SignalTransport::Http { url, verb } => {
            assert!(url.ends_with("Signature=abc%2Bdef%3D"), "URL kept byte for byte");
            assert_eq!(verb, HttpVerb::Post);
        }
        other => panic!("unexpected transport {other:?}"),
    }
}

#[test]
fn merger_fixture_rejects_only_the_malformed_entry() {
    let (deployments, rejected) = deployments_from_document(&fixture("os-collect-config-merger.json"));
    // Entries without an id cannot be run: the merger fixture's entries are os-apply-config data.
    assert_eq!(deployments.len(), 0);
    assert_eq!(rejected.len(), 5);
    assert!(rejected[4].reason.contains("id"), "{:?}", rejected[4]);
}

#[test]
fn heat_config_fixture_defaults() {
    let list = fixture("heat-config-deployments.json");
    let (deployments, rejected) = deployments_from_document(&json!({"deployments": list}));
    assert!(rejected.is_empty());
    assert_eq!(deployments.len(), 10);
    let salt = &deployments[2];
    assert_eq!(salt.group, "salt");
    assert_eq!(salt.inputs[0].input_type(), "String");
    assert_eq!(
        serde_json::to_value(&salt.inputs[0]).unwrap(),
        json!({"name": "foo", "value": "bar"}),
        "no type invented"
    );
    assert_eq!(deployments[1].outputs, vec![]);
    assert_eq!(
        deployments[0].signal_transport(),
        SignalTransport::Http { url: "mock://192.0.2.2/foo".into(), verb: HttpVerb::Post }
    );
    assert_eq!(deployments[1].signal_transport(), SignalTransport::None);
}

#[test]
fn signal_transport_precedence_follows_heat_config_notify() {
    let heat: Deployment = serde_json::from_value(fixture("heat-signal-inputs.json")).unwrap();
    let keystone = KeystoneInputs {
        auth_url: "mock://192.0.2.3/auth".into(),
        user_id: "aaaa".into(),
        password: "password".into(),
        project_id: "bbbb".into(),
        region_name: Some("RegionOne".into()),
    };
    assert_eq!(
        heat.signal_transport(),
        SignalTransport::HeatApi {
            keystone: keystone.clone(),
            stack_id: "cccc".into(),
            resource_name: "the_resource".into()
        }
    );
    assert!(!format!("{:?}", heat.signal_transport()).contains("password\""), "Debug hides the password");
    let mut zaqar = heat.clone();
    zaqar.inputs.push(serde_json::from_value(json!({"name": "deploy_queue_id", "value": "q"})).unwrap());
    assert_eq!(zaqar.signal_transport(), SignalTransport::Zaqar { keystone, queue_id: "q".into() });
    let mut sparse = heat.clone();
    sparse.inputs.retain(|input| input.name == "deploy_auth_url");
    sparse.inputs.push(serde_json::from_value(json!({"name": "deploy_region_name", "value": ""})).unwrap());
    let SignalTransport::HeatApi { keystone, stack_id, .. } = sparse.signal_transport() else { panic!() };
    assert_eq!((keystone.password.as_str(), keystone.region_name, stack_id.as_str()), ("", None, ""));
    let mut put = heat.clone();
    put.inputs.push(serde_json::from_value(json!({"name": "deploy_signal_id", "value": "http://x/"})).unwrap());
    put.inputs.push(serde_json::from_value(json!({"name": "deploy_signal_verb", "value": "PUT"})).unwrap());
    assert_eq!(put.signal_transport(), SignalTransport::Http { url: "http://x/".into(), verb: HttpVerb::Put });
}

#[test]
fn component_picks_the_config_for_the_action() {
    let component: Deployment = serde_json::from_value(fixture("component-deployment.json")).unwrap();
    let resolved = component.resolve_component().unwrap().unwrap();
    assert_eq!(resolved.group, "script");
    assert!(resolved.config.as_str().unwrap().contains("updated"));
    let mut delete = component.clone();
    delete.inputs[0].value = Some(json!("SUSPEND"));
    assert_eq!(delete.resolve_component().unwrap(), None);
    let mut broken = component.clone();
    broken.config = json!("not a component");
    assert_eq!(broken.resolve_component(), Err(ComponentError::NotComponent));
    let script = Deployment { group: "script".into(), ..component.clone() };
    assert_eq!(script.resolve_component().unwrap().unwrap(), script);
}

#[test]
fn options_are_typed_and_validated() {
    let parse = |options: Value| serde_json::from_value::<Deployment>(json!({"id": "a", "options": options}));
    let full = parse(json!({"depends_on": ["10_a"], "timeout": "30", "on_interrupt": "rerun", "tags": "x"})).unwrap();
    assert_eq!(full.options.depends_on, vec!["10_a".to_string()]);
    assert_eq!(full.options.timeout, Some(30));
    assert_eq!(full.options.on_interrupt, Some(OnInterrupt::Rerun));
    assert_eq!(full.options.extra["tags"], "x", "unknown options are kept for hooks");
    assert_eq!(parse(json!({"timeout": 1.5})).unwrap().options.timeout, Some(2));
    assert!(parse(json!({"timeout": 0})).is_err());
    assert!(parse(json!({"timeout": "soon"})).is_err());
    assert!(parse(json!({"on_interrupt": "maybe"})).is_err());
    assert!(parse(json!(null)).is_ok());
}

#[test]
fn missing_and_null_values_are_distinguished() {
    let deployment: Deployment = serde_json::from_value(json!({
        "id": "a", "group": null, "inputs": [{"name": "x"}, {"name": "y", "value": null}], "outputs": null
    }))
    .unwrap();
    assert_eq!(deployment.group, UNGROUPED);
    assert_eq!(deployment.inputs[0].value, None);
    assert_eq!(deployment.inputs[1].value, Some(Value::Null));
    assert_eq!(deployment.config, json!(""));
}

#[test]
fn unsafe_ids_are_rejected() {
    for id in ["../etc", "a/b", "", ".hidden", "x\0y", &"a".repeat(129)] {
        let (accepted, rejected) = deployments_from_document(&json!({"deployments": [{"id": id}]}));
        assert!(accepted.is_empty() && rejected.len() == 1, "{id:?}");
    }
    let (_, rejected) = deployments_from_document(&json!({"deployments": {"not": "a list"}}));
    assert_eq!(rejected.len(), 1);
    assert!(deployments_from_document(&json!({"other": 1})).0.is_empty());
}

#[test]
fn round_trip_keeps_unknown_keys() {
    let text = json!({"id": "a", "name": "n", "group": "script", "config": "", "options": {}, "inputs": [],
                      "outputs": [{"name": "o", "error_output": false, "type": "String"}], "future_key": 1});
    let deployment: Deployment = serde_json::from_value(text.clone()).unwrap();
    assert_eq!(serde_json::to_value(&deployment).unwrap(), text);
}

#[test]
fn secret_inputs_are_recognised() {
    let input = |name: &str, extra: Value| -> Input {
        let mut value = json!({"name": name, "value": "v"});
        value.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::from_value(value).unwrap()
    };
    assert!(input("deploy_password", json!({})).is_secret());
    assert!(input("API_TOKEN", json!({})).is_secret());
    assert!(input("ssh_key", json!({})).is_secret());
    assert!(input("plain", json!({"hidden": true})).is_secret());
    assert!(!input("foo", json!({})).is_secret());
}
