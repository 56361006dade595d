//! The boundary for servers under test.
//!
//! A server plug-in is any HTTP service bound to the simulated listener, plus
//! an application hook: the harness pushes [`AppCommand`]s (issue a server
//! request on a session, emit notifications) and the application reports what
//! became of each request through [`AppReporter`]. The reference engine with
//! each policy is one plug-in; real SDK servers are others.

use crate::inbox::Inbox;
use crate::trace::{Outcome, Recorder, What};
use crate::wire::jsonrpc::RpcId;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

/// What the harness asks the server's application to do. Non-exhaustive: a
/// new dialect may add commands, and a plug ignores those it has no use for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AppCommand {
    /// Issue a server request on the session behind `token`. When
    /// `reissuable` is false, its effect is not idempotent: a resumption must
    /// fail it explicitly or be refused, never re-issue it.
    ServerRequest {
        /// The client whose session it goes to (for reports).
        client: String,
        /// The session token the client holds.
        token: String,
        /// The JSON-RPC method to issue.
        method: String,
        /// The scenario's label for it; reports name the request by it.
        label: String,
        /// Whether it may be re-issued under a fresh id.
        reissuable: bool,
    },
    /// Emit `count` notifications on the session behind `token`.
    Notify {
        /// The client whose session they go to (for reports).
        client: String,
        /// The session token the client holds.
        token: String,
        /// How many notifications.
        count: u64,
    },
    /// stateless-http: the server's tool list changed; tell every open
    /// `subscriptions/listen` stream that asked for it.
    ToolsChanged,
}

/// A reissuable request's `RequestIssued` event.
fn issued(
    session: Option<String>,
    client: &str,
    label: &str,
    method: &str,
    id: &RpcId,
    event_id: Option<String>,
) -> What {
    What::RequestIssued {
        client: client.into(),
        label: label.into(),
        method: method.into(),
        id: id.clone(),
        event_id,
        session,
        reissuable: true,
    }
}

/// How the application tells the harness what happened.
#[derive(Clone)]
pub struct AppReporter {
    recorder: Sink,
}

/// Where an application's reports go: the run's trace, or (under
/// `mcpsim serve`) the control connection to a live run.
#[derive(Clone)]
struct Sink(Rc<dyn Fn(What)>);

impl Sink {
    fn record(&self, what: What) {
        (self.0)(what)
    }
}

impl AppReporter {
    pub(crate) fn new(recorder: Recorder) -> Self {
        Self { recorder: Sink(Rc::new(move |w| recorder.record(w))) }
    }

    /// The reporter of replica `n` (from 1) of a deployment: what it
    /// reports names the replica.
    pub(crate) fn for_replica(recorder: Recorder, n: u32) -> Self {
        Self {
            recorder: Sink(Rc::new(move |mut w: What| {
                w.set_replica(n);
                recorder.record(w)
            })),
        }
    }

    /// A reporter that hands each report to `sink` (a live server forwards
    /// them over its control connection).
    pub fn forwarding(sink: impl Fn(What) + 'static) -> Self {
        Self { recorder: Sink(Rc::new(sink)) }
    }

    /// Records `what` as this application's report (a live run's control
    /// connection hands over what its process reported).
    pub(crate) fn record(&self, what: What) {
        self.recorder.record(what)
    }

    /// A reporter whose records go nowhere: for driving a plug by hand, outside a run.
    pub fn detached() -> Self {
        Self::new(Recorder::new())
    }

    /// Reports a server request issued on `client`'s session under JSON-RPC id
    /// `id`, sent as SSE event `event_id` if the server exposes it.
    pub fn issued(&self, client: &str, label: &str, method: &str, id: &RpcId, event_id: Option<String>) {
        self.recorder.record(issued(None, client, label, method, id, event_id));
    }

    /// Like [`AppReporter::issued`], naming the session (token) it was issued
    /// on: JSON-RPC ids are unique only within a session, so this lets the
    /// checks tell requests of a client's successive sessions apart exactly.
    pub fn issued_on(
        &self,
        token: &str,
        client: &str,
        label: &str,
        method: &str,
        id: &RpcId,
        event_id: Option<String>,
    ) {
        self.recorder.record(issued(Some(token.into()), client, label, method, id, event_id));
    }

    /// Like [`AppReporter::issued_on`], for a request the application marked
    /// not reissuable (a `server-request` step with `reissuable = false`): a
    /// resumption must fail it explicitly or be refused, never re-issue it.
    pub fn issued_not_reissuable_on(
        &self,
        token: &str,
        client: &str,
        label: &str,
        method: &str,
        id: &RpcId,
        event_id: Option<String>,
    ) {
        let mut what = issued(Some(token.into()), client, label, method, id, event_id);
        if let What::RequestIssued { reissuable, .. } = &mut what {
            *reissuable = false;
        }
        self.recorder.record(what);
    }

    /// Reports what became of the request `label` (under id `id`); `new_id`
    /// is the fresh id of a re-issue, `detail` the words for the report.
    pub fn outcome(&self, label: &str, id: &RpcId, outcome: Outcome, new_id: Option<RpcId>, detail: impl Into<String>) {
        self.recorder.record(What::RequestOutcome {
            label: label.into(),
            id: id.clone(),
            outcome,
            new_id,
            detail: detail.into(),
        });
    }

    /// Notifications emitted on `client`'s session, on its standalone GET
    /// stream (their event ids, if the server exposes them). Reporting the
    /// ids lets `replay-integrity` see a replay skip events that never
    /// reached a socket (logged while the stream had no writer).
    pub fn notified(&self, client: &str, event_ids: Vec<String>) {
        self.recorder.record(What::Notified {
            client: client.into(),
            event_ids,
            session: None,
            stream: None,
            replica: None,
        });
    }

    /// Like [`AppReporter::notified`], naming the session (token) they were emitted on.
    pub fn notified_on(&self, token: &str, client: &str, event_ids: Vec<String>) {
        self.notified_on_stream(token, client, event_ids, None);
    }

    /// Like [`AppReporter::notified_on`], for ids minted on a stream other
    /// than the session's standalone one (`stream`: the server's name for it).
    pub fn notified_on_stream(&self, token: &str, client: &str, event_ids: Vec<String>, stream: Option<String>) {
        self.recorder.record(What::Notified {
            client: client.into(),
            event_ids,
            session: Some(token.into()),
            stream,
            replica: None,
        });
    }

    /// Reports that the application could not act for `client` (no such session, say).
    pub fn error(&self, client: &str, error: impl Into<String>) {
        self.recorder.record(What::AppError { client: client.into(), error: error.into() });
    }

    /// An explanation from inside the server; never decides a verdict.
    pub fn note(&self, session: &str, note: impl Into<String>) {
        self.recorder.record(What::ServerNote {
            session: session.into(),
            note: note.into(),
            explanation: true,
            replica: None,
        });
    }

    // ---- stateless-http (MCP 2026-07-28) ----

    /// Reports one step of tool execution `exec` (the server's own number),
    /// which serves request `id` (call `run.call`) from `run.principal`.
    pub fn execution(&self, exec: u32, run: &ExecutionOf, step: crate::trace::stateless::ExecStep) {
        self.recorder.record(What::Execution {
            exec,
            tool: run.tool.clone(),
            call: run.call.clone(),
            id: run.id.clone(),
            principal: run.principal.clone(),
            on_behalf_of: run.on_behalf_of.clone(),
            inputs: if step == crate::trace::stateless::ExecStep::Started {
                crate::wire::mrtr::reads(&run.inputs)
            } else {
                Vec::new()
            },
            step,
            replica: None,
        });
    }

    /// Reports that the tool list changed (the `n`th time) and how many open
    /// listen streams the application sent `notifications/tools/list_changed` to.
    pub fn tools_changed(&self, n: u32, streams: usize) {
        self.recorder.record(What::ToolsChanged { n, streams });
    }

    /// Reports a `requestState` minted for `principal` in answer to request
    /// `id` (call `call`); `state` is its text (the trace keeps a fingerprint).
    pub fn state_minted(
        &self,
        call: &str,
        id: &RpcId,
        principal: &str,
        state: &str,
        lifetime: Option<std::time::Duration>,
        once: bool,
    ) {
        self.recorder.record(What::StateMinted {
            call: call.into(),
            id: id.clone(),
            principal: principal.into(),
            fp: crate::wire::mrtr::fingerprint(state),
            lifetime_us: lifetime.map(|l| l.as_micros() as u64),
            once,
            replica: None,
        });
    }

    /// Reports what the application decided about the `requestState` that
    /// request `id` (call `call`, from `principal`) presented.
    pub fn state_checked(
        &self,
        call: &str,
        id: &RpcId,
        principal: &str,
        state: &str,
        verdict: crate::trace::stateless::StateVerdict,
    ) {
        self.recorder.record(What::StateChecked {
            call: call.into(),
            id: id.clone(),
            principal: principal.into(),
            fp: crate::wire::mrtr::fingerprint(state),
            verdict,
            replica: None,
        });
    }
}

/// What a tool execution serves: reported with each of its steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutionOf {
    /// The tool.
    pub tool: String,
    /// The request's `call` argument.
    pub call: String,
    /// The request's JSON-RPC id.
    pub id: RpcId,
    /// The principal whose credential the request presented.
    pub principal: String,
    /// The principal its `requestState` was minted for, if it continues one.
    pub on_behalf_of: Option<String>,
    /// The input responses the tool acts on: each key it read, and the
    /// value it found there (reported with its start).
    pub inputs: Vec<(String, serde_json::Value)>,
}

/// The hook a plug-in's application receives.
#[derive(Clone)]
pub struct AppHook {
    /// The commands the harness pushes, at their due times.
    pub commands: Inbox<AppCommand>,
    /// Where the application reports what it did.
    pub report: AppReporter,
    /// The store the server keeps durable state in: its own (it outlives a
    /// restart), or, in a deployment with a shared store, the one every
    /// replica reaches over the network (docs/replicas.md).
    pub store: Rc<dyn crate::store::Store>,
    /// Whether `store` is shared with other replicas (a deployment's shared
    /// store): the reference engine then keeps its sessions there too, so
    /// that any replica can serve them.
    pub shared_store: bool,
    /// Real seconds per scenario second for the timings a scenario does not
    /// set (the shared store's lease and poll): 1 in simulation; live, the
    /// run's `--time-scale`, which every scenario timing already carries.
    pub time_scale: f64,
}

impl AppHook {
    /// A hook with its own in-process store.
    pub fn new(commands: Inbox<AppCommand>, report: AppReporter) -> Self {
        Self {
            commands,
            report,
            store: Rc::new(crate::store::MemoryStore::default()),
            shared_store: false,
            time_scale: 1.0,
        }
    }

    /// The hook of a process that runs `scale` real seconds per scenario second.
    pub fn with_time_scale(mut self, scale: f64) -> Self {
        self.time_scale = scale;
        self
    }

    /// The hook of a replica that shares `store` with the others.
    pub fn with_shared_store(mut self, store: Rc<dyn crate::store::Store>) -> Self {
        self.store = store;
        self.shared_store = true;
        self
    }
}

/// A server under test.
///
/// Implement it for your own server: serve HTTP on the simulated listener
/// (hyper over `hyper_util::rt::TokioIo` works as on a real socket), take
/// application commands from `app.commands`, report outcomes through
/// `app.report`. `examples/own_server.rs` is a whole hyper MCP server.
///
/// ```
/// use mcpsim::server::{AppHook, ServerPlug};
/// use std::{future::Future, pin::Pin, rc::Rc};
///
/// /// Accepts connections and never answers: clients see no headers.
/// struct Mute;
///
/// impl ServerPlug for Mute {
///     fn name(&self) -> &str {
///         "mute"
///     }
///     fn serve(&self, listener: mcpsim::net::Listener, _app: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
///         Box::pin(async move {
///             let mut held = Vec::new();
///             while let Ok((stream, _)) = listener.accept().await {
///                 held.push(stream);
///             }
///         })
///     }
/// }
///
/// let plan = mcpsim::scenario::Plan::from_toml_str(r#"
/// [scenario]
/// name = "mute"
/// duration = "60s"
/// [[client]]
/// name = "alice"
/// [[step]]
/// at = "0s"
/// do = "connect"
/// client = "alice"
/// "#, "mute.toml").unwrap();
/// let run = mcpsim::run_with(&plan, Rc::new(Mute), plan.seed).unwrap();
/// let verdicts = mcpsim::check::judge(&run.trace);
/// assert_eq!(mcpsim::check::violated(&verdicts), ["protocol"]);
/// ```
pub trait ServerPlug {
    /// The server's name in reports and traces. A plug is not a `--server`
    /// value: only the built-in servers are (a plug's repro line says to run
    /// it through `run_with`).
    fn name(&self) -> &str;

    /// Serves HTTP on `listener` until the host stops, taking application
    /// commands from `app`. Called again each time the server host restarts.
    fn serve(&self, listener: crate::net::Listener, app: AppHook) -> Pin<Box<dyn Future<Output = ()>>>;

    /// Whether every timer the server sets goes through mcpsim's clock, so
    /// that a simulation may end once nothing can change its trace. Only
    /// the built-in servers can say yes.
    #[doc(hidden)]
    fn quiet_timers(&self) -> bool {
        false
    }

    /// How many event ids per stream the server may mint without reporting
    /// them (through [`AppReporter::notified`] and [`AppReporter::issued`])
    /// where no socket shows them either. Zero (the default) when it reports
    /// every id no socket carried; otherwise no check reads up to this many
    /// ids per stream that nobody saw as ids the server never minted.
    fn unreported_per_stream(&self) -> u32 {
        0
    }

    /// What the server promises a resumption, when it says: `None` (the
    /// default) leaves refusals of non-empty windows, and refusals while a
    /// prior writer is half-open, unjudged.
    fn resume_bounds(&self) -> Option<ResumeBounds> {
        None
    }
}

/// What a server promises a resumption (its configuration, declared in the
/// run's header so that the checks can tell a valid window from an evicted
/// one, and a refusal that waited for a fence from one that did not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumeBounds {
    /// Events per session kept for replay (the newest ones).
    pub retention: u64,
    /// How long a resumption waits for its prior writer to be fenced.
    pub fence_grace: std::time::Duration,
}
