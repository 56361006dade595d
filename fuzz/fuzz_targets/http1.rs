//! The HTTP/1 response sniffer (what the NAT reads from a server): it never
//! panics, and the chunking of the reads does not change the heads, the body
//! bytes or the ends it reports.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mcpsim::wire::http1::{ResponseSniffer, Sniffed};

/// Heads and ends as they are; body pieces joined.
fn normal(items: Vec<Sniffed>) -> Vec<Sniffed> {
    let mut out: Vec<Sniffed> = Vec::new();
    for s in items {
        match (out.last_mut(), s) {
            (Some(Sniffed::Body(prev)), Sniffed::Body(b)) => prev.extend_from_slice(&b),
            (_, s) => out.push(s),
        }
    }
    out.retain(|s| !matches!(s, Sniffed::Body(b) if b.is_empty()));
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, bytes)) = data.split_first() else { return };
    let whole = normal(ResponseSniffer::new().feed(bytes));
    let mut s = ResponseSniffer::new();
    let mut chunked = Vec::new();
    let mut rest = bytes;
    let mut size = usize::from(seed % 13) + 1;
    while !rest.is_empty() {
        let n = size.min(rest.len());
        chunked.extend(s.feed(&rest[..n]));
        rest = &rest[n..];
        size = size * 7 % 17 + 1;
    }
    assert_eq!(whole, normal(chunked), "chunking changed what was sniffed");
});
