//! The reference MCP server engine, speaking either dialect.
//!
//! Sessions own an event log that mints ids from `first_event_id` and keeps
//! the last `retention` events; every server→client message is a logged
//! event on one stream, routed to that stream's first live writer. In
//! `legacy-sse` a session has one stream (its uplink); in `streamable-http`
//! (see [`streamable`]) the standalone GET stream is stream 0 and each
//! tool call's POST response stream is another. Ids are unique across a
//! session's streams, so a `Last-Event-ID` names its stream. Resumptions are
//! decided by a [`ResumptionPolicy`] and carried out here.

mod streamable;

use super::plug::{AppCommand, AppHook, AppReporter, ServerPlug};
use super::policy::{Decision, Inflight, Refusal, RequestState, RequestView, ResumeView, ResumptionPolicy};
use crate::scenario::{Dialect, ServerConfig};
use crate::seed::Seed;
use crate::trace::Outcome;
use crate::wire::body::ChannelBody;
use crate::wire::jsonrpc::{mcp, Message, RpcId};
use crate::wire::{legacy, sse};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

type Body = BoxBody<Bytes, Infallible>;

/// The reference engine with one policy: a server plug-in.
pub struct Engine {
    cfg: ServerConfig,
    dialect: Dialect,
    policy: Rc<dyn ResumptionPolicy>,
    seed: Seed,
}

impl Engine {
    pub fn new(cfg: ServerConfig, dialect: Dialect, policy: Rc<dyn ResumptionPolicy>, seed: Seed) -> Self {
        Self { cfg, dialect, policy, seed }
    }
}

impl ServerPlug for Engine {
    fn name(&self) -> &str {
        self.policy.name()
    }

    fn serve(&self, listener: turmoil::net::TcpListener, app: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
        let shared = Rc::new(Shared {
            cfg: self.cfg.clone(),
            dialect: self.dialect,
            policy: self.policy.clone(),
            report: app.report.clone(),
            state: RefCell::new(State::default()),
            rng: RefCell::new(self.seed.stream("server.tokens")),
        });
        Box::pin(async move {
            tokio::task::spawn_local(app_loop(shared.clone(), app));
            loop {
                let Ok((stream, _peer)) = listener.accept().await else { continue };
                let ctl = Rc::new(ConnCtl::default());
                let svc_shared = shared.clone();
                let svc_ctl = ctl.clone();
                let svc = hyper::service::service_fn(move |req| {
                    let (shared, ctl) = (svc_shared.clone(), svc_ctl.clone());
                    async move {
                        Ok::<_, Infallible>(match shared.dialect {
                            Dialect::LegacySse => handle(shared, ctl, req).await,
                            Dialect::StreamableHttp => streamable::handle(shared, ctl, req).await,
                        })
                    }
                });
                tokio::task::spawn_local(async move {
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .serve_connection(TokioIo::new(stream), svc);
                    // Biased: the branch order decides, not the runtime's RNG; a
                    // fence that arrived wins over a connection that just ended.
                    tokio::select! {
                        biased;
                        _ = ctl.kill.notified() => {}
                        _ = conn => {}
                    }
                    ctl.closed.set(true);
                    ctl.closed_notify.notify_waiters();
                });
            }
        })
    }
}

/// Per-connection control: the fence.
#[derive(Default)]
struct ConnCtl {
    kill: Notify,
    closed: Cell<bool>,
    closed_notify: Notify,
}

impl ConnCtl {
    async fn wait_closed(&self) {
        while !self.closed.get() {
            self.closed_notify.notified().await;
        }
    }
}

struct Shared {
    cfg: ServerConfig,
    dialect: Dialect,
    policy: Rc<dyn ResumptionPolicy>,
    report: AppReporter,
    state: RefCell<State>,
    rng: RefCell<ChaCha8Rng>,
}

#[derive(Default)]
struct State {
    /// Live sessions by token. A BTreeMap: iteration order must be deterministic.
    sessions: BTreeMap<String, Session>,
    next_session: u32,
    next_uplink: u32,
}

struct Session {
    name: String,
    principal: String,
    log: VecDeque<Logged>,
    next_event_id: u64,
    uplinks: Vec<Uplink>,
    requests: Vec<Req>,
    tombstones: BTreeSet<RpcId>,
    /// Ids the server stopped waiting for (tombstoned, timed out) whose late
    /// answer arrived anyway: the client did answer them, so a replay of
    /// their events would hand it an answered request (condition 3).
    answered_tombstones: BTreeSet<RpcId>,
    /// The stream of every id minted (streamable-http; priming ids included).
    id_stream: BTreeMap<u64, StreamId>,
    /// Tool calls (streamable-http): their POST response streams.
    calls: BTreeMap<StreamId, Call>,
    /// One past the last evicted event id.
    first_kept: u64,
}

/// A session's stream: 0 is the uplink (legacy) or the standalone GET stream.
type StreamId = u32;
const STANDALONE: StreamId = 0;

/// A tool call whose POST response stream is stream `StreamId`.
struct Call {
    /// The client's JSON-RPC id of `tools/call`.
    rpc: RpcId,
    /// Set once the tool result was emitted: the stream ends after it.
    done: bool,
}

struct Logged {
    id: u64,
    data: String,
    request: Option<RpcId>,
    stream: StreamId,
    /// Whether it was written to a writer when emitted.
    routed: bool,
}

struct Uplink {
    id: u32,
    tx: mpsc::UnboundedSender<Bytes>,
    conn: Rc<ConnCtl>,
    stream: StreamId,
}

struct Req {
    id: RpcId,
    label: String,
    method: String,
    event_id: u64,
    state: RequestState,
    reissues: u32,
    stream: StreamId,
    /// False when a resumption must not re-issue it (condition 4: fail it or refuse).
    reissuable: bool,
}

impl Session {
    /// Logs a message on `stream`, mints its id and routes it to the stream's first live writer.
    fn emit(
        &mut self,
        msg: &Message,
        request: Option<RpcId>,
        stream: StreamId,
        retention: usize,
        report: &AppReporter,
    ) -> (u64, Option<u32>) {
        let id = self.mint(stream);
        let data = msg.to_json();
        let bytes = Bytes::from(sse::encode(Some(&id.to_string()), None, &data));
        self.prune(report);
        let routed = self.uplinks.iter().filter(|u| u.stream == stream).find(|u| u.tx.send(bytes.clone()).is_ok());
        let routed = routed.map(|u| u.id);
        self.log.push_back(Logged { id, data, request, stream, routed: routed.is_some() });
        while self.log.len() > retention {
            if let Some(gone) = self.log.pop_front() {
                self.first_kept = gone.id + 1;
            }
        }
        (id, routed)
    }

    /// Mints the next event id on `stream`.
    fn mint(&mut self, stream: StreamId) -> u64 {
        let id = self.next_event_id;
        self.next_event_id += 1;
        self.id_stream.insert(id, stream);
        id
    }

    /// The stream an event id was minted on (the standalone stream if unknown).
    fn stream_of(&self, id: u64) -> StreamId {
        self.id_stream.get(&id).copied().unwrap_or(STANDALONE)
    }

    /// Forgets uplinks whose connection is gone (the server noticed the close).
    fn prune(&mut self, report: &AppReporter) {
        let name = &self.name;
        self.uplinks.retain(|u| {
            let live = !u.tx.is_closed();
            if !live {
                report.note(name, format!("uplink U{} closed; unregistered", u.id));
            }
            live
        });
    }

    /// The oldest id not evicted, if anything was logged. Ids are sparse in
    /// streamable-http (priming ids are never logged), so this is one past the
    /// last evicted id, not the first logged one.
    fn oldest(&self) -> Option<u64> {
        self.log.front().map(|_| self.first_kept)
    }
}

fn full(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(text)).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert("content-type", "application/json".parse().unwrap());
    r
}

fn rpc_error(status: StatusCode, message: &str) -> Response<Body> {
    full(status, Message::Error { id: None, code: -32000, message: message.into() }.to_json())
}

fn sse_response(body: ChannelBody) -> Response<Body> {
    let mut r = Response::new(body.boxed());
    r.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    r.headers_mut().insert("cache-control", "no-cache".parse().unwrap());
    r
}

fn credential(req: &Request<Incoming>) -> String {
    req.headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("anonymous")
        .to_string()
}

async fn handle(shared: Rc<Shared>, ctl: Rc<ConnCtl>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let token = req.uri().query().and_then(legacy::session_token).map(str::to_string);
    let resp = match (req.method().as_str(), path.as_str(), token) {
        ("GET", legacy::SSE_PATH, None) => open_session(&shared, ctl, credential(&req)),
        ("GET", legacy::SSE_PATH, Some(token)) => {
            let last =
                req.headers().get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok());
            resume(&shared, ctl, token, credential(&req), last).await
        }
        ("POST", legacy::MESSAGES_PATH, Some(token)) => {
            let who = credential(&req);
            match req.into_body().collect().await {
                Ok(body) => post(&shared, &token, &who, &body.to_bytes()),
                Err(_) => rpc_error(StatusCode::BAD_REQUEST, "unreadable body"),
            }
        }
        _ => rpc_error(StatusCode::NOT_FOUND, "no such endpoint"),
    };
    resp
}

/// Registers a new writer of `stream` and starts its heartbeat.
fn attach(
    shared: &Shared,
    st: &mut State,
    token: &str,
    stream: StreamId,
    ctl: Rc<ConnCtl>,
) -> (u32, mpsc::UnboundedSender<Bytes>, ChannelBody) {
    st.next_uplink += 1;
    let id = st.next_uplink;
    let (tx, body) = ChannelBody::new();
    let s = st.sessions.get_mut(token).expect("attach to a live session");
    s.uplinks.push(Uplink { id, tx: tx.clone(), conn: ctl, stream });
    let hb_tx = tx.clone();
    let every = shared.cfg.heartbeat.0;
    tokio::task::spawn_local(async move {
        loop {
            tokio::time::sleep(every).await;
            if hb_tx.send(Bytes::from_static(b": ping\n\n")).is_err() {
                break;
            }
        }
    });
    (id, tx, body)
}

/// Creates a session for `principal`; returns its token and name.
fn new_session(shared: &Shared, st: &mut State, principal: &str) -> (String, String) {
    st.next_session += 1;
    let name = format!("S{}", st.next_session);
    let token = format!("tok-{:016x}", shared.rng.borrow_mut().next_u64());
    st.sessions.insert(
        token.clone(),
        Session {
            name: name.clone(),
            principal: principal.to_string(),
            log: VecDeque::new(),
            next_event_id: shared.cfg.first_event_id,
            uplinks: Vec::new(),
            requests: Vec::new(),
            tombstones: BTreeSet::new(),
            answered_tombstones: BTreeSet::new(),
            id_stream: BTreeMap::new(),
            calls: BTreeMap::new(),
            first_kept: shared.cfg.first_event_id,
        },
    );
    (token, name)
}

fn open_session(shared: &Shared, ctl: Rc<ConnCtl>, principal: String) -> Response<Body> {
    let mut st = shared.state.borrow_mut();
    let (token, name) = new_session(shared, &mut st, &principal);
    let (uplink, tx, body) = attach(shared, &mut st, &token, STANDALONE, ctl);
    let _ = tx.send(Bytes::from(sse::encode(None, Some("endpoint"), &legacy::messages_path(&token))));
    shared.report.note(&name, format!("session opened for principal {principal}; uplink U{uplink}"));
    sse_response(body)
}

/// Kills a session: its token dies, its uplinks are closed, its pending requests fail.
fn invalidate(shared: &Shared, st: &mut State, token: &str, why: &str) {
    let Some(s) = st.sessions.remove(token) else { return };
    for u in &s.uplinks {
        u.conn.kill.notify_one();
    }
    for r in s.requests.iter().filter(|r| r.state == RequestState::Pending) {
        shared.report.outcome(&r.label, &r.id, Outcome::Failed, None, format!("session invalidated: {why}"));
    }
    shared.report.note(&s.name, format!("session invalidated ({why}); token is dead"));
}

fn refuse(how: Refusal, reason: &str) -> Response<Body> {
    match how {
        Refusal::Status(code) => rpc_error(
            StatusCode::from_u16(code).unwrap_or(StatusCode::FORBIDDEN),
            &format!("resumption rejected: {reason}"),
        ),
        Refusal::ErrorEvent => {
            let (tx, body) = ChannelBody::new();
            let err = Message::Error { id: None, code: -32000, message: format!("resumption rejected: {reason}") };
            let _ = tx.send(Bytes::from(sse::encode(None, Some("error"), &err.to_json())));
            sse_response(body)
        }
        Refusal::EmptyOk => {
            let (_tx, body) = ChannelBody::new();
            sse_response(body)
        }
    }
}

async fn resume(
    shared: &Rc<Shared>,
    ctl: Rc<ConnCtl>,
    token: String,
    presented: String,
    last: Option<u64>,
) -> Response<Body> {
    // Decide; when the decision fences, fence (which awaits) and decide
    // again: while the fence was pending the session moved on (events were
    // minted and maybe evicted), and a decision must hold at the instant the
    // new writer is attached.
    let Some(stream) = shared.state.borrow().sessions.get(&token).map(|s| last.map_or(STANDALONE, |n| s.stream_of(n)))
    else {
        return rpc_error(StatusCode::NOT_FOUND, "unknown or expired session");
    };
    let mut rounds = 0;
    let (replay_from, inflight) = loop {
        let decision = match decide(shared, &token, &presented, last, stream) {
            Some(d) => d,
            None => return rpc_error(StatusCode::NOT_FOUND, "unknown or expired session"),
        };
        match decision {
            Decision::Reject { reason, how, invalidate: kill } => {
                note_decision(
                    shared,
                    &token,
                    &presented,
                    last,
                    &format!(
                        "refused ({reason}){}",
                        if kill { "; the session is invalidated" } else { "; the session lives on" }
                    ),
                );
                if kill {
                    invalidate(shared, &mut shared.state.borrow_mut(), &token, &reason);
                }
                return refuse(how, &reason);
            }
            Decision::Accept { fence_prior, replay_from, inflight } => {
                let has_prior = shared
                    .state
                    .borrow()
                    .sessions
                    .get(&token)
                    .is_some_and(|s| s.uplinks.iter().any(|u| u.stream == stream));
                if !fence_prior || !has_prior {
                    let fenced =
                        if !has_prior { "no prior writer" } else { "prior writer NOT fenced (it stays attached)" };
                    let inflight_words = match inflight {
                        Inflight::Reissue => "pending requests re-issued under fresh ids",
                        Inflight::Fail => "pending requests failed",
                        Inflight::Leave => "pending requests left where they are",
                    };
                    let how = if rounds > 0 { "prior writer fenced first" } else { fenced };
                    note_decision(
                        shared,
                        &token,
                        &presented,
                        last,
                        &format!("accepted: {how}; replay from {replay_from}; {inflight_words}"),
                    );
                    break (replay_from, inflight);
                }
                // Another resumption may attach while this one waits on a fence;
                // a few rounds settle any realistic race, then refuse.
                rounds += 1;
                let fenced = if rounds > 3 {
                    Err("could not become the session's sole writer".into())
                } else {
                    fence(shared, &token, stream).await
                };
                if let Err(reason) = fenced {
                    note_decision(
                        shared,
                        &token,
                        &presented,
                        last,
                        &format!("refused ({reason}); the session is invalidated"),
                    );
                    invalidate(shared, &mut shared.state.borrow_mut(), &token, &reason);
                    return refuse(Refusal::ErrorEvent, &reason);
                }
            }
        }
    };

    let mut st = shared.state.borrow_mut();
    if !st.sessions.contains_key(&token) {
        return rpc_error(StatusCode::NOT_FOUND, "session ended while resuming");
    }
    let (uplink, tx, body) = attach(shared, &mut st, &token, stream, ctl);
    let s = st.sessions.get_mut(&token).expect("checked above");
    let mut replayed = 0;
    for l in s.log.iter().filter(|l| l.id >= replay_from && l.stream == stream) {
        let _ = tx.send(Bytes::from(sse::encode(Some(&l.id.to_string()), None, &l.data)));
        replayed += 1;
    }
    if shared.dialect == Dialect::StreamableHttp && replayed == 0 {
        // Nothing replayed: give the client a fresh id to resume from.
        streamable::prime(s, stream, &tx);
    }
    shared.report.note(
        &s.name,
        format!(
            "uplink U{uplink} attached ({} writer(s)); replayed {replayed} event(s) from {replay_from}",
            s.uplinks.len()
        ),
    );

    dispose_inflight(shared, s, stream, inflight, &[]);
    if s.calls.get(&stream).is_some_and(|c| c.done) {
        // The tool call's stream was complete: the replay was its tail.
        let _ = tx.send(ChannelBody::END);
        s.uplinks.retain(|u| u.id != uplink);
    }
    sse_response(body)
}

/// Carries out a policy's in-flight disposition for the pending requests of
/// `stream` (except `skip`: requests just delivered on the new writer).
fn dispose_inflight(shared: &Shared, s: &mut Session, stream: StreamId, inflight: Inflight, skip: &[RpcId]) {
    let retention = shared.cfg.retention;
    let pending: Vec<usize> = (0..s.requests.len())
        .filter(|&i| s.requests[i].state == RequestState::Pending && s.requests[i].stream == stream)
        .filter(|&i| !skip.contains(&s.requests[i].id))
        .collect();
    for i in pending {
        match inflight {
            Inflight::Leave => {}
            Inflight::Fail => {
                let r = &mut s.requests[i];
                r.state = RequestState::Failed;
                shared.report.outcome(&r.label, &r.id, Outcome::Failed, None, "failed explicitly at resumption");
            }
            Inflight::Reissue => {
                let (old, new, method, label, owner) = {
                    let r = &mut s.requests[i];
                    r.reissues += 1;
                    let new = RpcId::Str(format!("{}.r{}", r.label, r.reissues));
                    (
                        std::mem::replace(&mut r.id, new.clone()),
                        new,
                        r.method.clone(),
                        r.label.clone(),
                        s.principal.clone(),
                    )
                };
                s.tombstones.insert(old.clone());
                let msg = mcp::server_request(new.clone(), &method, &label, &owner);
                let (event_id, _) = s.emit(&msg, Some(new.clone()), stream, retention, &shared.report);
                s.requests[i].event_id = event_id;
                shared.report.outcome(
                    &label,
                    &old,
                    Outcome::Reissued,
                    Some(new),
                    format!("re-issued as event {event_id}; old id tombstoned"),
                );
            }
        }
    }
}

/// Records the final decision on a resumption once, in words (an explanation).
fn note_decision(shared: &Shared, token: &str, presented: &str, last: Option<u64>, what: &str) {
    if let Some(s) = shared.state.borrow().sessions.get(token) {
        let last = last.map_or_else(|| "none".to_string(), |n| n.to_string());
        shared.report.note(&s.name, format!("resumption by {presented} from Last-Event-ID {last} {what}"));
    }
}

/// Asks the policy about a resumption of `token`'s `stream`; `None` if the session is gone.
fn decide(shared: &Shared, token: &str, presented: &str, last: Option<u64>, stream: StreamId) -> Option<Decision> {
    let mut st = shared.state.borrow_mut();
    let s = st.sessions.get_mut(token)?;
    s.prune(&shared.report);
    let mut requests: Vec<RequestView> = s
        .requests
        .iter()
        .map(|r| RequestView {
            id: r.id.clone(),
            label: r.label.clone(),
            method: r.method.clone(),
            event_id: r.event_id,
            // Answered late, after a timeout: to the client, answered.
            state: if s.answered_tombstones.contains(&r.id) { RequestState::Answered } else { r.state },
            reissuable: r.reissuable,
            on_stream: r.stream == stream,
        })
        .collect();
    // A retired id the client answered anyway is, to the client, answered.
    requests.extend(s.answered_tombstones.iter().map(|id| RequestView {
        id: id.clone(),
        label: id.to_string(),
        method: String::new(),
        event_id: 0,
        state: RequestState::Answered,
        reissuable: true,
        on_stream: false,
    }));
    let request_events: Vec<(u64, RpcId)> =
        s.log.iter().filter(|l| l.stream == stream).filter_map(|l| Some((l.id, l.request.clone()?))).collect();
    let view = ResumeView {
        owner: &s.principal,
        presented,
        last_event_id: last,
        retained: s.oldest().map(|o| (o, s.next_event_id - 1)),
        next_event_id: s.next_event_id,
        prior_uplinks: s.uplinks.iter().filter(|u| u.stream == stream).count(),
        requests: &requests,
        request_events: &request_events,
    };
    Some(shared.policy.decide(&view))
}

/// Fences every prior writer of the session's `stream`, waiting at most
/// `fence_grace` for each connection to be gone.
async fn fence(shared: &Shared, token: &str, stream: StreamId) -> Result<(), String> {
    let prior: Vec<(u32, Rc<ConnCtl>)> = {
        let st = shared.state.borrow();
        st.sessions
            .get(token)
            .map(|s| s.uplinks.iter().filter(|u| u.stream == stream).map(|u| (u.id, u.conn.clone())).collect())
            .unwrap_or_default()
    };
    // A fence takes `fence_delay` to reach the writer (blocked on a full
    // socket buffer, say); it is confirmed only once the connection is gone.
    let delay = shared.cfg.fence_delay.0;
    for (_, c) in &prior {
        if delay.is_zero() {
            c.kill.notify_one();
        } else {
            let c = c.clone();
            tokio::task::spawn_local(async move {
                tokio::time::sleep(delay).await;
                c.kill.notify_one();
            });
        }
    }
    let all_closed = async {
        for (_, c) in &prior {
            c.wait_closed().await;
        }
    };
    if tokio::time::timeout(shared.cfg.fence_grace.0, all_closed).await.is_err() {
        return Err(format!("prior uplink could not be fenced within {:?}", shared.cfg.fence_grace.0));
    }
    let mut st = shared.state.borrow_mut();
    if let Some(s) = st.sessions.get_mut(token) {
        s.uplinks.retain(|u| !prior.iter().any(|(id, _)| *id == u.id));
        for (id, _) in &prior {
            shared.report.note(&s.name, format!("uplink U{id} fenced before the new writer is attached"));
        }
    }
    Ok(())
}

fn post(shared: &Rc<Shared>, token: &str, who: &str, body: &[u8]) -> Response<Body> {
    let mut st = shared.state.borrow_mut();
    let Some(s) = st.sessions.get_mut(token) else {
        return rpc_error(StatusCode::NOT_FOUND, "unknown or expired session");
    };
    if shared.policy.binds_principal() && who != s.principal {
        return rpc_error(StatusCode::FORBIDDEN, "credential does not match the session's owner");
    }
    let msg = match parse_body(body) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    let retention = shared.cfg.retention;
    match msg {
        Message::Request { id, method, .. } => {
            let reply = match method.as_str() {
                "initialize" => mcp::initialize_result(id),
                "ping" => Message::Response { id, result: serde_json::json!({}) },
                _ => Message::Error { id: Some(id), code: -32601, message: format!("method not found: {method}") },
            };
            s.emit(&reply, None, STANDALONE, retention, &shared.report);
        }
        Message::Notification { .. } => {}
        Message::Response { ref id, .. } | Message::Error { id: Some(ref id), .. } => {
            settle(shared, s, id, matches!(msg, Message::Error { .. }));
        }
        Message::Error { id: None, .. } => {}
    }
    accepted()
}

fn accepted() -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::new()).boxed());
    *r.status_mut() = StatusCode::ACCEPTED;
    r
}

/// A POST body as one JSON-RPC message, or the 400 to answer.
fn parse_body(body: &[u8]) -> Result<Message, Box<Response<Body>>> {
    std::str::from_utf8(body)
        .map_err(|e| e.to_string())
        .and_then(|t| Message::parse(t).map_err(|e| e.to_string()))
        .map_err(|e| {
            Box::new(full(StatusCode::BAD_REQUEST, Message::Error { id: None, code: -32700, message: e }.to_json()))
        })
}

/// Settles a server request with the client's answer (or error) to `id`.
fn settle(shared: &Shared, s: &mut Session, id: &RpcId, is_error: bool) {
    if let Some(r) = s.requests.iter_mut().find(|r| &r.id == id) {
        if r.state == RequestState::Pending {
            r.state = if is_error { RequestState::Failed } else { RequestState::Answered };
            let (outcome, detail) = if is_error {
                (Outcome::Failed, "the client answered with an error")
            } else {
                (Outcome::Answered, "answer received on the downlink")
            };
            shared.report.outcome(&r.label, &r.id, outcome, None, detail);
            let (stream, label) = (r.stream, r.label.clone());
            s.finish_call(stream, &label, !is_error, shared.cfg.retention, &shared.report);
        } else {
            shared.report.note(&s.name, format!("duplicate answer to {id} ignored"));
            if !is_error {
                s.answered_tombstones.insert(id.clone());
            }
        }
    } else if s.tombstones.contains(id) {
        shared.report.note(&s.name, format!("late answer to tombstoned id {id} ignored"));
        s.answered_tombstones.insert(id.clone());
    } else {
        shared.report.note(&s.name, format!("answer to unknown id {id} ignored"));
    }
}

async fn app_loop(shared: Rc<Shared>, app: AppHook) {
    loop {
        match app.commands.recv().await {
            AppCommand::ServerRequest { client, token, method, label, reissuable } => {
                let mut st = shared.state.borrow_mut();
                let Some(s) = st.sessions.get_mut(&token) else {
                    shared.report.error(&client, format!("cannot issue {label}: no live session for {client}'s token"));
                    continue;
                };
                issue(&shared, s, &token, &client, (&method, &label, reissuable), STANDALONE);
            }
            AppCommand::Notify { client, token, count } => {
                let mut st = shared.state.borrow_mut();
                let Some(s) = st.sessions.get_mut(&token) else {
                    shared.report.error(&client, format!("cannot notify: no live session for {client}'s token"));
                    continue;
                };
                let mut ids = Vec::new();
                for _ in 0..count {
                    let n = s.next_event_id;
                    let (id, _) = s.emit(&mcp::progress(n), None, STANDALONE, shared.cfg.retention, &shared.report);
                    ids.push(id.to_string());
                }
                shared.report.notified_on(&token, &client, ids);
            }
        }
    }
}

/// Issues server request `label` on `stream` of the session behind `token`.
fn issue(
    shared: &Rc<Shared>,
    s: &mut Session,
    token: &str,
    client: &str,
    (method, label, reissuable): (&str, &str, bool),
    stream: StreamId,
) {
    let id = RpcId::Str(label.to_string());
    let msg = mcp::server_request(id.clone(), method, label, &s.principal);
    let (event_id, uplink) = s.emit(&msg, Some(id.clone()), stream, shared.cfg.retention, &shared.report);
    s.requests.push(Req {
        id: id.clone(),
        label: label.to_string(),
        method: method.to_string(),
        event_id,
        state: RequestState::Pending,
        reissues: 0,
        stream,
        reissuable,
    });
    if reissuable {
        shared.report.issued_on(token, client, label, method, &id, Some(event_id.to_string()));
    } else {
        shared.report.issued_not_reissuable_on(token, client, label, method, &id, Some(event_id.to_string()));
    }
    let route = uplink.map_or("no live writer: logged for replay".to_string(), |u| format!("written to uplink U{u}"));
    shared.report.note(&s.name, format!("{label} is event {event_id}; {route}"));
    tokio::task::spawn_local(request_timer(shared.clone(), token.to_string(), label.to_string()));
}

async fn request_timer(shared: Rc<Shared>, token: String, label: String) {
    tokio::time::sleep(shared.cfg.request_timeout.0).await;
    let mut st = shared.state.borrow_mut();
    let Some(s) = st.sessions.get_mut(&token) else { return };
    if let Some(r) = s.requests.iter_mut().find(|r| r.label == label && r.state == RequestState::Pending) {
        r.state = RequestState::TimedOut;
        let after: Duration = shared.cfg.request_timeout.0;
        shared.report.outcome(&r.label, &r.id, Outcome::TimedOut, None, format!("no answer within {after:?}"));
        let stream = r.stream;
        s.finish_call(stream, &label, false, shared.cfg.retention, &shared.report);
    }
}
