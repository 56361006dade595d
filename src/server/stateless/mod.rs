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

mod call;
mod state;

use super::http::{credential, full, sse_response, Body};
use super::plug::{AppCommand, AppHook, ServerPlug};
use crate::scenario::{ServerConfig, ToolSpec};
use crate::seed::Seed;
use crate::wire::body::ChannelBody;
use crate::wire::jsonrpc::{Message, RpcId};
use crate::wire::{mrtr, sse};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use state::Codec;
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
        "tools/call" => call::call(&shared, id, &principal, &params).await,
        "subscriptions/listen" => listen(&shared, id, &principal, peer),
        other => error(StatusCode::NOT_FOUND, Some(id), -32601, format!("method not found: {other}")),
    }
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
