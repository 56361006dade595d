//! HTTP responses both reference servers build (the stateful engine and
//! the stateless one), and the credential a request presents.

use crate::wire::body::ChannelBody;
use crate::wire::jsonrpc::Message;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use std::convert::Infallible;

/// A response body: a whole one, or a channel-fed stream.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// A JSON response with `status`.
pub(crate) fn full(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(text)).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert("content-type", "application/json".parse().unwrap());
    r
}

/// A JSON-RPC error without an id, with `status`.
pub(crate) fn rpc_error(status: StatusCode, message: &str) -> Response<Body> {
    full(status, Message::Error { id: None, code: -32000, message: message.into() }.to_json())
}

/// A `200 text/event-stream` response fed by `body`.
pub(crate) fn sse_response(body: ChannelBody) -> Response<Body> {
    let mut r = Response::new(body.boxed());
    r.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    r.headers_mut().insert("cache-control", "no-cache".parse().unwrap());
    r
}

/// The principal a request's `Authorization: Bearer` names (`anonymous` without one).
pub(crate) fn credential(req: &Request<Incoming>) -> String {
    req.headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("anonymous")
        .to_string()
}
