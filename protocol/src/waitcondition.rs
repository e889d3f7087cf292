//! Wait-condition handle signal bodies, both styles Heat accepts (docs/http-api.md "Wait
//! condition signals"; openstack/heat `heat/engine/resources/openstack/heat/wait_condition_handle.py`
//! and `heat/engine/resources/aws/cfn/wait_condition_handle.py`):
//! `OS::Heat::WaitConditionHandle` (`{status, reason, data, id}`, every key optional, nothing
//! else allowed) and the AWS handle (`{Status, Reason, UniqueId, Data}`, exactly those keys).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// SUCCESS or FAILURE; any FAILURE fails the wait condition at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WaitStatus {
    #[serde(rename = "SUCCESS")]
    Success,
    #[serde(rename = "FAILURE")]
    Failure,
}

/// The OS::Heat style body. Defaults (reason "Signal N received", id N) are the receiver's to fill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeatWaitSignal {
    #[serde(default = "success", skip_serializing_if = "is_success")]
    pub status: WaitStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "id_as_string")]
    pub id: Option<String>,
}

/// The AWS CloudFormation style body that cfn-signal PUTs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsWaitSignal {
    #[serde(rename = "Status")]
    pub status: WaitStatus,
    #[serde(rename = "Reason")]
    pub reason: String,
    #[serde(rename = "UniqueId", deserialize_with = "required_id_as_string")]
    pub unique_id: String,
    #[serde(rename = "Data")]
    pub data: Value,
}

impl HeatWaitSignal {
    /// Reads a POSTed body; an empty body is a valid SUCCESS, as in Heat.
    pub fn from_body(body: &[u8]) -> Result<HeatWaitSignal, serde_json::Error> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(HeatWaitSignal { status: WaitStatus::Success, reason: None, data: None, id: None });
        }
        serde_json::from_slice(body)
    }
}

fn success() -> WaitStatus {
    WaitStatus::Success
}

fn is_success(status: &WaitStatus) -> bool {
    *status == WaitStatus::Success
}

/// Heat stores ids as strings (integer ids collided with string ones, heat commit e4d2452f2).
fn id_as_string<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    use serde::de::Error;
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) => Ok(Some(id)),
        Some(Value::Number(id)) => Ok(Some(id.to_string())),
        Some(other) => Err(D::Error::custom(format!("id must be a string or a number, got {other}"))),
    }
}

fn required_id_as_string<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    use serde::de::Error;
    id_as_string(deserializer)?.ok_or_else(|| D::Error::custom("UniqueId must not be null"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fixture_bodies_parse() {
        let text = include_str!("../../tests/fixtures/heat/waitcondition-signals.json");
        let fixture: Value = serde_json::from_str(text).unwrap();
        for example in fixture["os_heat_handle"]["examples"].as_array().unwrap() {
            let body = serde_json::to_vec(example).unwrap();
            HeatWaitSignal::from_body(&body).unwrap();
        }
        let aws: AwsWaitSignal = serde_json::from_value(fixture["aws_handle"]["example"].clone()).unwrap();
        assert_eq!(aws.status, WaitStatus::Success);
        assert_eq!(aws.unique_id, "9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4");
    }

    #[test]
    fn heat_style_rules() {
        let empty = HeatWaitSignal::from_body(b"").unwrap();
        assert_eq!(empty.status, WaitStatus::Success);
        assert_eq!(HeatWaitSignal::from_body(b"{}").unwrap(), empty);
        assert!(HeatWaitSignal::from_body(br#"{"status": "SUCCESS", "extra": 1}"#).is_err());
        assert!(HeatWaitSignal::from_body(br#"{"status": "DONE"}"#).is_err());
        let numeric = HeatWaitSignal::from_body(br#"{"id": 7}"#).unwrap();
        assert_eq!(numeric.id.as_deref(), Some("7"));
    }

    #[test]
    fn aws_style_needs_exactly_four_keys() {
        let full = json!({"Status": "FAILURE", "Reason": "r", "UniqueId": "u", "Data": "d"});
        assert!(serde_json::from_value::<AwsWaitSignal>(full).is_ok());
        let missing = json!({"Status": "SUCCESS", "Reason": "r", "UniqueId": "u"});
        assert!(serde_json::from_value::<AwsWaitSignal>(missing).is_err());
        let extra = json!({"Status": "SUCCESS", "Reason": "r", "UniqueId": "u", "Data": "d", "X": 1});
        assert!(serde_json::from_value::<AwsWaitSignal>(extra).is_err());
    }

    #[test]
    fn serialises_back_to_heat_keys() {
        let signal =
            HeatWaitSignal { status: WaitStatus::Failure, reason: Some("r".into()), data: None, id: Some("a".into()) };
        assert_eq!(serde_json::to_value(&signal).unwrap(), json!({"status": "FAILURE", "reason": "r", "id": "a"}));
    }
}
