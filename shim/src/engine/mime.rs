//! The `config` of `OS::Heat::MultipartMime`: a MIME multipart message byte for byte as Heat
//! builds it (heat.engine.resources.openstack.heat.multi_part.MultipartMime.get_message with
//! Python's `email.mime` and `Message.as_string`), except for the random boundary, which is
//! drawn the same way (`===============` + 19 digits + `==`).

/// One `text` part: its text (a config's already, when the part named one) and headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub text: String,
    pub subtype: String,
    pub filename: String,
}

/// The message for `parts`.
pub fn message(parts: &[Part]) -> String {
    // As email.generator: random.randrange(sys.maxsize); not a secret, so the id generator will do.
    let random = crate::engine::context::new_uuid().replace('-', "");
    let token = u64::from_str_radix(&random[..16], 16).unwrap_or_default() % i64::MAX as u64;
    let mut boundary = format!("==============={token:019}==");
    // As email.generator._make_boundary: a boundary found in the text gets a counter.
    let mut counter = 0;
    while parts.iter().any(|part| part.text.contains(&boundary)) {
        counter += 1;
        boundary = format!("==============={token:019}==.{counter}");
    }
    with_boundary(parts, &boundary)
}

pub fn with_boundary(parts: &[Part], boundary: &str) -> String {
    let mut out = format!("Content-Type: multipart/mixed; boundary=\"{boundary}\"\nMIME-Version: 1.0\n\n");
    if parts.is_empty() {
        out.push_str(&format!("--{boundary}\n\n"));
    }
    for part in parts {
        out.push_str(&format!("--{boundary}\n"));
        out.push_str(&render_part(part));
        out.push('\n');
    }
    out.push_str(&format!("--{boundary}--\n"));
    out
}

/// As MultipartMime._create_message: `us-ascii` and 7bit when the text is ASCII, else
/// `utf-8` and base64 (76-character lines); the subtype defaults to the file name without its
/// extension, else `plain`.
fn render_part(part: &Part) -> String {
    let subtype = if !part.subtype.is_empty() {
        part.subtype.clone()
    } else if !part.filename.is_empty() {
        strip_extension(&part.filename).to_owned()
    } else {
        "plain".to_owned()
    };
    let ascii = part.text.is_ascii();
    let (charset, encoding) = if ascii { ("us-ascii", "7bit") } else { ("utf-8", "base64") };
    let content_type = header_value(&format!("text/{subtype}; charset=\"{charset}\""));
    let mut out = format!("Content-Type: {content_type}\nMIME-Version: 1.0\nContent-Transfer-Encoding: {encoding}\n");
    if !part.filename.is_empty() {
        out.push_str(&format!("Content-Disposition: attachment; {}\n", filename_parameter(&part.filename)));
    }
    out.push('\n');
    if ascii {
        out.push_str(&part.text);
    } else {
        for chunk in part.text.as_bytes().chunks(57) {
            out.push_str(&base64(chunk));
            out.push('\n');
        }
    }
    out
}

/// A header value as email's compat32 policy writes it: as is when ASCII, else one RFC 2047
/// `q` encoded word (email.header with the `utf-8` charset; a value long enough to need
/// several encoded words is not folded the way Python folds it).
fn header_value(value: &str) -> String {
    if value.is_ascii() {
        return value.to_owned();
    }
    let encoded: String = value
        .bytes()
        .map(|byte| match byte {
            b' ' => "_".to_owned(),
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'!' | b'*' | b'+' | b'/' => (byte as char).to_string(),
            other => format!("={other:02X}"),
        })
        .collect();
    format!("=?utf-8?q?{encoded}?=")
}

/// `os.path.splitext(name)[0]`: a leading dot does not start an extension.
fn strip_extension(name: &str) -> &str {
    let base_start = name.rfind('/').map_or(0, |index| index + 1);
    let base = &name[base_start..];
    let leading_dots = base.len() - base.trim_start_matches('.').len();
    match base[leading_dots..].rfind('.') {
        Some(index) => &name[..base_start + leading_dots + index],
        None => name,
    }
}

/// email.message._formatparam: quoted, `\` and `"` escaped; non-ASCII as RFC 2231.
fn filename_parameter(name: &str) -> String {
    if name.is_ascii() {
        let quoted = name.replace('\\', "\\\\").replace('"', "\\\"");
        return format!("filename=\"{quoted}\"");
    }
    let encoded: String = name
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => (byte as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect();
    format!("filename*=utf-8''{encoded}")
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let word = (u32::from(chunk[0]) << 16)
            | (u32::from(chunk.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(chunk.get(2).copied().unwrap_or(0));
        for position in 0..4 {
            if position <= chunk.len() {
                out.push(ALPHABET[((word >> (18 - 6 * position)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(text: &str, subtype: &str, filename: &str) -> Part {
        Part { text: text.into(), subtype: subtype.into(), filename: filename.into() }
    }

    /// Expected text is Heat's (tests/tests/heat_render.rs compares more cases with Heat's code).
    #[test]
    fn renders_as_heat_does() {
        let parts = [
            part("#!/bin/sh\necho hi", "", ""),
            part("#cloud-config\n", "cloud-config", "cc.yaml"),
            part("h\u{e9}llo\n", "", "x.sh"),
        ];
        let expected = "Content-Type: multipart/mixed; boundary=\"B\"\nMIME-Version: 1.0\n\n--B\nContent-Type: \
                        text/plain; charset=\"us-ascii\"\nMIME-Version: 1.0\nContent-Transfer-Encoding: \
                        7bit\n\n#!/bin/sh\necho hi\n--B\nContent-Type: text/cloud-config; charset=\"us-ascii\"\n\
                        MIME-Version: 1.0\nContent-Transfer-Encoding: 7bit\nContent-Disposition: attachment; \
                        filename=\"cc.yaml\"\n\n#cloud-config\n\n--B\nContent-Type: text/x; charset=\"utf-8\"\n\
                        MIME-Version: 1.0\nContent-Transfer-Encoding: base64\nContent-Disposition: attachment; \
                        filename=\"x.sh\"\n\naMOpbGxvCg==\n\n--B--\n";
        assert_eq!(with_boundary(&parts, "B"), expected);
        assert_eq!(
            with_boundary(&[], "B"),
            "Content-Type: multipart/mixed; boundary=\"B\"\nMIME-Version: 1.0\n\n--B\n\n--B--\n"
        );
        let drawn = message(&parts);
        assert!(drawn.starts_with("Content-Type: multipart/mixed; boundary=\"==============="), "{drawn}");
        assert_eq!(strip_extension(".bashrc"), ".bashrc");
        assert_eq!(strip_extension("a/b.c.d"), "a/b.c");
    }
}
