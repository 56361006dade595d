//! The SSE decoder, fed in arbitrary chunkings: it never panics, and how the
//! bytes are split into reads never changes what it decodes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mcpsim::wire::sse::Decoder;

fuzz_target!(|data: &[u8]| {
    // The first byte seeds the chunk sizes; the rest is the stream.
    let Some((&seed, bytes)) = data.split_first() else { return };
    let whole = Decoder::new().feed(bytes);
    let mut d = Decoder::new();
    let mut chunked = Vec::new();
    let mut rest = bytes;
    let mut size = usize::from(seed % 7) + 1;
    while !rest.is_empty() {
        let n = size.min(rest.len());
        chunked.extend(d.feed(&rest[..n]));
        rest = &rest[n..];
        size = size * 5 % 11 + 1;
    }
    assert_eq!(whole, chunked, "chunking changed the decoded items");
});
