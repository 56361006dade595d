//! Connections and requests: dialing, the HTTP/1 handshake, GETs and POSTs.

use super::*;

impl Client {
    pub(super) async fn connect(&self, purpose: Purpose) -> Option<(ConnId, Box<dyn Connection>)> {
        let n = self.shared.conn_seq.get() + 1;
        self.shared.conn_seq.set(n);
        let conn = ConnId(n);
        match timeout(CONNECT_TIMEOUT, self.dialer.dial()).await {
            Ok(Ok(d)) => {
                self.rec.record(What::Connect { client: self.name(), conn, port: d.local_port, purpose });
                crate::quiet::conn_port(&self.spec.name, conn.0, d.local_port);
                Some((conn, d.stream))
            }
            Ok(Err(e)) => {
                self.rec.record(What::ConnectFailed { client: self.name(), conn, error: e.to_string() });
                None
            }
            Err(_) => {
                self.rec.record(What::ConnectFailed { client: self.name(), conn, error: "connect timed out".into() });
                None
            }
        }
    }

    /// Opens a connection for `purpose` and speaks HTTP/1 on it: the
    /// connection's number, the request sender, and the task driving the
    /// connection (dropping it closes the connection). `None` when either
    /// step failed (the connect failure is in the trace).
    pub(super) async fn open<B>(&self, purpose: Purpose) -> Option<(ConnId, SendRequest<B>, AbortOnDrop)>
    where
        B: hyper::body::Body + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (conn, stream) = self.connect(purpose).await?;
        let (sender, driver) = hyper::client::conn::http1::handshake::<_, B>(TokioIo::new(stream)).await.ok()?;
        let driver = AbortOnDrop(tokio::task::spawn_local(async move {
            let _ = driver.await;
        }));
        Some((conn, sender, driver))
    }

    /// The trace event for a request about to go out on `conn`: it names
    /// the credential presented when that is not the client's own.
    pub(super) fn request_event(
        &self,
        conn: ConnId,
        method: &str,
        path: String,
        last_event_id: Option<String>,
        session: Option<String>,
    ) -> What {
        let presented = self.shared.credential.borrow();
        let credential = (*presented != self.spec.principal).then(|| presented.clone());
        What::HttpRequest {
            client: self.name(),
            conn,
            method: method.into(),
            path,
            last_event_id,
            session,
            credential,
            rpc: None,
        }
    }

    /// A GET for an SSE stream, in the client's dialect.
    /// A GET in the client's dialect; an error names the value that cannot
    /// be sent (a session id or event id from the server with characters no
    /// URL or header allows).
    pub(super) fn get_request(
        &self,
        path: &str,
        session: Option<&str>,
        last_event_id: Option<&str>,
    ) -> std::result::Result<Request<Empty<Bytes>>, String> {
        let mut req = Request::get(path)
            .header("host", self.dialer.authority())
            .header("accept", "text/event-stream")
            .header("authorization", format!("Bearer {}", self.shared.credential.borrow()));
        if let Some(token) = session {
            req = req.header("mcp-session-id", token).header("mcp-protocol-version", mcp::PROTOCOL_VERSION_STREAMABLE);
        }
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        req.body(Empty::new()).map_err(|e| unsendable(path, session, last_event_id, &e))
    }

    /// POSTs one message on its own connection; returns the status if any.
    pub(super) async fn post(&self, msg: &Message) -> Option<u16> {
        let token = self.shared.token.borrow().clone()?;
        let posted = self.send_post(msg, Some(&token), Purpose::Post, POST_TIMEOUT).await?;
        let status = posted.resp.status().as_u16();
        let _ = timeout(POST_TIMEOUT, posted.resp.into_body().collect()).await;
        Some(status)
    }

    /// Sends one POST in the client's dialect and records it and its response
    /// head, waiting at most `head_timeout` for that head.
    pub(super) async fn send_post(
        &self,
        msg: &Message,
        token: Option<&str>,
        purpose: Purpose,
        head_timeout: Duration,
    ) -> Option<Posted> {
        self.post_once(msg, token, purpose, head_timeout).await.ok()
    }

    /// [`Client::send_post`], saying which connection carried a request that
    /// went out but got no response (`Err(Some(conn))`): the server may have
    /// acted on it, and the checks read what that request presented.
    pub(super) async fn post_once(
        &self,
        msg: &Message,
        token: Option<&str>,
        purpose: Purpose,
        head_timeout: Duration,
    ) -> Result<Posted, Option<ConnId>> {
        let Some((conn, mut sender, driver)) = self.open::<Full<Bytes>>(purpose).await else { return Err(None) };
        let (path, session) = self.wire.post_target(token);
        let mut req = Request::post(&path)
            .header("host", self.dialer.authority())
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {}", self.shared.credential.borrow()));
        if self.wire.post_accepts_sse() {
            req = req.header("accept", "application/json, text/event-stream");
        }
        if let Some(token) = &session {
            req = req
                .header("mcp-session-id", token.as_str())
                .header("mcp-protocol-version", mcp::PROTOCOL_VERSION_STREAMABLE);
        }
        let req = match req.body(Full::new(Bytes::from(msg.to_json()))) {
            Ok(r) => r,
            Err(e) => {
                self.protocol_error(conn, "unsendable", unsendable(&path, session.as_deref(), None, &e));
                return Err(None);
            }
        };
        let mut sent = self.request_event(conn, "POST", path, None, session);
        if let (What::HttpRequest { rpc, .. }, Message::Request { id, method, params }) = (&mut sent, msg) {
            let call = params.pointer("/arguments/label").and_then(|v| v.as_str()).map(str::to_string);
            *rpc = Some(crate::trace::Sent { id: id.clone(), method: method.clone(), call });
        }
        self.rec.record(sent);
        let resp = match timeout(head_timeout, sender.send_request(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: format!("POST failed: {e}") });
                return Err(Some(conn));
            }
            Err(_) => {
                self.rec.record(What::UplinkEnded { client: self.name(), conn, reason: "POST got no response".into() });
                return Err(Some(conn));
            }
        };
        let status = resp.status().as_u16();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
        self.rec.record(What::HttpResponse { client: self.name(), conn, status, content_type });
        Ok(Posted { conn, resp, _driver: driver })
    }
}

/// A POST's response, with the task driving its connection.
pub(super) struct Posted {
    pub(super) conn: ConnId,
    pub(super) resp: hyper::Response<hyper::body::Incoming>,
    pub(super) _driver: AbortOnDrop,
}

/// Why a request could not be built: the server handed out a value no URL or
/// header can carry (a session id with a space, an event id with a newline).
pub(crate) fn unsendable(
    path: &str,
    session: Option<&str>,
    last_event_id: Option<&str>,
    e: &hyper::http::Error,
) -> String {
    let mut what = format!("the request cannot be sent ({e}): path {path:?}");
    if let Some(s) = session {
        what.push_str(&format!(", session id {s:?}"));
    }
    if let Some(l) = last_event_id {
        what.push_str(&format!(", Last-Event-ID {l:?}"));
    }
    what.push_str(": the server handed out a value no URL or header can carry");
    what
}
