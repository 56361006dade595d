//! JSON-RPC 2.0 and the MCP messages mcpsim uses.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fmt;

/// A JSON-RPC id: a string or an integer.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RpcId {
    /// An integer id.
    Num(i64),
    /// A string id.
    Str(String),
}

impl fmt::Display for RpcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcId::Num(n) => write!(f, "{n}"),
            RpcId::Str(s) => f.write_str(s),
        }
    }
}

/// A parsed JSON-RPC 2.0 message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// A request: it has a method and an id, and expects a response.
    Request {
        /// Its id, which the response repeats.
        id: RpcId,
        /// The method it calls.
        method: String,
        /// Its `params` (`null` when absent).
        params: Value,
    },
    /// A notification: a method without an id; nothing answers it.
    Notification {
        /// The method it calls.
        method: String,
        /// Its `params` (`null` when absent).
        params: Value,
    },
    /// A successful response.
    Response {
        /// The id of the request it answers.
        id: RpcId,
        /// Its `result`.
        result: Value,
    },
    /// An error response.
    Error {
        /// The id of the request it answers; `None` when the error names none.
        id: Option<RpcId>,
        /// The error's `code` (0 when absent).
        code: i64,
        /// The error's `message` (empty when absent).
        message: String,
    },
}

/// Why a text is not a JSON-RPC 2.0 message.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The text is not JSON.
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The text is JSON, but not a JSON-RPC 2.0 message; says what is wrong.
    #[error("not a JSON-RPC 2.0 message: {0}")]
    Shape(&'static str),
}

impl Message {
    /// Parses a message from JSON text.
    pub fn parse(text: &str) -> Result<Message, ParseError> {
        let v: Value = serde_json::from_str(text)?;
        Self::from_value(v)
    }

    /// Reads a message from a JSON value: a `method` makes a request (with an
    /// id) or a notification; else a `result` or an `error` makes a response.
    pub fn from_value(v: Value) -> Result<Message, ParseError> {
        let Value::Object(mut o) = v else { return Err(ParseError::Shape("not an object")) };
        if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(ParseError::Shape("missing \"jsonrpc\": \"2.0\""));
        }
        let id = match o.remove("id") {
            None | Some(Value::Null) => None,
            Some(v) => {
                Some(serde_json::from_value(v).map_err(|_| ParseError::Shape("id is neither string nor integer"))?)
            }
        };
        if let Some(method) = o.remove("method") {
            let Value::String(method) = method else { return Err(ParseError::Shape("method is not a string")) };
            let params = o.remove("params").unwrap_or(Value::Null);
            return Ok(match id {
                Some(id) => Message::Request { id, method, params },
                None => Message::Notification { method, params },
            });
        }
        if let Some(result) = o.remove("result") {
            let id = id.ok_or(ParseError::Shape("response without id"))?;
            return Ok(Message::Response { id, result });
        }
        if let Some(err) = o.remove("error") {
            let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
            let message = err.get("message").and_then(Value::as_str).unwrap_or("").to_string();
            return Ok(Message::Error { id, code, message });
        }
        Err(ParseError::Shape("neither request, notification nor response"))
    }

    /// The message as a JSON value, with `"jsonrpc": "2.0"`.
    pub fn to_value(&self) -> Value {
        match self {
            Message::Request { id, method, params } => {
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
            }
            Message::Notification { method, params } => json!({"jsonrpc": "2.0", "method": method, "params": params}),
            Message::Response { id, result } => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Message::Error { id, code, message } => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        }
    }

    /// The message as compact JSON text.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// What the trace keeps of it: kind, method and id, and for a request
    /// a digest of its params.
    pub fn summary(&self) -> RpcSummary {
        match self {
            Message::Request { id, method, params } => RpcSummary {
                kind: RpcKind::Request,
                method: Some(method.clone()),
                id: Some(id.clone()),
                params: Some(params_digest(params)),
            },
            Message::Notification { method, .. } => {
                RpcSummary { kind: RpcKind::Notification, method: Some(method.clone()), id: None, params: None }
            }
            Message::Response { id, .. } => {
                RpcSummary { kind: RpcKind::Response, method: None, id: Some(id.clone()), params: None }
            }
            Message::Error { id, .. } => {
                RpcSummary { kind: RpcKind::Error, method: None, id: id.clone(), params: None }
            }
        }
    }
}

/// What the trace keeps of a message: its kind, method and id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcSummary {
    /// Which kind of message it is.
    pub kind: RpcKind,
    /// The method, for a request or a notification.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub method: Option<String>,
    /// The id, for a request or a response (an error's, if it names one).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub id: Option<RpcId>,
    /// For a request, a digest of its `params` ([`params_digest`]): a
    /// re-issue must carry the same request under a fresh id, and the
    /// trace cuts the data it keeps, so the digest is what tells.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub params: Option<String>,
}

/// A digest of a request's `params`: FNV-1a (64 bits, as 16 hex digits)
/// of their JSON with object keys sorted, leaving out the top-level
/// `_meta` (protocol metadata such as a progress token, which a re-issue
/// may renew). Absent params digest as `null`.
pub fn params_digest(params: &Value) -> String {
    fn feed(h: &mut u64, bytes: &[u8]) {
        for b in bytes {
            *h ^= u64::from(*b);
            *h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn walk(h: &mut u64, v: &Value, top: bool) {
        match v {
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().filter(|k| !(top && k.as_str() == "_meta")).collect();
                keys.sort();
                feed(h, b"{");
                for k in keys {
                    feed(h, Value::String(k.clone()).to_string().as_bytes());
                    feed(h, b":");
                    walk(h, &o[k], false);
                    feed(h, b",");
                }
                feed(h, b"}");
            }
            Value::Array(a) => {
                feed(h, b"[");
                for x in a {
                    walk(h, x, false);
                    feed(h, b",");
                }
                feed(h, b"]");
            }
            other => feed(h, other.to_string().as_bytes()),
        }
    }
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    walk(&mut h, params, true);
    format!("{h:016x}")
}

/// The kind of a JSON-RPC message, as [`RpcSummary`] records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RpcKind {
    /// A request ([`Message::Request`]).
    Request,
    /// A notification ([`Message::Notification`]).
    Notification,
    /// A successful response ([`Message::Response`]).
    Response,
    /// An error response ([`Message::Error`]).
    Error,
}

/// MCP methods and payloads used by the simulation.
pub mod mcp {
    use super::*;

    /// The version the `legacy-sse` dialect negotiates.
    pub const PROTOCOL_VERSION_LEGACY: &str = "2024-11-05";
    /// The version the `streamable-http` dialect negotiates.
    pub const PROTOCOL_VERSION_STREAMABLE: &str = "2025-11-25";
    /// The server-to-client request methods a scenario may issue.
    pub const SERVER_REQUEST_METHODS: [&str; 3] = ["sampling/createMessage", "roots/list", "elicitation/create"];

    /// The client's `initialize` request, at the `legacy-sse` protocol version.
    pub fn initialize(id: RpcId, client_name: &str) -> Message {
        initialize_at(id, client_name, PROTOCOL_VERSION_LEGACY)
    }

    /// The client's `initialize` request at protocol `version`, named `client_name`.
    pub fn initialize_at(id: RpcId, client_name: &str, version: &str) -> Message {
        Message::Request {
            id,
            method: "initialize".into(),
            params: json!({
                "protocolVersion": version,
                "capabilities": {"sampling": {}, "roots": {"listChanged": true}, "elicitation": {}},
                "clientInfo": {"name": client_name, "version": "0"}
            }),
        }
    }

    /// The reference server's `initialize` result, at the `legacy-sse` protocol version.
    pub fn initialize_result(id: RpcId) -> Message {
        initialize_result_at(id, PROTOCOL_VERSION_LEGACY)
    }

    /// The reference server's `initialize` result at protocol `version`.
    pub fn initialize_result_at(id: RpcId, version: &str) -> Message {
        Message::Response {
            id,
            result: json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcpsim-reference", "version": env!("CARGO_PKG_VERSION")}
            }),
        }
    }

    /// The client's `notifications/initialized`, sent once the handshake completes.
    pub fn initialized() -> Message {
        Message::Notification { method: "notifications/initialized".into(), params: json!({}) }
    }

    /// A server request whose content names the conversation it belongs to:
    /// that content is what a leak exposes.
    pub fn server_request(id: RpcId, method: &str, label: &str, owner: &str) -> Message {
        let params = match method {
            "sampling/createMessage" => json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": format!("{label}: continue {owner}'s conversation")}}],
                "maxTokens": 256
            }),
            "elicitation/create" => json!({
                "message": format!("{label}: {owner}, please confirm"),
                "requestedSchema": {"type": "object", "properties": {}}
            }),
            _ => json!({}),
        };
        Message::Request { id, method: method.into(), params }
    }

    /// The client's answer to a server request.
    pub fn answer(id: RpcId, method: &str, client: &str) -> Message {
        let result = match method {
            "sampling/createMessage" => {
                json!({"role": "assistant", "content": {"type": "text", "text": format!("answer from {client}")}, "model": "sim"})
            }
            "roots/list" => json!({"roots": [{"uri": format!("file:///home/{client}"), "name": client}]}),
            "elicitation/create" => json!({"action": "accept", "content": {}}),
            _ => json!({}),
        };
        Message::Response { id, result }
    }

    /// `tools/call` of the `ask` tool: the server issues `method` (labelled
    /// `label`, owned by `client`) related to the call, then returns.
    pub fn call_tool(id: RpcId, client: &str, label: &str, method: &str) -> Message {
        Message::Request {
            id,
            method: "tools/call".into(),
            params: json!({"name": ASK_TOOL, "arguments": {"client": client, "label": label, "method": method}}),
        }
    }

    /// `tools/call` of the `enable_tool` tool: the server enables `tool` and
    /// tells the session its tool list changed.
    pub fn enable_tool(id: RpcId, tool: &str) -> Message {
        Message::Request {
            id,
            method: "tools/call".into(),
            params: json!({"name": ENABLE_TOOL, "arguments": {"tool": tool}}),
        }
    }

    /// The reference engine's tool that changes a session's tool list.
    pub const ENABLE_TOOL: &str = "enable_tool";

    /// `notifications/tools/list_changed`.
    pub fn tools_list_changed() -> Message {
        Message::Notification { method: "notifications/tools/list_changed".into(), params: json!({}) }
    }

    /// The name of the tool every server under test offers for related requests.
    pub const ASK_TOOL: &str = "ask";

    /// A tool result.
    pub fn tool_result(id: RpcId, text: &str, is_error: bool) -> Message {
        Message::Response { id, result: json!({"content": [{"type": "text", "text": text}], "isError": is_error}) }
    }

    /// A `notifications/message` log notification saying `note {n}` (the
    /// reference engine's `notify` passes the event id it will carry).
    pub fn progress(n: u64) -> Message {
        Message::Notification {
            method: "notifications/message".into(),
            params: json!({"level": "info", "data": format!("note {n}")}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_kind() {
        let msgs = [
            mcp::initialize(RpcId::Num(1), "alice"),
            mcp::initialized(),
            mcp::server_request(RpcId::Str("req-42".into()), "sampling/createMessage", "req-42", "alice"),
            mcp::answer(RpcId::Str("req-42".into()), "roots/list", "alice"),
            Message::Error { id: Some(RpcId::Num(3)), code: -32600, message: "bad".into() },
        ];
        for m in msgs {
            assert_eq!(Message::parse(&m.to_json()).unwrap(), m);
        }
    }

    #[test]
    fn rejects_non_jsonrpc() {
        assert!(Message::parse("{}").is_err());
        assert!(Message::parse("[1]").is_err());
        assert!(Message::parse("{\"jsonrpc\":\"2.0\",\"id\":1}").is_err());
        assert!(Message::parse("{\"jsonrpc\":\"2.0\",\"method\":3}").is_err());
        assert!(Message::parse("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"x\"}").is_err());
        assert!(Message::parse("nope").is_err());
    }

    #[test]
    fn summary_names_method_and_id() {
        let m = mcp::server_request(RpcId::Str("req-43".into()), "roots/list", "req-43", "alice");
        let s = m.summary();
        assert_eq!(
            (s.kind, s.method.as_deref(), s.id.clone()),
            (RpcKind::Request, Some("roots/list"), Some(RpcId::Str("req-43".into())))
        );
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.starts_with(r#"{"kind":"request","method":"roots/list","id":"req-43","params":""#), "{json}");
    }

    #[test]
    fn params_digest_ignores_key_order_and_meta_but_not_content() {
        let d = |t: &str| params_digest(&serde_json::from_str(t).unwrap());
        assert_eq!(d(r#"{"a":1,"b":[1,{"x":2,"y":3}]}"#), d(r#"{"b":[1,{"y":3,"x":2}],"a":1}"#));
        assert_eq!(d(r#"{"a":1}"#), d(r#"{"a":1,"_meta":{"progressToken":7}}"#));
        assert_ne!(d(r#"{"a":1}"#), d(r#"{}"#));
        assert_ne!(d(r#"{"a":1}"#), d("null"));
        assert_ne!(d(r#"{"a":"1"}"#), d(r#"{"a":1}"#));
        assert_ne!(d(r#"{"b":{"_meta":1}}"#), d(r#"{"b":{}}"#), "only the top-level _meta is metadata");
        assert_eq!(d("null").len(), 16);
    }
}
