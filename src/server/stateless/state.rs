//! `requestState` as the reference server mints and checks it.
//!
//! The payload names the tool, a digest of the call's arguments, the
//! principal it was minted for, when it expires and a nonce. A sealing
//! server appends an HMAC-SHA-256 tag under a per-process key (as the Python
//! SDK does by default); a plain one sends the payload as it is (as rmcp's
//! `from_request_state` path does): anything a client sends back is believed.

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// What a state says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Payload {
    /// The tool.
    pub(super) t: String,
    /// The arguments' digest (`params_digest` of `arguments`).
    pub(super) a: String,
    /// The principal it was minted for.
    pub(super) p: String,
    /// Expiry, in µs of scenario time.
    pub(super) e: u64,
    /// A nonce: what a single-use registry remembers.
    pub(super) n: String,
}

/// Seals payloads (or not) with one process's key.
pub(super) struct Codec {
    key: Option<[u8; 32]>,
}

impl Codec {
    /// A codec that seals with `key`; `None`: plain JSON, no integrity.
    pub(super) fn new(key: Option<[u8; 32]>) -> Self {
        Codec { key }
    }

    fn tag(key: &[u8; 32], text: &str) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
        mac.update(text.as_bytes());
        hex(&mac.finalize().into_bytes()[..16])
    }

    /// The state's text.
    pub(super) fn seal(&self, p: &Payload) -> String {
        let json = serde_json::to_string(p).expect("payloads serialize");
        match &self.key {
            None => json,
            Some(key) => {
                let body = hex(json.as_bytes());
                let tag = Self::tag(key, &body);
                format!("{body}.{tag}")
            }
        }
    }

    /// The payload of a state this codec would accept, or why not.
    pub(super) fn open(&self, state: &str) -> Result<Payload, String> {
        let json = match &self.key {
            None => state.to_string(),
            Some(key) => {
                let (body, tag) = state.rsplit_once('.').ok_or("not a sealed state (no tag)")?;
                if Self::tag(key, body) != tag {
                    return Err("its integrity tag does not match: not minted by this process, or altered".into());
                }
                let bytes = unhex(body).ok_or("its body is not hex")?;
                String::from_utf8(bytes).map_err(|_| "its body is not UTF-8".to_string())?
            }
        };
        serde_json::from_str(&json).map_err(|e| format!("it does not parse: {e}"))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload() -> Payload {
        Payload { t: "deploy".into(), a: "00ff".into(), p: "alice".into(), e: 60_000_000, n: "0123".into() }
    }

    #[test]
    fn a_sealed_state_opens_and_any_change_is_refused() {
        let c = Codec::new(Some([7; 32]));
        let s = c.seal(&payload());
        assert_eq!(c.open(&s).unwrap(), payload());
        assert!(c.open(&crate::wire::mrtr::flip(&s)).unwrap_err().contains("tag"));
        assert!(c.open(&crate::wire::mrtr::truncate(&s)).is_err());
        // Another process's key: refused.
        assert!(Codec::new(Some([8; 32])).open(&s).is_err());
    }

    #[test]
    fn a_plain_state_is_believed_even_when_altered() {
        let c = Codec::new(None);
        let s = c.seal(&payload());
        let flipped = c.open(&crate::wire::mrtr::flip(&s)).unwrap();
        assert_ne!(flipped, payload());
        assert!(c.open("{").is_err());
    }
}
