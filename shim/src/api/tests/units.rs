//! The pure helpers (HTTP dates, path redaction, `?wait=`, Heat's body rule, the route table) and
//! the promise that request logs never contain a token.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::*;
use crate::api::metadata::parse_wait;
use crate::api::signals::{is_json_content_type, signal_details};
use crate::api::{ApiError, Credential, ROUTES, parse_http_date, redact_path};

#[test]
fn http_dates_round_trip_and_parse_all_three_forms() {
    assert_eq!(format_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_eq!(format_http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(format_http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    assert_eq!(format_http_date(PUBLISHED_AT), "Sat, 21 Nov 2026 05:00:00 GMT");
    for seconds in [0, 59, 86_399, 86_400, 951_782_399, 1_795_237_200, 4_102_444_800, 253_402_300_799] {
        assert_eq!(parse_http_date(&format_http_date(seconds)), Some(seconds), "{seconds}");
    }
    assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), Some(784_111_777));
    assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), Some(784_111_777));
    assert_eq!(parse_http_date("  Sun, 06 Nov 1994 08:49:37 GMT "), Some(784_111_777));
    let invalid = [
        "",
        "yesterday",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:49 GMT",
        "Sun, 06 Nov 1994 08:49:37:01 GMT",
        "Sun, 06 Nov 1969 08:49:37 GMT",
        "1, 06 Nov 1994 08:49:37 GMT",
    ];
    for text in invalid {
        assert_eq!(parse_http_date(text), None, "{text}");
    }
}

#[test]
fn tokens_are_redacted_from_logged_paths() {
    assert_eq!(redact_path("/v1/stacks/web"), "/v1/stacks/web");
    assert_eq!(redact_path("/v1/servers/web/metadata"), "/v1/servers/web/metadata");
    assert_eq!(redact_path(&format!("/v1/signals/{APPLIED_TOKEN}")), "/v1/signals/***");
    assert_eq!(redact_path("/v1/waitconditions/short"), "/v1/waitconditions/***");
    assert_eq!(redact_path(&format!("/v1/metadata/{WEB_TOKEN}/")), "/v1/metadata/***/");
    assert_eq!(redact_path(&format!("/v1/signal/{APPLIED_TOKEN}/x")), "/v1/signal/***/x");
    assert_eq!(redact_path("/v1/signals/"), "/v1/signals/");
    assert_eq!(redact_path("/"), "/");
    assert_eq!(redact_path(""), "");
}

/// The route table is consistent: each method and path once, a path token exactly on the
/// capability routes, and that token masked in the request log whatever its length.
#[test]
fn every_capability_route_carries_its_token_in_the_path_and_logs_it_masked() {
    let mut seen = std::collections::BTreeSet::new();
    for route in ROUTES {
        assert!(seen.insert((route.method.as_str(), route.path)), "{route:?} is listed twice");
        let in_path = matches!(
            route.credential,
            Credential::ServerTokenInPath | Credential::SignalTokenInPath | Credential::HandleTokenInPath
        );
        assert_eq!(route.path.ends_with("/{token}"), in_path, "{route:?}");
        let path = route.path.replace("{token}", "short").replace("{name}", "web");
        assert!(!redact_path(&path).contains("short"), "{route:?}: {}", redact_path(&path));
    }
}

#[test]
fn wait_parameter() {
    let max = Duration::from_secs(60);
    assert_eq!(parse_wait(None, max).unwrap(), None);
    assert_eq!(parse_wait(Some("0"), max).unwrap(), None);
    assert_eq!(parse_wait(Some("1"), max).unwrap(), Some(Duration::from_secs(1)));
    assert_eq!(parse_wait(Some("60"), max).unwrap(), Some(max));
    assert_eq!(parse_wait(Some("61"), max).unwrap(), Some(max));
    for bad in ["", "x", "-5", "2.5", "1e3"] {
        assert!(matches!(parse_wait(Some(bad), max), Err(ApiError::BadRequest { .. })), "{bad}");
    }
}

#[test]
fn heat_body_rule() {
    for accepted in [None, Some(""), Some(" "), Some("application/json"), Some("JSON"), Some("text/plain;q=1")] {
        assert!(is_json_content_type(accepted), "{accepted:?}");
    }
    for refused in [Some("application/jsonx"), Some("text/html"), Some("multipart/form-data"), Some("text/")] {
        assert!(!is_json_content_type(refused), "{refused:?}");
    }
    assert_eq!(signal_details(None, b"\r\n {\"a\": [1]}").unwrap(), json!({"a": [1]}));
    assert_eq!(signal_details(Some("text/html"), b"{\"a\": 1}").unwrap(), json!({}));
    assert_eq!(signal_details(None, b"").unwrap(), json!({}));
    assert_eq!(signal_details(None, b"\xff\xfe").unwrap(), json!({}));
    assert!(matches!(signal_details(None, b"{\xff}"), Err(ApiError::BadRequest { .. })));
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn request_logs_never_contain_tokens() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let server = TestServer::start().await;
    let requests = [
        server.request(Method::POST, &format!("/v1/signals/{APPLIED_TOKEN}")).body("{}"),
        server.request(Method::PUT, &format!("/v1/waitconditions/{UNKNOWN_TOKEN}")),
        server.get(&format!("/v1/metadata/{WEB_TOKEN}")),
        server.get(&format!("/v1/signals/{DB_TOKEN}/typo")),
        server.get("/v1/servers/web/metadata").bearer_auth(WEB_TOKEN),
        server.admin(Method::POST, "/v1/stacks").body(r#"{"name": "broken", "template": "t"}"#),
    ];
    for request in requests {
        request.send().await.unwrap();
    }
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("path=/v1/signals/***"), "{log}");
    assert!(log.contains("path=/v1/metadata/***"), "{log}");
    assert!(log.contains("storage failure") && log.contains("cannot commit: disk on fire"), "{log}");
    for token in [APPLIED_TOKEN, UNKNOWN_TOKEN, WEB_TOKEN, DB_TOKEN, ADMIN_TOKEN] {
        assert!(!log.contains(token), "{log}");
    }
}
