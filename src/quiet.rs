//! When a simulation may end early (issue #30): once nothing left in the
//! world can add an event to the trace before the scenario's end.
//!
//! The step loop asks [`still`] at each tick boundary once every step has
//! fired. The world is still when no message is in flight (the step loop
//! looks) and every timer pending in it either fires after the end, or does
//! nothing that shows:
//! - a timer that matters only while a condition holds ([`Kind::While`]: a
//!   request's timeout, once the request is answered);
//! - a server's keep-alive on a stream ([`Kind::KeepAlive`]), whose
//!   connection reaches its client through a live NAT mapping ([`path`])
//!   and, in a deployment, the balancer's connection ([`relay`]);
//! - a client's silence watchdog on a stream ([`Kind::Watchdog`]), which
//!   that keep-alive re-arms before it fires, now and at every later beat
//!   (the beat plus the way to the client is shorter than the silence).
//!
//! - a replica's poll of the shared store ([`Kind::While`]) that would find
//!   nothing to do: no take-over of a session it holds, no queued command,
//!   no write its sessions wait for. Its commands and replies on their way
//!   do not count as in flight while that holds ([`quiet_conn`]).
//!
//! A keep-alive already on its way does not count as in flight either, on
//! a leg of such a live path ([`harmless_beat`]). A pending turmoil connect
//! keeps the world from being still whatever its timeout ([`connecting`]):
//! its handshake completes without a message.
//!
//! A keep-alive is an SSE comment, which neither the NAT nor the client
//! records. So a run that ends when the world is still has the trace the
//! whole run would have had, byte for byte (`tests/determinism.rs` compares
//! them). Every other timer is plain and blocks the end while it may fire in
//! the run: a reconnect's backoff, a half-open mapping's lifetime, an
//! inbox's due step, hyper's header-read timeout.
//!
//! Timers register themselves through [`crate::clock`]'s `sleep` and
//! `timeout` (and `sleep_as`/`timeout_as` with their kind); a server plug-in
//! whose timers do not all go through it (rmcp, whose own crate keeps
//! timers) says so, and its runs are never ended early. The registry is per
//! thread (a simulation runs on one thread) and exists only while
//! [`begin`]'s guard lives: live runs and code outside a simulation register
//! nothing.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::Duration;

/// What a pending timer does when it fires.
#[derive(Clone)]
pub(crate) enum Kind {
    /// Anything: it blocks an early end while it may fire in the run.
    Plain,
    /// Something only while the condition holds (a request's timeout, while
    /// the request is pending). In a still world nothing changes state, so
    /// a condition false at a still point stays false.
    While(std::rc::Rc<dyn Fn() -> bool>),
    /// A server's keep-alive into the connection from `peer`, every `every`.
    KeepAlive { peer: SocketAddr, every: Duration },
    /// A client's silence watchdog on its connection `conn` (the number in
    /// the trace), firing after `silence` without a complete SSE item.
    Watchdog { client: String, conn: u32, silence: Duration },
}

struct Timer {
    deadline: Duration,
    kind: Kind,
}

/// A NAT mapping: the client's side (its name and port) and the server's
/// side (the address the server sees), and whether it still carries bytes.
struct Path {
    client: String,
    down_port: u16,
    /// The NAT's own address on the client's connection (its bytes to the
    /// client come from it).
    down: Option<SocketAddr>,
    up: SocketAddr,
    live: Box<dyn Fn() -> bool>,
}

/// A balancer's connection: from the address the client's NAT connected
/// from to the address the replica sees, while both carry bytes.
struct Relay {
    from: SocketAddr,
    to: SocketAddr,
    live: Box<dyn Fn() -> bool>,
}

#[derive(Default)]
struct Registry {
    /// Bumped by each [`begin`]: guards of an earlier run remove nothing.
    generation: u64,
    timers: Vec<Option<Timer>>,
    free: Vec<usize>,
    /// Each client connection's local port, by (client, connection number).
    ports: Vec<((String, u32), u16)>,
    paths: Vec<Path>,
    relays: Vec<Relay>,
    /// Connections whose messages on their way change nothing while their
    /// condition holds (a replica's polls of the store): by local address.
    conns: Vec<(SocketAddr, Box<dyn Fn() -> bool>)>,
    /// Bumped by each look at the world ([`look`]): what a condition found
    /// stays true for the rest of that look ([`Memo`]).
    look: u64,
}

impl Registry {
    /// Where a server sees a connection that left the NAT from `up`: `up`
    /// itself, or, behind a balancer, the balancer's connection to the
    /// replica; `None` when that one is gone.
    fn server_side(&self, up: SocketAddr) -> Option<SocketAddr> {
        match self.relays.iter().rev().find(|r| r.from == up) {
            Some(r) => (r.live)().then_some(r.to),
            None => Some(up),
        }
    }
}

thread_local! {
    static REG: RefCell<Option<Registry>> = const { RefCell::new(None) };
}

/// Keeps this thread's registry while a simulation runs.
pub(crate) struct Session {
    _private: (),
}

impl Drop for Session {
    fn drop(&mut self) {
        REG.with(|r| *r.borrow_mut() = None);
    }
}

/// Starts this thread's registry for one simulation.
pub(crate) fn begin() -> Session {
    REG.with(|r| {
        let mut r = r.borrow_mut();
        let generation = r.as_ref().map_or(0, |g| g.generation) + 1;
        *r = Some(Registry { generation, ..Registry::default() });
    });
    Session { _private: () }
}

/// Removes its timer from the registry when the wait ends or is dropped.
pub(crate) struct Guard {
    slot: usize,
    generation: u64,
}

impl Drop for Guard {
    fn drop(&mut self) {
        REG.with(|r| {
            if let Some(reg) = r.borrow_mut().as_mut().filter(|g| g.generation == self.generation) {
                reg.timers[self.slot] = None;
                reg.free.push(self.slot);
            }
        });
    }
}

/// Registers a timer that fires at `deadline` (scenario time; `None`
/// outside a host); `None` outside a simulation.
pub(crate) fn register(deadline: Option<Duration>, kind: Kind) -> Option<Guard> {
    REG.with(|r| {
        let mut r = r.borrow_mut();
        let reg = r.as_mut()?;
        let deadline = deadline?;
        let timer = Some(Timer { deadline, kind });
        let slot = match reg.free.pop() {
            Some(s) => {
                reg.timers[s] = timer;
                s
            }
            None => {
                reg.timers.push(timer);
                reg.timers.len() - 1
            }
        };
        Some(Guard { slot, generation: reg.generation })
    })
}

/// Runs `connect`, a turmoil TCP connect, keeping the world from being
/// still while it is pending, whatever its timeout. Its handshake
/// completes through an in-process channel, not a message: once the
/// listening host accepted, the connecting task is runnable with nothing
/// in flight, and stays so across a tick boundary when its host ticked
/// first (found by hunting: a balancer's connect to a replica, whose
/// timeout fell after the end, was cut off with its request).
pub(crate) async fn connecting<F: std::future::Future>(connect: F) -> F::Output {
    let _busy = register(Some(Duration::ZERO), Kind::Plain);
    connect.await
}

/// Notes that the messages on their way on the connection from `local`
/// (either way) change nothing any client sees while `harmless` holds: a
/// replica's poll of the store that finds nothing to do.
pub(crate) fn quiet_conn(local: SocketAddr, harmless: Box<dyn Fn() -> bool>) {
    REG.with(|r| {
        if let Some(reg) = r.borrow_mut().as_mut() {
            reg.conns.push((local, harmless));
        }
    });
}

/// Starts a look at the world (before [`harmless_message`] and [`still`]):
/// nothing changes until the next one.
pub(crate) fn look() {
    REG.with(|r| {
        if let Some(reg) = r.borrow_mut().as_mut() {
            reg.look += 1;
        }
    });
}

/// A condition's answer, kept for the rest of one [`look`] (a condition
/// asked once per message or timer can be dear).
#[derive(Default)]
pub(crate) struct Memo(std::cell::Cell<Option<(u64, bool)>>);

impl Memo {
    /// `f()`, or what it answered earlier in this look.
    pub(crate) fn get(&self, f: impl FnOnce() -> bool) -> bool {
        let look = REG.with(|r| r.borrow().as_ref().map(|reg| (reg.generation, reg.look)));
        let Some((generation, look)) = look else { return f() };
        let id = generation << 32 | look;
        match self.0.get() {
            Some((at, answer)) if at == id => answer,
            _ => {
                let answer = f();
                self.0.set(Some((id, answer)));
                answer
            }
        }
    }
}

/// Whether a message on its way from `from` to `to` changes nothing any
/// client sees ([`quiet_conn`]); every other message may.
pub(crate) fn harmless_message(from: SocketAddr, to: SocketAddr) -> bool {
    REG.with(|r| {
        let r = r.borrow();
        let Some(reg) = r.as_ref() else { return false };
        reg.conns.iter().rev().find(|(local, _)| *local == from || *local == to).is_some_and(|(_, harmless)| harmless())
    })
}

/// Notes that `client`'s connection `conn` has local port `port`.
pub(crate) fn conn_port(client: &str, conn: u32, port: u16) {
    REG.with(|r| {
        if let Some(reg) = r.borrow_mut().as_mut() {
            reg.ports.push(((client.to_string(), conn), port));
        }
    });
}

/// Notes a NAT mapping from `client`'s port `down_port` to the server, which
/// sees it come from `up`; `live` says whether it still carries bytes.
/// `down`: the NAT's own address on the client's connection.
pub(crate) fn path(
    client: &str,
    down_port: u16,
    down: Option<SocketAddr>,
    up: SocketAddr,
    live: Box<dyn Fn() -> bool>,
) {
    REG.with(|r| {
        if let Some(reg) = r.borrow_mut().as_mut() {
            reg.paths.retain(|p| (p.live)());
            reg.paths.push(Path { client: client.to_string(), down_port, down, up, live });
        }
    });
}

/// Whether `bytes`, a message on its way from `from` to `to`, is a server's
/// keep-alive (one HTTP chunk holding only an SSE comment) on a leg of a
/// live path to its client: from the server to the balancer or the NAT,
/// from the balancer to the NAT, or from the NAT to the client. Such a beat
/// re-arms the client's watchdog and records nothing, as the keep-alive
/// timer that sent it ([`Kind::KeepAlive`]).
pub(crate) fn harmless_beat(from: SocketAddr, to: SocketAddr, bytes: &[u8]) -> bool {
    if !is_comment_chunk(bytes) {
        return false;
    }
    REG.with(|r| {
        let r = r.borrow();
        let Some(reg) = r.as_ref() else { return false };
        reg.paths.iter().any(|p| {
            (p.live)()
                && reg.server_side(p.up).is_some_and(|server_side| {
                    to == server_side || to == p.up || (p.down == Some(from) && to.port() == p.down_port)
                })
        })
    })
}

/// Whether `b` is exactly one HTTP/1.1 chunk whose data is SSE comment
/// lines (`: ...`) ended by a blank line.
fn is_comment_chunk(b: &[u8]) -> bool {
    let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else { return false };
    let Some(len) = std::str::from_utf8(&b[..eol]).ok().and_then(|h| usize::from_str_radix(h, 16).ok()) else {
        return false;
    };
    let rest = &b[eol + 2..];
    if len < 3 || rest.len() != len + 2 || !rest.ends_with(b"\r\n") {
        return false;
    }
    let data = &rest[..len];
    data.ends_with(b"\n\n") && data[..len - 2].split(|&c| c == b'\n').all(|line| line.first() == Some(&b':'))
}

/// Notes a balancer's connection from `from` (a NAT's side) to a replica,
/// which sees it come from `to`; `live` says whether it still carries bytes.
pub(crate) fn relay(from: SocketAddr, to: SocketAddr, live: Box<dyn Fn() -> bool>) {
    REG.with(|r| {
        if let Some(reg) = r.borrow_mut().as_mut() {
            reg.relays.retain(|p| (p.live)());
            reg.relays.push(Relay { from, to, live });
        }
    });
}

/// Whether nothing pending can fire before `end` and change the trace,
/// given that a beat takes at most `way` from the server's timer to the
/// client's reader. (The caller checks that no message is in flight.)
pub(crate) fn still(end: Duration, way: Duration) -> bool {
    REG.with(|r| {
        let r = r.borrow();
        let Some(reg) = r.as_ref() else { return false };
        let live_path =
            |peer: &SocketAddr| reg.paths.iter().any(|p| (p.live)() && reg.server_side(p.up) == Some(*peer));
        reg.timers.iter().flatten().filter(|t| t.deadline < end).all(|t| match &t.kind {
            Kind::Plain => false,
            Kind::While(matters) => !matters(),
            Kind::KeepAlive { peer, .. } => live_path(peer),
            Kind::Watchdog { client, conn, silence } => {
                let Some(port) = reg.ports.iter().rev().find(|(k, _)| k.0 == *client && k.1 == *conn).map(|(_, p)| *p)
                else {
                    return false;
                };
                let Some(path) =
                    reg.paths.iter().rev().find(|p| p.client == *client && p.down_port == port && (p.live)())
                else {
                    return false;
                };
                let Some(server_side) = reg.server_side(path.up) else { return false };
                reg.timers.iter().flatten().any(|k| match &k.kind {
                    Kind::KeepAlive { peer, every } => {
                        *peer == server_side && k.deadline + way < t.deadline && *every + way < *silence
                    }
                    _ => false,
                })
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::future::Future;
    use std::rc::Rc;

    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }

    const END: Duration = Duration::from_secs(100);
    const WAY: Duration = Duration::from_millis(500);

    #[test]
    fn outside_a_simulation_nothing_registers_and_nothing_is_still() {
        assert!(register(secs(1), Kind::Plain).is_none());
        assert!(!still(END, WAY));
        let _s = begin();
        // Outside a host there is no clock to date a timer by.
        assert!(register(None, Kind::Plain).is_none());
        assert!(still(END, WAY), "an empty world is still");
    }

    #[test]
    fn a_plain_timer_blocks_until_it_fires_or_is_dropped_unless_it_fires_after_the_end() {
        let _s = begin();
        let t = register(secs(50), Kind::Plain);
        assert!(!still(END, WAY));
        drop(t);
        assert!(still(END, WAY));
        let _late = register(secs(150), Kind::Plain);
        assert!(still(END, WAY), "a timer after the end changes nothing in the run");
        let pending = Rc::new(Cell::new(true));
        let p = pending.clone();
        let _cond = register(secs(50), Kind::While(Rc::new(move || p.get())));
        assert!(!still(END, WAY), "a request's timeout while it is pending");
        pending.set(false);
        assert!(still(END, WAY), "the request was answered: its timeout will do nothing");
    }

    #[test]
    fn a_watchdog_is_harmless_only_while_a_keep_alive_on_a_live_path_re_arms_it_in_time() {
        let _s = begin();
        let up: SocketAddr = "10.0.0.2:49152".parse().unwrap();
        let live = Rc::new(Cell::new(true));
        let l = live.clone();
        conn_port("alice", 1, 49152);
        path("alice", 49152, None, up, Box::new(move || l.get()));
        // The server beats every 2 s (next at 12 s); alice's watchdog fires after 5 s of silence (at 14 s).
        let beat = register(secs(12), Kind::KeepAlive { peer: up, every: Duration::from_secs(2) });
        let watchdog = Kind::Watchdog { client: "alice".into(), conn: 1, silence: Duration::from_secs(5) };
        let dog = register(secs(14), watchdog.clone());
        assert!(still(END, WAY));
        // The path goes dead (a rebind): the beat no longer reaches her.
        live.set(false);
        assert!(!still(END, WAY));
        live.set(true);
        // The beat comes too late for the watchdog now.
        drop(dog);
        let dog = register(Some(Duration::from_millis(12_300)), watchdog.clone());
        assert!(!still(END, WAY));
        drop(dog);
        // A beat slower than the silence: the watchdog fires between two beats.
        drop(beat);
        let _slow = register(secs(12), Kind::KeepAlive { peer: up, every: Duration::from_secs(5) });
        let _dog = register(secs(14), watchdog);
        assert!(!still(END, WAY));
    }

    #[test]
    fn a_quiet_connections_messages_are_harmless_only_while_its_condition_holds() {
        let _s = begin();
        let local: SocketAddr = "192.168.0.3:49153".parse().unwrap();
        let store: SocketAddr = "192.168.0.2:6379".parse().unwrap();
        let other: SocketAddr = "192.168.0.4:49153".parse().unwrap();
        assert!(!harmless_message(local, store), "a message on any other connection may matter");
        let calm = Rc::new(Cell::new(true));
        let c = calm.clone();
        quiet_conn(local, Box::new(move || c.get()));
        assert!(harmless_message(local, store) && harmless_message(store, local), "either way");
        assert!(!harmless_message(other, store));
        calm.set(false);
        assert!(!harmless_message(store, local));
    }

    #[test]
    fn a_beat_on_its_way_is_harmless_only_as_a_comment_chunk_on_a_live_path() {
        let _s = begin();
        let nat_down: SocketAddr = "10.0.0.5:80".parse().unwrap();
        let client: SocketAddr = "10.0.0.6:49152".parse().unwrap();
        let up: SocketAddr = "10.0.0.5:49153".parse().unwrap();
        let server: SocketAddr = "10.0.0.2:80".parse().unwrap();
        let live = Rc::new(Cell::new(true));
        let l = live.clone();
        let beat: &[u8] = b"8\r\n: ping\n\n\r\n";
        assert!(!harmless_beat(server, up, beat), "no path yet");
        path("alice", 49152, Some(nat_down), up, Box::new(move || l.get()));
        assert!(harmless_beat(server, up, beat), "server to NAT");
        assert!(harmless_beat(nat_down, client, beat), "NAT to client");
        assert!(!harmless_beat(nat_down, "10.0.0.6:49153".parse().unwrap(), beat), "another connection of hers");
        assert!(!harmless_beat(server, up, b"e\r\ndata: {}\n\n\r\n\r\n"), "an event");
        assert!(!harmless_beat(server, up, b"8\r\n: ping\n\n\r\n5\r\ndata:\r\n"), "a beat and more");
        assert!(!harmless_beat(server, up, b"8\r\n: ping\n\n"), "a chunk cut short");
        live.set(false);
        assert!(!harmless_beat(server, up, beat), "into a dead mapping: its reset shows");
    }

    #[test]
    fn a_memo_answers_once_per_look() {
        let _s = begin();
        let (memo, asked) = (Memo::default(), Cell::new(0));
        let ask = || {
            asked.set(asked.get() + 1);
            true
        };
        look();
        assert!(memo.get(ask) && memo.get(ask));
        assert_eq!(asked.get(), 1);
        look();
        assert!(memo.get(ask));
        assert_eq!(asked.get(), 2, "the world may have changed since the last look");
    }

    #[test]
    fn a_pending_connect_keeps_the_world_from_being_still_whatever_its_timeout() {
        let _s = begin();
        let mut connect = Box::pin(connecting(std::future::pending::<()>()));
        let waker = futures::task::noop_waker();
        assert!(connect.as_mut().poll(&mut std::task::Context::from_waker(&waker)).is_pending());
        assert!(!still(END, WAY), "a handshake may complete without a message");
        drop(connect);
        assert!(still(END, WAY));
    }

    #[test]
    fn a_keep_alive_without_a_path_or_through_a_closed_relay_blocks() {
        let _s = begin();
        let up: SocketAddr = "10.0.0.2:49152".parse().unwrap();
        let replica_side: SocketAddr = "10.0.0.9:49200".parse().unwrap();
        let beat = register(secs(12), Kind::KeepAlive { peer: replica_side, every: Duration::from_secs(2) });
        assert!(!still(END, WAY), "a beat into a connection no NAT carries");
        path("alice", 49152, None, up, Box::new(|| true));
        assert!(!still(END, WAY), "the NAT's connection is not the replica's");
        let open = Rc::new(Cell::new(true));
        let o = open.clone();
        relay(up, replica_side, Box::new(move || o.get()));
        assert!(still(END, WAY), "the balancer relays the NAT's connection to the replica");
        open.set(false);
        assert!(!still(END, WAY));
        drop(beat);
    }
}
