//! Reading an HTTP response body under a size limit, for every source that reads one (http,
//! heat, zaqar, cfn, ec2): a hostile or broken server cannot make the agent hold more than `limit`
//! bytes of one answer. Request errors lose their URL here, since reqwest prints it with its query.

use reqwest::Response;

use super::SourceError;

/// The whole body of `response`, or `TooLarge` once it passes `limit` bytes (checked against
/// `Content-Length` first, then while reading). `url` is already redacted.
pub(super) async fn read_limited(
    source_name: &str,
    url: &str,
    mut response: Response,
    limit: usize,
) -> Result<Vec<u8>, SourceError> {
    let too_large = || SourceError::TooLarge { source_name: source_name.to_string(), what: url.to_string(), limit };
    if response.content_length().is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|source| request_error(source_name, url, source))? {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A failed request, without the URL reqwest would print (its query string may be signed).
pub(super) fn request_error(source_name: &str, url: &str, source: reqwest::Error) -> SourceError {
    SourceError::Request { source_name: source_name.to_string(), url: url.to_string(), source: source.without_url() }
}
