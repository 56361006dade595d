//! Server-sent events: an encoder and an incremental decoder.
//!
//! The decoder follows the WHATWG "event stream interpretation" rules: lines
//! end in CRLF, LF or CR (also when the CR and LF arrive in different reads);
//! a leading BOM is dropped; `:` starts a comment; `data` lines accumulate;
//! an `id` containing NUL is ignored; `retry` takes only ASCII digits; a blank
//! line dispatches, and a block with no data dispatches nothing.
//!
//! ```
//! use mcpsim::wire::sse::{Decoder, Item};
//! let mut d = Decoder::new();
//! let mut items = d.feed(b"id: 7\ndata: a\r");
//! items.extend(d.feed(b"\ndata: b\n\n"));
//! let Item::Event(ev) = &items[0] else { panic!() };
//! assert_eq!((ev.id.as_deref(), ev.data.as_str()), (Some("7"), "a\nb"));
//! ```

use serde::{Deserialize, Serialize};

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The event type; `message` when the block named none.
    pub event: String,
    /// The data lines joined with `\n`.
    pub data: String,
    /// The id this block set, if it set one (a NUL-bearing id sets nothing).
    pub id: Option<String>,
    /// The stream's last event id after this block (persists across blocks).
    pub last_event_id: String,
}

/// What the decoder yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A complete event, dispatched at its blank line.
    Event(Event),
    /// A comment line (heartbeats are comments); the text after `:`.
    Comment(String),
    /// A valid `retry` field, in milliseconds.
    Retry(u64),
}

/// Incremental decoder: feed it reads of any size.
#[derive(Debug, Default)]
pub struct Decoder {
    line: Vec<u8>,
    /// The previous read ended in CR: a leading LF in the next read is part of that line end.
    after_cr: bool,
    started: bool,
    data: String,
    event: String,
    block_id: Option<String>,
    last_event_id: String,
}

impl Decoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes held for an event not yet dispatched (a partial line or data).
    pub fn pending_bytes(&self) -> usize {
        self.line.len() + self.data.len() + self.event.len()
    }

    /// Whether the stream stopped in the middle of an event.
    pub fn has_partial(&self) -> bool {
        self.pending_bytes() > 0
    }

    /// The last event id of the stream so far.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// Decodes one read; returns the items it completed.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Vec<Item> {
        let mut out = Vec::new();
        if !self.started && !bytes.is_empty() {
            // A BOM may itself be split across reads; wait for 3 bytes.
            let mut probe = self.line.clone();
            probe.extend_from_slice(&bytes[..bytes.len().min(3)]);
            if probe.len() < 3 && b"\xEF\xBB\xBF".starts_with(&probe) {
                self.line = probe;
                return out;
            }
            self.started = true;
            if probe.starts_with(b"\xEF\xBB\xBF") {
                let skip = 3 - self.line.len();
                self.line.clear();
                bytes = &bytes[skip..];
            } else if !self.line.is_empty() {
                let pending = std::mem::take(&mut self.line);
                self.feed_started(&pending, &mut out);
            }
        }
        self.feed_started(bytes, &mut out);
        out
    }

    fn feed_started(&mut self, bytes: &[u8], out: &mut Vec<Item>) {
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(out);
                }
                b'\n' => self.end_line(out),
                _ => self.line.push(b),
            }
        }
    }

    fn end_line(&mut self, out: &mut Vec<Item>) {
        let raw = std::mem::take(&mut self.line);
        let line = String::from_utf8_lossy(&raw);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if let Some(comment) = line.strip_prefix(':') {
            out.push(Item::Comment(comment.strip_prefix(' ').unwrap_or(comment).to_string()));
            return;
        }
        let (name, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&line[..], ""),
        };
        match name {
            "event" => self.event = value.to_string(),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => {
                self.last_event_id = value.to_string();
                self.block_id = Some(value.to_string());
            }
            "retry" if !value.is_empty() && value.bytes().all(|c| c.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    out.push(Item::Retry(ms));
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Item>) {
        let event = std::mem::take(&mut self.event);
        let block_id = self.block_id.take();
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the trailing LF
        out.push(Item::Event(Event {
            event: if event.is_empty() { "message".into() } else { event },
            data,
            id: block_id,
            last_event_id: self.last_event_id.clone(),
        }));
    }
}

/// Encodes one event. Multi-line data becomes several `data:` lines.
pub fn encode(id: Option<&str>, event: Option<&str>, data: &str) -> String {
    let mut s = String::new();
    if let Some(event) = event {
        s.push_str("event: ");
        s.push_str(event);
        s.push('\n');
    }
    if let Some(id) = id {
        s.push_str("id: ");
        s.push_str(id);
        s.push('\n');
    }
    for line in data.split('\n') {
        s.push_str("data: ");
        s.push_str(line);
        s.push('\n');
    }
    s.push('\n');
    s
}

/// Encodes a comment (used for heartbeats).
pub fn encode_comment(text: &str) -> String {
    format!(": {text}\n\n")
}

/// Encodes a `retry` field on its own.
pub fn encode_retry(ms: u64) -> String {
    format!("retry: {ms}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(items: Vec<Item>) -> Vec<Event> {
        items
            .into_iter()
            .filter_map(|i| match i {
                Item::Event(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    fn all_at_once(input: &[u8]) -> Vec<Item> {
        Decoder::new().feed(input)
    }

    fn byte_by_byte(input: &[u8]) -> Vec<Item> {
        let mut d = Decoder::new();
        input.iter().flat_map(|b| d.feed(std::slice::from_ref(b))).collect()
    }

    #[test]
    fn basic_fields() {
        let items = all_at_once(b"event: endpoint\nid: 1000\ndata: /mcp\n\n");
        assert_eq!(
            events(items),
            vec![Event {
                event: "endpoint".into(),
                data: "/mcp".into(),
                id: Some("1000".into()),
                last_event_id: "1000".into()
            }]
        );
    }

    #[test]
    fn line_endings_cr_lf_crlf_and_split_reads() {
        let input = b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r";
        for items in [all_at_once(input), byte_by_byte(input)] {
            let evs = events(items);
            assert_eq!(evs.len(), 2);
            assert_eq!(evs[0].data, "a\nb\nc");
            assert_eq!(evs[1].data, "d");
        }
    }

    #[test]
    fn cr_then_lf_in_next_read_is_one_line_end() {
        let mut d = Decoder::new();
        let mut items = d.feed(b"data: x\r");
        items.extend(d.feed(b"\n"));
        // CR LF is one line end: still no blank line, nothing dispatched.
        assert!(events(items).is_empty());
        assert_eq!(events(d.feed(b"\n")).len(), 1);
    }

    #[test]
    fn field_split_across_reads() {
        let mut d = Decoder::new();
        let mut items = d.feed(b"da");
        items.extend(d.feed(b"ta: hel"));
        items.extend(d.feed(b"lo\n"));
        items.extend(d.feed(b"\n"));
        assert_eq!(events(items)[0].data, "hello");
    }

    #[test]
    fn comments_and_retry() {
        let items = all_at_once(b": ping\nretry: 3000\nretry: 3x\n\n");
        assert_eq!(items, vec![Item::Comment("ping".into()), Item::Retry(3000)]);
    }

    #[test]
    fn id_with_nul_is_ignored_and_ids_persist() {
        let evs = events(all_at_once(b"id: 5\ndata: a\n\nid: 6\0x\ndata: b\n\ndata: c\n\n"));
        assert_eq!(evs[0].last_event_id, "5");
        assert_eq!(evs[1].id, None);
        assert_eq!(evs[1].last_event_id, "5");
        assert_eq!(evs[2].last_event_id, "5");
    }

    #[test]
    fn empty_data_dispatches_nothing_but_id_sticks() {
        let mut d = Decoder::new();
        assert!(events(d.feed(b"id: 9\nevent: x\n\n")).is_empty());
        assert_eq!(d.last_event_id(), "9");
        let evs = events(d.feed(b"data: y\n\n"));
        assert_eq!(evs[0].event, "message", "event type is reset after a block");
    }

    #[test]
    fn field_without_colon_and_no_space_after_colon() {
        let evs = events(all_at_once(b"data\ndata:x\ndata:  y\n\n"));
        assert_eq!(evs[0].data, "\nx\n y");
    }

    #[test]
    fn bom_is_dropped_even_when_split() {
        let input = b"\xEF\xBB\xBFdata: a\n\n";
        assert_eq!(events(all_at_once(input))[0].data, "a");
        assert_eq!(events(byte_by_byte(input))[0].data, "a");
        // A BOM later in the stream is not special.
        assert_eq!(events(all_at_once(b"data: a\n\n\xEF\xBB\xBFdata: b\n\n")).len(), 1);
    }

    #[test]
    fn unknown_fields_ignored_and_unterminated_block_not_dispatched() {
        let evs = events(all_at_once(b"foo: bar\ndata: a\n\ndata: pending\n"));
        assert_eq!(evs.len(), 1);
    }

    #[test]
    fn partial_events_are_visible() {
        let mut d = Decoder::new();
        d.feed(b"data: {\"jsonrpc\"");
        assert!(d.has_partial());
        assert_eq!(d.pending_bytes(), 16);
        d.feed(b"}\n\n");
        assert!(!d.has_partial());
    }

    #[test]
    fn encode_round_trips() {
        let s = encode(Some("1007"), Some("message"), "{\"a\":1}\nsecond");
        let evs = events(all_at_once(s.as_bytes()));
        assert_eq!(evs[0].data, "{\"a\":1}\nsecond");
        assert_eq!(evs[0].id.as_deref(), Some("1007"));
        assert_eq!(all_at_once(encode_comment("ping").as_bytes()), vec![Item::Comment("ping".into())]);
        assert_eq!(all_at_once(encode_retry(500).as_bytes()), vec![Item::Retry(500)]);
    }
}
