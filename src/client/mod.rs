//! The simulated MCP client, in either dialect.
//!
//! A well-behaved client: it opens its uplink, initializes, tracks the last
//! event id, answers every server request it received after `think_time`
//! (over POST, while it holds the session, whatever became of the stream
//! that carried it), resumes with
//! `Last-Event-ID` when its uplink dies or goes silent (missed heartbeats),
//! and re-initializes when a resumption is refused. A token thief is the
//! same client after `steal-token` handed it someone else's token.
//!
//! In `legacy-sse` the uplink is `GET /mcp/sse` and messages go to the
//! endpoint its `endpoint` event names. In `streamable-http` (see
//! [`streamable`]) the client POSTs `initialize` to `/mcp`, keeps the
//! `Mcp-Session-Id`, opens the standalone GET stream as its uplink, reads
//! tool calls' POST response streams, resumes any stream by GET with
//! `Last-Event-ID` and re-initializes on 404.
//!
//! Everything a client records is what a real client could observe.

mod conn;
use conn::unsendable;
pub mod dial;
mod legacy;
mod session;
mod stateless;
mod stream;
pub(crate) mod streamable;

use crate::clock::timeout;
use crate::inbox::Inbox;
use crate::scenario::{ClientSpec, Dialect};
use crate::trace::{ConnId, Purpose, Recorder, Refused, What};
use crate::wire::jsonrpc::{mcp, Message, RpcId};
use crate::wire::sse::{Decoder, Item};
use bytes::Bytes;
use dial::{Connection, Dialer};
use http_body_util::{BodyExt, Empty, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Commands the step loop sends a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientCmd {
    /// Open a fresh session (a fresh uplink).
    Connect,
    /// Resume the held session's stream from this id (re-initialize if it holds none).
    Resume(ResumeFrom),
    /// Answer these request ids now, if seen and not answered yet.
    Answer(Vec<RpcId>),
    /// Take over a (stolen) session token, and the owner's credential if given.
    Adopt {
        /// The session token to hold from now on.
        token: String,
        /// The credential to present from now on, if the owner's was stolen too.
        credential: Option<String>,
    },
    /// The uplink of generation `gen` ended; reconnect if it is still current.
    Retry {
        /// The uplink generation that ended.
        gen: u64,
        /// Open a fresh session instead of resuming the held one.
        fresh: bool,
    },
    /// streamable-http: call the `ask` tool, asking for `method` labelled `label`.
    CallTool {
        /// The label of the request the server issues during the call.
        label: String,
        /// The method of that request.
        method: String,
    },
    /// streamable-http: end the session with DELETE.
    EndSession,
    /// streamable-http: call `enable_tool` for `tool` on the held session.
    EnableTool {
        /// The tool to enable.
        tool: String,
    },
    /// stateless-http: call `tool`; `label` names the call.
    Call {
        /// The call's label (sent as the `call` argument).
        label: String,
        /// The tool.
        tool: String,
        /// Whether the client declines the elicitations it is asked for this call.
        decline: bool,
    },
    /// stateless-http: open a listen stream for tool-list changes, and keep one open.
    Listen,
    /// stateless-http: present `held` on a request for call `call` (tool
    /// `tool`) once, as a step asks: stolen, altered or again.
    Present {
        /// The call whose request carries it.
        call: String,
        /// That call's tool.
        tool: String,
        /// The state, and the input requests it answers.
        held: HeldState,
        /// How the client came by it.
        how: crate::trace::stateless::StateHow,
        /// The credential to present on this request, if not the client's own.
        credential: Option<String>,
    },
}

/// stateless-http: a `requestState` a client holds for one of its calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldState {
    /// The call's tool.
    pub tool: String,
    /// The state, as the server sent it.
    pub state: String,
    /// The input requests it came with: (key, method).
    pub requests: Vec<(String, String)>,
    /// When the client received it (µs of scenario time).
    pub received_us: Option<u64>,
    /// Whether the round it continues has completed.
    pub spent: bool,
}

/// Which id a resumption presents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResumeFrom {
    /// The last event id the client saw on its uplink.
    LastSeen,
    /// This id, sent as it is.
    Id(String),
    /// No `Last-Event-ID`: a plain GET on the session.
    Nothing,
    /// The last id seen plus an offset (numeric ids only).
    LastSeenPlus(i64),
}

/// What the step loop may read and change from outside the host.
#[derive(Debug, Default)]
pub struct ClientShared {
    /// The session token the client holds, if any (the step loop reads it for thefts and server requests).
    pub token: RefCell<Option<String>>,
    /// The credential the client presents: its principal, or one it stole.
    pub credential: RefCell<String>,
    /// Connection numbers stay unique across restarts, so a trace never
    /// names two connections of one client alike.
    pub conn_seq: std::cell::Cell<u32>,
    /// stateless-http: the latest `requestState` of each call, by label (a
    /// step that steals, alters or replays one reads it here).
    pub states: RefCell<BTreeMap<String, HeldState>>,
    /// stateless-http: the local port of each call's request in flight, by
    /// label (a fault aimed at a call's stream finds its NAT mapping by it).
    pub open_calls: RefCell<BTreeMap<String, u16>>,
}

/// What a client of each dialect is: the client layer's one choice of
/// dialect (docs/design.md §7).
enum Actor {
    /// The session client, with what its dialect does differently.
    Stateful(&'static dyn session::SessionWire),
    /// The stateless-http client.
    Stateless,
}

impl Actor {
    fn of(dialect: Dialect) -> Actor {
        match dialect {
            Dialect::LegacySse => Actor::Stateful(&legacy::Legacy),
            Dialect::StreamableHttp => Actor::Stateful(&streamable::Streamable),
            Dialect::StatelessHttp => Actor::Stateless,
        }
    }
}

/// A client host's body for `dialect`: the stateless client, or the
/// stateful one (legacy-sse and streamable-http).
pub(crate) fn body(
    spec: ClientSpec,
    dialect: Dialect,
    dialer: Rc<dyn Dialer>,
    rec: Recorder,
    shared: Rc<ClientShared>,
    inbox: Inbox<ClientCmd>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
    match Actor::of(dialect) {
        Actor::Stateful(wire) => Box::pin(Client::new(spec, wire, dialer, rec, shared, inbox).run()),
        Actor::Stateless => Box::pin(stateless::Client::new(spec, dialer, rec, shared, inbox).run()),
    }
}

/// The port the server (and each NAT) listens on.
pub const PORT: u16 = 80;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest SSE event a client accepts.
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// Streams in a row that may end with nothing (SSE polling, MCP 2025-11-25)
/// before the client polls with its growing backoff (the standalone stream)
/// or gives up (a tool call's stream).
pub(crate) const EMPTY_POLLS: u32 = 3;

/// The longest a client waits between two reconnection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// One client actor.
pub struct Client {
    spec: ClientSpec,
    /// What its (stateful) dialect does differently.
    wire: &'static dyn session::SessionWire,
    dialer: Rc<dyn Dialer>,
    rec: Recorder,
    /// What the step loop shares with this client.
    pub shared: Rc<ClientShared>,
    inbox: Inbox<ClientCmd>,
    st: RefCell<State>,
}

#[derive(Default)]
struct State {
    rpc_seq: i64,
    gen: u64,
    uplink: Option<JoinHandle<()>>,
    last_seen: Option<String>,
    backoff: Duration,
    init_id: Option<RpcId>,
    /// Requests seen, with their method (an `answer` step answers them by id).
    seen: BTreeMap<RpcId, String>,
    /// `(session, id)` of every request answered. Request ids are the
    /// session's: a new session may number its requests from the start again
    /// (rmcp and the Python SDK do), and its request 1 is not the old
    /// session's request 1 (the Python SDK's req-43 once went unanswered, its
    /// id taken for one answered in the session before).
    answered: BTreeSet<(Option<String>, RpcId)>,
    /// `(session, id)` of every request received and taken on, answered or
    /// not yet: each is answered once, whatever stream carries it again.
    taken: BTreeSet<(Option<String>, RpcId)>,
    /// Streams in a row that ended with nothing in them (SSE polling).
    empty_polls: u32,
    /// The session whose stream carried each request (answers go there).
    request_token: BTreeMap<RpcId, String>,
    /// The reconnection delay the server announced (`retry`), in ms.
    retry_ms: Option<u64>,
    /// Tool calls in flight (streamable-http), by label.
    calls: BTreeMap<String, streamable::CallState>,
    /// Generations of call streams count from here, apart from the uplink's.
    call_gen: u64,
}

impl State {
    /// Whether the stream of generation `gen` is still the one being read.
    fn live(&self, gen: u64) -> bool {
        gen == self.gen || self.calls.values().any(|c| c.gen == gen)
    }
}

/// How reading an SSE stream ended.
enum StreamEnd {
    /// No complete item within the heartbeat timeout.
    Silent,
    /// The server ended the body.
    Ended,
    /// The body broke, or an event grew too large.
    Broken,
    /// The server refused with `event: error`.
    ErrorEvent,
    /// A tool call's result arrived.
    Complete,
}

struct AbortOnDrop(JoinHandle<()>);
impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

enum Mode {
    Fresh,
    Resume { token: String, last_event_id: Option<String> },
}

impl Client {
    /// A client for `spec`, dialing through `dialer`, recording to `rec` and
    /// taking commands from `inbox`; its credential starts as its principal.
    fn new(
        spec: ClientSpec,
        wire: &'static dyn session::SessionWire,
        dialer: Rc<dyn Dialer>,
        rec: Recorder,
        shared: Rc<ClientShared>,
        inbox: Inbox<ClientCmd>,
    ) -> Rc<Client> {
        *shared.credential.borrow_mut() = spec.principal.clone();
        let st = State { call_gen: 1 << 32, ..State::default() };
        Rc::new(Client { spec, wire, dialer, rec, shared, inbox, st: RefCell::new(st) })
    }

    fn name(&self) -> String {
        self.spec.name.clone()
    }

    /// The actor's main loop: one command at a time.
    pub async fn run(self: Rc<Self>) {
        loop {
            match self.inbox.recv().await {
                ClientCmd::Connect => self.start_uplink(Mode::Fresh),
                ClientCmd::Resume(which) => {
                    let token = self.shared.token.borrow().clone();
                    match token {
                        Some(token) => {
                            let last_event_id = match which {
                                ResumeFrom::LastSeen => self.st.borrow().last_seen.clone(),
                                ResumeFrom::Id(id) => Some(id),
                                ResumeFrom::Nothing => None,
                                ResumeFrom::LastSeenPlus(k) => {
                                    let last = self.st.borrow().last_seen.clone();
                                    match last
                                        .as_deref()
                                        .and_then(|l| l.parse::<u64>().ok())
                                        .and_then(|n| n.checked_add_signed(k))
                                    {
                                        Some(n) => Some(n.to_string()),
                                        None => {
                                            // Not the server's fault: the plan asked for arithmetic on an id that has none.
                                            self.rec.record(What::AppError {
                                                client: self.name(),
                                                error: format!("cannot resume from the last seen id {k:+}: last seen id {last:?} is not a number it can add to"),
                                            });
                                            continue;
                                        }
                                    }
                                }
                            };
                            self.start_uplink(Mode::Resume { token, last_event_id });
                        }
                        None => self.reinitialize("resume requested but the client holds no session"),
                    }
                }
                ClientCmd::Answer(ids) => {
                    for id in ids {
                        let method = self.st.borrow().seen.get(&id).cloned();
                        if let Some(method) = method {
                            tokio::task::spawn_local(self.clone().answer(id, method));
                        }
                    }
                }
                ClientCmd::Adopt { token, credential } => {
                    *self.shared.token.borrow_mut() = Some(token);
                    if let Some(c) = credential {
                        *self.shared.credential.borrow_mut() = c;
                    }
                    self.st.borrow_mut().last_seen = None;
                }
                ClientCmd::Retry { gen, fresh } => {
                    if gen != self.st.borrow().gen {
                        continue;
                    }
                    let token = self.shared.token.borrow().clone();
                    match token {
                        Some(token) if !fresh => {
                            let last_event_id = self.st.borrow().last_seen.clone();
                            self.start_uplink(Mode::Resume { token, last_event_id })
                        }
                        _ => self.start_uplink(Mode::Fresh),
                    }
                }
                ClientCmd::CallTool { label, method } => self.clone().start_call(label, method),
                ClientCmd::EndSession => {
                    tokio::task::spawn_local(self.clone().end_session());
                }
                ClientCmd::EnableTool { tool } => {
                    tokio::task::spawn_local(self.clone().enable_tool(tool));
                }
                // stateless-http's commands (the loader keeps them out of stateful plans).
                ClientCmd::Call { .. } | ClientCmd::Present { .. } | ClientCmd::Listen => {}
            }
        }
    }

    fn start_uplink(self: &Rc<Self>, mode: Mode) {
        let gen = {
            let mut st = self.st.borrow_mut();
            if let Some(old) = st.uplink.take() {
                old.abort();
            }
            st.gen += 1;
            st.gen
        };
        let me = self.clone();
        let handle = tokio::task::spawn_local(async move { me.uplink(gen, mode).await });
        self.st.borrow_mut().uplink = Some(handle);
    }

    fn reinitialize(self: &Rc<Self>, why: &str) {
        self.rec.record(What::Reinitialize { client: self.name(), why: why.into() });
        *self.shared.token.borrow_mut() = None;
        {
            let mut st = self.st.borrow_mut();
            st.last_seen = None;
            st.seen.clear();
            // The new session's ids may repeat the old one's.
            st.request_token.clear();
            // Tool calls die with their session.
            for (label, call) in std::mem::take(&mut st.calls) {
                if let Some(task) = call.task {
                    task.abort();
                }
                self.rec.record(What::CallAbandoned {
                    client: self.name(),
                    call: label,
                    why: format!("its session ended ({why})"),
                });
            }
        }
        self.start_uplink(Mode::Fresh);
    }

    /// Schedules a reconnect of generation `gen` after the current backoff.
    fn retry_later(self: &Rc<Self>, gen: u64, fresh: bool) {
        let delay = {
            let mut st = self.st.borrow_mut();
            st.backoff = (st.backoff * 2).clamp(Duration::from_secs(1), MAX_BACKOFF);
            st.backoff
        };
        let inbox = self.inbox.clone();
        tokio::task::spawn_local(async move {
            crate::clock::sleep(delay).await;
            inbox.push(ClientCmd::Retry { gen, fresh });
        });
    }
}
