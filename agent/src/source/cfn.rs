//! The `cfn` source (Heat's POLL_SERVER_CFN): `DescribeStackResource` on heat-api-cfn, signed
//! with EC2 signature version 2 (HmacSHA256) as os-collect-config's cfn collector signs it
//! (keystoneclient's `Ec2Signer`; heat-api-cfn has Keystone's `/v3/ec2tokens` recompute it), the
//! XML answer parsed with quick-xml, and the resource's `Metadata` JSON (or the sub-key `path`
//! names) is the document. There is no timestamp in the signed request, so the URL is the same
//! on every poll and is signed once. The signed URL is a credential: only its redacted form
//! reaches a log or an error. See docs/configuration.md#kind--cfn.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use quick_xml::Reader;
use quick_xml::events::{BytesRef, Event};
use reqwest::{Client, Url};
use serde_json::Value;
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use super::body::{read_limited, request_error};
use super::{Fetched, MAX_DOCUMENT_BYTES, SourceError, require_object};
use crate::config::CfnSourceConfig;
use crate::httpclient::{self, TrustRoots};
use crate::secret::{Secret, redact_url};

/// Elements deeper than this are refused: Heat's answer is four levels deep.
const MAX_XML_DEPTH: usize = 32;
/// How much of a server's error message is kept for our error text.
const MAX_MESSAGE_CHARS: usize = 300;

/// A cfn metadata source with its client and its (once) signed request URL.
pub(crate) struct CfnSource {
    name: String,
    /// What is read (`metadata_url stack_name path`), for the source's identity.
    described: String,
    redacted_url: String,
    signed_url: Secret<Url>,
    resource: String,
    /// The element of `StackResourceDetail` holding the JSON (`Metadata`).
    field: String,
    /// The keys below `field` that select the document (`path`'s part after `Metadata.`).
    sub_keys: Vec<String>,
    client: Client,
    read_timeout: Duration,
    body_limit: usize,
}

impl fmt::Debug for CfnSource {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("CfnSource")
            .field("name", &self.name)
            .field("url", &self.redacted_url)
            .field("resource", &self.resource)
            .field("field", &self.field)
            .field("sub_keys", &self.sub_keys)
            .finish_non_exhaustive()
    }
}

impl CfnSource {
    /// Builds the client (trusting `roots` besides the system's) and signs the request.
    pub(crate) fn new(name: String, config: &CfnSourceConfig, roots: &TrustRoots) -> Result<CfnSource, SourceError> {
        let client = httpclient::build(config.client.connect_timeout, None, roots)
            .map_err(|source| SourceError::Client { source_name: name.clone(), source })?;
        let redacted_url = redact_url(&config.metadata_url);
        let endpoint = Url::parse(&config.metadata_url).map_err(|error| SourceError::BadResponse {
            source_name: name.clone(),
            what: "metadata_url".to_string(),
            reason: format!("not a valid URL: {error}"),
        })?;
        // Validated by the config as RESOURCE.FIELD[.SUB.KEY]; split as os-collect-config does.
        let (resource, field_and_keys) = config.path.split_once('.').unwrap_or((&config.path, "Metadata"));
        let mut parts = field_and_keys.split('.');
        let field = parts.next().unwrap_or("Metadata").to_string();
        let sub_keys = parts.map(str::to_string).collect();
        let signed_url = Secret::new(signed_request_url(&endpoint, config, resource));
        Ok(CfnSource {
            name,
            described: format!("cfn {} {} {}", config.metadata_url, config.stack_name, config.path),
            redacted_url,
            signed_url,
            resource: resource.to_string(),
            field,
            sub_keys,
            client,
            read_timeout: config.client.read_timeout,
            body_limit: MAX_DOCUMENT_BYTES,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// What the source reads, for its cache identity (hashed there; no secret in it).
    pub(super) fn described(&self) -> String {
        self.described.clone()
    }

    pub(crate) async fn fetch(&self, shutdown: &CancellationToken) -> Result<Fetched, SourceError> {
        tokio::select! {
            result = self.fetch_now() => result,
            () = shutdown.cancelled() => Ok(Fetched::Cancelled),
        }
    }

    async fn fetch_now(&self) -> Result<Fetched, SourceError> {
        tracing::debug!(source = %self.name, url = %self.redacted_url, resource = %self.resource, "describing the stack resource");
        let request = self.client.get(self.signed_url.expose().clone()).timeout(self.read_timeout);
        let response = request.send().await.map_err(|source| request_error(&self.name, &self.redacted_url, source))?;
        let status = response.status().as_u16();
        if (300..400).contains(&status) {
            return Err(SourceError::Redirect {
                source_name: self.name.clone(),
                url: self.redacted_url.clone(),
                status,
            });
        }
        let body = read_limited(&self.name, &self.redacted_url, response, self.body_limit).await?;
        let answer = parse_answer(&body, &self.field);
        match (status, answer) {
            (_, Ok(Answer::Error { code, message })) => Err(SourceError::Refused {
                source_name: self.name.clone(),
                url: self.redacted_url.clone(),
                status,
                code,
                message,
            }),
            (200..=299, Ok(Answer::Detail(Some(text)))) => self.document(&text).map(Fetched::Document),
            (200..=299, Ok(Answer::Detail(None))) => Err(self.bad_answer(format!(
                "the answer has no StackResourceDetail/{} for resource {:?}",
                self.field, self.resource
            ))),
            (200..=299, Err(reason)) => Err(self.bad_answer(reason)),
            (status, _) => {
                Err(SourceError::Status { source_name: self.name.clone(), url: self.redacted_url.clone(), status })
            }
        }
    }

    /// The JSON in the `Metadata` element, narrowed to `sub_keys`. Heat writes an empty element
    /// for a resource without metadata (its XML serializer leaves out empty JSON values).
    fn document(&self, text: &str) -> Result<Value, SourceError> {
        let what = format!("{}.{} of {}", self.resource, self.field, self.redacted_url);
        let mut value: Value = if text.trim().is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_str(text).map_err(|source| SourceError::InvalidJson {
                source_name: self.name.clone(),
                what: what.clone(),
                source,
            })?
        };
        for key in &self.sub_keys {
            value = match value {
                Value::Object(mut object) => object.remove(key),
                _ => None,
            }
            .ok_or_else(|| self.bad_answer(format!("{what} has no key {key:?}")))?;
        }
        require_object(&self.name, &what, value)
    }

    fn bad_answer(&self, reason: String) -> SourceError {
        SourceError::BadResponse { source_name: self.name.clone(), what: self.redacted_url.clone(), reason }
    }

    #[cfg(test)]
    fn set_body_limit(&mut self, limit: usize) {
        self.body_limit = limit;
    }
}

/// `endpoint` with the signed DescribeStackResource query: the parameters os-collect-config
/// sends (plus any query the URL already had, which the server also counts), `SignatureMethod`,
/// and the `Signature` over all of them.
fn signed_request_url(endpoint: &Url, config: &CfnSourceConfig, resource: &str) -> Url {
    let mut params: BTreeMap<String, String> = endpoint.query_pairs().into_owned().collect();
    for (key, value) in [
        ("Action", "DescribeStackResource"),
        ("StackName", &config.stack_name),
        ("LogicalResourceId", resource),
        ("AWSAccessKeyId", &config.access_key_id),
        ("SignatureVersion", "2"),
        ("SignatureMethod", "HmacSHA256"),
    ] {
        params.insert(key.to_string(), value.to_string());
    }
    let signature =
        signature_v2(config.secret_access_key.expose(), "GET", &host_header(endpoint), endpoint.path(), &params);
    let mut url = endpoint.clone();
    url.set_fragment(None);
    url.set_query(Some(&format!("{}&Signature={}", canonical_query(&params), percent_encode(&signature))));
    url
}

/// The `Host` header the client will send, which is what the server verifies against: the
/// port only when it is not the scheme's default (`Url` drops a default port).
fn host_header(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// EC2 signature version 2 with HmacSHA256: base64 of the HMAC of
/// `"{verb}\n{host}\n{path}\n{canonical query}"` (AWS's "Signature Version 2 signing process",
/// as boto's `QuerySignatureV2AuthHandler` and keystoneclient's `Ec2Signer` compute it).
pub(super) fn signature_v2(
    secret: &str,
    verb: &str,
    host: &str,
    path: &str,
    params: &BTreeMap<String, String>,
) -> String {
    let string_to_sign = format!("{verb}\n{host}\n{path}\n{}", canonical_query(params));
    // HMAC accepts a key of any length; the error case cannot happen.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(string_to_sign.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

/// The parameters sorted by name (byte order, as Python sorts them), each name and value
/// RFC 3986-encoded (everything but `A-Z a-z 0-9 - _ . ~` as `%XX`), joined with `&`.
pub(super) fn canonical_query(params: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> =
        params.iter().map(|(key, value)| format!("{}={}", percent_encode(key), percent_encode(value))).collect();
    pairs.join("&")
}

fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// What heat-api-cfn answered.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// A `DescribeStackResourceResponse`, with the text of its detail's `field` if present.
    Detail(Option<String>),
    /// An `ErrorResponse`: its `Code` and `Message`, sanitized for our error text.
    Error { code: String, message: String },
}

/// Which text of the answer an element's content belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Field,
    Code,
    Message,
}

/// Parses heat-api-cfn's answer: `DescribeStackResourceResponse/DescribeStackResourceResult/
/// StackResourceDetail/{field}` or `ErrorResponse/Error/{Code,Message}` (local names, any
/// namespace). Only XML's predefined and character entities are known; a DTD is ignored, so
/// nothing expands.
fn parse_answer(body: &[u8], field: &str) -> Result<Answer, String> {
    let mut reader = Reader::from_reader(body);
    let mut stack: Vec<String> = Vec::new();
    let mut root: Option<String> = None;
    let mut texts: [Option<String>; 3] = [None, None, None];
    loop {
        let event = reader.read_event().map_err(|error| format!("the answer is not well-formed XML: {error}"))?;
        let target = target_of(&stack, field);
        let opens = matches!(event, Event::Start(_));
        match event {
            Event::Start(start) | Event::Empty(start) => {
                let name = String::from_utf8_lossy(start.local_name().as_ref()).into_owned();
                root.get_or_insert_with(|| name.clone());
                let mut path = stack.clone();
                path.push(name);
                if let Some(target) = target_of(&path, field) {
                    let slot = &mut texts[target as usize];
                    if slot.is_some() {
                        return Err(format!("the answer has more than one {}", path.join("/")));
                    }
                    *slot = Some(String::new());
                }
                if opens {
                    if path.len() > MAX_XML_DEPTH {
                        return Err(format!("the answer nests elements deeper than {MAX_XML_DEPTH}"));
                    }
                    stack = path;
                }
            }
            Event::End(_) => {
                stack.pop();
            }
            Event::Text(text) => append(&mut texts, target, &text.xml_content().map_err(not_utf8)?),
            Event::CData(data) => append(&mut texts, target, &data.decode().map_err(not_utf8)?),
            Event::GeneralRef(reference) => append(&mut texts, target, &resolve_reference(&reference)?),
            Event::Eof if stack.is_empty() => break,
            Event::Eof => {
                return Err(format!("the answer is not well-formed XML: <{}> is not closed", stack.join("/")));
            }
            _ => {}
        }
    }
    let [field_text, code, message] = texts;
    match root.as_deref() {
        Some("DescribeStackResourceResponse") => Ok(Answer::Detail(field_text)),
        Some("ErrorResponse") => Ok(Answer::Error {
            code: sanitize(&code.unwrap_or_default(), 64).unwrap_or_else(|| "(no code)".to_string()),
            message: sanitize(&message.unwrap_or_default(), MAX_MESSAGE_CHARS)
                .unwrap_or_else(|| "(no message)".to_string()),
        }),
        Some(other) => Err(format!("unexpected answer element {:?}", sanitize(other, 64).unwrap_or_default())),
        None => Err("the answer is empty".to_string()),
    }
}

/// A character reference, or one of XML's five predefined entities; anything else (an entity a
/// DTD would define) is refused.
fn resolve_reference(reference: &BytesRef<'_>) -> Result<String, String> {
    let invalid = |error: quick_xml::Error| format!("the answer has an invalid reference: {error}");
    if let Some(character) = reference.resolve_char_ref().map_err(invalid)? {
        return Ok(character.to_string());
    }
    let name = reference.decode().map_err(not_utf8)?;
    match quick_xml::escape::resolve_predefined_entity(&name) {
        Some(text) => Ok(text.to_string()),
        None => Err(format!("the answer uses the unknown entity &{};", sanitize(&name, 64).unwrap_or_default())),
    }
}

fn not_utf8(error: quick_xml::encoding::EncodingError) -> String {
    format!("the answer is not UTF-8 text: {error}")
}

/// Which text the element at `path` holds, if any.
fn target_of(path: &[String], field: &str) -> Option<Target> {
    match path {
        [response, result, detail, leaf]
            if response == "DescribeStackResourceResponse"
                && result == "DescribeStackResourceResult"
                && detail == "StackResourceDetail"
                && leaf == field =>
        {
            Some(Target::Field)
        }
        [response, error, leaf] if response == "ErrorResponse" && error == "Error" => match leaf.as_str() {
            "Code" => Some(Target::Code),
            "Message" => Some(Target::Message),
            _ => None,
        },
        _ => None,
    }
}

fn append(texts: &mut [Option<String>; 3], target: Option<Target>, text: &str) {
    if let Some(Some(slot)) = target.map(|target| &mut texts[target as usize]) {
        slot.push_str(text);
    }
}

/// Server-chosen text made fit for one error line: trimmed, control characters as spaces, at
/// most `limit` characters; `None` when nothing is left.
fn sanitize(text: &str, limit: usize) -> Option<String> {
    let cleaned: String = text.trim().chars().take(limit).map(|c| if c.is_control() { ' ' } else { c }).collect();
    (!cleaned.is_empty()).then_some(cleaned)
}

#[cfg(test)]
mod tests;
