//! Misbehaving servers never crash or hang the harness: each run below ends
//! on time with a `protocol` finding that says what the server did. (A server
//! that panics or stops serving: tests/plug.rs.)

use mcpsim::scenario::Plan;
use mcpsim::seed::Seed;
use mcpsim::server::{AppHook, ServerPlug};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    Garbage,
    CloseMidEvent,
    HugeEvent,
    NoHeaders,
    Drip,
    /// A legacy endpoint event whose session id holds a space.
    SpaceInSessionId,
}

struct Bad(Misbehaviour);

const SSE_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";

async fn read_head(s: &mut Box<dyn mcpsim::net::Connection>) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    buf
}

async fn misbehave(how: Misbehaviour, mut s: Box<dyn mcpsim::net::Connection>) {
    let head = read_head(&mut s).await;
    if head.starts_with(b"POST") {
        let _ = s.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n").await;
        return;
    }
    match how {
        Misbehaviour::Garbage => {
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.6\r\nthis is not http\r\n\r\n").await;
        }
        Misbehaviour::CloseMidEvent => {
            let _ = s.write_all(SSE_HEAD).await;
            let _ = s
                .write_all(
                    b"event: endpoint\ndata: /mcp/messages?sessionId=tok-1\n\nid: 1\ndata: {\"jsonrpc\":\"2.0\",",
                )
                .await;
            return; // dropping the stream closes it mid-event
        }
        Misbehaviour::HugeEvent => {
            let _ = s.write_all(SSE_HEAD).await;
            let _ = s.write_all(b"id: 1\ndata: ").await;
            let block = vec![b'x'; 1 << 20];
            for _ in 0..10 {
                if s.write_all(&block).await.is_err() {
                    return;
                }
            }
            let _ = s.write_all(b"\n\n").await;
        }
        Misbehaviour::NoHeaders => {}
        Misbehaviour::SpaceInSessionId => {
            let _ = s.write_all(SSE_HEAD).await;
            let _ = s.write_all(b"event: endpoint\ndata: /mcp/messages?sessionId=tok 1\n\n").await;
        }
        Misbehaviour::Drip => {
            let _ = s.write_all(SSE_HEAD).await;
            for b in b"data: one byte per second, forever ".iter().cycle() {
                if s.write_all(&[*b]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    // Keep the connection open, saying nothing more.
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

impl ServerPlug for Bad {
    fn name(&self) -> &str {
        "misbehaving"
    }
    fn serve(&self, listener: mcpsim::net::Listener, _app: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
        let how = self.0;
        Box::pin(async move {
            while let Ok((s, _)) = listener.accept().await {
                tokio::task::spawn_local(misbehave(how, s));
            }
        })
    }
}

fn run(how: Misbehaviour) -> (mcpsim::Run, Vec<mcpsim::check::Verdict>) {
    let plan = Plan::from_toml_str(
        "[scenario]\nname = \"bad\"\nduration = \"40s\"\n[server]\nheartbeat = \"4s\"\n[[client]]\nname = \"alice\"\n\
         [[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n",
        "bad.toml",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let run = mcpsim::run_with(&plan, Rc::new(Bad(how)), Seed(5)).expect("the run completes");
    assert!(started.elapsed() < Duration::from_secs(60), "{how:?} must not hang the harness");
    assert!(run.aborted.is_none());
    let verdicts = mcpsim::check::judge(&run.trace);
    (run, verdicts)
}

fn protocol_finding(how: Misbehaviour, says: &str) {
    let (run, verdicts) = run(how);
    let v = verdicts.iter().find(|v| v.check == "protocol").unwrap();
    assert!(
        v.violations().iter().any(|x| x.headline().contains(says)),
        "{how:?}: expected a protocol finding containing {says:?}, got {:?}",
        v.status
    );
    let report = mcpsim::report::text(&run, &verdicts, None);
    assert!(report.contains("protocol                 VIOLATED"), "{report}");
    assert!(report.contains("seed 5"), "the report names the seed");
}

#[test]
fn garbage_instead_of_http() {
    protocol_finding(Misbehaviour::Garbage, "the response is not HTTP/1.1");
}

#[test]
fn a_stream_closed_mid_event() {
    protocol_finding(Misbehaviour::CloseMidEvent, "in the middle of an event");
}

#[test]
fn a_ten_megabyte_event() {
    protocol_finding(Misbehaviour::HugeEvent, "an event grew past 1048576 bytes");
}

#[test]
fn headers_that_never_come() {
    protocol_finding(Misbehaviour::NoHeaders, "no response headers within 10.0 s");
}

#[test]
fn one_byte_per_second() {
    protocol_finding(Misbehaviour::Drip, "without one complete event");
}

#[test]
fn a_session_id_no_url_can_carry() {
    // The client once panicked building a request with it (`expect("valid
    // request")`); now it is the server's protocol fault, named as such.
    protocol_finding(Misbehaviour::SpaceInSessionId, "no URL or header can carry");
}
