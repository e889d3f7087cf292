//! The `config` of `OS::Heat::MultipartMime`: a MIME multipart message byte for byte as Heat
//! builds it (heat.engine.resources.openstack.heat.multi_part.MultipartMime.get_message with
//! Python's `email.mime` and `Message.as_string`), except for the random boundary, which is
//! drawn the same way (`===============` + 19 digits + `==`). The parts a part of `type:
//! multipart` splices in are read by `splice` (Python's email parser); `params` reads and
//! writes header parameters as Python's `email` does.

mod params;
mod splice;

pub use params::ParamError;
pub use splice::SpliceError;

use params::ParamValue;

/// The largest message built: what any one value a template produces may be (the expression
/// result cap, `template::expr::values::MAX_RESULT_BYTES`).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// One part: its text (a config's already, when the part named one) and headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub text: String,
    pub subtype: String,
    pub filename: String,
}

/// The parts MultipartMime._append_multiparts takes from `text`: none when it is not a
/// multipart message.
pub fn spliced_parts(text: &str) -> Result<Vec<Part>, SpliceError> {
    let parts = splice::spliced_parts(text)?;
    Ok(parts
        .into_iter()
        .map(|part| Part { text: part.text, subtype: part.subtype, filename: part.filename.unwrap_or_default() })
        .collect())
}

/// The message for `parts`.
pub fn message(parts: &[Part]) -> Result<String, ParamError> {
    // As email.generator: random.randrange(sys.maxsize); not a secret, so the id generator will do.
    let random = crate::engine::context::new_uuid().replace('-', "");
    let token = u64::from_str_radix(&random[..16], 16).unwrap_or_default() % i64::MAX as u64;
    let drawn = format!("==============={token:019}==");
    with_boundary(parts, &unused_boundary(parts, &drawn))
}

/// As email.generator._make_boundary: a boundary found in the text gets a counter. Python
/// looks for a whole `--boundary` line; any occurrence counts here, which is stricter.
fn unused_boundary(parts: &[Part], drawn: &str) -> String {
    let mut boundary = drawn.to_owned();
    let mut counter = 0;
    while parts.iter().any(|part| part.text.contains(&boundary)) {
        boundary = format!("{drawn}.{counter}");
        counter += 1;
    }
    boundary
}

pub fn with_boundary(parts: &[Part], boundary: &str) -> Result<String, ParamError> {
    let mut out = format!("Content-Type: multipart/mixed; boundary=\"{boundary}\"\nMIME-Version: 1.0\n\n");
    if parts.is_empty() {
        out.push_str(&format!("--{boundary}\n\n"));
    }
    for part in parts {
        out.push_str(&format!("--{boundary}\n"));
        out.push_str(&render_part(part)?);
        out.push('\n');
    }
    out.push_str(&format!("--{boundary}--\n"));
    Ok(out)
}

/// As MultipartMime._create_message: `us-ascii` and 7bit when the text is ASCII, else
/// `utf-8` and base64 (76-character lines); the subtype defaults to the file name without its
/// extension, else `plain`.
fn render_part(part: &Part) -> Result<String, ParamError> {
    let subtype = if !part.subtype.is_empty() {
        part.subtype.clone()
    } else if !part.filename.is_empty() {
        strip_extension(&part.filename).to_owned()
    } else {
        "plain".to_owned()
    };
    let ascii = part.text.is_ascii();
    let (charset, encoding) = if ascii { ("us-ascii", "7bit") } else { ("utf-8", "base64") };
    let written = format!("text/{subtype}; charset=\"{charset}\"");
    let content_type = with_charset_set(&written, charset)?;
    let content_type_header = format!("Content-Type: {}\n", header_value(&content_type));
    // Message.set_param replaces a Content-Type it rewrites at the end, after MIME-Version.
    let mut out = if content_type == written {
        format!("{content_type_header}MIME-Version: 1.0\n")
    } else {
        format!("MIME-Version: 1.0\n{content_type_header}")
    };
    out.push_str(&format!("Content-Transfer-Encoding: {encoding}\n"));
    if !part.filename.is_empty() {
        let filename = params::format_param("filename", &ParamValue::Plain(part.filename.clone()))?;
        out.push_str(&format!("Content-Disposition: attachment; {filename}\n"));
    }
    out.push('\n');
    if ascii {
        // email.generator._write_lines: every line end written as `\n`.
        out.push_str(&part.text.replace("\r\n", "\n").replace('\r', "\n"));
    } else {
        for chunk in part.text.as_bytes().chunks(57) {
            out.push_str(&base64(chunk));
            out.push('\n');
        }
    }
    Ok(out)
}

/// What MIMEText's `set_param('charset', …)` leaves of the Content-Type `written` (the subtype
/// and the charset parameter): the same text, unless the subtype reads as parameters
/// (a `;`, a `=`, an odd `"`, blanks at its end), when Python rewrites it from its parameters.
fn with_charset_set(written: &str, charset: &str) -> Result<String, ParamError> {
    let charset_param = params::format_param("charset", &ParamValue::Plain(charset.to_owned()))?;
    let set = match params::get_param(Some(written), "charset")? {
        Some(ParamValue::Plain(text)) => !text.is_empty(),
        Some(ParamValue::Encoded { .. }) => true,
        None => false,
    };
    if !set {
        return Ok(format!("{written}; {charset_param}"));
    }
    let mut rebuilt = Vec::new();
    for (name, value) in params::params(written)? {
        rebuilt.push(if name.to_lowercase() == "charset" {
            charset_param.clone()
        } else {
            params::format_param(&name, &params::unquoted(value))?
        });
    }
    Ok(rebuilt.join("; "))
}

/// A header value as email's compat32 policy writes it: as is when ASCII, else one RFC 2047
/// encoded word in the `utf-8` charset, `b` when shorter than `q`, as email.charset's SHORTEST
/// picks (a value long enough to need several encoded words is not folded the way Python
/// folds it).
fn header_value(value: &str) -> String {
    if value.is_ascii() {
        return value.to_owned();
    }
    let quoted: String = value
        .bytes()
        .map(|byte| match byte {
            b' ' => "_".to_owned(),
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'!' | b'*' | b'+' | b'/' => (byte as char).to_string(),
            other => format!("={other:02X}"),
        })
        .collect();
    let encoded = base64(value.as_bytes());
    if encoded.len() < quoted.len() { format!("=?utf-8?b?{encoded}?=") } else { format!("=?utf-8?q?{quoted}?=") }
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

    fn rendered(parts: &[Part]) -> String {
        with_boundary(parts, "B").unwrap()
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
        assert_eq!(rendered(&parts), expected);
        assert_eq!(rendered(&[]), "Content-Type: multipart/mixed; boundary=\"B\"\nMIME-Version: 1.0\n\n--B\n\n--B--\n");
        let drawn = message(&parts).unwrap();
        assert!(drawn.starts_with("Content-Type: multipart/mixed; boundary=\"==============="), "{drawn}");
        assert_eq!(strip_extension(".bashrc"), ".bashrc");
        assert_eq!(strip_extension("a/b.c.d"), "a/b.c");
    }

    /// Python's generator writes every line end as `\n`; MIMEText's set_param rewrites a
    /// Content-Type whose subtype reads as parameters, and moves it after MIME-Version.
    #[test]
    fn line_ends_and_odd_subtypes_as_python_writes_them() {
        let head = "Content-Type: multipart/mixed; boundary=\"B\"\nMIME-Version: 1.0\n\n--B\n";
        let ascii = "Content-Transfer-Encoding: 7bit\n";
        assert_eq!(
            rendered(&[part("a\r\nb\rc\n", "", "")]),
            format!(
                "{head}Content-Type: text/plain; charset=\"us-ascii\"\nMIME-Version: 1.0\n{ascii}\na\nb\nc\n\n--B--\n"
            )
        );
        let moved =
            |content_type: &str, rest: &str| format!("{head}MIME-Version: 1.0\nContent-Type: {content_type}\n{rest}");
        assert_eq!(
            rendered(&[part("x", "a=b", "")]),
            moved("text/a=\"b\"; charset=\"us-ascii\"", &format!("{ascii}\nx\n--B--\n"))
        );
        assert_eq!(
            rendered(&[part("x", "", "f g ")]),
            moved(
                "text/f g; charset=\"us-ascii\"",
                &format!("{ascii}Content-Disposition: attachment; filename=\"f g \"\n\nx\n--B--\n")
            )
        );
        assert_eq!(
            rendered(&[part("x", "a;b", "")]),
            moved("text/a; b; charset=\"us-ascii\"", &format!("{ascii}\nx\n--B--\n"))
        );
        assert_eq!(
            rendered(&[part("x", "q\"x", "")]),
            moved("text/q\"x; charset=\"us-ascii\"; charset=\"us-ascii\"", &format!("{ascii}\nx\n--B--\n"))
        );
        assert_eq!(
            rendered(&[part("x", "a; name*=utf-8''%C3%A9", "")]),
            moved("text/a; charset=\"us-ascii\"; name*=utf-8''%C3%83%C2%A9", &format!("{ascii}\nx\n--B--\n"))
        );
        assert_eq!(
            rendered(&[part("h\u{e9}", "a=b", "")]),
            moved("text/a=\"b\"; charset=\"utf-8\"", "Content-Transfer-Encoding: base64\n\naMOp\n\n--B--\n")
        );
    }

    #[test]
    fn a_boundary_in_a_part_gets_a_counter_as_in_python() {
        assert_eq!(unused_boundary(&[part("x", "", "")], "D"), "D");
        assert_eq!(unused_boundary(&[part("--D\n", "", "")], "D"), "D.0");
        assert_eq!(unused_boundary(&[part("D", "", ""), part("D.0", "", "")], "D"), "D.1");
    }

    /// What Heat renders, spliced into another message, renders as Heat renders it again.
    #[test]
    fn a_rendered_message_splices_back_into_its_parts() {
        let parts = [part("#!/bin/sh\necho hi", "", ""), part("#cloud-config\n", "cloud-config", "cc.yaml")];
        let spliced = spliced_parts(&message(&parts).unwrap()).unwrap();
        assert_eq!(
            spliced,
            [part("#!/bin/sh\necho hi", "plain", ""), part("#cloud-config\n", "cloud-config", "cc.yaml")]
        );
        assert_eq!(rendered(&spliced), rendered(&parts));
        // Heat's parser does not decode: a base64 part comes back as its base64 text.
        let spliced = spliced_parts(&message(&[part("h\u{e9}llo\n", "", "x.sh")]).unwrap()).unwrap();
        assert_eq!(spliced, [part("aMOpbGxvCg==\n", "x", "x.sh")]);
    }
}
