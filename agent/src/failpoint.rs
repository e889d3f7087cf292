//! Crash points for the crash-safety tests: in test builds (debug builds, or any build with the
//! `failpoints` feature) `main` arms one point from `ANNEAL_FAILPOINT=<point>[:<n>]` and the agent
//! aborts (SIGABRT, no cleanup, like a kill -9) the n-th time (default the first) it passes that
//! point. In a release build every `hit` compiles to nothing and the variable is refused. Debug
//! builds carry them so that whichever command built `target/debug/anneal-agent`, the tests get
//! a binary that can crash on cue. The points are the journal's transitions and the two moments
//! of a signal's life that a crash can split.

use std::fmt;
use std::str::FromStr;

/// Where the agent may be made to crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failpoint {
    /// The entry was written as seen; nothing ran.
    AfterSeen,
    /// The entry was written as started; the hook is not spawned yet.
    AfterStarted,
    /// The hook's process exists; its run marker file is not written yet.
    AfterSpawn,
    /// The hook exited; its result is not journaled yet.
    AfterHookExit,
    /// The result is journaled; the signal is not sent yet.
    AfterFinished,
    /// Half of the signal request is on the wire.
    MidSignal,
    /// The receiver answered 2xx; the delivery is not journaled yet.
    AfterSignalAck,
}

impl Failpoint {
    pub(crate) const ALL: [Failpoint; 7] = [
        Failpoint::AfterSeen,
        Failpoint::AfterStarted,
        Failpoint::AfterSpawn,
        Failpoint::AfterHookExit,
        Failpoint::AfterFinished,
        Failpoint::MidSignal,
        Failpoint::AfterSignalAck,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Failpoint::AfterSeen => "after_seen",
            Failpoint::AfterStarted => "after_started",
            Failpoint::AfterSpawn => "after_spawn",
            Failpoint::AfterHookExit => "after_hook_exit",
            Failpoint::AfterFinished => "after_finished",
            Failpoint::MidSignal => "mid_signal",
            Failpoint::AfterSignalAck => "after_signal_ack",
        }
    }
}

impl fmt::Display for Failpoint {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A point and the pass at which it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Armed {
    pub point: Failpoint,
    pub on_pass: u32,
}

impl FromStr for Armed {
    type Err = String;

    fn from_str(text: &str) -> Result<Armed, String> {
        let (name, pass) = text.split_once(':').unwrap_or((text, "1"));
        let point = Failpoint::ALL.into_iter().find(|point| point.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Failpoint::ALL.iter().map(|point| point.name()).collect();
            format!("unknown failpoint {name:?}; one of {}", names.join(", "))
        })?;
        let on_pass = pass.parse().ok().filter(|pass| *pass > 0).ok_or_else(|| format!("bad pass count {pass:?}"))?;
        Ok(Armed { point, on_pass })
    }
}

#[cfg(any(debug_assertions, feature = "failpoints"))]
mod armed {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::{Armed, Failpoint};

    static ARMED: OnceLock<Armed> = OnceLock::new();
    static PASSES: AtomicU32 = AtomicU32::new(0);

    pub fn arm(armed: Armed) {
        let _ = ARMED.set(armed);
    }

    pub fn fires(point: Failpoint) -> bool {
        match ARMED.get() {
            Some(armed) if armed.point == point => PASSES.fetch_add(1, Ordering::SeqCst) + 1 == armed.on_pass,
            _ => false,
        }
    }
}

/// Whether this build has crash points.
pub const COMPILED_IN: bool = cfg!(any(debug_assertions, feature = "failpoints"));

/// Arms `armed` (a no-op without the feature; `main` says so).
pub fn arm(armed: Armed) {
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    armed::arm(armed);
    #[cfg(not(any(debug_assertions, feature = "failpoints")))]
    let _ = armed;
}

/// Aborts the process if `point` is armed and this is the pass it fires on.
#[inline]
pub(crate) fn hit(point: Failpoint) {
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    if armed::fires(point) {
        eprintln!("anneal-agent: failpoint {point} reached; aborting");
        std::process::abort();
    }
    #[cfg(not(any(debug_assertions, feature = "failpoints")))]
    let _ = point;
}

/// At `MidSignal`: writes the headers and half of `body` of the signal request to `url`'s host
/// over a plain connection, then aborts, so the receiver sees a torn request.
pub(crate) fn hit_mid_signal(url: &reqwest::Url, method: &str, signal_id: &str, body: &str) {
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    if armed::fires(Failpoint::MidSignal) {
        send_half_and_abort(url, method, signal_id, body);
    }
    #[cfg(not(any(debug_assertions, feature = "failpoints")))]
    let _ = (url, method, signal_id, body);
}

#[cfg(any(debug_assertions, feature = "failpoints"))]
fn send_half_and_abort(url: &reqwest::Url, method: &str, signal_id: &str, body: &str) -> ! {
    use std::io::Write;
    let host = url.host_str().unwrap_or("127.0.0.1");
    let port = url.port_or_known_default().unwrap_or(80);
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_string(),
    };
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n\
         X-Anneal-Signal-Id: {signal_id}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    if let Ok(mut stream) = std::net::TcpStream::connect((host, port)) {
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(&body.as_bytes()[..body.len() / 2]);
        let _ = stream.flush();
    }
    eprintln!("anneal-agent: failpoint mid_signal reached; aborting");
    std::process::abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_points_and_passes() {
        assert_eq!("after_seen".parse(), Ok(Armed { point: Failpoint::AfterSeen, on_pass: 1 }));
        assert_eq!("mid_signal:3".parse(), Ok(Armed { point: Failpoint::MidSignal, on_pass: 3 }));
        assert!("after_lunch".parse::<Armed>().unwrap_err().contains("after_seen"));
        assert!("after_seen:0".parse::<Armed>().is_err());
        for point in Failpoint::ALL {
            assert_eq!(point.name().parse::<Armed>().map(|armed| armed.point), Ok(point));
        }
    }
}
