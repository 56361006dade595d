//! Put your own hyper MCP server under mcpsim.
//!
//! This is a small legacy-sse MCP server written directly on hyper, the way
//! a user's server would be: sessions, an event log, replay after
//! `Last-Event-ID`. It implements `mcpsim::server::ServerPlug`, so mcpsim runs
//! it on the simulated network and judges it with the same checks as the
//! built-in servers. Its resumption has the classic bug: it never retires the
//! old stream, so `nat-rebind` catches it.
//!
//! Run: `cargo run --example own_server`

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::{body::Incoming, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use mcpsim::server::{AppCommand, AppHook, ServerPlug};
use mcpsim::trace::Outcome;
use mcpsim::wire::body::ChannelBody;
use mcpsim::wire::jsonrpc::{mcp, Message, RpcId};
use mcpsim::wire::sse;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use tokio::sync::mpsc::UnboundedSender;

type Body = BoxBody<Bytes, Infallible>;

#[derive(Default)]
struct Session {
    log: Vec<(u64, String)>,
    streams: Vec<UnboundedSender<Bytes>>,
    pending: BTreeMap<String, String>,
}

#[derive(Default)]
struct MyServer {
    sessions: RefCell<BTreeMap<String, Session>>,
    next: RefCell<u64>,
}

impl MyServer {
    fn emit(&self, token: &str, msg: &Message) -> Option<u64> {
        let mut sessions = self.sessions.borrow_mut();
        let s = sessions.get_mut(token)?;
        let id = 1000 + s.log.len() as u64;
        let data = msg.to_json();
        s.log.push((id, data.clone()));
        s.streams.retain(|tx| !tx.is_closed());
        // The bug: the first registered stream gets everything, even after a resume.
        if let Some(tx) = s.streams.first() {
            let _ = tx.send(Bytes::from(sse::encode(Some(&id.to_string()), None, &data)));
        }
        Some(id)
    }

    async fn handle(self: Rc<Self>, app: AppHook, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
        let token = req.uri().query().and_then(|q| q.strip_prefix("sessionId=")).map(str::to_string);
        let last: Option<u64> = req.headers().get("last-event-id").and_then(|v| v.to_str().ok()?.parse().ok());
        if req.method() == "GET" {
            let (tx, body) = ChannelBody::new();
            let token = match token {
                Some(t) if self.sessions.borrow().contains_key(&t) => t,
                Some(_) => return Ok(status(StatusCode::NOT_FOUND)),
                None => {
                    let n = *self.next.borrow() + 1;
                    *self.next.borrow_mut() = n;
                    let t = format!("my-{n}");
                    self.sessions.borrow_mut().insert(t.clone(), Session::default());
                    let _ = tx.send(Bytes::from(sse::encode(
                        None,
                        Some("endpoint"),
                        &format!("/mcp/messages?sessionId={t}"),
                    )));
                    t
                }
            };
            let mut sessions = self.sessions.borrow_mut();
            let s = sessions.get_mut(&token).expect("exists");
            for (id, data) in s.log.iter().filter(|(id, _)| Some(*id) > last) {
                let _ = tx.send(Bytes::from(sse::encode(Some(&id.to_string()), None, data)));
            }
            s.streams.push(tx);
            let mut r = Response::new(body.boxed());
            r.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            return Ok(r);
        }
        let Some(token) = token else { return Ok(status(StatusCode::NOT_FOUND)) };
        let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        match Message::parse(&String::from_utf8_lossy(&bytes)) {
            Ok(Message::Request { id, method, .. }) if method == "initialize" => {
                self.emit(&token, &mcp::initialize_result(id));
            }
            Ok(Message::Response { id, .. }) => {
                let label = self.sessions.borrow_mut().get_mut(&token).and_then(|s| s.pending.remove(&id.to_string()));
                if let Some(label) = label {
                    app.report.outcome(&label, &id, Outcome::Answered, None, "answered");
                }
            }
            _ => {}
        }
        Ok(status(StatusCode::ACCEPTED))
    }
}

fn status(code: StatusCode) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::new()).boxed());
    *r.status_mut() = code;
    r
}

/// The plug: serve HTTP on mcpsim's listener, and let the harness drive the application.
struct MyPlug;

impl ServerPlug for MyPlug {
    fn name(&self) -> &str {
        "my-server"
    }

    fn serve(&self, listener: mcpsim::net::Listener, app: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let server = Rc::new(MyServer::default());
            let (srv, hook) = (server.clone(), app.clone());
            tokio::task::spawn_local(async move {
                loop {
                    match hook.commands.recv().await {
                        AppCommand::ServerRequest { client, token, method, label, .. } => {
                            let id = RpcId::Str(label.clone());
                            let msg = mcp::server_request(id.clone(), &method, &label, &client);
                            match srv.emit(&token, &msg) {
                                Some(event) => {
                                    srv.sessions
                                        .borrow_mut()
                                        .get_mut(&token)
                                        .unwrap()
                                        .pending
                                        .insert(label.clone(), label.clone());
                                    hook.report.issued(&client, &label, &method, &id, Some(event.to_string()));
                                }
                                None => hook.report.error(&client, "no such session"),
                            }
                        }
                        AppCommand::Notify { client, token, count } => {
                            let ids = (0..count)
                                .filter_map(|n| srv.emit(&token, &mcp::progress(n)))
                                .map(|i| i.to_string())
                                .collect();
                            hook.report.notified(&client, ids);
                        }
                        // Commands of other dialects (stateless-http's tool-list changes):
                        // this server speaks streamable-http only.
                        _ => {}
                    }
                }
            });
            while let Ok((stream, _)) = listener.accept().await {
                let (server, app) = (server.clone(), app.clone());
                let svc = hyper::service::service_fn(move |req| server.clone().handle(app.clone(), req));
                tokio::task::spawn_local(async move {
                    let _ =
                        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        })
    }
}

fn main() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/nat-rebind.toml");
    let plan = mcpsim::scenario::Plan::load(path.as_ref()).expect("bundled scenario");
    let run = mcpsim::run_with(&plan, Rc::new(MyPlug), plan.seed).expect("run");
    let verdicts = mcpsim::check::judge(&run.trace);
    print!("{}", mcpsim::report::text(&run, &verdicts, None));
    let violated = mcpsim::check::violated(&verdicts);
    assert!(
        violated.contains(&mcpsim::check::CheckId::SessionBinding),
        "mcpsim catches the stale-stream bug: {violated:?}"
    );
}
