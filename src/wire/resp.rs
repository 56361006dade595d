//! RESP2, the protocol Redis speaks: the subset mcpsim's store client and
//! its simulated store host use (docs/replicas.md).
//!
//! A command is an array of bulk strings; a reply is a simple string, an
//! error, an integer, a bulk string (or nil) or an array of replies. Parsing
//! is incremental: [`parse`] takes the bytes read so far and says how many
//! of them one whole frame used, or that more are needed.

/// One RESP2 frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// `+OK`
    Simple(String),
    /// `-ERR ...`
    Error(String),
    /// `:42`
    Int(i64),
    /// `$3\r\nfoo`, or `$-1` (nil).
    Bulk(Option<Vec<u8>>),
    /// `*2\r\n...`, or `*-1` (nil).
    Array(Option<Vec<Frame>>),
}

/// Longest bulk string or array accepted (a guard against a garbled length).
const MAX_LEN: usize = 64 << 20;

/// Why bytes are not RESP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed RESP: {}", self.0)
    }
}

impl std::error::Error for Malformed {}

impl Frame {
    /// The bytes of this frame.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Simple(s) => line(out, b'+', s.as_bytes()),
            Frame::Error(s) => line(out, b'-', s.as_bytes()),
            Frame::Int(n) => line(out, b':', n.to_string().as_bytes()),
            Frame::Bulk(None) => out.extend_from_slice(b"$-1\r\n"),
            Frame::Bulk(Some(b)) => {
                line(out, b'$', b.len().to_string().as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Array(None) => out.extend_from_slice(b"*-1\r\n"),
            Frame::Array(Some(items)) => {
                line(out, b'*', items.len().to_string().as_bytes());
                for i in items {
                    i.encode(out);
                }
            }
        }
    }

    /// A command: an array of bulk strings.
    pub fn command<A: AsRef<[u8]>>(args: &[A]) -> Frame {
        Frame::Array(Some(args.iter().map(|a| Frame::Bulk(Some(a.as_ref().to_vec()))).collect()))
    }

    /// The arguments of a command frame, or why it is not one.
    pub fn into_args(self) -> Result<Vec<Vec<u8>>, Malformed> {
        match self {
            Frame::Array(Some(items)) if !items.is_empty() => items
                .into_iter()
                .map(|i| match i {
                    Frame::Bulk(Some(b)) => Ok(b),
                    other => Err(Malformed(format!("a command's arguments are bulk strings, not {other:?}"))),
                })
                .collect(),
            other => Err(Malformed(format!("a command is a non-empty array, not {other:?}"))),
        }
    }
}

fn line(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// The first frame of `buf` and the bytes it took; `None` if `buf` holds
/// only part of one.
pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, Malformed> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        if buf.len() > 1024 && !matches!(buf.first(), Some(b'$')) {
            return Err(Malformed("a line longer than 1024 bytes".into()));
        }
        return Ok(None);
    };
    let Some((&tag, body)) = buf[..end].split_first() else {
        return Err(Malformed("an empty line".into()));
    };
    let text = std::str::from_utf8(body).map_err(|_| Malformed("a header line that is not UTF-8".into()))?;
    let rest = end + 2;
    let int = || text.parse::<i64>().map_err(|_| Malformed(format!("{text:?} is not an integer")));
    match tag {
        b'+' => Ok(Some((Frame::Simple(text.to_string()), rest))),
        b'-' => Ok(Some((Frame::Error(text.to_string()), rest))),
        b':' => Ok(Some((Frame::Int(int()?), rest))),
        b'$' => {
            let n = int()?;
            if n < 0 {
                return Ok(Some((Frame::Bulk(None), rest)));
            }
            let n = usize::try_from(n).ok().filter(|n| *n <= MAX_LEN).ok_or(Malformed(format!("bulk length {n}")))?;
            if buf.len() < rest + n + 2 {
                return Ok(None);
            }
            if &buf[rest + n..rest + n + 2] != b"\r\n" {
                return Err(Malformed("a bulk string not ended by CRLF".into()));
            }
            Ok(Some((Frame::Bulk(Some(buf[rest..rest + n].to_vec())), rest + n + 2)))
        }
        b'*' => {
            let n = int()?;
            if n < 0 {
                return Ok(Some((Frame::Array(None), rest)));
            }
            let n = usize::try_from(n).ok().filter(|n| *n <= MAX_LEN).ok_or(Malformed(format!("array length {n}")))?;
            let mut items = Vec::with_capacity(n.min(64));
            let mut at = rest;
            for _ in 0..n {
                match parse(&buf[at..])? {
                    Some((f, used)) => {
                        items.push(f);
                        at += used;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Frame::Array(Some(items)), at)))
        }
        other => Err(Malformed(format!("unknown type byte {:?}", other as char))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(f: &Frame) -> Vec<u8> {
        let mut out = Vec::new();
        f.encode(&mut out);
        out
    }

    #[test]
    fn frames_encode_as_redis_sends_them_and_parse_back() {
        let cmd = Frame::command(&["SET", "k", "v", "NX"]);
        assert_eq!(bytes(&cmd), b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n");
        for f in [
            cmd,
            Frame::Simple("OK".into()),
            Frame::Error("ERR nope".into()),
            Frame::Int(-7),
            Frame::Bulk(None),
            Frame::Bulk(Some(b"a\r\nb".to_vec())),
            Frame::Array(None),
            Frame::Array(Some(vec![Frame::Int(1), Frame::Array(Some(vec![]))])),
        ] {
            let b = bytes(&f);
            assert_eq!(parse(&b).unwrap(), Some((f.clone(), b.len())), "{f:?}");
            // Every proper prefix is incomplete, never an error.
            for cut in 0..b.len() {
                assert_eq!(parse(&b[..cut]).unwrap(), None, "{f:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for bad in [&b"?x\r\n"[..], b"$abc\r\n", b"$2\r\nabcd\r\n", b"\r\n", b":1.5\r\n", b"$99999999999\r\n"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert!(Frame::Int(1).into_args().is_err());
        assert_eq!(Frame::command(&["GET", "k"]).into_args().unwrap(), vec![b"GET".to_vec(), b"k".to_vec()]);
    }
}
