//! `--server rmcp`: the official Rust MCP SDK's `StreamableHttpService`
//! (rmcp, pinned in Cargo.toml) served over the simulated listener.
//!
//! What is ours here is only the harness around it, never a verdict:
//! - a small application (`ask` tool) whose handler issues the server request
//!   a `call-tool` step names, through rmcp's request context, so rmcp routes
//!   it onto the tool call's POST response stream; standalone requests from
//!   `server-request` steps go through the session's `Peer`, which rmcp routes
//!   to the standalone GET stream;
//! - session ids drawn from the seed (rmcp mints random UUIDs): a
//!   `SessionManager` that wraps rmcp's `LocalSessionManager` and replaces
//!   only `create_session`;
//! - SSE keep-alive on the simulated clock: rmcp's own keep-alive re-arms with
//!   the wall clock, which under virtual time floods a stream with pings and
//!   breaks determinism, so it is off and `KeepAlive` pings after
//!   `[server] heartbeat` of silence instead;
//! - the Host allow-list opened to the simulated host name `server`, and to
//!   `127.0.0.1` for live runs (`mcpsim serve --server rmcp`).

#![allow(deprecated)] // roots and sampling are deprecated for protocol 2026-07-28; we speak 2025-11-25

use super::plug::{AppCommand, AppHook, AppReporter, ServerPlug};
use super::rmcp_tap::ClosedSends;
use crate::scenario::ServerConfig;
use crate::seed::Seed;
use crate::trace::Outcome;
use crate::wire::jsonrpc::{mcp, Message, RpcId};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage, ClientResult, ContentBlock,
    Implementation, InitializeResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ServerCapabilities, ServerInfo, ServerJsonRpcMessage, ServerRequest, Tool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, ServiceError};
use rmcp::transport::streamable_http_server::session::local::{
    create_local_session, LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService, WorkerTransport};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// The rmcp version under test (keep in step with Cargo.toml).
pub const RMCP_VERSION: &str = "3.11.0";

/// How many events rmcp keeps per stream for replay (its `channel_capacity`).
const STREAM_CAPACITY: usize = 16;
/// The reconnection delay rmcp's priming events announce.
const RETRY: Duration = Duration::from_secs(1);

/// The rmcp server plug-in.
pub struct Rmcp {
    cfg: ServerConfig,
    seed: Seed,
    /// How many processes it has served as (one per replica).
    serves: std::cell::Cell<u32>,
}

impl Rmcp {
    /// rmcp configured by `cfg`; its session ids are drawn from `seed`.
    pub fn new(cfg: ServerConfig, seed: Seed) -> Self {
        Self { cfg, seed, serves: std::cell::Cell::new(0) }
    }

    /// As the `life`th process of its server (from 1), as
    /// [`crate::server::engine::Engine::in_life`].
    pub(crate) fn in_life(self, life: u32) -> Self {
        self.serves.set(life.saturating_sub(1));
        self
    }
}

/// What the application reports from inside rmcp's (`Send`) tasks; a local
/// task turns these into trace records.
#[derive(Clone)]
enum Report {
    Issued {
        client: String,
        label: String,
        method: String,
        id: RpcId,
        session: Option<String>,
    },
    Outcome {
        label: String,
        id: RpcId,
        outcome: Outcome,
        detail: String,
    },
    Error {
        client: String,
        error: String,
    },
    /// An event id rmcp minted on a session into a stream no one reads ([`super::rmcp_tap`]).
    Minted {
        session: String,
        id: String,
    },
}

/// The client each session token belongs to, from the harness's commands.
type Clients = Arc<Mutex<BTreeMap<String, String>>>;

async fn pump(mut rx: mpsc::UnboundedReceiver<Report>, report: AppReporter, clients: Clients) {
    while let Some(first) = rx.recv().await {
        // rmcp fails its pending requests in its own (hash) order when a
        // transport closes; those outcomes all arrive in one turn. Let every
        // ready task report first, then record each run of outcomes sorted by
        // label, so that the trace does not depend on that order.
        tokio::task::yield_now().await;
        let mut batch = vec![first];
        while let Ok(r) = rx.try_recv() {
            batch.push(r);
        }
        for run in batch.chunk_by_mut(|a, b| matches!((a, b), (Report::Outcome { .. }, Report::Outcome { .. }))) {
            run.sort_by(|a, b| match (a, b) {
                (Report::Outcome { label: x, .. }, Report::Outcome { label: y, .. }) => x.cmp(y),
                _ => std::cmp::Ordering::Equal,
            });
        }
        // Ids minted in one turn on one session are one report.
        for run in batch.chunk_by(|a, b| match (a, b) {
            (Report::Minted { session: x, .. }, Report::Minted { session: y, .. }) => x == y,
            _ => false,
        }) {
            if let [Report::Minted { session, .. }, ..] = run {
                let ids =
                    run.iter().filter_map(|r| if let Report::Minted { id, .. } = r { Some(id.clone()) } else { None });
                let client = clients.lock().expect("clients lock").get(session).cloned();
                // A session no command named has no client to report for.
                // rmcp names a POST stream's events `index/stream`: those of
                // each such stream are reported as that stream's, never the
                // standalone stream's (a tool call's event is not owed there).
                if let Some(client) = client {
                    let mut by_stream: Vec<(Option<String>, Vec<String>)> = Vec::new();
                    for id in ids {
                        let stream = id.split_once('/').map(|(_, s)| s.to_string());
                        match by_stream.iter_mut().find(|(s, _)| *s == stream) {
                            Some((_, v)) => v.push(id),
                            None => by_stream.push((stream, vec![id])),
                        }
                    }
                    for (stream, ids) in by_stream {
                        report.notified_on_stream(session, &client, ids, stream);
                    }
                }
                continue;
            }
            for r in run.iter().cloned() {
                record(&report, r);
            }
        }
    }
}

/// Turns one report of the application into its trace record.
fn record(report: &AppReporter, r: Report) {
    match r {
        Report::Issued { client, label, method, id, session: Some(token) } => {
            report.issued_on(&token, &client, &label, &method, &id, None)
        }
        Report::Issued { client, label, method, id, session: None } => {
            report.issued(&client, &label, &method, &id, None)
        }
        Report::Outcome { label, id, outcome, detail } => report.outcome(&label, &id, outcome, None, detail),
        Report::Error { client, error } => report.error(&client, error),
        Report::Minted { .. } => unreachable!("pump reports mints in runs"),
    }
}

type Peers = Arc<Mutex<BTreeMap<String, Peer<RoleServer>>>>;

/// The application under the SDK: one tool, `ask`.
#[derive(Clone)]
struct App {
    peers: Peers,
    report: mpsc::UnboundedSender<Report>,
    timeout: Duration,
}

/// The SDK's typed server request for `method`, with our labelled content.
fn server_request(method: &str, label: &str, owner: &str) -> Result<ServerRequest, String> {
    let Message::Request { params, .. } = mcp::server_request(RpcId::Num(0), method, label, owner) else {
        unreachable!("server_request builds a request")
    };
    let mut params = params;
    if method == "elicitation/create" {
        params["mode"] = "form".into();
    }
    let v = if method == "roots/list" {
        serde_json::json!({"method": method})
    } else {
        serde_json::json!({"method": method, "params": params})
    };
    serde_json::from_value(v).map_err(|e| format!("rmcp cannot build {method}: {e}"))
}

/// Sends `req` on `peer`, reports it issued and then its outcome.
async fn issue(
    peer: Peer<RoleServer>,
    req: ServerRequest,
    (client, label, method, session): (String, String, String, Option<String>),
    timeout: Duration,
    report: mpsc::UnboundedSender<Report>,
) -> bool {
    let mut options = PeerRequestOptions::no_options();
    options.timeout = Some(timeout);
    let handle = match peer.send_request_with_option(req, options).await {
        Ok(h) => h,
        Err(e) => {
            let _ = report.send(Report::Error { client, error: format!("rmcp refused to send {label}: {e}") });
            return false;
        }
    };
    let id = super::rmcp_shared::rpc_id(&handle.id);
    let _ = report.send(Report::Issued { client, label: label.clone(), method, id: id.clone(), session });
    let (outcome, detail, ok) = match handle.await_response().await {
        Ok(ClientResult::EmptyResult(_)) | Ok(_) => (Outcome::Answered, "rmcp received the answer".to_string(), true),
        Err(ServiceError::Timeout { timeout }) => {
            (Outcome::TimedOut, format!("rmcp: no answer within {timeout:?}"), false)
        }
        Err(e) => (Outcome::Failed, format!("rmcp: {e}"), false),
    };
    let _ = report.send(Report::Outcome { label, id, outcome, detail });
    ok
}

impl ServerHandler for App {
    fn get_info(&self) -> ServerInfo {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("mcpsim-rmcp-app", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let serde_json::Value::Object(schema) = serde_json::json!({
            "type": "object",
            "properties": {"client": {"type": "string"}, "label": {"type": "string"}, "method": {"type": "string"}}
        }) else {
            unreachable!()
        };
        let serde_json::Value::Object(enable) = serde_json::json!({
            "type": "object",
            "properties": {"tool": {"type": "string"}}
        }) else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new(mcp::ASK_TOOL, "issues the named server request related to this call", schema),
            Tool::new(mcp::ENABLE_TOOL, "enables a tool: the session is told its tool list changed", enable),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arg = |k: &str| {
            request.arguments.as_ref().and_then(|a| a.get(k)).and_then(|v| v.as_str()).unwrap_or_default().to_string()
        };
        if request.name == mcp::ENABLE_TOOL {
            // The session is told on its own (standalone) stream, as an
            // application tells a session of a change outside any call.
            let session = context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|p| p.headers.get("mcp-session-id")?.to_str().ok().map(str::to_string));
            let peer = session.and_then(|s| self.peers.lock().expect("peers lock").get(&s).cloned());
            if let Some(peer) = peer {
                let _ = peer.notify_tool_list_changed().await;
            }
            return Ok(CallToolResult::success(vec![ContentBlock::text(format!("{} enabled", arg("tool")))]).into());
        }
        if request.name != mcp::ASK_TOOL {
            return Err(ErrorData::invalid_params("unknown tool", None));
        }
        let (client, label, method) = (arg("client"), arg("label"), arg("method"));
        let req = server_request(&method, &label, &client).map_err(|e| ErrorData::invalid_params(e, None))?;
        // Sent from inside the handler, so rmcp relates it to this call.
        // The call's session, from the HTTP request rmcp hands the handler.
        let session = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get("mcp-session-id")?.to_str().ok().map(str::to_string));
        let ok = issue(
            context.peer.clone(),
            req,
            (client, label.clone(), method, session),
            self.timeout,
            self.report.clone(),
        )
        .await;
        let text = if ok { format!("{label} answered") } else { format!("{label} was not answered") };
        let result = if ok {
            CallToolResult::success(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::error(vec![ContentBlock::text(text)])
        };
        Ok(result.into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let session = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(session) = session {
            self.peers.lock().expect("peers lock").insert(session, context.peer.clone());
        }
    }
}

/// rmcp's `LocalSessionManager` with session ids drawn from the seed.
struct SeededSessions {
    inner: LocalSessionManager,
    rng: Mutex<ChaCha8Rng>,
}

impl SeededSessions {
    fn next_id(&self) -> SessionId {
        let mut b = [0u8; 16];
        self.rng.lock().expect("rng lock").fill_bytes(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40; // shaped like the v4 UUIDs rmcp mints
        b[8] = (b[8] & 0x3f) | 0x80;
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]).into()
    }
}

impl SessionManager for SeededSessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let id = self.next_id();
        let (handle, worker) = create_local_session(id.clone(), self.inner.session_config.clone());
        self.inner.sessions.write().await.insert(id.clone(), handle);
        Ok((id, WorkerTransport::spawn(worker)))
    }
    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }
    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(id).await
    }
    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }
    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }
    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }
    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }
}

impl ServerPlug for Rmcp {
    fn name(&self) -> &str {
        "rmcp"
    }

    /// The tap reports the ids rmcp fails to send into a closed stream; ids
    /// still queued in a stream's channel (up to its capacity) when its
    /// socket went are neither sent nor logged.
    fn unreported_per_stream(&self) -> u32 {
        STREAM_CAPACITY as u32
    }

    fn serve(&self, listener: crate::net::Listener, app: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
        let mut config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(true)
            .with_sse_keep_alive(None)
            .with_sse_retry(Some(RETRY))
            .with_allowed_hosts(["server", "server:80", "127.0.0.1"]);
        config.json_response = false;
        let mut sessions = SessionConfig::default();
        sessions.sse_retry = Some(RETRY);
        sessions.channel_capacity = STREAM_CAPACITY;
        let mut inner = LocalSessionManager::default();
        inner.session_config = sessions;
        self.serves.set(self.serves.get() + 1);
        let rng = super::engine::token_stream(self.seed, self.serves.get());
        let manager = Arc::new(SeededSessions { inner, rng: Mutex::new(rng) });
        let peers: Peers = Arc::default();
        let (tx, rx) = mpsc::unbounded_channel();
        let handler = App { peers: peers.clone(), report: tx.clone(), timeout: self.cfg.request_timeout.0 };
        let service = StreamableHttpService::new(move || Ok(handler.clone()), manager, config);
        let heartbeat = self.cfg.heartbeat.0;
        let timeout = self.cfg.request_timeout.0;
        let clients: Clients = Arc::default();
        let tap = tx.clone();
        Box::pin(async move {
            // For the run (this future's life): the ids rmcp mints into closed streams.
            let _tap = tracing::subscriber::set_default(ClosedSends::new(move |(session, id)| {
                let _ = tap.send(Report::Minted { session, id });
            }));
            tokio::task::spawn_local(pump(rx, app.report.clone(), clients.clone()));
            tokio::task::spawn_local(commands(app, peers, clients, tx, timeout));
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let service = service.clone();
                tokio::task::spawn_local(async move {
                    let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                        let service = service.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(super::rmcp_shared::keep_alive(
                                service.handle(req).await,
                                heartbeat,
                            ))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(crate::clock::HyperTimer)
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        })
    }
}

/// Carries out the harness's application commands on rmcp's peers.
async fn commands(
    app: AppHook,
    peers: Peers,
    clients: Clients,
    report: mpsc::UnboundedSender<Report>,
    timeout: Duration,
) {
    loop {
        let cmd = app.commands.recv().await;
        let (client, token) = match &cmd {
            AppCommand::ServerRequest { client, token, .. } | AppCommand::Notify { client, token, .. } => {
                (client.clone(), token.clone())
            }
            AppCommand::ToolsChanged => {
                app.report.error("server", "rmcp runs stateful sessions here: no listen stream to tell");
                continue;
            }
        };
        clients.lock().expect("clients lock").insert(token.clone(), client.clone());
        let Some(peer) = peers.lock().expect("peers lock").get(&token).cloned() else {
            app.report.error(&client, format!("rmcp has no initialized session {token} for {client}"));
            continue;
        };
        match cmd {
            AppCommand::ServerRequest { client, method, label, token, .. } => {
                match server_request(&method, &label, &client) {
                    Ok(req) => {
                        let who = (client, label, method, Some(token));
                        tokio::task::spawn_local(issue(peer, req, who, timeout, report.clone()));
                    }
                    Err(e) => app.report.error(&client, e),
                }
            }
            AppCommand::Notify { client, count, token } => {
                for n in 0..count {
                    let param = LoggingMessageNotificationParam::new(
                        LoggingLevel::Info,
                        // Unique per session: rmcp numbers every session's
                        // events from 0, so the same text on two sessions
                        // would be the same event to confidentiality's
                        // "same id, same bytes" rule (a false leak).
                        serde_json::json!(format!("note {n} on session {token}")),
                    );
                    if let Err(e) = peer.notify_logging_message(param).await {
                        app.report.error(&client, format!("rmcp could not notify: {e}"));
                    }
                }
                app.report.notified_on(&token, &client, Vec::new());
            }
            AppCommand::ToolsChanged => {}
        }
    }
}
