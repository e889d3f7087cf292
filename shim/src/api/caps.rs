//! What the caps of `limits`, `held` and `budget` have in common: who they count by (`PeerKey`,
//! a client address) and why they refuse (`Refusal`, whose text is the answer's message). A leaf,
//! so the three can share it without importing one another.

use std::net::IpAddr;

/// Why a connection, a long-poll or a request body was refused; the text is the answer's
/// message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("too many connections to the shim (limit {limit}); retry later")]
    Connections { limit: usize },
    #[error("too many connections from {peer} (limit {limit}); retry later")]
    PeerConnections { peer: PeerKey, limit: usize },
    #[error("too many metadata long-polls held (limit {limit}); retry later")]
    LongPolls { limit: usize },
    #[error("too many request bodies being received (limit {limit} bytes in all); retry later")]
    BodyBytes { limit: usize },
    #[error("too many request bodies being received from {peer} (limit {limit} bytes); retry later")]
    PeerBodyBytes { peer: PeerKey, limit: usize },
    #[error("another request with this token is being received (limit {limit} at once); retry later")]
    TokenBodies { limit: usize },
}

/// What the per-address cap counts by: an IPv4 address, or an IPv6 address's /64 prefix (one
/// host is routinely given a whole /64, so per address would be no cap at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerKey(IpAddr);

impl PeerKey {
    pub fn of(address: IpAddr) -> PeerKey {
        match address {
            IpAddr::V4(v4) => PeerKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => PeerKey(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    PeerKey(IpAddr::V6(prefix.into()))
                }
            },
        }
    }
}

impl std::fmt::Display for PeerKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(formatter, "{v4}"),
            IpAddr::V6(v6) => write!(formatter, "{v6}/64"),
        }
    }
}
