//! The real parts of a live deployment (docs/replicas.md): HAProxy in front
//! of the replicas, and, for a shared store, a Redis that mcpsim starts and
//! stops for the run, reached by each replica through a TCP proxy of
//! mcpsim's own, so that a `partition` between one replica and the store
//! can be injected.
//!
//! Both are Debian's packages (`haproxy`, `redis-server`). Each runs in its
//! own process group and is killed when the run ends, however it ends.

use super::process::{describe_exit, Process};
use crate::error::{Error, Result};
use crate::scenario::{Deployment, Routing, StoreKind};
use crate::world::balancer::{CONNECT_TIMEOUT, HEALTH_CHECK, REPLICA_HEADER};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// How long HAProxy and Redis get to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// HAProxy's timeouts on a connection to a replica (real time). An SSE
/// stream is a response that does not end: `timeout server` bounds the
/// silence between two of its writes, `timeout tunnel` a connection that
/// became a tunnel. Both are set past any scenario's silence, so that the
/// balancer never cuts a stream a scenario keeps open; a deployer's
/// shorter settings end long streams at that bound, which the client
/// sees as a reset.
pub const STREAM_TIMEOUT: &str = "1h";

/// A program a live deployment needs: where it is, or an error naming the
/// package that has it.
fn program(name: &str, package: &str, role: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file()).ok_or_else(|| {
        Error::io(format!(
            "{name} is not installed: a live run of a deployment uses it as the {role} (Debian: apt-get install {package})"
        ))
    })
}

/// Waits until something accepts connections on `port`, or `proc` exits.
async fn listening(port: u16, proc: &mut Process, what: &str) -> Result<()> {
    let connect = async {
        loop {
            if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        biased;
        status = proc.exited() => {
            let how = status.map_or_else(|e| format!("could not be waited for: {e}"), describe_exit);
            proc.settle().await;
            Err(Error::io(format!("{what} {how} before it listened on port {port}\nits last output lines:\n{}", proc.tail())))
        }
        r = tokio::time::timeout(START_TIMEOUT, connect) => r.map_err(|_| {
            Error::io(format!("{what} did not listen on port {port} within {START_TIMEOUT:?}\nits last output lines:\n{}", proc.tail()))
        }),
    }
}

/// Whether what listens on `port` is the Redis with process id `pid`: it
/// answers `INFO server` with that `process_id`, within a second. (Another
/// run's Redis on the port would answer PING too.)
async fn is_redis(port: u16, pid: u32) -> bool {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let ask = async {
        let mut s = tokio::io::BufReader::new(TcpStream::connect(("127.0.0.1", port)).await.ok()?);
        s.get_mut().write_all(b"INFO server\r\n").await.ok()?;
        // A bulk string: `$<length>`, then that many bytes.
        let mut head = String::new();
        s.read_line(&mut head).await.ok()?;
        let len: usize = head.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut body = vec![0u8; len.min(1 << 16)];
        s.read_exact(&mut body).await.ok()?;
        let body = String::from_utf8_lossy(&body);
        Some(body.lines().any(|l| l.trim_end().strip_prefix("process_id:") == Some(pid.to_string().as_str())))
    };
    tokio::time::timeout(Duration::from_secs(1), ask).await.ok().flatten().unwrap_or(false)
}

/// A TCP proxy from one replica to the store that can be cut: while cut,
/// it closes every connection it carries and every new one at once (the
/// replica's store client sees an error and gives up, as over a partition).
struct StoreLink {
    port: u16,
    cut: Rc<Cell<bool>>,
    /// Bumped by each cut: connections of an earlier generation end.
    generation: Rc<Cell<u64>>,
    task: tokio::task::AbortHandle,
}

impl StoreLink {
    async fn start(store_port: u16) -> Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| Error::io(format!("cannot listen for a store link: {e}")))?;
        let port = listener.local_addr().map_err(|e| Error::io(e.to_string()))?.port();
        let (cut, generation) = (Rc::new(Cell::new(false)), Rc::new(Cell::new(0u64)));
        let (c, g) = (cut.clone(), generation.clone());
        let task = tokio::task::spawn_local(async move {
            loop {
                let Ok((down, _)) = listener.accept().await else { continue };
                if c.get() {
                    drop(down);
                    continue;
                }
                let (g, born) = (g.clone(), g.get());
                tokio::task::spawn_local(async move {
                    let Ok(up) = TcpStream::connect(("127.0.0.1", store_port)).await else { return };
                    let (mut down, mut up) = (down, up);
                    let copy = tokio::io::copy_bidirectional(&mut down, &mut up);
                    let cut = async {
                        while g.get() == born {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    };
                    tokio::select! {
                        _ = copy => {}
                        _ = cut => {}
                    }
                });
            }
        })
        .abort_handle();
        Ok(StoreLink { port, cut, generation, task })
    }

    fn set_cut(&self, cut: bool) {
        if cut {
            self.generation.set(self.generation.get() + 1);
        }
        self.cut.set(cut);
    }
}

impl Drop for StoreLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a replica is told about the deployment: its port and its store.
pub struct ReplicaSlot {
    /// The port it serves MCP on.
    pub port: u16,
    /// Its store, `redis://127.0.0.1:P` (through its link), with a shared store.
    pub store: Option<String>,
}

/// Redis and the store links, started before the replicas.
pub struct LiveStore {
    redis: Option<Process>,
    links: Vec<StoreLink>,
}

impl LiveStore {
    /// Starts Redis (for a shared store) and one link per replica; the
    /// replicas' slots, their ports taken from `port`.
    pub async fn start(
        d: &Deployment,
        mut port: impl AsyncFnMut() -> Result<u16>,
    ) -> Result<(LiveStore, Vec<ReplicaSlot>)> {
        let mut store = LiveStore { redis: None, links: Vec::new() };
        let mut redis_port = None;
        if d.store == StoreKind::Shared {
            let exe = program("redis-server", "redis-server", "shared store")?;
            // A port checked free may be taken by another process before
            // Redis binds it (then Redis exits, and what listens there is not
            // this Redis): it must answer with its own process id, or it
            // starts again on another port.
            let mut tries = 0;
            loop {
                tries += 1;
                let p = port().await?;
                // No persistence, loopback only: the run's store lives and dies
                // with it. Its process title names the mcpsim run that owns it.
                let cmd = format!(
                    "exec {} --port {p} --bind 127.0.0.1 --save '' --appendonly no --protected-mode no \
                     --proc-title-template '{{title}} {{listen-addr}} mcpsim-store-{}'",
                    exe.display(),
                    std::process::id()
                );
                let mut proc = Process::spawn(&cmd, &[], false)
                    .map_err(|e| Error::io(format!("cannot start redis-server (the shared store): {e}")))?;
                let up = listening(p, &mut proc, "redis-server (the shared store)").await;
                let failed = match up {
                    Ok(()) if is_redis(p, proc.pid().unwrap_or(0)).await => {
                        store.redis = Some(proc);
                        redis_port = Some(p);
                        break;
                    }
                    Ok(()) => {
                        proc.kill();
                        proc.settle().await;
                        Error::io(format!(
                            "what listens on port {p} is not the redis-server (the shared store) just started\nits last output lines:\n{}",
                            proc.tail()
                        ))
                    }
                    Err(e) => e,
                };
                if tries == 3 {
                    return Err(failed);
                }
            }
        }
        let mut slots = Vec::new();
        for _ in 0..d.replicas {
            let mut slot = ReplicaSlot { port: port().await?, store: None };
            if let Some(rp) = redis_port {
                let link = StoreLink::start(rp).await?;
                slot.store = Some(format!("redis://127.0.0.1:{}", link.port));
                store.links.push(link);
            }
            slots.push(slot);
        }
        Ok((store, slots))
    }

    /// Cuts (or restores) replica `replica`'s (from 1) link to the store.
    pub fn set_cut(&self, replica: u32, cut: bool) -> std::result::Result<(), String> {
        match self.links.get(replica as usize - 1) {
            Some(l) => {
                l.set_cut(cut);
                Ok(())
            }
            None => Err(format!("replica {replica} has no link to a shared store")),
        }
    }

    /// Why Redis is gone, if it exited.
    pub fn died(&mut self) -> Option<String> {
        let redis = self.redis.as_mut()?;
        let status = redis.try_exited()?;
        Some(format!(
            "redis-server (the shared store) {} mid-run\nits last output lines:\n{}",
            describe_exit(status),
            redis.tail()
        ))
    }

    /// Stops the links and hands over Redis, for the caller to stop and
    /// reap (a `RefCell` borrow must not be held across that wait).
    pub fn take_redis(&mut self) -> Option<Process> {
        self.links.clear();
        self.redis.take()
    }
}

/// HAProxy in front of the replicas, as mcpsim writes its configuration.
pub struct Balancer {
    proc: Process,
    /// Where the configuration was written (removed at the end).
    dir: PathBuf,
}

/// The name of HAProxy's runtime API socket in its directory.
const ADMIN_SOCKET: &str = "admin.sock";

/// HAProxy's configuration for `d` on `port`, in front of `replicas`:
/// HTTP mode, each request balanced on its own (`option
/// http-server-close`), every write forwarded at once (`option
/// http-no-delay`: without it HAProxy holds a streamed response's data
/// for more, up to 200 ms, which delays each SSE event that long), the
/// routing's `balance`, and each response tagged
/// with the replica that served it ([`REPLICA_HEADER`]). Each connection
/// starts with the PROXY line in which mcpsim's NAT states the client's
/// public address (`accept-proxy`): `balance source` hashes that address,
/// as the simulated balancer does.
///
/// Its timings are the simulated balancer's, at the run's time `scale`:
/// each replica is health-checked every [`HEALTH_CHECK`] (a TCP connect;
/// one failure takes it out of rotation, one success brings it back), as
/// the simulated balancer takes a crashed replica out that long after, and
/// `timeout connect` is its [`CONNECT_TIMEOUT`] (HAProxy waits as long, up
/// to a second, before it retries a refused connection). A session stuck
/// to a replica that is down is balanced anew, and sticks where it lands
/// (`option redispatch`). `admin` is the runtime API's socket, through
/// which a `drain` step drains a replica.
pub fn haproxy_config(d: &Deployment, port: u16, replicas: &[u16], scale: f64, admin: &Path) -> String {
    let balance = match d.routing {
        Routing::RoundRobin | Routing::Session => "static-rr",
        Routing::LeastConnections => "leastconn",
        Routing::Source => "source",
    };
    // Sticky sessions: learned from the response that names a session, matched on the request.
    let stick = if d.routing == Routing::Session {
        "    stick-table type string len 128 size 100k expire 1h\n    \
         stick on req.hdr(mcp-session-id)\n    stick store-response res.hdr(mcp-session-id)\n"
    } else {
        ""
    };
    let admin = admin.display();
    let connect = CONNECT_TIMEOUT.mul_f64(scale).as_millis().max(10);
    // The deployment's own, scaled as every scenario timing; else an hour.
    let timeout = |t: Option<crate::scenario::Dur>| match t {
        Some(t) => format!("{}ms", t.0.mul_f64(scale).as_millis().max(1)),
        None => STREAM_TIMEOUT.to_string(),
    };
    let (server, tunnel) = (timeout(d.timeout_server), timeout(d.timeout_tunnel));
    // The header the NATs read the serving replica from, as in simulation.
    let tag = REPLICA_HEADER;
    let mut cfg = format!(
        "# Written by mcpsim for one live run (docs/replicas.md).\n\
         global\n    maxconn 4096\n    stats socket {admin} level admin\n\n\
         defaults\n    mode http\n    option http-server-close\n    option http-no-delay\n    option redispatch\n    timeout connect {connect}ms\n    \
         timeout client {STREAM_TIMEOUT}\n    timeout server {server}\n    timeout tunnel {tunnel}\n\n\
         frontend mcp\n    bind 127.0.0.1:{port} accept-proxy\n    default_backend replicas\n\n\
         backend replicas\n    balance {balance}\n{stick}    http-response set-header {tag} %s\n"
    );
    let inter = HEALTH_CHECK.mul_f64(scale).as_millis().max(10);
    for (i, p) in replicas.iter().enumerate() {
        cfg.push_str(&format!("    server replica-{} 127.0.0.1:{p} check inter {inter}ms fall 1 rise 1\n", i + 1));
    }
    cfg
}

impl Balancer {
    /// Starts HAProxy on `port` in front of the replicas on `replicas`, its
    /// timings at time `scale`.
    pub async fn start(d: &Deployment, port: u16, replicas: &[u16], scale: f64) -> Result<Balancer> {
        let exe = program("haproxy", "haproxy", "load balancer")?;
        let dir = std::env::temp_dir().join(format!("mcpsim-haproxy-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("{}: {e}", dir.display())))?;
        let cfg = dir.join("haproxy.cfg");
        std::fs::write(&cfg, haproxy_config(d, port, replicas, scale, &dir.join(ADMIN_SOCKET)))
            .map_err(|e| Error::io(format!("{}: {e}", cfg.display())))?;
        // -db: stay in the foreground, in the process group mcpsim kills.
        let cmd = format!("exec {} -db -f {}", exe.display(), cfg.display());
        let mut proc = Process::spawn(&cmd, &[], false).map_err(|e| Error::io(format!("cannot start haproxy: {e}")))?;
        if let Err(e) = listening(port, &mut proc, "haproxy (the load balancer)").await {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        Ok(Balancer { proc, dir })
    }

    /// Drains replica `replica` (from 1) through HAProxy's runtime API: no
    /// new connection goes to it; the sessions stuck to it still do.
    pub async fn drain(&self, replica: u32) -> std::result::Result<(), String> {
        let reply = self.command(&format!("set server replicas/replica-{replica} state drain")).await?;
        // The runtime API answers an accepted command with an empty line.
        match reply.trim() {
            "" => Ok(()),
            why => Err(format!("haproxy refused to drain replica {replica}: {why}")),
        }
    }

    /// Waits (at most `within`, real time) until HAProxy's health check
    /// sees replica `replica` (from 1) up: a restarted replica is back in
    /// rotation, as in simulation, before the run goes on. Whether it is.
    pub async fn wait_up(&self, replica: u32, within: Duration) -> bool {
        let name = format!("replica-{replica}");
        let up = async {
            loop {
                // `show servers state`: srv_name is the 4th field, srv_op_state (2: running) the 6th.
                if let Ok(reply) = self.command("show servers state replicas").await {
                    let state = reply
                        .lines()
                        .map(|l| l.split(' ').collect::<Vec<_>>())
                        .find(|f| f.get(3) == Some(&name.as_str()));
                    if state.is_some_and(|f| f.get(5) == Some(&"2")) {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(within, up).await.is_ok()
    }

    /// One command over HAProxy's runtime API socket, and its reply.
    async fn command(&self, cmd: &str) -> std::result::Result<String, String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let path = self.dir.join(ADMIN_SOCKET);
        let talk = async {
            let mut s = tokio::net::UnixStream::connect(&path).await?;
            s.write_all(format!("{cmd}\n").as_bytes()).await?;
            let mut reply = String::new();
            s.read_to_string(&mut reply).await?;
            Ok::<_, std::io::Error>(reply)
        };
        match tokio::time::timeout(START_TIMEOUT, talk).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(format!("haproxy's runtime API ({}): {e}", path.display())),
            Err(_) => Err(format!("haproxy's runtime API ({}) did not answer `{cmd}`", path.display())),
        }
    }

    /// Why HAProxy is gone, if it exited.
    pub fn died(&mut self) -> Option<String> {
        let status = self.proc.try_exited()?;
        Some(format!(
            "haproxy (the load balancer) {} mid-run\nits last output lines:\n{}",
            describe_exit(status),
            self.proc.tail()
        ))
    }

    /// Stops HAProxy and reaps it.
    pub async fn stop(&mut self) {
        self.proc.kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.proc.exited()).await;
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.proc.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the Redis just started passes: a listener that answers `INFO
    /// server` with that process id does; one with another process id (a
    /// parallel run's Redis), one that answers something else, or nothing,
    /// does not.
    #[test]
    fn only_the_redis_just_started_passes_for_it() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let info = |pid: u32| {
                let body = format!("# Server\r\nredis_version:7.0.15\r\nprocess_id:{pid}\r\ntcp_port:6379\r\n");
                format!("${}\r\n{body}\r\n", body.len()).into_bytes()
            };
            for (reply, ours) in [
                (info(4242), true),
                (info(4243), false),
                (b"HTTP/1.1 400 Bad Request\r\n".to_vec(), false),
                (Vec::new(), false),
            ] {
                let l = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
                let port = l.local_addr().unwrap().port();
                let shown = String::from_utf8_lossy(&reply).to_string();
                let server = tokio::spawn(async move {
                    let (mut s, _) = l.accept().await.unwrap();
                    let mut ask = [0u8; 13];
                    s.read_exact(&mut ask).await.unwrap();
                    assert_eq!(&ask, b"INFO server\r\n");
                    s.write_all(&reply).await.unwrap();
                    // Held open: a silent listener must not pass either.
                    tokio::time::sleep(Duration::from_secs(2)).await;
                });
                assert_eq!(is_redis(port, 4242).await, ours, "{shown:?}");
                server.abort();
            }
        });
    }

    #[test]
    fn the_haproxy_configuration_balances_each_request_as_the_routing_says() {
        let d = Deployment { replicas: 2, routing: Routing::Source, store: StoreKind::Shared, ..Deployment::default() };
        let admin = Path::new("/tmp/x/admin.sock");
        let cfg = haproxy_config(&d, 8080, &[9001, 9002], 0.1, admin);
        for line in [
            "mode http",
            "option http-server-close",
            "option http-no-delay",
            "timeout tunnel 1h",
            "bind 127.0.0.1:8080 accept-proxy",
            "balance source",
            "http-response set-header x-mcpsim-replica %s",
            "option redispatch",
            "timeout connect 500ms",
            "stats socket /tmp/x/admin.sock level admin",
            "server replica-1 127.0.0.1:9001 check inter 200ms fall 1 rise 1",
            "timeout server 1h",
            "server replica-2 127.0.0.1:9002 check inter 200ms fall 1 rise 1",
        ] {
            assert!(cfg.contains(line), "{line} missing:\n{cfg}");
        }
        let rr = Deployment { routing: Routing::RoundRobin, ..d.clone() };
        assert!(haproxy_config(&rr, 1, &[2], 1.0, admin).contains("balance static-rr"));
        let lc = Deployment { routing: Routing::LeastConnections, ..d.clone() };
        assert!(haproxy_config(&lc, 1, &[2], 1.0, admin).contains("balance leastconn"));
        let sticky = haproxy_config(&Deployment { routing: Routing::Session, ..d }, 1, &[2], 1.0, admin);
        assert!(sticky.contains("stick on req.hdr(mcp-session-id)"), "{sticky}");
        assert!(sticky.contains("stick store-response res.hdr(mcp-session-id)"), "{sticky}");
        // A deployment's own timeouts, scaled as every scenario timing.
        let short = Deployment {
            timeout_server: Some(crate::scenario::Dur(Duration::from_secs(30))),
            timeout_tunnel: Some(crate::scenario::Dur(Duration::from_secs(60))),
            ..d.clone()
        };
        let cfg = haproxy_config(&short, 8080, &[9001, 9002], 0.1, admin);
        assert!(cfg.contains("timeout server 3000ms") && cfg.contains("timeout tunnel 6000ms"), "{cfg}");
    }

    #[test]
    fn a_missing_program_is_named_with_its_package() {
        let e = program("mcpsim-no-such-program", "some-package", "load balancer").unwrap_err().to_string();
        assert!(e.contains("mcpsim-no-such-program is not installed"), "{e}");
        assert!(e.contains("apt-get install some-package"), "{e}");
        assert_eq!(program("mcpsim-no-such-program", "p", "r").unwrap_err().exit_code(), 4);
    }
}
