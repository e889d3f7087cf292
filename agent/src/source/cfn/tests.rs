use serde_json::json;
use wiremock::matchers::{method, path, query_param};
use wiremock::{Match, Mock, MockServer, Request, ResponseTemplate};

use super::*;
use crate::config::ClientConfig;
use crate::error_chain;

const SECRET: &str = "secret+key/=\u{fc}";

fn config(metadata_url: &str, path: &str) -> CfnSourceConfig {
    CfnSourceConfig {
        metadata_url: metadata_url.to_string(),
        stack_name: "my stack/1b7a-\u{fc}".to_string(),
        path: path.to_string(),
        access_key_id: "AKID0123~x".to_string(),
        secret_access_key: Secret::new(SECRET.to_string()),
        client: ClientConfig {
            ca_file: None,
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(5),
        },
    }
}

fn source(metadata_url: &str, path: &str) -> CfnSource {
    CfnSource::new("source[0] cfn".to_string(), &config(metadata_url, path), &TrustRoots::default()).unwrap()
}

fn detail(metadata: &str) -> String {
    format!(
        "<DescribeStackResourceResponse><DescribeStackResourceResult><StackResourceDetail>\
         <StackName>s</StackName><LogicalResourceId>server</LogicalResourceId>\
         <Metadata>{metadata}</Metadata><ResourceStatus>CREATE_COMPLETE</ResourceStatus>\
         </StackResourceDetail></DescribeStackResourceResult></DescribeStackResourceResponse>"
    )
}

fn error_response(code: &str, message: &str) -> String {
    format!(
        "<ErrorResponse><Error><Message>{message}</Message><Code>{code}</Code><Type>Sender</Type></Error></ErrorResponse>"
    )
}

async fn serve(server: &MockServer, response: ResponseTemplate) {
    Mock::given(method("GET")).and(path("/v1/")).respond_with(response).mount(server).await;
}

async fn fetch(source: &CfnSource) -> Result<Fetched, SourceError> {
    source.fetch(&CancellationToken::new()).await
}

/// The reference vectors were computed with the peers venv (tests/peers/.cache/venv), both with
/// keystoneclient's `Ec2Signer` (what os-collect-config's cfn collector and keystone's ec2tokens
/// use) and with boto 2.49's `QuerySignatureV2AuthHandler._calc_signature`, which agree:
/// `Ec2Signer(secret_key=SECRET).generate({'params': {Action, StackName, LogicalResourceId,
/// AWSAccessKeyId, SignatureVersion='2'}, 'verb': 'GET', 'host': '127.0.0.1:8000', 'path': '/v1/'})`.
#[test]
fn signature_matches_keystoneclient_and_boto() {
    let url = signed_request_url(
        &Url::parse("http://127.0.0.1:8000/v1/").unwrap(),
        &config("http://127.0.0.1:8000/v1/", "server.Metadata"),
        "server",
    );
    // boto's canonical query string, then the signature.
    assert_eq!(
        url.as_str(),
        "http://127.0.0.1:8000/v1/?AWSAccessKeyId=AKID0123~x&Action=DescribeStackResource\
         &LogicalResourceId=server&SignatureMethod=HmacSHA256&SignatureVersion=2\
         &StackName=my%20stack%2F1b7a-%C3%BC&Signature=9qUmvKFgi0B4sjlQ89BrKb9lSyUm1zKWCk%2FEs7fJaM8%3D"
    );
}

/// Same tools as above: host `heat.example.com` (no port: the scheme's default is not part of
/// the Host header), path `/v1/`, secret `7b3e2f`.
#[test]
fn default_port_is_not_signed() {
    let mut config = config("https://heat.example.com:443/v1/", "server.Metadata");
    config.stack_name = "s1".to_string();
    config.access_key_id = "4a0c9a5cd0b34e6a8f0ba4bd5a4bb2b5".to_string();
    config.secret_access_key = Secret::new("7b3e2f".to_string());
    let endpoint = Url::parse(&config.metadata_url).unwrap();
    assert_eq!(host_header(&endpoint), "heat.example.com");
    let url = signed_request_url(&endpoint, &config, "server");
    let signature = url.query_pairs().find(|(key, _)| key == "Signature").unwrap().1.into_owned();
    assert_eq!(signature, "JAegazj+/89l09JjtZnLGbx/7ZAQYKvfiQgu65vzles=");
}

#[test]
fn encoding_is_rfc3986() {
    let params: BTreeMap<String, String> =
        [("b", "x y+z*~"), ("a", "A-z_0.9/é")].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(canonical_query(&params), "a=A-z_0.9%2F%C3%A9&b=x%20y%2Bz%2A~");
}

/// Checks what heat-api-cfn (through keystone) checks: the signature over the Host header the
/// request carried, its path and its other parameters.
struct SignedFor;

impl Match for SignedFor {
    fn matches(&self, request: &Request) -> bool {
        let host = request.headers.get("host").and_then(|host| host.to_str().ok()).unwrap_or_default();
        let mut params: BTreeMap<String, String> = request.url.query_pairs().into_owned().collect();
        let Some(signature) = params.remove("Signature") else {
            return false;
        };
        signature == signature_v2(SECRET, "GET", host, request.url.path(), &params)
    }
}

#[tokio::test]
async fn metadata_is_the_document() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/"))
        .and(query_param("Action", "DescribeStackResource"))
        .and(query_param("StackName", "my stack/1b7a-\u{fc}"))
        .and(query_param("LogicalResourceId", "server"))
        .and(query_param("AWSAccessKeyId", "AKID0123~x"))
        .and(query_param("SignatureVersion", "2"))
        .and(query_param("SignatureMethod", "HmacSHA256"))
        .and(SignedFor)
        .respond_with(ResponseTemplate::new(200).set_body_string(detail(
            r#"{"deployments": [{"id": "d1"}], "os-collect-config": {"cfn": {"a": "&lt;&amp;&#62;"}}}"#,
        )))
        .expect(2)
        .mount(&server)
        .await;
    let source = source(&format!("{}/v1/", server.uri()), "server.Metadata");
    let expected = json!({"deployments": [{"id": "d1"}], "os-collect-config": {"cfn": {"a": "<&>"}}});
    assert_eq!(fetch(&source).await.unwrap(), Fetched::Document(expected.clone()));
    // The same signed URL on every poll (no timestamp).
    assert_eq!(fetch(&source).await.unwrap(), Fetched::Document(expected));
}

#[tokio::test]
async fn sub_keys_select_part_of_the_metadata() {
    let server = MockServer::start().await;
    let metadata = r#"{"os-collect-config": {"cfn": {"stack_name": "s"}}, "deployments": []}"#;
    let body = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}", detail(&format!("<![CDATA[{metadata}]]>")));
    serve(&server, ResponseTemplate::new(200).set_body_string(body)).await;
    let uri = format!("{}/v1/", server.uri());
    let nested = source(&uri, "server.Metadata.os-collect-config.cfn");
    assert_eq!(fetch(&nested).await.unwrap(), Fetched::Document(json!({"stack_name": "s"})));
    let error = fetch(&source(&uri, "server.Metadata.absent")).await.unwrap_err();
    assert!(matches!(error, SourceError::BadResponse { .. }), "{error:?}");
    assert!(error.to_string().contains("server.Metadata of http://127.0.0.1"), "{error}");
    assert!(error.to_string().ends_with("has no key \"absent\""), "{error}");
    let error = fetch(&source(&uri, "server.Metadata.deployments")).await.unwrap_err();
    assert!(matches!(error, SourceError::NotObject { found: "array", .. }), "{error:?}");
}

#[tokio::test]
async fn empty_metadata_is_an_empty_document() {
    let server = MockServer::start().await;
    serve(
        &server,
        ResponseTemplate::new(200).set_body_string(detail("{}").replace("<Metadata>{}</Metadata>", "<Metadata/>")),
    )
    .await;
    let source = source(&format!("{}/v1/", server.uri()), "server.Metadata");
    assert_eq!(fetch(&source).await.unwrap(), Fetched::Document(json!({})));
}

#[tokio::test]
async fn signature_rejected_is_a_configuration_error_without_the_signature() {
    let server = MockServer::start().await;
    let body = error_response("SignatureDoesNotMatch", "The request signature we calculated does not match");
    serve(&server, ResponseTemplate::new(403).set_body_string(body)).await;
    let source = source(&format!("{}/v1/", server.uri()), "server.Metadata");
    let error = fetch(&source).await.unwrap_err();
    assert!(matches!(&error, SourceError::Refused { status: 403, code, .. } if code == "SignatureDoesNotMatch"));
    assert!(!error.is_transient());
    let text = error_chain(&error);
    assert_eq!(
        text,
        format!(
            "source[0] cfn: GET {}/v1/ was refused with SignatureDoesNotMatch (HTTP 403): The request \
             signature we calculated does not match",
            server.uri()
        )
    );
    for secret in ["Signature=", "AKID", SECRET, "9qUm"] {
        assert!(!text.contains(secret) && !format!("{source:?}").contains(secret), "{secret} leaked: {text}");
    }
}

#[tokio::test]
async fn access_denied_and_server_errors() {
    let server = MockServer::start().await;
    let uri = format!("{}/v1/", server.uri());
    serve(
        &server,
        ResponseTemplate::new(403).set_body_string(error_response("AccessDenied", "User is not authorized")),
    )
    .await;
    let error = fetch(&source(&uri, "server.Metadata")).await.unwrap_err();
    assert!(matches!(&error, SourceError::Refused { code, .. } if code == "AccessDenied"), "{error:?}");
    assert!(!error.is_transient());

    server.reset().await;
    serve(&server, ResponseTemplate::new(500).set_body_string(error_response("InternalFailure", "boom\n\tagain")))
        .await;
    let error = fetch(&source(&uri, "server.Metadata")).await.unwrap_err();
    assert!(error.is_transient());
    assert!(error.to_string().ends_with("InternalFailure (HTTP 500): boom  again"), "{error}");

    server.reset().await;
    serve(&server, ResponseTemplate::new(502).set_body_string("<html>bad gateway</html>")).await;
    let error = fetch(&source(&uri, "server.Metadata")).await.unwrap_err();
    assert!(matches!(error, SourceError::Status { status: 502, .. }), "{error:?}");
    assert!(error.is_transient());

    server.reset().await;
    serve(&server, ResponseTemplate::new(302).insert_header("location", "http://127.0.0.1:9/")).await;
    let error = fetch(&source(&uri, "server.Metadata")).await.unwrap_err();
    assert!(matches!(error, SourceError::Redirect { status: 302, .. }), "{error:?}");
}

#[tokio::test]
async fn hostile_answers_are_clear_errors() {
    let server = MockServer::start().await;
    let uri = format!("{}/v1/", server.uri());
    let cases = [
        ("<DescribeStackResourceResponse><Unclosed>".to_string(), "not well-formed XML"),
        (detail("&xxe;"), "unknown entity &xxe;"),
        ("<Other/>".to_string(), "unexpected answer element \"Other\""),
        (String::new(), "the answer is empty"),
        (detail("{}").replace("<Metadata>{}</Metadata>", ""), "no StackResourceDetail/Metadata"),
        (detail("{}").replace("<Metadata>{}</Metadata>", "<Metadata/><Metadata/>"), "more than one"),
        (format!("{}{}", "<a>".repeat(40), "</a>".repeat(40)), "deeper than 32"),
        (detail("&#0;"), "invalid reference"),
    ];
    for (body, expected) in cases {
        server.reset().await;
        serve(&server, ResponseTemplate::new(200).set_body_string(body.clone())).await;
        let error = fetch(&source(&uri, "server.Metadata")).await.unwrap_err();
        assert!(matches!(error, SourceError::BadResponse { .. }), "{body}: {error:?}");
        assert!(error.to_string().contains(expected), "{body}: {error}");
    }
    server.reset().await;
    let mut latin1 = detail("{\"a\": \"x\"}").into_bytes();
    let value = latin1.windows(3).position(|window| window == b"\"x\"").unwrap() + 1;
    latin1[value] = 0xe9;
    serve(&server, ResponseTemplate::new(200).set_body_bytes(latin1)).await;
    let error = fetch(&source(&uri, "server.Metadata")).await.unwrap_err();
    assert!(error.to_string().contains("the answer is not UTF-8 text"), "{error}");
    server.reset().await;
    serve(&server, ResponseTemplate::new(200).set_body_string(detail("{not json"))).await;
    let error = fetch(&source(&uri, "server.Metadata")).await.unwrap_err();
    assert!(matches!(error, SourceError::InvalidJson { .. }), "{error:?}");
}

#[tokio::test]
async fn oversized_answers_are_refused() {
    let server = MockServer::start().await;
    serve(&server, ResponseTemplate::new(200).set_body_string(detail(&format!("{{\"a\": \"{}\"}}", "x".repeat(4096)))))
        .await;
    let mut source = source(&format!("{}/v1/", server.uri()), "server.Metadata");
    source.set_body_limit(1024);
    let error = fetch(&source).await.unwrap_err();
    assert!(matches!(error, SourceError::TooLarge { limit: 1024, .. }), "{error:?}");
}

#[tokio::test]
async fn connection_errors_are_transient_and_redacted() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let source = source(&format!("http://127.0.0.1:{port}/v1/"), "server.Metadata");
    let error = fetch(&source).await.unwrap_err();
    assert!(matches!(error, SourceError::Request { .. }), "{error:?}");
    assert!(error.is_transient());
    assert!(!error_chain(&error).contains("Signature"), "{}", error_chain(&error));
}

#[test]
fn identity_names_url_and_path_only() {
    let one = source("http://127.0.0.1:8000/v1/", "server.Metadata");
    assert_eq!(one.described(), "cfn http://127.0.0.1:8000/v1/ my stack/1b7a-\u{fc} server.Metadata");
    let nested = source("http://127.0.0.1:8000/v1/", "server.Metadata.os-collect-config");
    assert_ne!(one.described(), nested.described());
}
