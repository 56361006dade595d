//! The JSON-RPC / MCP message parser: any text parses or is refused, never a
//! panic; a parsed message summarizes, and its JSON parses back to the same.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mcpsim::wire::jsonrpc::Message;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(m) = Message::parse(text) {
        let summary = m.summary();
        let again = Message::parse(&m.to_json()).expect("a parsed message's JSON parses");
        assert_eq!(again.summary(), summary);
    }
});
