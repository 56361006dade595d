//! The NAT's sniffing of server bytes, chunk by chunk.

use super::*;
use rand::SeedableRng;

/// What the NAT makes of a server's bytes, chunk by chunk: SSE events, a
/// whole JSON response, and a chunk that only ends the response (the
/// server closing the stream: its fence, not a write).
#[test]
fn sniff_names_events_json_responses_and_the_end_of_a_response() {
    let m = Mapping {
        id: MappingId(1),
        status: Cell::new(Status::Live),
        is_uplink: Cell::new(false),
        plain_body: RefCell::new(None),
        eofs: Cell::new(0),
        kill: watch::channel(false).0,
        down_port: 1,
        last: Cell::default(),
    };
    let (mut sniffer, mut sse) = (ResponseSniffer::default(), Decoder::new());
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    let (events, response, closing) = sniff(&m, &mut sniffer, &mut sse, head);
    assert!(events.is_empty() && response.is_none() && !closing && m.is_uplink.get());
    let (events, _, closing) = sniff(&m, &mut sniffer, &mut sse, b"f\r\nid: 7\ndata: x\n\n\r\n");
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(!closing);
    let (_, _, closing) = sniff(&m, &mut sniffer, &mut sse, b"8\r\n: ping\n\n\r\n");
    assert!(!closing, "a heartbeat is a write");
    let (events, response, closing) = sniff(&m, &mut sniffer, &mut sse, b"0\r\n\r\n");
    assert!(events.is_empty() && response.is_none() && closing, "the terminator closes the stream");
    let json = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
    let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", json.len());
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(json);
    let (events, response, closing) = sniff(&m, &mut sniffer, &mut sse, &bytes);
    assert!(events.is_empty() && !closing);
    assert_eq!(response.as_deref(), Some("a JSON response (response to 1)"));
}

/// Drawn addresses stay in 100.64.0.0/10, and route on HAProxy's hash
/// (the value modulo the replicas up) as the hash of the address first
/// drawn did, for every deployment size.
#[test]
fn a_drawn_address_routes_by_its_residue_and_stays_in_the_carrier_range() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut copy = rng.clone();
    let (low, high) =
        (u32::from(std::net::Ipv4Addr::new(100, 64, 0, 0)), u32::from(std::net::Ipv4Addr::new(100, 127, 255, 255)));
    let mut picks = std::collections::BTreeSet::new();
    for _ in 0..2000 {
        let a = u32::from(draw_address(&mut rng));
        assert!((low..=high).contains(&a), "{}", std::net::Ipv4Addr::from(a));
        use rand::RngCore;
        let b = copy.next_u32().to_be_bytes();
        let first = [100u8, 64 | (b[0] & 0x3f), b[1], b[2].max(1)];
        let fnv =
            first.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
        for k in 1..=crate::scenario::MAX_REPLICAS {
            assert_eq!(u64::from(a % k), fnv % u64::from(k), "{} over {k}", std::net::Ipv4Addr::from(a));
        }
        picks.insert(a % 3);
    }
    assert_eq!(picks.len(), 3, "addresses reach every replica");
}
