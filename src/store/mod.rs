//! The store a server's replicas share (docs/replicas.md), behind one small
//! interface: [`Store`] runs one Redis command.
//!
//! Two implementations:
//! - [`MemoryStore`], the store inside one process (a single server, or a
//!   deployment whose replicas each keep their own): no network, no failure;
//! - [`RespStore`], a RESP client over any byte stream: to the simulated
//!   store host ([`host::serve`], a turmoil host that partitions and delays
//!   reach like any other) or to a real Redis, with the same code.
//!
//! Both execute commands with one state machine, [`Db`], so the simulated
//! store and the in-process one agree to the byte. Time is scenario time
//! (`PX` expiries), so everything here is deterministic in simulation.

pub mod host;

use crate::wire::resp::{self, Frame};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The port the store listens on (Redis's).
pub const PORT: u16 = 6379;

/// Why a command got no answer the caller can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// No answer: the store cannot be reached, the connection broke, or the
    /// answer did not come in time. The caller cannot tell whether the
    /// command took effect.
    Unreachable(String),
    /// The store answered with an error.
    Refused(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Unreachable(why) => write!(f, "the store did not answer: {why}"),
            StoreError::Refused(why) => write!(f, "the store refused the command: {why}"),
        }
    }
}

/// A command's reply, when it comes.
pub type Reply<'a> = Pin<Box<dyn Future<Output = Result<Frame, StoreError>> + 'a>>;

/// A key-value store that speaks Redis commands.
pub trait Store {
    /// Runs one command (`["SET", "k", "v", "NX"]`); its reply.
    fn call(&self, args: Vec<Vec<u8>>) -> Reply<'_>;
}

impl dyn Store {
    /// `SET key value NX [PX ttl]`: whether this call set it (false: it was there).
    pub async fn set_nx(&self, key: &str, value: &str, ttl: Option<Duration>) -> Result<bool, StoreError> {
        let mut args = vec![b"SET".to_vec(), key.into(), value.into(), b"NX".to_vec()];
        if let Some(ttl) = ttl {
            args.extend([b"PX".to_vec(), ttl.as_millis().max(1).to_string().into_bytes()]);
        }
        match self.call(args).await? {
            Frame::Simple(s) if s == "OK" => Ok(true),
            Frame::Bulk(None) => Ok(false),
            other => Err(unexpected(other)),
        }
    }

    /// `GET key`.
    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.call(vec![b"GET".to_vec(), key.into()]).await? {
            Frame::Bulk(b) => Ok(b),
            other => Err(unexpected(other)),
        }
    }

    /// `INCR key`: the new value.
    pub async fn incr(&self, key: &str) -> Result<i64, StoreError> {
        match self.call(vec![b"INCR".to_vec(), key.into()]).await? {
            Frame::Int(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }
}

/// The address of a `redis://HOST:PORT` URL (no user, database or options:
/// mcpsim's store client speaks to one Redis, unauthenticated, database 0).
pub fn redis_address(url: &str) -> Result<std::net::SocketAddr, String> {
    let rest = url.strip_prefix("redis://").ok_or_else(|| format!("{url:?} is not a redis://HOST:PORT URL"))?;
    let rest = rest.trim_end_matches('/');
    if rest.contains(['@', '/', '?']) {
        return Err(format!("{url:?}: only redis://HOST:PORT is supported (no user, database or options)"));
    }
    use std::net::ToSocketAddrs;
    rest.to_socket_addrs()
        .map_err(|e| format!("{url:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url:?} names no address"))
}

fn unexpected(f: Frame) -> StoreError {
    match f {
        Frame::Error(e) => StoreError::Refused(e),
        other => StoreError::Refused(format!("unexpected reply {other:?}")),
    }
}

/// What a key holds.
#[derive(Clone, Debug)]
enum Value {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
}

/// The store's data and the commands on it: the subset of Redis the engine
/// uses (`PING`, `GET`, `SET` with `NX`/`XX`/`PX`/`EX`, `DEL`, `EXISTS`,
/// `INCR`, `RPUSH`, `LRANGE`), with Redis's replies.
#[derive(Default, Debug)]
pub struct Db {
    /// Each key's value and its expiry (µs of scenario time).
    keys: BTreeMap<Vec<u8>, (Value, Option<u64>)>,
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn err(s: impl Into<String>) -> Frame {
    Frame::Error(s.into())
}

fn int_arg(a: &[u8]) -> Option<i64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

impl Db {
    /// Runs `args` at `now_us`; the reply Redis would give.
    pub fn apply(&mut self, now_us: u64, args: &[Vec<u8>]) -> Frame {
        self.keys.retain(|_, (_, exp)| exp.is_none_or(|e| e > now_us));
        let Some((name, args)) = args.split_first() else { return err("ERR empty command") };
        let name = String::from_utf8_lossy(name).to_ascii_uppercase();
        let arity = |lo: usize, hi: Option<usize>| args.len() >= lo && hi.is_none_or(|h| args.len() <= h);
        let wrong = || err(format!("ERR wrong number of arguments for '{}' command", name.to_ascii_lowercase()));
        match name.as_str() {
            "PING" => Frame::Simple("PONG".into()),
            "GET" if arity(1, Some(1)) => match self.keys.get(&args[0]) {
                None => Frame::Bulk(None),
                Some((Value::Str(v), _)) => Frame::Bulk(Some(v.clone())),
                Some(_) => err(WRONGTYPE),
            },
            "SET" if arity(2, None) => {
                let (mut nx, mut xx, mut exp) = (false, false, None);
                let mut opts = args[2..].iter();
                while let Some(o) = opts.next() {
                    match String::from_utf8_lossy(o).to_ascii_uppercase().as_str() {
                        "NX" => nx = true,
                        "XX" => xx = true,
                        unit @ ("PX" | "EX") => {
                            let Some(n) = opts.next().and_then(|n| int_arg(n)).filter(|n| *n > 0) else {
                                return err("ERR invalid expire time in 'set' command");
                            };
                            let us = if unit == "PX" { n * 1_000 } else { n * 1_000_000 };
                            exp = Some(now_us + us as u64);
                        }
                        _ => return err("ERR syntax error"),
                    }
                }
                if nx && xx {
                    return err("ERR syntax error");
                }
                let exists = self.keys.contains_key(&args[0]);
                if (nx && exists) || (xx && !exists) {
                    return Frame::Bulk(None);
                }
                self.keys.insert(args[0].clone(), (Value::Str(args[1].clone()), exp));
                Frame::Simple("OK".into())
            }
            "DEL" | "EXISTS" if arity(1, None) => {
                let del = name == "DEL";
                let n =
                    args.iter()
                        .filter(|k| if del { self.keys.remove(*k).is_some() } else { self.keys.contains_key(*k) });
                Frame::Int(n.count() as i64)
            }
            "INCR" if arity(1, Some(1)) => {
                let (v, _) = self.keys.entry(args[0].clone()).or_insert((Value::Str(b"0".to_vec()), None));
                let Value::Str(s) = v else { return err(WRONGTYPE) };
                let Some(n) = int_arg(s).and_then(|n| n.checked_add(1)) else {
                    return err("ERR value is not an integer or out of range");
                };
                *v = Value::Str(n.to_string().into_bytes());
                Frame::Int(n)
            }
            "RPUSH" if arity(2, None) => {
                let (v, _) = self.keys.entry(args[0].clone()).or_insert((Value::List(Vec::new()), None));
                let Value::List(l) = v else { return err(WRONGTYPE) };
                l.extend(args[1..].iter().cloned());
                Frame::Int(l.len() as i64)
            }
            "LRANGE" if arity(3, Some(3)) => {
                let (Some(start), Some(stop)) = (int_arg(&args[1]), int_arg(&args[2])) else {
                    return err("ERR value is not an integer or out of range");
                };
                let l = match self.keys.get(&args[0]) {
                    None => return Frame::Array(Some(Vec::new())),
                    Some((Value::List(l), _)) => l,
                    Some(_) => return err(WRONGTYPE),
                };
                let len = l.len() as i64;
                let norm = |i: i64| if i < 0 { (len + i).max(0) } else { i };
                let (a, b) = (norm(start), norm(stop).min(len - 1));
                let items = if a > b { Vec::new() } else { l[a as usize..=b as usize].to_vec() };
                Frame::Array(Some(items.into_iter().map(|i| Frame::Bulk(Some(i))).collect()))
            }
            "GET" | "SET" | "DEL" | "EXISTS" | "INCR" | "RPUSH" | "LRANGE" => wrong(),
            _ => err(format!("ERR unknown command '{}'", name.to_ascii_lowercase())),
        }
    }
}

fn now_us() -> u64 {
    crate::clock::now().map_or(0, |d| d.as_micros() as u64)
}

/// The store inside one process: what a single server, or a replica with
/// a store of its own, keeps. Never fails.
#[derive(Default)]
pub struct MemoryStore {
    db: RefCell<Db>,
}

impl Store for MemoryStore {
    fn call(&self, args: Vec<Vec<u8>>) -> Reply<'_> {
        let reply = self.db.borrow_mut().apply(now_us(), &args);
        Box::pin(std::future::ready(Ok(reply)))
    }
}

/// Opens a new connection to the store.
pub type Connector = Rc<dyn Fn() -> Pin<Box<dyn Future<Output = std::io::Result<Box<dyn crate::net::Connection>>>>>>;

/// One open connection and the bytes read past the last reply.
struct Open {
    stream: Box<dyn crate::net::Connection>,
    buf: Vec<u8>,
    /// A command was sent and its reply not read yet: set while an exchange
    /// runs. Found set by the next exchange, it means the last one was
    /// cancelled halfway (its caller's future dropped: a request handler
    /// whose client went away), and its reply may still come: the
    /// connection cannot tell which reply is whose, and is dropped.
    busy: bool,
}

/// A RESP client: the simulated store host or a real Redis, one connection
/// at a time (opened when needed, dropped on any failure). Each command is
/// bounded by `timeout` (scenario time), after which it is unreachable.
pub struct RespStore {
    connect: Connector,
    timeout: Duration,
    conn: tokio::sync::Mutex<Option<Open>>,
}

impl RespStore {
    /// A client that opens its connections with `connect`.
    pub fn new(connect: Connector, timeout: Duration) -> Self {
        Self { connect, timeout, conn: tokio::sync::Mutex::new(None) }
    }

    /// A client of the simulated store host `host`.
    pub fn simulated(host: &str, timeout: Duration) -> Self {
        let host = host.to_string();
        let connect: Connector = Rc::new(move || {
            let host = host.clone();
            Box::pin(async move {
                let s = turmoil::net::TcpStream::connect((host.as_str(), PORT)).await?;
                Ok(Box::new(s) as Box<dyn crate::net::Connection>)
            })
        });
        Self::new(connect, timeout)
    }

    /// A client of the Redis at `addr`, over real TCP (`mcpsim serve --store`).
    pub fn tcp(addr: std::net::SocketAddr, timeout: Duration) -> Self {
        let connect: Connector = Rc::new(move || {
            Box::pin(async move {
                let s = tokio::net::TcpStream::connect(addr).await?;
                let _ = s.set_nodelay(true);
                Ok(Box::new(s) as Box<dyn crate::net::Connection>)
            })
        });
        Self::new(connect, timeout)
    }

    async fn exchange(&self, args: &[Vec<u8>]) -> Result<Frame, String> {
        let mut slot = self.conn.lock().await;
        if slot.as_ref().is_some_and(|o| o.busy) {
            *slot = None;
        }
        if slot.is_none() {
            let stream = (self.connect)().await.map_err(|e| format!("cannot connect: {e}"))?;
            *slot = Some(Open { stream, buf: Vec::new(), busy: false });
        }
        let open = slot.as_mut().expect("just opened");
        open.busy = true;
        let result = async {
            let mut out = Vec::new();
            Frame::command(args).encode(&mut out);
            open.stream.write_all(&out).await.map_err(|e| format!("write: {e}"))?;
            loop {
                if let Some((frame, used)) = resp::parse(&open.buf).map_err(|e| e.to_string())? {
                    open.buf.drain(..used);
                    open.busy = false;
                    return Ok(frame);
                }
                let mut chunk = [0u8; 4096];
                let n = open.stream.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
                if n == 0 {
                    return Err("the store closed the connection".to_string());
                }
                open.buf.extend_from_slice(&chunk[..n]);
            }
        }
        .await;
        if result.is_err() {
            *slot = None;
        }
        result
    }
}

impl Store for RespStore {
    fn call(&self, args: Vec<Vec<u8>>) -> Reply<'_> {
        Box::pin(async move {
            let r = crate::clock::timeout(self.timeout, self.exchange(&args)).await;
            match r {
                Ok(Ok(Frame::Error(e))) => Err(StoreError::Refused(e)),
                Ok(Ok(f)) => Ok(f),
                Ok(Err(why)) => Err(StoreError::Unreachable(why)),
                Err(_) => {
                    // A late reply would be read as the next command's: start over.
                    if let Ok(mut slot) = self.conn.try_lock() {
                        *slot = None;
                    }
                    Err(StoreError::Unreachable(format!("no reply within {:?}", self.timeout)))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(db: &mut Db, now: u64, cmd: &[&str]) -> Frame {
        db.apply(now, &cmd.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>())
    }

    fn ok() -> Frame {
        Frame::Simple("OK".into())
    }

    /// The simulated store host answers a RESP client across turmoil's
    /// network; a partition makes the client's command unreachable (after
    /// its timeout, in scenario time), and the next command after the repair
    /// opens a new connection and is answered.
    #[test]
    fn the_store_host_answers_over_the_network_and_a_partition_makes_it_unreachable() {
        let mut sim = turmoil::Builder::new().build();
        sim.host("store", || async {
            let l = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
            host::serve(l.into()).await;
            Ok(())
        });
        sim.client("replica-1", async {
            let store: Rc<dyn Store> = Rc::new(RespStore::simulated("store", Duration::from_secs(2)));
            assert_eq!(store.set_nx("once:n1", "redeemed", Some(Duration::from_secs(60))).await, Ok(true));
            assert_eq!(store.set_nx("once:n1", "redeemed", None).await, Ok(false));
            assert_eq!(store.get("once:n1").await, Ok(Some(b"redeemed".to_vec())));
            assert_eq!(store.incr("epoch").await, Ok(1));
            let refused = store.call(vec![b"FLUSHALL".to_vec()]).await;
            assert!(matches!(&refused, Err(StoreError::Refused(e)) if e.contains("unknown command")), "{refused:?}");
            turmoil::partition("replica-1", "store");
            let t0 = tokio::time::Instant::now();
            let cut = store.set_nx("once:n2", "redeemed", None).await;
            assert!(matches!(&cut, Err(StoreError::Unreachable(e)) if e.contains("no reply within")), "{cut:?}");
            assert_eq!(t0.elapsed(), Duration::from_secs(2));
            turmoil::repair("replica-1", "store");
            // The data outlived the partition; the command lost to it never arrived.
            assert_eq!(store.incr("epoch").await, Ok(2));
            assert_eq!(store.set_nx("once:n2", "redeemed", None).await, Ok(true));
            // A command cancelled once sent (its caller went away: a request
            // handler whose client closed) must not hand its reply to the next
            // command. A hunt found that: the stale OK let a replica redeem a
            // one-time state the store had never recorded for it.
            let sent = store.clone();
            let cancelled = tokio::task::spawn_local(async move { sent.set_nx("once:n3", "redeemed", None).await });
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
            cancelled.abort();
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert_eq!(store.get("once:n3").await, Ok(Some(b"redeemed".to_vec())));
            assert_eq!(store.incr("epoch").await, Ok(3));
            Ok(())
        });
        sim.run().unwrap();
    }

    #[test]
    fn redis_urls_name_one_address() {
        assert_eq!(redis_address("redis://127.0.0.1:6400").unwrap(), "127.0.0.1:6400".parse().unwrap());
        assert_eq!(redis_address("redis://127.0.0.1:6400/").unwrap(), "127.0.0.1:6400".parse().unwrap());
        for bad in ["127.0.0.1:6400", "redis://u:p@127.0.0.1:6400", "redis://127.0.0.1:6400/2", "redis://nohost"] {
            assert!(redis_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn set_nx_sets_once_and_px_expires_in_scenario_time() {
        let mut db = Db::default();
        assert_eq!(run(&mut db, 0, &["SET", "once:a", "1", "NX", "PX", "1000"]), ok());
        assert_eq!(run(&mut db, 10, &["SET", "once:a", "2", "NX"]), Frame::Bulk(None));
        assert_eq!(run(&mut db, 10, &["GET", "once:a"]), Frame::Bulk(Some(b"1".to_vec())));
        assert_eq!(run(&mut db, 999_999, &["EXISTS", "once:a"]), Frame::Int(1));
        assert_eq!(run(&mut db, 1_000_000, &["GET", "once:a"]), Frame::Bulk(None));
        assert_eq!(run(&mut db, 1_000_000, &["SET", "once:a", "3", "XX"]), Frame::Bulk(None));
        assert_eq!(run(&mut db, 1_000_000, &["SET", "once:a", "3", "NX"]), ok());
    }

    #[test]
    fn counters_lists_and_deletes_answer_as_redis_does() {
        let mut db = Db::default();
        assert_eq!(run(&mut db, 0, &["INCR", "epoch"]), Frame::Int(1));
        assert_eq!(run(&mut db, 0, &["INCR", "epoch"]), Frame::Int(2));
        assert_eq!(run(&mut db, 0, &["RPUSH", "log", "a", "b", "c"]), Frame::Int(3));
        let bulk = |s: &str| Frame::Bulk(Some(s.as_bytes().to_vec()));
        assert_eq!(run(&mut db, 0, &["LRANGE", "log", "1", "-1"]), Frame::Array(Some(vec![bulk("b"), bulk("c")])));
        assert_eq!(run(&mut db, 0, &["LRANGE", "log", "5", "9"]), Frame::Array(Some(vec![])));
        assert_eq!(run(&mut db, 0, &["LRANGE", "none", "0", "-1"]), Frame::Array(Some(vec![])));
        assert!(matches!(run(&mut db, 0, &["INCR", "log"]), Frame::Error(e) if e.starts_with("WRONGTYPE")));
        assert!(matches!(run(&mut db, 0, &["GET", "log"]), Frame::Error(e) if e.starts_with("WRONGTYPE")));
        assert_eq!(run(&mut db, 0, &["DEL", "log", "epoch", "none"]), Frame::Int(2));
        assert!(matches!(run(&mut db, 0, &["SET", "k"]), Frame::Error(e) if e.contains("wrong number")));
        assert!(matches!(run(&mut db, 0, &["SET", "k", "v", "PX", "0"]), Frame::Error(_)));
        assert!(matches!(run(&mut db, 0, &["FLUSHALL"]), Frame::Error(e) if e.contains("unknown command")));
        assert_eq!(run(&mut db, 0, &["ping"]), Frame::Simple("PONG".into()));
    }
}
