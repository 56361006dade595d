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

mod db;
pub mod host;

use crate::wire::resp::{self, Frame};
use db::int_arg;
pub use db::Db;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::net::SocketAddr;
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
    /// Another client of the same store, with a connection of its own (so
    /// that a background task's commands never queue in front of a
    /// request's); the store itself when it has no connections.
    fn another(self: Rc<Self>) -> Rc<dyn Store>;
    /// Tells the early end ([`crate::quiet`]) that this client's commands
    /// and replies on their way change nothing any client sees while
    /// `matters` is false. A store without connections has nothing on its
    /// way.
    fn quiet_while(&self, _matters: Rc<dyn Fn() -> bool>) {}
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

    /// `SET key value XX`: whether this call set it (false: the key was gone).
    pub async fn set_xx(&self, key: &str, value: &[u8]) -> Result<bool, StoreError> {
        match self.call(vec![b"SET".to_vec(), key.into(), value.to_vec(), b"XX".to_vec()]).await? {
            Frame::Simple(s) if s == "OK" => Ok(true),
            Frame::Bulk(None) => Ok(false),
            other => Err(unexpected(other)),
        }
    }

    /// `SET key value [PX ttl]`.
    pub async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        let mut args = vec![b"SET".to_vec(), key.into(), value.to_vec()];
        if let Some(ttl) = ttl {
            args.extend([b"PX".to_vec(), ttl.as_millis().max(1).to_string().into_bytes()]);
        }
        match self.call(args).await? {
            Frame::Simple(s) if s == "OK" => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// `DEL key`.
    pub async fn del(&self, key: &str) -> Result<(), StoreError> {
        match self.call(vec![b"DEL".to_vec(), key.into()]).await? {
            Frame::Int(_) => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// `RPUSH key value`.
    pub async fn rpush(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        match self.call(vec![b"RPUSH".to_vec(), key.into(), value.to_vec()]).await? {
            Frame::Int(_) => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// `LPOP key`: the list's first item, if any.
    pub async fn lpop(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.call(vec![b"LPOP".to_vec(), key.into()]).await? {
            Frame::Bulk(b) => Ok(b),
            other => Err(unexpected(other)),
        }
    }

    /// `GET key` read as an integer (0 when absent).
    pub async fn get_int(&self, key: &str) -> Result<i64, StoreError> {
        Ok(self.get(key).await?.and_then(|v| int_arg(&v)).unwrap_or(0))
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
    fn another(self: Rc<Self>) -> Rc<dyn Store> {
        self
    }
}

/// Opens a new connection to the store.
/// Opens a connection to the store: the connection, and its local address
/// when it is a simulated one (for [`crate::quiet`]).
pub type Connector = Rc<
    dyn Fn() -> Pin<Box<dyn Future<Output = std::io::Result<(Box<dyn crate::net::Connection>, Option<SocketAddr>)>>>>,
>;

/// A command on its way, and where its reply goes.
type Pending = (Vec<u8>, tokio::sync::oneshot::Sender<Result<Frame, String>>);

/// One open connection: a task that writes each command as it comes and
/// hands each reply, in order, to the command that waits for it (Redis
/// answers in the order it was asked). Commands are pipelined: one
/// caller's command never waits for another's reply. A caller that goes
/// away (its request was cancelled) leaves its reply to be read and
/// dropped, so no reply is ever handed to the wrong command.
struct Pipe {
    commands: tokio::sync::mpsc::UnboundedSender<Pending>,
    /// Told when the client gives the connection up (a reply that never
    /// came): every command still waiting on it fails at once, since their
    /// replies would come after the missing one.
    kill: Rc<tokio::sync::Notify>,
}

impl Pipe {
    fn open(stream: Box<dyn crate::net::Connection>) -> Rc<Pipe> {
        let (commands, rx) = tokio::sync::mpsc::unbounded_channel();
        let kill = Rc::new(tokio::sync::Notify::new());
        tokio::task::spawn_local(Pipe::run(stream, rx, kill.clone()));
        Rc::new(Pipe { commands, kill })
    }

    /// Writes commands and reads replies until the connection fails or the
    /// client drops the pipe; then every command still waiting fails.
    async fn run(
        mut stream: Box<dyn crate::net::Connection>,
        mut rx: tokio::sync::mpsc::UnboundedReceiver<Pending>,
        kill: Rc<tokio::sync::Notify>,
    ) {
        let mut waiting: std::collections::VecDeque<tokio::sync::oneshot::Sender<Result<Frame, String>>> =
            std::collections::VecDeque::new();
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 4096];
        let why = loop {
            tokio::select! {
                biased;
                _ = kill.notified() => break "the connection to the store was given up: a command before this one got no reply".to_string(),
                cmd = rx.recv() => match cmd {
                    Some((bytes, reply)) => {
                        if let Err(e) = stream.write_all(&bytes).await {
                            let _ = reply.send(Err(format!("write: {e}")));
                            break format!("write: {e}");
                        }
                        waiting.push_back(reply);
                    }
                    None => return,
                },
                n = stream.read(&mut chunk) => {
                    let n = match n {
                        Ok(0) => break "the store closed the connection".to_string(),
                        Ok(n) => n,
                        Err(e) => break format!("read: {e}"),
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    loop {
                        match resp::parse(&buf) {
                            Ok(Some((frame, used))) => {
                                buf.drain(..used);
                                match waiting.pop_front() {
                                    Some(reply) => {
                                        let _ = reply.send(Ok(frame));
                                    }
                                    None => return, // a reply nobody asked for: the connection is lost
                                }
                            }
                            Ok(None) => break,
                            Err(e) => return waiting.drain(..).for_each(|w| drop(w.send(Err(e.to_string())))),
                        }
                    }
                }
            }
        };
        for w in waiting {
            let _ = w.send(Err(why.clone()));
        }
    }
}

/// A RESP client: the simulated store host or a real Redis, one pipelined
/// connection at a time (opened when needed, dropped on any failure). Each
/// command is bounded by `timeout` (scenario time), after which it is
/// unreachable.
pub struct RespStore {
    connect: Connector,
    timeout: Duration,
    pipe: RefCell<Option<Rc<Pipe>>>,
    /// Held while a connection is being opened (one at a time).
    opening: tokio::sync::Mutex<()>,
    /// How many connections it tried to open, and why the last one failed:
    /// a command that waited for another's attempt shares its failure
    /// rather than trying again (each attempt may take the whole timeout).
    attempts: Cell<u64>,
    last_failure: RefCell<String>,
    /// [`Store::quiet_while`]'s condition.
    matters: RefCell<Option<Rc<dyn Fn() -> bool>>>,
}

impl RespStore {
    /// A client that opens its connections with `connect`.
    pub fn new(connect: Connector, timeout: Duration) -> Self {
        Self {
            connect,
            timeout,
            pipe: RefCell::new(None),
            opening: tokio::sync::Mutex::new(()),
            attempts: Cell::new(0),
            last_failure: RefCell::default(),
            matters: RefCell::default(),
        }
    }

    /// A client of the simulated store host `host`.
    pub fn simulated(host: &str, timeout: Duration) -> Self {
        let host = host.to_string();
        let connect: Connector = Rc::new(move || {
            let host = host.clone();
            Box::pin(async move {
                let s = crate::quiet::connecting(turmoil::net::TcpStream::connect((host.as_str(), PORT))).await?;
                let local = s.local_addr().ok();
                Ok((Box::new(s) as Box<dyn crate::net::Connection>, local))
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
                Ok((Box::new(s) as Box<dyn crate::net::Connection>, None))
            })
        });
        Self::new(connect, timeout)
    }

    /// The open connection, opening one when there is none.
    async fn pipe(&self) -> Result<Rc<Pipe>, String> {
        if let Some(p) = self.pipe.borrow().as_ref().filter(|p| !p.commands.is_closed()) {
            return Ok(p.clone());
        }
        let seen = self.attempts.get();
        // Another command's attempt in progress is this one's too.
        let (_opening, waited) = match self.opening.try_lock() {
            Ok(g) => (g, false),
            Err(_) => (self.opening.lock().await, true),
        };
        if let Some(p) = self.pipe.borrow().as_ref().filter(|p| !p.commands.is_closed()) {
            return Ok(p.clone());
        }
        if (waited || self.attempts.get() != seen) && !self.last_failure.borrow().is_empty() {
            // That attempt failed while this command waited for it. (One that
            // succeeded, its connection already dropped, is no failure to
            // share: found by hunting, a command failed with no reason.)
            return Err(self.last_failure.borrow().clone());
        }
        self.attempts.set(seen + 1);
        // A connection that cannot be made in time (its handshake held up by
        // a partition) fails as a command without a reply does.
        let (stream, local) = match crate::clock::timeout(self.timeout, (self.connect)()).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                *self.last_failure.borrow_mut() = format!("cannot connect: {e}");
                return Err(self.last_failure.borrow().clone());
            }
            Err(_) => {
                *self.last_failure.borrow_mut() = format!("cannot connect within {:?}", self.timeout);
                return Err(self.last_failure.borrow().clone());
            }
        };
        self.last_failure.borrow_mut().clear();
        let p = Pipe::open(stream);
        if let (Some(local), Some(matters)) = (local, self.matters.borrow().clone()) {
            // Quiet while it is the open connection and its traffic does not matter.
            let open = Rc::downgrade(&p);
            let harmless = move || open.upgrade().is_some_and(|p| !p.commands.is_closed()) && !matters();
            crate::quiet::quiet_conn(local, Box::new(harmless));
        }
        *self.pipe.borrow_mut() = Some(p.clone());
        Ok(p)
    }

    /// Drops connection `p` if it is still the open one.
    fn drop_pipe(&self, p: &Rc<Pipe>) {
        p.kill.notify_one();
        let mut slot = self.pipe.borrow_mut();
        if slot.as_ref().is_some_and(|q| Rc::ptr_eq(q, p)) {
            *slot = None;
        }
    }

    async fn exchange(&self, args: &[Vec<u8>]) -> Result<Frame, String> {
        let p = self.pipe().await?;
        let mut out = Vec::new();
        Frame::command(args).encode(&mut out);
        let (tx, rx) = tokio::sync::oneshot::channel();
        if p.commands.send((out, tx)).is_err() {
            self.drop_pipe(&p);
            return Err("the connection to the store is gone".into());
        }
        // A reply that is on its way: its timeout never fires, and matters
        // only when the traffic does.
        let kind = match self.matters.borrow().clone() {
            Some(m) => crate::quiet::Kind::While(m),
            None => crate::quiet::Kind::Plain,
        };
        match crate::clock::timeout_as(self.timeout, kind, rx).await {
            Ok(Ok(Ok(frame))) => Ok(frame),
            Ok(Ok(Err(why))) => {
                self.drop_pipe(&p);
                Err(why)
            }
            Ok(Err(_)) => {
                self.drop_pipe(&p);
                Err("the connection to the store is gone".into())
            }
            Err(_) => {
                // A reply this late may never come: start over on a new connection.
                self.drop_pipe(&p);
                Err(format!("no reply within {:?}", self.timeout))
            }
        }
    }
}

impl Store for RespStore {
    fn call(&self, args: Vec<Vec<u8>>) -> Reply<'_> {
        Box::pin(async move {
            match self.exchange(&args).await {
                Ok(Frame::Error(e)) => Err(StoreError::Refused(e)),
                Ok(f) => Ok(f),
                Err(why) => Err(StoreError::Unreachable(why)),
            }
        })
    }
    fn another(self: Rc<Self>) -> Rc<dyn Store> {
        Rc::new(RespStore::new(self.connect.clone(), self.timeout))
    }
    fn quiet_while(&self, matters: Rc<dyn Fn() -> bool>) {
        *self.matters.borrow_mut() = Some(matters);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
