//! Starting a live run's processes: Ctrl-C and SIGTERM, the ports, and the
//! wait for a process to say `ready` on the control port.

use super::control::{FromServer, PROTOCOL};
use super::process::describe_exit;
use super::process::Process;
use super::LiveOptions;
use crate::error::{Error, Result};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;

/// The first Ctrl-C or SIGTERM this process got, once a live run listened
/// for them: one listener for the process, so that one Ctrl-C stops every
/// run in flight and no run starts after it.
static SIGNALLED: std::sync::Mutex<Option<tokio::sync::watch::Receiver<Option<&'static str>>>> =
    std::sync::Mutex::new(None);

/// Whether a Ctrl-C (or SIGTERM) came since a live run first listened:
/// its words ("interrupted (Ctrl-C)"). A gate or hunt starts no run after it.
pub fn interrupted() -> Option<&'static str> {
    SIGNALLED.lock().ok()?.as_ref().and_then(|rx| *rx.borrow())
}

/// The process's signal listener, started by the first live run: a thread
/// of its own that records the first signal for every run to see.
pub(super) fn signals() -> Result<tokio::sync::watch::Receiver<Option<&'static str>>> {
    let mut slot = SIGNALLED.lock().map_err(|_| Error::io("the signal listener broke"))?;
    if let Some(rx) = slot.as_ref() {
        return Ok(rx.clone());
    }
    let (tx, rx) = tokio::sync::watch::channel(None);
    let (up_tx, up_rx) = std::sync::mpsc::channel::<std::result::Result<(), String>>();
    std::thread::Builder::new()
        .name("mcpsim-signals".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = up_tx.send(Err(e.to_string()));
                    return;
                }
            };
            rt.block_on(async move {
                #[cfg(unix)]
                {
                    use tokio::signal::unix::{signal, SignalKind};
                    let (mut int, mut term) = match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
                        (Ok(i), Ok(t)) => (i, t),
                        (Err(e), _) | (_, Err(e)) => {
                            let _ = up_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let _ = up_tx.send(Ok(()));
                    loop {
                        let why = tokio::select! {
                            _ = int.recv() => "interrupted (Ctrl-C)",
                            _ = term.recv() => "terminated (SIGTERM)",
                        };
                        tx.send_if_modified(|v| v.is_none() && v.replace(why).is_none());
                    }
                }
                #[cfg(not(unix))]
                {
                    let _ = up_tx.send(Ok(()));
                    loop {
                        let _ = tokio::signal::ctrl_c().await;
                        tx.send_if_modified(|v| v.is_none() && v.replace("interrupted (Ctrl-C)").is_none());
                    }
                }
            });
        })
        .map_err(|e| Error::io(format!("cannot catch signals: {e}")))?;
    match up_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(Error::io(format!("cannot catch signals: {e}"))),
        Err(_) => return Err(Error::io("cannot catch signals: the listener did not start")),
    }
    *slot = Some(rx.clone());
    Ok(rx)
}

/// Ctrl-C and SIGTERM, caught so that the process group is always killed.
pub(super) struct Interrupt {
    signalled: tokio::sync::watch::Receiver<Option<&'static str>>,
}

impl Interrupt {
    pub(super) fn new() -> Result<Self> {
        Ok(Interrupt { signalled: signals()? })
    }

    /// Waits for a signal (at once if one came already); says which.
    pub(super) async fn recv(&mut self) -> &'static str {
        match self.signalled.wait_for(Option::is_some).await {
            Ok(why) => why.unwrap_or("interrupted"),
            // The listener is gone: no signal can come.
            Err(_) => std::future::pending().await,
        }
    }
}

/// Whether a server's failed start says its port was taken (the message
/// Rust, Node and Python print for EADDRINUSE).
pub(super) fn port_was_taken(e: &Error) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("address already in use") || text.contains("eaddrinuse")
}

/// The server's MCP port (checked free) and the control listener.
pub(super) async fn ports(port: Option<u16>) -> Result<(u16, TcpListener)> {
    let port = match port {
        Some(p) => {
            // Taken already: say so now, not after a confusing process failure.
            TcpListener::bind(("127.0.0.1", p))
                .await
                .map_err(|e| Error::io(format!("port {p} on 127.0.0.1 is not free for the server: {e}")))?;
            p
        }
        None => free_port().await?,
    };
    let control = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| Error::io(format!("cannot listen for the control connection: {e}")))?;
    Ok((port, control))
}

/// A free port for the server, below Linux's ephemeral range (32768 on):
/// a port the kernel handed out for `:0` may be handed out again, to an
/// outgoing connection of a parallel run, before the server process binds it
/// (a possible cause of one failed start in 240 parallel live runs). Ports are tried
/// along a walk of the span drawn for each process ([`port_walk`]), each
/// checked free by binding it. Within one process the ports handed out cycle
/// through all 12,000 before one comes again: a run whose server restarts
/// leaves its port free for a moment, and a parallel run of the same process
/// (`run --jobs`, the tests) must not take it then (it did once: the
/// restarted server found its port in use).
pub(super) async fn free_port() -> Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static WALK: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    // Wall clock and pid only draw the walk: ports are no part of any trace.
    let (start, stride) = *WALK.get_or_init(|| {
        port_walk(
            std::process::id().wrapping_mul(7_919)
                ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos()),
        )
    });
    for _ in 0..200 {
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (PORT_SPAN.0 + (start + (k % PORT_SPAN.1) * stride) % PORT_SPAN.1) as u16;
        if TcpListener::bind(("127.0.0.1", port)).await.is_ok() {
            return Ok(port);
        }
    }
    let l = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| Error::io(format!("cannot find a free port on 127.0.0.1: {e}")))?;
    Ok(l.local_addr().map_err(|e| Error::io(e.to_string()))?.port())
}

/// The ports [`free_port`] hands out: the first, and how many.
pub(super) const PORT_SPAN: (u32, u32) = (20_000, 12_000);

/// A process's walk of the span, drawn from `seed`: where it starts, and
/// its step, prime to the span's length (so that it visits every port once
/// per 12,000 steps). Both differ between processes: with one step for all
/// (613 until 2026-12-07), two processes walked the same order from two
/// starts, and one whose start trailed the other's by a few steps took, a
/// moment later, each port the other had just checked free (a Redis found
/// its port held by a parallel run's server).
pub(super) fn port_walk(seed: u32) -> (u32, u32) {
    let h = u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let span = PORT_SPAN.1;
    let start = ((h >> 32) as u32) % span;
    let mut stride = (h as u32) % span;
    // 12,000 = 2^5 * 3 * 5^3.
    while stride % 2 == 0 || stride % 3 == 0 || stride % 5 == 0 {
        stride += 1;
    }
    (start, stride % span)
}

pub(super) type Lines = tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>;
pub(super) type Writer = tokio::net::tcp::OwnedWriteHalf;

/// A process's name, the dialects it declared in `ready`, and whether it said it authenticates.
pub(super) type Hello = (String, Option<Vec<String>>, Option<bool>);

/// The words of a start that missed the ready timeout.
pub(super) const NOT_READY: &str = "did not say `ready` on the control port within";

/// "the server process", or "the server process of replica N".
pub(super) fn whose(deployed: bool, i: usize) -> String {
    if deployed {
        format!("the server process of replica {}", i + 1)
    } else {
        "the server process".to_string()
    }
}

/// Waits for the process to connect to the control port and say `ready`.
pub(super) async fn ready(
    control: &TcpListener,
    process: &mut Process,
    opts: &LiveOptions,
    within: Duration,
) -> Result<(Hello, Lines, Writer)> {
    let fail = |what: String, process: &Process| {
        Error::io(format!("{what}\nthe server command: {}\nits last output lines:\n{}", opts.command, process.tail()))
    };
    let hello = async {
        let (stream, _) = control.accept().await?;
        let (r, w) = stream.into_split();
        let mut lines = BufReader::new(r).lines();
        let first = lines.next_line().await?;
        Ok::<_, std::io::Error>((first, lines, w))
    };
    let (first, lines, writer) = tokio::select! {
        biased;
        status = process.exited() => {
            let how = status.map_or_else(|e| format!("could not be waited for: {e}"), describe_exit);
            process.settle().await;
            return Err(fail(format!("the server process {how} before it was ready"), process));
        }
        r = tokio::time::timeout(within, hello) => match r {
            Err(_) => {
                return Err(fail(format!(
                    "the server process {NOT_READY} {:?}: does it speak {PROTOCOL} \
                     (docs/live-protocol.md)? It must connect to 127.0.0.1:$MCPSIM_CONTROL_PORT and send \
                     {{\"type\":\"ready\",\"protocol\":\"{PROTOCOL}\",\"server\":\"NAME\"}}",
                    within
                ), process))
            }
            Ok(Err(e)) => return Err(fail(format!("the control connection failed before `ready`: {e}"), process)),
            Ok(Ok(x)) => x,
        },
    };
    let Some(first) = first else {
        return Err(fail("the server process closed the control connection without saying `ready`".into(), process));
    };
    match serde_json::from_str::<FromServer>(&first) {
        Ok(FromServer::Ready { protocol, server, dialects, authenticates }) if protocol == PROTOCOL => {
            Ok(((server, dialects, authenticates), lines, writer))
        }
        Ok(FromServer::Ready { protocol, .. }) => Err(fail(
            format!("the server process speaks control protocol {protocol:?}; this mcpsim speaks {PROTOCOL:?}"),
            process,
        )),
        Ok(_) => Err(fail(format!("the server process's first control line must be `ready`, not: {first}"), process)),
        Err(e) => {
            Err(fail(format!("the server process's first control line is not {PROTOCOL}: {e}: {first}"), process))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ports handed out within one process do not come again soon, even
    /// once free: a restarting server's port stays its own.
    #[test]
    fn free_ports_of_one_process_do_not_repeat() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let ports: Vec<u16> = rt.block_on(async {
            let mut v = Vec::new();
            for _ in 0..300 {
                v.push(free_port().await.unwrap());
            }
            v
        });
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port came twice: {ports:?}");
        assert!(ports.iter().all(|p| (20_000..32_000).contains(p)), "{ports:?}");
    }

    /// Each process walks the span in its own order: two processes share
    /// few of their first hundred ports, however their starts fall (with
    /// one step for all, a process starting a step behind another took
    /// each port the other took, a moment later).
    #[test]
    fn two_processes_walk_the_ports_in_different_orders() {
        let walk = |seed: u32| {
            let (start, stride) = port_walk(seed);
            assert!(stride % 2 != 0 && stride % 3 != 0 && stride % 5 != 0, "{stride}");
            (0..100u32).map(move |k| (start + k * stride) % PORT_SPAN.1).collect::<std::collections::BTreeSet<_>>()
        };
        for (a, b) in [(1, 2), (7_919, 15_838), (123_456, 123_457), (0, u32::MAX)] {
            let shared = walk(a).intersection(&walk(b)).count();
            assert!(shared < 10, "seeds {a} and {b} share {shared} of their first 100 ports");
        }
        // Every port of the span, once per cycle.
        let (start, stride) = port_walk(42);
        let all: std::collections::BTreeSet<u32> =
            (0..PORT_SPAN.1).map(|k| (start + k * stride) % PORT_SPAN.1).collect();
        assert_eq!(all.len() as u32, PORT_SPAN.1);
    }
}
