//! The client's streams: opening or resuming one, reading its SSE events,
//! and acting on the messages in them (answering server requests).

use super::session::UplinkRefusal;
use super::*;

impl Client {
    pub(super) async fn uplink(self: Rc<Self>, gen: u64, mode: Mode) {
        // streamable-http: a fresh uplink first opens a session by POST.
        let mode = match mode {
            Mode::Fresh if self.wire.opens_by_post() => match self.init_session().await {
                Some(token) => Mode::Resume { token, last_event_id: None },
                None => return self.retry_later(gen, true),
            },
            m => m,
        };
        let resuming = self.wire.is_resumption(&mode);
        let Some((conn, sender, _driver)) = self.open::<Empty<Bytes>>(Purpose::Uplink).await else {
            return self.retry_later(gen, self.wire.retries_fresh(resuming));
        };
        let (path, token, last_event_id) = self.wire.uplink_target(&mode);
        let req = match self.get_request(&path, token.as_deref(), last_event_id.as_deref()) {
            Ok(r) => r,
            Err(e) => {
                // Only the server's bytes (its session id, an id it sent) can
                // get here: the loader validates what a scenario supplies.
                self.protocol_error(conn, "unsendable", e);
                return self.retry_later(gen, true);
            }
        };
        self.rec.record(self.request_event(conn, "GET", path, last_event_id, token.clone()));
        let Some(resp) = self.response_head(conn, sender, req).await else {
            return self.retry_later(gen, self.wire.retries_fresh(resuming));
        };
        let status = resp.status().as_u16();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
        self.rec.record(What::HttpResponse { client: self.name(), conn, status, content_type: content_type.clone() });
        let is_stream = content_type.as_deref().is_some_and(|c| c.starts_with("text/event-stream"));
        if status != 200 || !is_stream {
            return self.not_a_stream(conn, gen, status, resuming);
        }
        self.st.borrow_mut().backoff = Duration::ZERO;

        // Answers go to the session whose stream carried the request, also
        // after the client took another's token meanwhile (found by fuzzing:
        // a legacy-sse client answered its own session's request on the
        // stolen session, was refused, and liveness blamed the server). A
        // fresh legacy-sse uplink learns its token from its `endpoint` event.
        let session = match &mode {
            Mode::Resume { token, .. } => Some(token.as_str()),
            Mode::Fresh => None,
        };
        let (end, any_item) = self.read_stream(conn, resp.into_body(), gen, None, session).await;
        self.after_stream(conn, gen, end, any_item, resuming)
    }

    /// Sends `req` and waits at most the heartbeat timeout for the response
    /// head; `None` (recorded) when none came or it was not HTTP.
    async fn response_head(
        &self,
        conn: ConnId,
        mut sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
        req: Request<Empty<Bytes>>,
    ) -> Option<hyper::Response<hyper::body::Incoming>> {
        let silence = self.spec.heartbeat_timeout;
        match timeout(silence, sender.send_request(req)).await {
            Err(_) => {
                self.protocol_error(
                    conn,
                    "no-headers",
                    format!("no response headers within {:.1} s", silence.as_secs_f64()),
                );
                self.rec.record(What::UplinkSilent {
                    client: self.name(),
                    conn,
                    silent_ms: silence.as_millis() as u64,
                });
                None
            }
            Ok(Err(e)) => {
                if e.is_parse() || e.is_parse_too_large() {
                    self.protocol_error(conn, "garbage", format!("the response is not HTTP/1.1: {e}"));
                }
                self.rec.record(What::UplinkEnded {
                    client: self.name(),
                    conn,
                    reason: format!("request failed: {e}"),
                });
                None
            }
            Ok(Ok(r)) => Some(r),
        }
    }

    /// An uplink GET answered with something other than a 200 event stream:
    /// a refusal (re-initialize), a dead session, or a failure (retry).
    fn not_a_stream(self: &Rc<Self>, conn: ConnId, gen: u64, status: u16, resuming: bool) {
        let refusal = self.wire.uplink_refusal(status);
        if refusal == UplinkRefusal::SessionGone {
            // The session is gone: start a new one (MCP 2025-11-25).
            if resuming {
                self.rec.record(What::Rejected { client: self.name(), conn, how: Refused::Status(404) });
            }
            return self.reinitialize("HTTP 404: the session is gone");
        }
        if resuming {
            self.rec.record(What::Rejected { client: self.name(), conn, how: Refused::Status(status) });
            return self.reinitialize(&format!("resumption refused with HTTP {status}"));
        }
        self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: format!("HTTP {status}") });
        if refusal == UplinkRefusal::NoStream {
            return; // the server offers no standalone stream
        }
        self.retry_later(gen, self.wire.retries_fresh(false))
    }

    /// What the client does once its uplink stopped: a refusal seen in the
    /// stream makes it re-initialize; otherwise it comes back.
    fn after_stream(self: &Rc<Self>, conn: ConnId, gen: u64, end: StreamEnd, any_item: bool, resuming: bool) {
        match end {
            StreamEnd::ErrorEvent => {
                self.rec.record(What::Rejected { client: self.name(), conn, how: Refused::ErrorEvent });
                self.reinitialize("resumption refused with an error event")
            }
            StreamEnd::Ended if resuming && !any_item && self.wire.empty_resumption_is_refusal() => {
                self.rec.record(What::Rejected { client: self.name(), conn, how: Refused::EmptyStream });
                self.reinitialize("resumption answered with an empty stream")
            }
            StreamEnd::Ended if !self.wire.empty_resumption_is_refusal() => {
                // A server may close a stream at any time, also right after a
                // replay with nothing in it: that is SSE polling (MCP
                // 2025-11-25, SEP-1699), not a refusal. Come back after its
                // `retry` from the same id; after a few empty polls in a row,
                // with the growing backoff. (Whether the id deserved a replay
                // is replay-integrity's to judge.)
                let empty = {
                    let mut st = self.st.borrow_mut();
                    st.empty_polls = if any_item { 0 } else { st.empty_polls + 1 };
                    st.empty_polls
                };
                let retry = self.st.borrow().retry_ms.map_or(Duration::from_secs(1), Duration::from_millis);
                let doubled = empty.saturating_sub(super::EMPTY_POLLS - 1).min(8);
                self.reconnect_after(gen, (retry * 2u32.pow(doubled)).min(super::MAX_BACKOFF.max(retry)))
            }
            _ => self.retry_later(gen, false),
        }
    }

    /// Schedules a reconnect of generation `gen` after `delay` (no backoff).
    pub(super) fn reconnect_after(self: &Rc<Self>, gen: u64, delay: Duration) {
        let inbox = self.inbox.clone();
        tokio::task::spawn_local(async move {
            crate::clock::sleep(delay).await;
            inbox.push(ClientCmd::Retry { gen, fresh: false });
        });
    }

    /// Reads one SSE stream until it ends; records every event and hands
    /// messages on. `call` names the tool call whose stream this is. Also
    /// says whether anything (an event or a heartbeat) arrived: a stream that
    /// ends with nothing at all was a silent refusal.
    pub(super) async fn read_stream(
        self: &Rc<Self>,
        conn: ConnId,
        mut body: hyper::body::Incoming,
        gen: u64,
        call: Option<&str>,
        token: Option<&str>,
    ) -> (StreamEnd, bool) {
        // The session this stream belongs to: given, or (a fresh legacy-sse
        // uplink) named by its `endpoint` event.
        let mut token = token.map(String::from);
        let silence = self.spec.heartbeat_timeout;
        let mut decoder = Decoder::new();
        let mut any_item = false;
        // Silence is measured from the last complete SSE item: a server that
        // drips bytes without ever completing an event is as dead as a silent one.
        // tokio's clock inside a turmoil host is the simulated one (paused runtime).
        let mut last_item = crate::clock::Stamp::now();
        let mut bytes_since_item = 0usize;
        loop {
            let left = silence.saturating_sub(last_item.elapsed());
            // The silence watchdog, which a healthy stream's keep-alive re-arms (crate::quiet).
            let watchdog = crate::quiet::Kind::Watchdog { client: self.spec.name.clone(), conn: conn.0, silence };
            let frame = match crate::clock::timeout_as(left, watchdog, body.frame()).await {
                Err(_) => return (self.stopped(conn, Stop::Silent, &decoder, bytes_since_item), any_item),
                Ok(None) => return (self.stopped(conn, Stop::Ended, &decoder, bytes_since_item), any_item),
                Ok(Some(Err(e))) => {
                    return (self.stopped(conn, Stop::Broken(e.to_string()), &decoder, bytes_since_item), any_item)
                }
                Ok(Some(Ok(f))) => f,
            };
            let Some(data) = frame.data_ref() else { continue };
            let items = decoder.feed(data);
            if items.is_empty() {
                bytes_since_item += data.len();
            } else {
                last_item = crate::clock::Stamp::now();
                bytes_since_item = decoder.pending_bytes();
            }
            if decoder.pending_bytes() > MAX_EVENT_BYTES {
                self.protocol_error(conn, "too-large", format!("an event grew past {} bytes", MAX_EVENT_BYTES));
                self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: "event too large".into() });
                return (StreamEnd::Broken, any_item);
            }
            for item in items {
                let ev = match item {
                    Item::Event(ev) => ev,
                    Item::Retry(ms) => {
                        self.st.borrow_mut().retry_ms = Some(ms);
                        continue;
                    }
                    Item::Comment(_) => {
                        // A heartbeat: the server accepted the stream and keeps it alive.
                        any_item = true;
                        continue;
                    }
                };
                any_item = true;
                if token.is_none() {
                    token = self.wire.endpoint_token(&ev).map(String::from);
                }
                if let Some(end) = self.on_event(conn, ev, gen, call, token.as_deref()) {
                    return (end, any_item);
                }
            }
        }
    }

    /// Records why a stream stopped delivering (silence, its end, an error)
    /// and any event it cut in half or dripped without completing.
    fn stopped(&self, conn: ConnId, stop: Stop, decoder: &Decoder, bytes_since_item: usize) -> StreamEnd {
        let silence = self.spec.heartbeat_timeout;
        match stop {
            Stop::Silent => {
                if bytes_since_item > 0 {
                    self.protocol_error(
                        conn,
                        "drip",
                        format!(
                            "{bytes_since_item} byte(s) in {:.1} s without one complete event",
                            silence.as_secs_f64()
                        ),
                    );
                }
                self.rec.record(What::UplinkSilent {
                    client: self.name(),
                    conn,
                    silent_ms: silence.as_millis() as u64,
                });
                StreamEnd::Silent
            }
            Stop::Ended => {
                if decoder.has_partial() {
                    self.protocol_error(conn, "mid-event", "the stream ended in the middle of an event".into());
                }
                self.rec.record(What::UplinkEnded {
                    client: self.name(),
                    conn,
                    reason: crate::trace::SERVER_ENDED.into(),
                });
                StreamEnd::Ended
            }
            Stop::Broken(e) => {
                if decoder.has_partial() {
                    self.protocol_error(conn, "mid-event", format!("the stream broke in the middle of an event: {e}"));
                }
                self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: format!("stream error: {e}") });
                StreamEnd::Broken
            }
        }
    }

    /// Acts on one SSE event of a stream: records it, remembers its id as
    /// the last seen, hands its message on. `Some` when the stream is done
    /// (a refusal's error event, or the tool call's result).
    fn on_event(
        self: &Rc<Self>,
        conn: ConnId,
        ev: crate::wire::sse::Event,
        gen: u64,
        call: Option<&str>,
        token: Option<&str>,
    ) -> Option<StreamEnd> {
        match ev.event.as_str() {
            "endpoint" if self.wire.has_endpoint_event() => self.clone().on_endpoint(&ev.data, conn),
            "error" => {
                self.record_sse(conn, &ev, None);
                return Some(StreamEnd::ErrorEvent);
            }
            _ => {
                let msg = Message::parse(&ev.data).ok();
                self.record_sse(conn, &ev, msg.as_ref());
                if let Some(id) = &ev.id {
                    let mut st = self.st.borrow_mut();
                    match call {
                        None => st.last_seen = Some(id.clone()),
                        Some(label) => {
                            if let Some(c) = st.calls.get_mut(label) {
                                c.last_seen = Some(id.clone());
                            }
                        }
                    }
                }
                if let Some(msg) = msg {
                    if call.is_some_and(|label| self.is_call_result(label, &msg)) {
                        return Some(StreamEnd::Complete);
                    }
                    if let (Message::Request { id, .. }, Some(t)) = (&msg, token) {
                        self.st.borrow_mut().request_token.insert(id.clone(), t.to_string());
                    }
                    self.clone().on_message(msg, gen);
                }
            }
        }
        None
    }

    pub(super) fn protocol_error(&self, conn: ConnId, kind: &str, what: String) {
        self.rec.record(What::ProtocolError { client: self.name(), conn, problem: kind.into(), what });
    }

    pub(super) fn record_sse(&self, conn: ConnId, ev: &crate::wire::sse::Event, msg: Option<&Message>) {
        self.rec.record(What::sse_event(self.name(), conn, ev, msg));
    }

    pub(super) fn on_endpoint(self: Rc<Self>, data: &str, conn: ConnId) {
        let Some(token) = crate::wire::legacy::session_token(data).map(String::from) else {
            return;
        };
        self.rec.record(What::SessionToken { client: self.name(), conn, token: token.clone() });
        *self.shared.token.borrow_mut() = Some(token);
        let id = {
            let mut st = self.st.borrow_mut();
            st.rpc_seq += 1;
            let id = RpcId::Num(st.rpc_seq);
            st.init_id = Some(id.clone());
            id
        };
        let msg = mcp::initialize(id, &self.spec.name);
        tokio::task::spawn_local(async move {
            self.post(&msg).await;
        });
    }

    pub(super) fn on_message(self: Rc<Self>, msg: Message, gen: u64) {
        match msg {
            Message::Response { id, .. } if Some(&id) == self.st.borrow().init_id.as_ref() => {
                tokio::task::spawn_local(async move {
                    self.post(&mcp::initialized()).await;
                });
            }
            Message::Request { id, method, .. } => {
                // A request is the session's, not the stream's: a real client
                // answers every request it received, once, over POST, while
                // it holds the session that sent it, whatever became of the
                // stream that carried it (both SDKs' servers accept such an
                // answer). A replay of a request already taken is not new; a
                // re-issue under a fresh id is.
                let (session, fresh) = {
                    let mut st = self.st.borrow_mut();
                    let session = st.request_token.get(&id).cloned().or_else(|| self.shared.token.borrow().clone());
                    st.seen.insert(id.clone(), method.clone());
                    let key = (session.clone(), id.clone());
                    let fresh = !st.answered.contains(&key) && st.taken.insert(key);
                    (session, fresh)
                };
                if fresh && self.spec.auto_answer {
                    let think = self.spec.think_time;
                    tokio::task::spawn_local(async move {
                        crate::clock::sleep(think).await;
                        // A client that left the session (a new session after a
                        // refusal, another's token taken over) has nobody to
                        // answer for, unless it still reads the stream that
                        // carried the request (a tool call of the old session).
                        if *self.shared.token.borrow() != session && !self.st.borrow().live(gen) {
                            self.rec.record(What::Abandoned {
                                client: self.name(),
                                id,
                                why: "the client no longer holds the session that sent it".into(),
                            });
                            return;
                        }
                        self.answer(id, method).await;
                    });
                }
            }
            _ => {}
        }
    }

    /// POSTs the answer to a server request once; records it with the status the server gave.
    pub(super) async fn answer(self: Rc<Self>, id: RpcId, method: String) {
        // The session whose stream carried the request, else the current one.
        let token = self.st.borrow().request_token.get(&id).cloned().or_else(|| self.shared.token.borrow().clone());
        if !self.st.borrow_mut().answered.insert((token.clone(), id.clone())) {
            return;
        }
        let msg = mcp::answer(id.clone(), &method, &self.spec.name);
        let (status, conn) = match &token {
            Some(token) => match self.post_once(&msg, Some(token), Purpose::Post, POST_TIMEOUT).await {
                Ok(posted) => {
                    let status = posted.resp.status().as_u16();
                    let _ = timeout(POST_TIMEOUT, posted.resp.into_body().collect()).await;
                    (Some(status), Some(posted.conn))
                }
                Err(sent_on) => (None, sent_on),
            },
            None => (None, None),
        };
        self.rec.record(What::Answer { client: self.name(), id, method, status, session: token, conn });
    }
}

/// Why a stream stopped delivering frames.
enum Stop {
    /// Nothing complete within the heartbeat timeout.
    Silent,
    /// The server ended it.
    Ended,
    /// It failed, with this error.
    Broken(String),
}
