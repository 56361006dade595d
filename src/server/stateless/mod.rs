//! The reference server for `stateless-http` (MCP 2026-07-28): every
//! request is its own POST; a tool that needs input answers with an
//! `InputRequiredResult` carrying `requestState`, and the client's retry
//! (a new request, a new id) brings the state back; a tool's response is
//! JSON, or an SSE stream of progress then the result, scoped to that one
//! request. Closing that stream is the cancellation.
//!
//! What the server checks is its [`StatelessPolicy`]: `naive` checks
//! nothing, `guarded` everything the specification asks, and each mutant
//! leaves one thing out. The application reports every execution, its side
//! effect, its cancellation and completion, and every state it mints and
//! checks (`AppReporter`), so the checks judge from the trace alone.

mod state;

use super::http::{credential, full, sse_response, Body};
use super::plug::{AppCommand, AppHook, ExecutionOf, ServerPlug};
use crate::scenario::{ServerConfig, ToolSpec};
use crate::seed::Seed;
use crate::trace::stateless::{ExecStep, StateVerdict};
use crate::wire::body::ChannelBody;
use crate::wire::jsonrpc::{params_digest, Message, RpcId};
use crate::wire::{mrtr, sse};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use state::{Codec, Payload};
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

/// What a stateless reference server checks and does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatelessPolicy {
    /// Its name (`--server`).
    pub name: &'static str,
    /// One line on what it does.
    pub description: &'static str,
    /// Seals `requestState` with HMAC-SHA-256 under a per-process key.
    pub seal: bool,
    /// Refuses state presented by another principal than the one it was minted for.
    pub bind_principal: bool,
    /// Refuses state presented on another tool or other arguments.
    pub bind_request: bool,
    /// Refuses state past `[server] state_lifetime`.
    pub expiry: bool,
    /// Keeps a single-use registry for `once` tools.
    pub single_use: bool,
    /// Keeps that registry in the store (which outlives a restart and, in a
    /// deployment with a shared store, every replica reaches); when false,
    /// in the process's memory.
    pub registry_in_store: bool,
    /// Stops an execution when the close of its response stream reaches it.
    pub cancel_on_close: bool,
    /// Seals with a configured key that survives a restart; when false, with
    /// a key drawn at each start (the Python SDK's default), so a restart
    /// makes every outstanding state unreadable.
    pub durable_key: bool,
    /// A principal's new `subscriptions/listen` replaces its open one; when
    /// false, it is refused with 409 while the old one looks open (a
    /// half-open one does for minutes: the 2025 SDKs' lock-out).
    pub listen_replaces: bool,
    /// One deliberate bug no built-in server has, for test mutants (none:
    /// the policy's own behaviour).
    pub flaw: Option<Flaw>,
}

/// A deliberate bug a test mutant of the stateless server carries: each
/// one escaped the checks once (issue "Bugs that escape").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flaw {
    /// On a close it reports the execution cancelled, then does its side
    /// effect and completes anyway, a moment later.
    CommitsAfterCancel,
    /// Answers `input_required` again to every retry whose state it accepted.
    AsksForever,
    /// Marks a one-time state used only after the execution's side effect,
    /// not when it accepts it: a second redemption while the first runs passes.
    MarksUsedLate,
    /// Reads each of a two-input tool's answers under the other's key.
    SwapsAnswers,
    /// Runs the tool when an elicitation it asked was declined, as if accepted.
    IgnoresDecline,
    /// Answers the first round `input_required` with a `requestState` and no
    /// `inputRequests`, then runs the tool on the retry, which answered nothing.
    StateWithoutInputs,
    /// Answers the first round `input_required` with neither
    /// `inputRequests` nor `requestState`: nothing a client can answer.
    BareInputRequired,
}

const ALL_CHECKS: StatelessPolicy = StatelessPolicy {
    name: "guarded",
    description:
        "sealed state bound to principal, request and lifetime; one-time states redeemed once; a closed stream cancels",
    seal: true,
    bind_principal: true,
    bind_request: true,
    expiry: true,
    single_use: true,
    registry_in_store: true,
    cancel_on_close: true,
    durable_key: true,
    listen_replaces: true,
    flaw: None,
};

/// The built-in stateless servers: naive, guarded, then guarded's one-bug mutants.
pub const POLICIES: &[StatelessPolicy] = &[
    StatelessPolicy {
        name: "naive",
        description:
            "plain JSON state, believed as sent; no single-use registry; a closed stream does not stop the work; one listen stream per principal (409 for the next)",
        seal: false,
        bind_principal: false,
        bind_request: false,
        expiry: false,
        single_use: false,
        registry_in_store: false,
        cancel_on_close: false,
        durable_key: true,
        listen_replaces: false,
        flaw: None,
    },
    ALL_CHECKS,
    StatelessPolicy {
        name: "unbound-state",
        description: "guarded, but state is not bound to the principal it was minted for",
        bind_principal: false,
        ..ALL_CHECKS
    },
    StatelessPolicy {
        name: "unsealed-state",
        description: "guarded, but state carries no integrity tag (its fields are still checked)",
        seal: false,
        ..ALL_CHECKS
    },
    StatelessPolicy {
        name: "reusable-state",
        description: "guarded, but a one-time state can be redeemed again",
        single_use: false,
        ..ALL_CHECKS
    },
    StatelessPolicy {
        name: "uncancelled",
        description: "guarded, but a closed response stream does not stop the execution",
        cancel_on_close: false,
        ..ALL_CHECKS
    },
    StatelessPolicy {
        name: "ephemeral-key",
        description:
            "guarded, but seals state with a key drawn at each start: after a restart no outstanding state opens",
        durable_key: false,
        ..ALL_CHECKS
    },
    StatelessPolicy {
        name: "local-once",
        description:
            "guarded, but keeps its single-use registry in the process's memory: a restart forgets it, another replica never sees it",
        registry_in_store: false,
        ..ALL_CHECKS
    },
];

/// A stateless reference server: a policy, the scenario's tools and `[server]`.
pub struct StatelessServer {
    policy: StatelessPolicy,
    cfg: ServerConfig,
    tools: Vec<ToolSpec>,
    seed: Seed,
    /// Which life of the process this is (a restart draws a new per-process key).
    lives: Cell<u32>,
    /// The application's numbering, which outlives a restart (and is one
    /// sequence across replicas, so that the trace names each execution
    /// once). The single-use registry is in the store (`AppHook::store`).
    durable: Rc<Durable>,
}

/// The numbering a restart does not reset.
#[derive(Default)]
struct Durable {
    /// Executions numbered from 1, across lives.
    execs: Cell<u32>,
    /// Tool-list changes numbered from 1, across lives.
    changes: Cell<u32>,
}

/// An open `subscriptions/listen` stream.
struct Listening {
    principal: String,
    /// The listen request's id: the subscription's id.
    id: RpcId,
    tx: tokio::sync::mpsc::UnboundedSender<Bytes>,
}

impl StatelessServer {
    /// The server `policy`, offering `tools`; its keys and nonces are drawn from `seed`.
    pub fn new(policy: StatelessPolicy, cfg: ServerConfig, tools: Vec<ToolSpec>, seed: Seed) -> Self {
        Self { policy, cfg, tools, seed, lives: Cell::new(0), durable: Rc::new(Durable::default()) }
    }

    /// The server as a process that starts in its `life`th life (1: a fresh
    /// one; `mcpsim serve` restarted by a live run counts on).
    pub fn in_life(self, life: u32) -> Self {
        self.lives.set(life.saturating_sub(1));
        self
    }
}

/// One process's memory.
struct Shared {
    policy: StatelessPolicy,
    cfg: ServerConfig,
    tools: Vec<ToolSpec>,
    app: AppHook,
    codec: Codec,
    rng: RefCell<ChaCha8Rng>,
    durable: Rc<Durable>,
    /// This process's open listen streams.
    listens: RefCell<Vec<Listening>>,
    /// Nonces of one-time states this process redeemed (`local-once`: its
    /// registry; the others keep it in `app.store`).
    redeemed_here: RefCell<BTreeSet<String>>,
}

impl ServerPlug for StatelessServer {
    fn name(&self) -> &str {
        self.policy.name
    }

    fn quiet_timers(&self) -> bool {
        true
    }

    fn serve(&self, listener: crate::net::Listener, app: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
        let life = self.lives.get() + 1;
        self.lives.set(life);
        let mut rng = self.seed.stream(&format!("server.stateless.{life}"));
        // A configured key is the same in every life; a per-process one is drawn anew.
        let mut key = [0u8; 32];
        if self.policy.durable_key {
            self.seed.stream("server.stateless.key").fill_bytes(&mut key);
        } else {
            rng.fill_bytes(&mut key);
        }
        let shared = Rc::new(Shared {
            policy: self.policy,
            cfg: self.cfg.clone(),
            tools: self.tools.clone(),
            app,
            codec: Codec::new(self.policy.seal.then_some(key)),
            rng: RefCell::new(rng),
            durable: self.durable.clone(),
            listens: RefCell::new(Vec::new()),
            redeemed_here: RefCell::new(BTreeSet::new()),
        });
        tokio::task::spawn_local(app_loop(shared.clone()));
        Box::pin(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else { continue };
                let shared = shared.clone();
                let svc = hyper::service::service_fn(move |req| {
                    let shared = shared.clone();
                    async move { Ok::<_, Infallible>(handle(shared, req, peer).await) }
                });
                tokio::task::spawn_local(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(crate::clock::HyperTimer)
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        })
    }
}

/// A JSON-RPC message as a JSON response with `status`.
fn json(status: StatusCode, msg: &Message) -> Response<Body> {
    full(status, msg.to_json())
}

fn error(status: StatusCode, id: Option<RpcId>, code: i64, message: impl Into<String>) -> Response<Body> {
    json(status, &Message::Error { id, code, message: message.into() })
}

/// The value of header `name`, if it is there and readable.
fn header<'a>(req: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

async fn handle(shared: Rc<Shared>, req: Request<Incoming>, peer: std::net::SocketAddr) -> Response<Body> {
    if req.uri().path() != mrtr::ENDPOINT {
        return error(StatusCode::NOT_FOUND, None, -32601, "no such endpoint");
    }
    if req.method() != hyper::Method::POST {
        // "SHOULD answer GET/DELETE with 405": no sessions, no standalone stream.
        let mut r = error(StatusCode::METHOD_NOT_ALLOWED, None, -32600, "only POST");
        r.headers_mut().insert("allow", "POST".parse().unwrap());
        return r;
    }
    let principal = credential(&req);
    let version = header(&req, "mcp-protocol-version").map(str::to_string);
    let h_method = header(&req, "mcp-method").map(str::to_string);
    let h_name = header(&req, "mcp-name").map(str::to_string);
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(StatusCode::BAD_REQUEST, None, -32700, "unreadable body"),
    };
    let msg = match std::str::from_utf8(&body)
        .map_err(|e| e.to_string())
        .and_then(|t| Message::parse(t).map_err(|e| e.to_string()))
    {
        Ok(m) => m,
        Err(e) => return error(StatusCode::BAD_REQUEST, None, -32700, e),
    };
    let Message::Request { id, method, params } = msg else {
        // No client notification is defined over HTTP; a response has nothing to answer.
        let mut r = Response::new(http_body_util::Full::new(Bytes::new()).boxed());
        *r.status_mut() = StatusCode::ACCEPTED;
        return r;
    };
    // Headers must agree with the body (HeaderMismatch, 400).
    let meta_version = params.get("_meta").and_then(|m| m.get(mrtr::META_VERSION)).and_then(Value::as_str);
    let name = params.get("name").or_else(|| params.get("uri")).and_then(Value::as_str);
    let mismatch = if version.as_deref() != Some(mrtr::PROTOCOL_VERSION) {
        Some(format!("MCP-Protocol-Version {version:?} is not {:?}", mrtr::PROTOCOL_VERSION))
    } else if meta_version != version.as_deref() {
        Some(format!("_meta protocolVersion {meta_version:?} disagrees with the header {version:?}"))
    } else if h_method.as_deref() != Some(method.as_str()) {
        Some(format!("Mcp-Method {h_method:?} disagrees with method {method:?}"))
    } else if name.is_some() && h_name.as_deref() != name {
        Some(format!("Mcp-Name {h_name:?} disagrees with {name:?}"))
    } else {
        None
    };
    if let Some(why) = mismatch {
        return error(StatusCode::BAD_REQUEST, Some(id), mrtr::HEADER_MISMATCH, why);
    }
    match method.as_str() {
        "server/discover" => json(
            StatusCode::OK,
            &Message::Response {
                id,
                result: json!({
                    "resultType": "complete",
                    "supportedVersions": [mrtr::PROTOCOL_VERSION],
                    "capabilities": {"tools": {}},
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": shared.policy.name, "version": "mcpsim"}},
                }),
            },
        ),
        "tools/list" => {
            let tools: Vec<Value> = shared
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "inputSchema": {"type": "object"}, "annotations": {"idempotentHint": t.idempotent}}))
                .collect();
            json(StatusCode::OK, &Message::Response { id, result: json!({"resultType": "complete", "tools": tools}) })
        }
        "tools/call" => call(&shared, id, &principal, &params).await,
        "subscriptions/listen" => listen(&shared, id, &principal, peer),
        other => error(StatusCode::NOT_FOUND, Some(id), -32601, format!("method not found: {other}")),
    }
}

fn now_us() -> u64 {
    crate::clock::now().map_or(0, |d| d.as_micros() as u64)
}

/// `tools/call`: a first round that asks for input, a retry that brings
/// the state back, or a tool that runs at once.
async fn call(shared: &Rc<Shared>, id: RpcId, principal: &str, params: &Value) -> Response<Body> {
    let tool_name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let Some(tool) = shared.tools.iter().find(|t| t.name == tool_name).cloned() else {
        return error(StatusCode::OK, Some(id), mrtr::INVALID_PARAMS, format!("unknown tool {tool_name:?}"));
    };
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    let call = args.get(mrtr::CALL_ARG).and_then(Value::as_str).unwrap_or("").to_string();
    let digest = params_digest(&args);
    let report = &shared.app.report;
    let mut on_behalf_of = None;
    let mut nonce: Option<String> = None;
    let mut inputs = Vec::new();
    if !tool.input.is_empty() {
        let asks: Vec<(String, String)> =
            (0..tool.input.len()).map(|i| (mrtr::input_key(&tool.input, i), tool.input[i].clone())).collect();
        let flaw = shared.policy.flaw;
        let ask = |digest: String| {
            let nonce = format!("{:016x}", shared.rng.borrow_mut().next_u64());
            let lifetime = shared.cfg.state_lifetime.0;
            let payload = Payload {
                t: tool.name.clone(),
                a: digest,
                p: principal.to_string(),
                e: now_us() + lifetime.as_micros() as u64,
                n: nonce,
            };
            let st = shared.codec.seal(&payload);
            // The state says when it expires whether or not this policy enforces it.
            report.state_minted(&call, &id, principal, &st, Some(lifetime), tool.once);
            let words = format!("{} needs your confirmation", tool.name);
            let asked = if flaw == Some(Flaw::StateWithoutInputs) { &[][..] } else { &asks[..] };
            let st = if flaw == Some(Flaw::BareInputRequired) { None } else { Some(st.as_str()) };
            let asked = if st.is_none() { &[][..] } else { asked };
            json(StatusCode::OK, &mrtr::input_required(id.clone(), asked, &words, st))
        };
        let Some(presented) = params.get("requestState") else { return ask(digest) };
        let Value::String(st) = presented else {
            return error(
                StatusCode::OK,
                Some(id),
                mrtr::INVALID_PARAMS,
                format!("requestState must be a string, not {presented}"),
            );
        };
        // Each answer under its own key; none missing (the state is not
        // touched, so a one-time state is not spent on a retry that lacks one).
        let responses = params.get("inputResponses");
        let asked = if flaw == Some(Flaw::StateWithoutInputs) { &[][..] } else { &asks[..] };
        for (i, (key, _)) in asked.iter().enumerate() {
            // The swap reads the first answer under the second key and the second under the first.
            let from = match flaw {
                Some(Flaw::SwapsAnswers) if asked.len() == 2 => &asked[1 - i].0,
                _ => key,
            };
            match responses.and_then(|r| r.get(from)) {
                Some(v) => inputs.push((key.clone(), v.clone())),
                None => {
                    return error(
                        StatusCode::OK,
                        Some(id),
                        mrtr::INVALID_PARAMS,
                        format!("inputResponses has no answer under {key:?}"),
                    )
                }
            }
        }
        let verdict = check_state(shared, &tool, &digest, (&call, &id, principal), st).await;
        match verdict {
            Ok(_) if flaw == Some(Flaw::AsksForever) => {
                report.state_checked(&call, &id, principal, st, StateVerdict::Accepted);
                return ask(digest);
            }
            Ok(p) => {
                report.state_checked(&call, &id, principal, st, StateVerdict::Accepted);
                on_behalf_of = Some(p.p);
                nonce = Some(p.n);
            }
            Err(why) => {
                report.state_checked(&call, &id, principal, st, StateVerdict::Refused { why: why.clone() });
                return error(StatusCode::OK, Some(id), mrtr::INVALID_PARAMS, format!("invalid requestState: {why}"));
            }
        }
        // A declined confirmation: the tool does not run.
        if let Some((key, _)) = inputs.iter().find(|(_, v)| mrtr::declines(v)) {
            if flaw != Some(Flaw::IgnoresDecline) {
                return json(
                    StatusCode::OK,
                    &mrtr::complete_error(id, &format!("{} not run: {key} declined", tool.name)),
                );
            }
        }
    }
    let n = shared.durable.execs.get() + 1;
    shared.durable.execs.set(n);
    let run = ExecutionOf {
        tool: tool.name.clone(),
        call,
        id: id.clone(),
        principal: principal.to_string(),
        on_behalf_of,
        inputs,
    };
    report.execution(n, &run, ExecStep::Started);
    let data_of = run.on_behalf_of.clone().unwrap_or_else(|| principal.to_string());
    if tool.runs.is_zero() {
        report.execution(n, &run, ExecStep::Effect);
        mark_used_late(shared, &tool, nonce.as_deref()).await;
        report.execution(n, &run, ExecStep::Completed);
        return json(StatusCode::OK, &mrtr::complete(id, &format!("{} done", tool.name), &data_of));
    }
    let (tx, body) = ChannelBody::new();
    let token = params.get("_meta").and_then(|m| m.get("progressToken")).and_then(Value::as_str).map(str::to_string);
    let shared = shared.clone();
    tokio::task::spawn_local(async move {
        let start = crate::clock::Stamp::now();
        let mut sent = 0u64;
        loop {
            let next =
                tool.progress_every.map(|p| p * (sent as u32 + 1)).filter(|t| *t < tool.runs).unwrap_or(tool.runs);
            let wait = next.saturating_sub(start.elapsed());
            // Biased: a close that arrived wins over a timer due at the same moment.
            let closed = tokio::select! {
                biased;
                _ = tx.closed(), if shared.policy.cancel_on_close => true,
                _ = crate::clock::sleep(wait) => false,
            };
            if closed {
                shared.app.report.execution(n, &run, ExecStep::Cancelled);
                if shared.policy.flaw == Some(Flaw::CommitsAfterCancel) {
                    crate::clock::sleep(std::time::Duration::from_millis(100)).await;
                    shared.app.report.execution(n, &run, ExecStep::Effect);
                    shared.app.report.execution(n, &run, ExecStep::Completed);
                }
                return;
            }
            if next >= tool.runs {
                break;
            }
            sent += 1;
            if let Some(t) = &token {
                // Into a dead socket, too: the server cannot tell.
                let _ = tx.send(Bytes::from(sse::encode(None, None, &mrtr::progress(t, sent).to_json())));
            }
        }
        shared.app.report.execution(n, &run, ExecStep::Effect);
        mark_used_late(&shared, &tool, nonce.as_deref()).await;
        let result = mrtr::complete(run.id.clone(), &format!("{} done", run.tool), &data_of);
        let _ = tx.send(Bytes::from(sse::encode(None, None, &result.to_json())));
        shared.app.report.execution(n, &run, ExecStep::Completed);
        let _ = tx.send(ChannelBody::END);
    });
    sse_response(body)
}

/// The application's commands: a tool-list change is told to every open
/// listen stream (a half-open one too: the server cannot tell).
async fn app_loop(shared: Rc<Shared>) {
    loop {
        match shared.app.commands.recv().await {
            AppCommand::ToolsChanged => {
                let n = shared.durable.changes.get() + 1;
                shared.durable.changes.set(n);
                let mut ls = shared.listens.borrow_mut();
                ls.retain(|l| !l.tx.is_closed());
                let mut told = 0;
                for l in ls.iter() {
                    let msg = mrtr::on_listen(mrtr::TOOLS_CHANGED, &l.id);
                    if l.tx.send(Bytes::from(sse::encode(None, None, &msg.to_json()))).is_ok() {
                        told += 1;
                    }
                }
                shared.app.report.tools_changed(n, told);
            }
            AppCommand::ServerRequest { client, .. } | AppCommand::Notify { client, .. } => {
                shared.app.report.error(&client, "stateless-http has no sessions to issue on or notify");
            }
        }
    }
}

/// `subscriptions/listen`: an SSE stream that stays open, acknowledged
/// first, with keep-alive comments, told of every tool-list change.
fn listen(shared: &Rc<Shared>, id: RpcId, principal: &str, peer: std::net::SocketAddr) -> Response<Body> {
    let mut ls = shared.listens.borrow_mut();
    ls.retain(|l| !l.tx.is_closed());
    if let Some(pos) = ls.iter().position(|l| l.principal == principal) {
        if !shared.policy.listen_replaces {
            return error(StatusCode::CONFLICT, Some(id), -32600, "a listen stream is already open for this principal");
        }
        // Replaced: the old stream gets its listen result, then ends.
        let old = ls.remove(pos);
        let done = Message::Response {
            id: old.id.clone(),
            result: json!({"resultType": "complete", "_meta": {mrtr::META_SUBSCRIPTION: old.id}}),
        };
        let _ = old.tx.send(Bytes::from(sse::encode(None, None, &done.to_json())));
        let _ = old.tx.send(ChannelBody::END);
    }
    let (tx, body) = ChannelBody::new();
    let ack = mrtr::on_listen(mrtr::ACKNOWLEDGED, &id);
    let _ = tx.send(Bytes::from(sse::encode(None, None, &ack.to_json())));
    let (hb, every) = (tx.clone(), shared.cfg.heartbeat.0);
    // A beat keeps a healthy stream healthy: it does not keep a simulation running (crate::quiet).
    let beat = crate::quiet::Kind::KeepAlive { peer, every };
    tokio::task::spawn_local(async move {
        loop {
            crate::clock::sleep_as(every, beat.clone()).await;
            if hb.send(Bytes::from_static(b": keep-alive\n\n")).is_err() {
                break;
            }
        }
    });
    ls.push(Listening { principal: principal.to_string(), id, tx });
    sse_response(body)
}

/// Opens and checks a presented state under the policy: the payload, or why it is refused.
/// `who`: the call, request id and principal of the request that presents it.
/// The single-use registry's key for a state's nonce.
fn once_key(nonce: &str) -> String {
    format!("mcpsim:once:{nonce}")
}

/// [`Flaw::MarksUsedLate`]: the one-time state marked used after its effect.
async fn mark_used_late(shared: &Shared, tool: &ToolSpec, nonce: Option<&str>) {
    if let (true, Some(Flaw::MarksUsedLate), Some(n)) = (tool.once, shared.policy.flaw, nonce) {
        let _ = shared.app.store.set_nx(&once_key(n), "redeemed", None).await;
    }
}

async fn check_state(
    shared: &Shared,
    tool: &ToolSpec,
    digest: &str,
    who: (&str, &RpcId, &str),
    st: &str,
) -> Result<Payload, String> {
    let (call, id, principal) = who;
    let p = shared.codec.open(st)?;
    let pol = &shared.policy;
    if pol.bind_request && (p.t != tool.name || p.a != digest) {
        return Err(format!("it was minted for another request ({} with other arguments)", p.t));
    }
    // A server that does not authenticate has no principal to bind to: the
    // name in `Authorization` is self-asserted, and binds nothing.
    if pol.bind_principal && shared.cfg.authenticate && p.p != principal {
        return Err(format!("it was minted for {}, not {principal}", p.p));
    }
    if pol.expiry && now_us() > p.e {
        return Err("it has expired".into());
    }
    if tool.once && pol.single_use && pol.flaw == Some(Flaw::MarksUsedLate) {
        // Looked up now, marked only after the effect (`mark_used_late`).
        let used = shared.app.store.get(&once_key(&p.n)).await;
        return match used {
            Ok(None) => Ok(p),
            Ok(Some(_)) => Err("this one-time state was already redeemed".into()),
            Err(e) => Err(format!("the single-use registry could not be consulted ({e})")),
        };
    }
    if tool.once && pol.single_use {
        let first = if pol.registry_in_store {
            // Kept while the state could still be presented.
            let ttl = pol.expiry.then(|| std::time::Duration::from_micros(p.e.saturating_sub(now_us()) + 1_000_000));
            // The redemption runs to its end in a task of its own: if the
            // request goes away while the store answers (its client closed
            // it), a redemption the store recorded is still reported, so
            // that no state is spent unseen; so is one whose answer never
            // came (a partition lost it): the store may have recorded it,
            // and this server refuses what it cannot confirm.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (store, key) = (shared.app.store.clone(), once_key(&p.n));
            let (report, who) = (shared.app.report.clone(), (call.to_string(), id.clone(), principal.to_string()));
            let state = st.to_string();
            tokio::task::spawn_local(async move {
                let r = store.set_nx(&key, "redeemed", ttl).await;
                let verdict = match &r {
                    Ok(true) => Some(StateVerdict::Accepted),
                    Ok(false) => None,
                    Err(e) => Some(StateVerdict::Refused {
                        why: format!(
                            "the single-use registry could not be consulted ({e}) after the request had gone away: the store may have recorded the redemption"
                        ),
                    }),
                };
                if let (Err(_), Some(verdict)) = (tx.send(r), verdict) {
                    report.state_checked(&who.0, &who.1, &who.2, &state, verdict);
                }
            });
            match rx.await {
                Ok(Ok(first)) => first,
                // Fail closed: better a refused call than a second redemption.
                Ok(Err(e)) => return Err(format!("the single-use registry could not be consulted ({e})")),
                Err(_) => return Err("the single-use registry stopped".into()),
            }
        } else {
            shared.redeemed_here.borrow_mut().insert(p.n.clone())
        };
        if !first {
            return Err("this one-time state was already redeemed".into());
        }
    }
    Ok(p)
}
