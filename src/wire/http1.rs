//! A passive HTTP/1.1 response sniffer for the NAT.
//!
//! The NAT sees raw server→client bytes. To record which SSE events a server
//! wrote into a dropped mapping it must find the response bodies: parse each
//! response head, then undo `Content-Length` or chunked framing. Anything it
//! cannot parse switches it to opaque mode, where bytes are still counted.

/// What the sniffer yields for one read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sniffed {
    /// A response head.
    Head {
        /// The status code.
        status: u16,
        /// The `Content-Type` header, if any.
        content_type: Option<String>,
    },
    /// Body bytes, framing removed.
    Body(Vec<u8>),
    /// The current response's body ended.
    End,
}

#[derive(Debug)]
enum State {
    Head,
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkDataEnd,
    Trailers,
    UntilClose,
    Opaque,
}

/// Incremental response sniffer.
#[derive(Debug)]
pub struct ResponseSniffer {
    state: State,
    buf: Vec<u8>,
    /// How many buffered bytes were already searched for the line or head
    /// end the state waits for: a head dripped a byte per read is searched
    /// once, not once per read (fuzzing found that quadratic).
    searched: usize,
}

impl Default for ResponseSniffer {
    fn default() -> Self {
        Self { state: State::Head, buf: Vec::new(), searched: 0 }
    }
}

const MAX_HEAD: usize = 64 * 1024;

impl ResponseSniffer {
    /// A sniffer expecting a response head.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the stream stopped looking like HTTP/1.1.
    pub fn is_opaque(&self) -> bool {
        matches!(self.state, State::Opaque)
    }

    /// Feeds the next bytes the server wrote; yields each head, body piece and
    /// body end they complete, in order (nothing once opaque). Long, for a
    /// reason: one state machine over one buffer, each arm a few lines that
    /// consume from the same position; split apart, the arms would have to
    /// hand the buffer and the position back and forth (it counts toward
    /// the house's 12 long functions, docs/design.md §9).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Sniffed> {
        let mut out = Vec::new();
        if self.is_opaque() {
            return out;
        }
        self.buf.extend_from_slice(bytes);
        let mut pos = 0;
        // Only the first search of this feed resumes where the last one stopped.
        let mut searched = std::mem::take(&mut self.searched);
        loop {
            let rest = &self.buf[pos..];
            let from = std::mem::take(&mut searched);
            match self.state {
                State::Opaque => break,
                State::Head => {
                    let Some(end) = find_from(rest, b"\r\n\r\n", from) else {
                        if rest.len() > MAX_HEAD {
                            self.state = State::Opaque;
                        }
                        self.searched = rest.len();
                        break;
                    };
                    let head = String::from_utf8_lossy(&rest[..end]).into_owned();
                    pos += end + 4;
                    match parse_head(&head) {
                        Some((status, content_type, framing)) => {
                            out.push(Sniffed::Head { status, content_type });
                            self.state = match framing {
                                Framing::Chunked => State::ChunkSize,
                                Framing::Length(0) => {
                                    out.push(Sniffed::End);
                                    State::Head
                                }
                                Framing::Length(n) => State::Length(n),
                                Framing::None => State::UntilClose,
                            };
                            if (100..200).contains(&status) || status == 204 || status == 304 {
                                if !matches!(self.state, State::Head) {
                                    out.push(Sniffed::End);
                                }
                                self.state = State::Head;
                            }
                        }
                        None => self.state = State::Opaque,
                    }
                }
                State::Length(n) => {
                    if rest.is_empty() {
                        break;
                    }
                    let take = (n as usize).min(rest.len());
                    out.push(Sniffed::Body(rest[..take].to_vec()));
                    pos += take;
                    let left = n - take as u64;
                    if left == 0 {
                        out.push(Sniffed::End);
                        self.state = State::Head;
                    } else {
                        self.state = State::Length(left);
                    }
                }
                State::UntilClose => {
                    if !rest.is_empty() {
                        out.push(Sniffed::Body(rest.to_vec()));
                        pos += rest.len();
                    }
                    break;
                }
                State::ChunkSize => {
                    let Some(end) = find_from(rest, b"\r\n", from) else {
                        if rest.len() > 1024 {
                            self.state = State::Opaque;
                        }
                        self.searched = rest.len();
                        break;
                    };
                    let line = String::from_utf8_lossy(&rest[..end]);
                    let size = line.split(';').next().unwrap_or("").trim();
                    pos += end + 2;
                    match u64::from_str_radix(size, 16) {
                        Ok(0) => self.state = State::Trailers,
                        Ok(n) => self.state = State::ChunkData(n),
                        Err(_) => self.state = State::Opaque,
                    }
                }
                State::ChunkData(n) => {
                    if rest.is_empty() {
                        break;
                    }
                    let take = (n as usize).min(rest.len());
                    out.push(Sniffed::Body(rest[..take].to_vec()));
                    pos += take;
                    let left = n - take as u64;
                    self.state = if left == 0 { State::ChunkDataEnd } else { State::ChunkData(left) };
                }
                State::ChunkDataEnd => {
                    if rest.len() < 2 {
                        break;
                    }
                    if &rest[..2] != b"\r\n" {
                        self.state = State::Opaque;
                        break;
                    }
                    pos += 2;
                    self.state = State::ChunkSize;
                }
                State::Trailers => {
                    let Some(end) = find_from(rest, b"\r\n", from) else {
                        self.searched = rest.len();
                        break;
                    };
                    pos += end + 2;
                    if end == 0 {
                        out.push(Sniffed::End);
                        self.state = State::Head;
                    }
                }
            }
        }
        self.buf.drain(..pos);
        if self.is_opaque() {
            self.buf = Vec::new();
        }
        out
    }
}

enum Framing {
    Chunked,
    Length(u64),
    None,
}

fn parse_head(head: &str) -> Option<(u16, Option<String>, Framing)> {
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let mut parts = status_line.splitn(3, ' ');
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status: u16 = parts.next()?.parse().ok()?;
    let mut content_type = None;
    let mut framing = Framing::None;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-type" => content_type = Some(value.to_string()),
            "transfer-encoding" if value.to_ascii_lowercase().contains("chunked") => framing = Framing::Chunked,
            "content-length" if !matches!(framing, Framing::Chunked) => framing = Framing::Length(value.parse().ok()?),
            _ => {}
        }
    }
    Some((status, content_type, framing))
}

/// Where `needle` first occurs in `hay`, given that none ends in its first
/// `searched` bytes.
fn find_from(hay: &[u8], needle: &[u8], searched: usize) -> Option<usize> {
    let start = searched.saturating_sub(needle.len() - 1).min(hay.len());
    hay[start..].windows(needle.len()).position(|w| w == needle).map(|i| i + start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(items: &[Sniffed]) -> Vec<u8> {
        items
            .iter()
            .flat_map(|i| match i {
                Sniffed::Body(b) => b.clone(),
                _ => vec![],
            })
            .collect()
    }

    #[test]
    fn chunked_sse_split_anywhere() {
        let input = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\n!!!\r\n0\r\n\r\nHTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
        for split in 0..input.len() {
            let mut s = ResponseSniffer::new();
            let mut items = s.feed(&input[..split]);
            items.extend(s.feed(&input[split..]));
            assert_eq!(body(&items), b"hello!!!", "split at {split}");
            assert_eq!(items.iter().filter(|i| **i == Sniffed::End).count(), 2, "split at {split}");
            assert_eq!(items[0], Sniffed::Head { status: 200, content_type: Some("text/event-stream".into()) });
            assert!(!s.is_opaque());
        }
    }

    #[test]
    fn dripped_a_byte_at_a_time_gives_what_one_read_gives() {
        // Each search resumes where the last stopped: a delimiter that
        // straddles two reads must still be found.
        let input = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nx-pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n5;ext\r\nhello\r\n0\r\nx-trailer: 1\r\n\r\n";
        let whole = ResponseSniffer::new().feed(input);
        for step in 1..5 {
            let mut s = ResponseSniffer::new();
            let mut items = Vec::new();
            for piece in input.chunks(step) {
                items.extend(s.feed(piece));
            }
            assert_eq!(body(&items), body(&whole), "reads of {step}");
            assert_eq!(items.iter().filter(|i| **i == Sniffed::End).count(), 1, "reads of {step}");
            assert_eq!(items[0], whole[0], "reads of {step}");
            assert!(!s.is_opaque());
        }
    }

    #[test]
    fn content_length_and_until_close() {
        let mut s = ResponseSniffer::new();
        let items = s.feed(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 2\r\n\r\nnoHTTP/1.1 200 OK\r\n\r\nstream");
        assert_eq!(body(&items), b"nostream");
    }

    #[test]
    fn garbage_goes_opaque() {
        let mut s = ResponseSniffer::new();
        assert!(s.feed(b"SSH-2.0-OpenSSH\r\n\r\n").is_empty());
        assert!(s.is_opaque());
        assert!(s.feed(b"more").is_empty());
    }
}
