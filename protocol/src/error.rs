//! How an error reads on one line: the message, then each cause the message does not already
//! end with (`a: b: c`). Shared by both binaries and their libraries so log lines, `status` and
//! the CLIs print errors the same way; error messages therefore never repeat their `#[source]`.

/// An error and its causes on one line (`a: b: c`, what `{:#}` shows with anyhow), for log lines,
/// `status` and the CLIs. A cause whose text the message already ends with is not repeated.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read {path}")]
    struct Read {
        path: &'static str,
        #[source]
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot load the config")]
    struct Load(#[source] Read);

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open: denied")]
    struct Repeats(#[source] std::io::Error);

    #[test]
    fn causes_follow_the_message_separated_by_colons() {
        let error = Load(Read { path: "/etc/x", source: std::io::Error::other("denied") });
        assert_eq!(error_chain(&error), "cannot load the config: cannot read /etc/x: denied");
    }

    #[test]
    fn a_cause_the_message_already_ends_with_is_not_repeated() {
        let error = Repeats(std::io::Error::other("denied"));
        assert_eq!(error_chain(&error), "cannot open: denied");
    }
}
