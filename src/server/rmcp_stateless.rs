//! `--server rmcp` and `--server rmcp-unsealed` in `stateless-http`: the
//! official Rust MCP SDK (rmcp, pinned in Cargo.toml) serving MCP 2026-07-28
//! without sessions (`legacy_session_mode(false)`), over the simulated
//! listener.
//!
//! rmcp carries the protocol: headers and `_meta` checks, `server/discover`,
//! one serve loop per POST, JSON or SSE replies, the cancellation token a
//! closed response stream fires, and `subscriptions/listen`. What is ours is
//! the application an author writes on top, in the two ways rmcp's docs show
//! for `requestState`:
//! - `rmcp`: state sealed with rmcp's `RequestStateCodec` (HMAC-SHA-256),
//!   the principal, tool and argument digest bound as associated data, as
//!   the codec's module docs advise; a configured key (it survives a
//!   restart); a single-use registry for `once` tools, which the codec's
//!   docs leave to the server;
//! - `rmcp-unsealed`: the plain `InputRequiredResult::from_request_state`
//!   path with JSON the application reads back and checks field by field
//!   (tool, digest, principal, single use), but with no integrity.
//!
//! Neither declares a lifetime: the codec's only expiry (`SealOptions::ttl`)
//! reads the wall clock, which a simulated run cannot move and which would
//! make the state's text differ between runs. Both report `lifetime: None`,
//! so the checks judge no expiry for them, and say so.
//!
//! The tools honour rmcp's cancellation token (`RequestContext::ct`) as the
//! reference server honours a closed stream; a listen stream waits for its
//! token, and a tool-list change goes to every open listen stream. rmcp's
//! SSE keep-alive (on by default) re-arms with the wall clock, so it is off
//! and the stateful plug's `keep_alive` pings after `[server] heartbeat` of
//! silence on the simulated clock instead.

use super::plug::{AppCommand, AppHook, ExecutionOf, ServerPlug};
use crate::scenario::{ServerConfig, ToolSpec};
use crate::seed::Seed;
use crate::trace::stateless::{ExecStep, StateVerdict};
use crate::wire::jsonrpc::{params_digest, RpcId};
use crate::wire::mrtr;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, InitializeResult,
    InputRequest, InputRequests, InputRequiredResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, RequestStateCodec, SealOptions, ServerCapabilities,
    ServerConfig as Info, SubscriptionFilter, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, SubscriptionContext, SubscriptionSink};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// The names of the two plugs.
pub const NAMES: [&str; 2] = ["rmcp", "rmcp-unsealed"];

/// rmcp in stateless-http: `sealed` picks `RequestStateCodec` over the plain path.
pub struct RmcpStateless {
    sealed: bool,
    tools: Vec<ToolSpec>,
    seed: Seed,
    heartbeat: std::time::Duration,
    lives: Cell<u32>,
    durable: Arc<Durable>,
}

/// What outlives a restart: the execution numbering. (The single-use
/// registry is in the store, `AppHook::store`.)
#[derive(Default)]
struct Durable {
    execs: AtomicU32,
    changes: AtomicU32,
}

impl RmcpStateless {
    /// rmcp offering `tools`; `sealed`: the codec (`rmcp`), else the plain path (`rmcp-unsealed`).
    pub fn new(sealed: bool, cfg: &ServerConfig, tools: Vec<ToolSpec>, seed: Seed) -> Self {
        Self { sealed, tools, seed, heartbeat: cfg.heartbeat.0, lives: Cell::new(0), durable: Arc::default() }
    }

    /// The server as a process that starts in its `life`th life (1: a fresh one).
    pub fn in_life(self, life: u32) -> Self {
        self.lives.set(life.saturating_sub(1));
        self
    }
}

/// What the application's state says (its JSON; sealed or not).
#[derive(Serialize, Deserialize)]
struct Payload {
    /// The tool.
    t: String,
    /// The arguments' digest.
    a: String,
    /// The principal it was minted for.
    p: String,
    /// A nonce: what the single-use registry remembers.
    n: String,
}

/// A one-time state's nonce, to record as redeemed; the reply says whether
/// this was the first redemption.
struct Redeem {
    nonce: String,
    reply: tokio::sync::oneshot::Sender<Result<bool, String>>,
    /// What reports the redemption if the handler is gone by its answer
    /// (its client closed the request): a state the store recorded as
    /// redeemed is never spent unseen.
    orphan: Report,
}

/// Runs the single-use registry's commands on the store, from rmcp's
/// (`Send`) handlers to the (local) store.
async fn registry(
    mut rx: mpsc::UnboundedReceiver<Redeem>,
    store: Rc<dyn crate::store::Store>,
    report: mpsc::UnboundedSender<Report>,
) {
    while let Some(r) = rx.recv().await {
        let first = store.set_nx(&format!("mcpsim:once:{}", r.nonce), "redeemed", None).await;
        let recorded = first == Ok(true);
        if r.reply.send(first.map_err(|e| e.to_string())).is_err() && recorded {
            let _ = report.send(r.orphan);
        }
    }
}

/// What the application reports from inside rmcp's (`Send`) tasks; a local
/// task turns each into its trace record, in arrival order.
enum Report {
    Exec(u32, ExecutionOf, ExecStep),
    Minted { call: String, id: RpcId, principal: String, state: String, once: bool },
    Checked { call: String, id: RpcId, principal: String, state: String, verdict: StateVerdict },
    ToolsChanged(u32, usize),
}

#[derive(Clone)]
struct App {
    tools: Arc<[ToolSpec]>,
    codec: Option<Arc<RequestStateCodec>>,
    rng: Arc<Mutex<ChaCha8Rng>>,
    durable: Arc<Durable>,
    /// The single-use registry: the local task that reaches the store.
    redeem: mpsc::UnboundedSender<Redeem>,
    listens: Arc<Mutex<Vec<SubscriptionSink>>>,
    report: mpsc::UnboundedSender<Report>,
}

impl App {
    fn send(&self, r: Report) {
        let _ = self.report.send(r);
    }

    /// Mints the first round's state for `p`, as the variant does.
    fn mint(&self, p: &Payload, ad: &str) -> Result<String, ErrorData> {
        match &self.codec {
            Some(codec) => codec
                .seal_json_with(p, &SealOptions::new().associated_data(ad.as_bytes()))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
            None => serde_json::to_string(p).map_err(|e| ErrorData::internal_error(e.to_string(), None)),
        }
    }

    /// Opens and checks a presented state: its payload, or why it is refused.
    async fn open(
        &self,
        st: &str,
        tool: &ToolSpec,
        digest: &str,
        (call, id, principal): (&str, &RpcId, &str),
        ad: &str,
    ) -> Result<Payload, String> {
        let p: Payload = match &self.codec {
            Some(codec) => codec.open_json_with(st, ad.as_bytes()).map_err(|e| format!("rmcp's codec: {e}"))?,
            None => {
                let p: Payload = serde_json::from_str(st).map_err(|e| format!("not our state: {e}"))?;
                if p.t != tool.name || p.a != digest {
                    return Err(format!("it was minted for another request ({} with other arguments)", p.t));
                }
                if p.p != principal {
                    return Err(format!("it was minted for {}, not {principal}", p.p));
                }
                p
            }
        };
        if tool.once {
            let (reply, first) = tokio::sync::oneshot::channel();
            let gone = || "the single-use registry stopped".to_string();
            let orphan = Report::Checked {
                call: call.to_string(),
                id: id.clone(),
                principal: principal.to_string(),
                state: st.to_string(),
                verdict: StateVerdict::Accepted,
            };
            self.redeem.send(Redeem { nonce: p.n.clone(), reply, orphan }).map_err(|_| gone())?;
            match first.await.map_err(|_| gone())? {
                Ok(true) => {}
                Ok(false) => return Err("this one-time state was already redeemed".into()),
                Err(e) => return Err(format!("the single-use registry could not be consulted ({e})")),
            }
        }
        Ok(p)
    }

    /// A first round's answer: a state minted for `digest` (sealed with
    /// the additional data `ad`, when this server seals) and the inputs `asks` names.
    fn ask(
        &self,
        tool: &ToolSpec,
        asks: &[(String, String)],
        digest: String,
        (call, id, principal): (String, RpcId, String),
        ad: &str,
    ) -> Result<CallToolResponse, ErrorData> {
        let n = format!("{:016x}", self.rng.lock().expect("rng lock").next_u64());
        let p = Payload { t: tool.name.clone(), a: digest, p: principal.clone(), n };
        let st = self.mint(&p, ad)?;
        let reqs = input_requests(asks, &format!("{} needs your confirmation", tool.name))?;
        self.send(Report::Minted { call, id, principal, state: st.clone(), once: tool.once });
        let result = if self.codec.is_some() {
            InputRequiredResult::new(Some(reqs), Some(st))
        } else {
            let mut r = InputRequiredResult::from_request_state(st);
            r.input_requests = Some(reqs);
            r
        };
        Ok(result.into())
    }

    /// Runs `tool` for `run` (called by `principal`): progress while it
    /// runs, when asked for; stopped by a cancellation; then its effect and result.
    async fn execute(
        &self,
        tool: &ToolSpec,
        run: ExecutionOf,
        principal: String,
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let n = self.durable.execs.fetch_add(1, Ordering::Relaxed) + 1;
        self.send(Report::Exec(n, run.clone(), ExecStep::Started));
        let data_of = run.on_behalf_of.clone().unwrap_or(principal);
        let token = cx.meta.get_progress_token();
        let start = crate::clock::Stamp::now();
        let mut sent = 0u64;
        while !tool.runs.is_zero() {
            let next =
                tool.progress_every.map(|p| p * (sent as u32 + 1)).filter(|t| *t < tool.runs).unwrap_or(tool.runs);
            let wait = next.saturating_sub(start.elapsed());
            // Biased: a cancellation that arrived wins over a timer due at the same moment.
            let cancelled = tokio::select! {
                biased;
                _ = cx.ct.cancelled() => true,
                _ = crate::clock::sleep(wait) => false,
            };
            if cancelled {
                self.send(Report::Exec(n, run, ExecStep::Cancelled));
                return Err(ErrorData::internal_error("cancelled", None));
            }
            if next >= tool.runs {
                break;
            }
            sent += 1;
            if let Some(t) = &token {
                let _ = cx.peer.notify_progress(ProgressNotificationParam::new(t.clone(), sent as f64)).await;
            }
        }
        self.send(Report::Exec(n, run.clone(), ExecStep::Effect));
        let mut result = CallToolResult::success(vec![ContentBlock::text(format!("{} done", tool.name))]);
        result.structured_content = Some(json!({"for": data_of}));
        // rmcp sends the result once this returns: the nearest point to report it.
        self.send(Report::Exec(n, run, ExecStep::Completed));
        Ok(result.into())
    }
}

/// The principal a request's `Authorization: Bearer` names, from the HTTP
/// parts rmcp hands the handler (`anonymous` without one).
fn principal(cx: &RequestContext<RoleServer>) -> String {
    cx.extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.headers.get("authorization")?.to_str().ok()?.strip_prefix("Bearer ").map(str::to_string))
        .unwrap_or_else(|| "anonymous".into())
}

/// rmcp's typed input requests for the first round, built from the same
/// wire shape the reference server sends.
fn input_requests(asks: &[(String, String)], ask: &str) -> Result<InputRequests, ErrorData> {
    let msg = mrtr::input_required(RpcId::Num(0), asks, ask, None);
    let crate::wire::jsonrpc::Message::Response { result, .. } = msg else {
        unreachable!("input_required builds a response")
    };
    let reqs = result.get("inputRequests").cloned().unwrap_or(Value::Null);
    serde_json::from_value::<std::collections::BTreeMap<String, InputRequest>>(reqs)
        .map_err(|e| ErrorData::internal_error(format!("rmcp cannot build the input requests {asks:?}: {e}"), None))
}

impl ServerHandler for App {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[ProtocolVersion::V_2026_07_28])
    }

    fn get_info(&self) -> Info {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(Implementation::new("mcpsim-rmcp-stateless-app", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Value::Object(schema) = json!({"type": "object"}) else { unreachable!() };
        let tools = self
            .tools
            .iter()
            .map(|t| {
                Tool::new(t.name.clone(), "", schema.clone()).annotate(ToolAnnotations::new().idempotent(t.idempotent))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = self.tools.iter().find(|t| *t.name == *req.name).cloned() else {
            return Err(ErrorData::invalid_params(format!("unknown tool {:?}", req.name), None));
        };
        let principal = principal(&cx);
        let id = super::rmcp_shared::rpc_id(&cx.id);
        let args = req.arguments.clone().map(Value::Object).unwrap_or(Value::Null);
        let call = args.get(mrtr::CALL_ARG).and_then(Value::as_str).unwrap_or("").to_string();
        let digest = params_digest(&args);
        // The module docs' shape: "user:alice|tools/call:weather", plus the digest.
        let ad = format!("user:{principal}|tools/call:{}|{digest}", tool.name);
        let mut on_behalf_of = None;
        let mut inputs = Vec::new();
        if !tool.input.is_empty() {
            let asks: Vec<(String, String)> =
                (0..tool.input.len()).map(|i| (mrtr::input_key(&tool.input, i), tool.input[i].clone())).collect();
            if req.request_state.is_some() {
                // Each answer under its own key (before the state is opened: a
                // retry that lacks one spends no one-time state).
                let responses = req.input_responses.clone().unwrap_or_default();
                for (key, _) in &asks {
                    match responses.get(key) {
                        Some(v) => inputs.push((key.clone(), v.clone())),
                        None => {
                            return Err(ErrorData::invalid_params(
                                format!("inputResponses has no answer under {key:?}"),
                                None,
                            ))
                        }
                    }
                }
            }
            match &req.request_state {
                None => return self.ask(&tool, &asks, digest, (call, id, principal), &ad),
                Some(st) => match self.open(st, &tool, &digest, (&call, &id, &principal), &ad).await {
                    Ok(p) => {
                        let verdict = StateVerdict::Accepted;
                        self.send(Report::Checked {
                            call: call.clone(),
                            id: id.clone(),
                            principal: principal.clone(),
                            state: st.clone(),
                            verdict,
                        });
                        on_behalf_of = Some(p.p);
                    }
                    Err(why) => {
                        let verdict = StateVerdict::Refused { why };
                        self.send(Report::Checked { call, id, principal, state: st.clone(), verdict });
                        // "MUST map all token-opening failures to a single client-facing error".
                        return Err(ErrorData::invalid_params("invalid requestState", None));
                    }
                },
            }
        }
        // A declined confirmation: the tool does not run.
        if let Some((key, _)) = inputs.iter().find(|(_, v)| mrtr::declines(v)) {
            let words = format!("{} not run: {key} declined", tool.name);
            return Ok(CallToolResult::error(vec![ContentBlock::text(words)]).into());
        }
        let run = ExecutionOf { tool: tool.name.clone(), call, id, principal: principal.clone(), on_behalf_of, inputs };
        self.execute(&tool, run, principal, &cx).await
    }

    fn accepted_subscription_filter(&self, _requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.listens.lock().expect("listens lock").push(context.sink().clone());
        context.cancelled().await;
        Ok(())
    }
}

/// Turns the application's reports into trace records, in arrival order.
async fn pump(mut rx: mpsc::UnboundedReceiver<Report>, report: super::AppReporter) {
    while let Some(r) = rx.recv().await {
        match r {
            Report::Exec(n, run, step) => report.execution(n, &run, step),
            Report::Minted { call, id, principal, state, once } => {
                report.state_minted(&call, &id, &principal, &state, None, once)
            }
            Report::Checked { call, id, principal, state, verdict } => {
                report.state_checked(&call, &id, &principal, &state, verdict)
            }
            Report::ToolsChanged(n, told) => report.tools_changed(n, told),
        }
    }
}

/// The harness's commands: a tool-list change goes to every open listen
/// stream rmcp still holds (a half-open one too: it cannot tell).
async fn commands(hook: AppHook, app: App) {
    loop {
        match hook.commands.recv().await {
            AppCommand::ToolsChanged => {
                let n = app.durable.changes.fetch_add(1, Ordering::Relaxed) + 1;
                let sinks: Vec<SubscriptionSink> = app.listens.lock().expect("listens lock").clone();
                let mut open = Vec::new();
                let mut told = 0;
                for s in sinks {
                    match s.notify_tool_list_changed().await {
                        Ok(()) => {
                            told += 1;
                            open.push(s);
                        }
                        Err(rmcp::service::SubscriptionSendError::SubscriptionClosed) => {}
                        Err(_) => open.push(s),
                    }
                }
                *app.listens.lock().expect("listens lock") = open;
                app.send(Report::ToolsChanged(n, told));
            }
            AppCommand::ServerRequest { client, .. } | AppCommand::Notify { client, .. } => {
                hook.report.error(&client, "stateless-http has no sessions to issue on or notify");
            }
        }
    }
}

impl ServerPlug for RmcpStateless {
    fn name(&self) -> &str {
        NAMES[usize::from(!self.sealed)]
    }

    fn serve(&self, listener: crate::net::Listener, hook: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
        let life = self.lives.get() + 1;
        self.lives.set(life);
        // A configured key, as the codec's docs show: the same in every life.
        let mut key = [0u8; 32];
        self.seed.stream("server.rmcp.key").fill_bytes(&mut key);
        let codec = self.sealed.then(|| {
            Arc::new(RequestStateCodec::try_new(key.to_vec()).expect("a 32-byte key is long enough for rmcp"))
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let report = tx.clone();
        let (redeem, redeems) = mpsc::unbounded_channel();
        let app = App {
            tools: self.tools.clone().into(),
            codec,
            rng: Arc::new(Mutex::new(self.seed.stream(&format!("server.rmcp.{life}")))),
            durable: self.durable.clone(),
            redeem,
            listens: Arc::default(),
            report: tx,
        };
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_stateless_protocol_metadata_required(true)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_allowed_hosts(["server", "server:80", "127.0.0.1"]);
        let handler = app.clone();
        let heartbeat = self.heartbeat;
        let service =
            StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(NeverSessionManager::default()), config);
        Box::pin(async move {
            tokio::task::spawn_local(pump(rx, hook.report.clone()));
            tokio::task::spawn_local(registry(redeems, hook.store.clone(), report.clone()));
            tokio::task::spawn_local(commands(hook, app));
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
