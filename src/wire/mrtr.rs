//! MCP 2026-07-28 (`stateless-http`) on the wire, pure: the per-request
//! `_meta` and headers, `tools/call` with `inputResponses` and
//! `requestState`, reading a result's `resultType`, and the ways a
//! `tamper-request-state` step alters a state.
//!
//! Sources: `docs/specification/2026-07-28/` of
//! modelcontextprotocol/modelcontextprotocol (`basic/index.mdx` § `_meta`,
//! § ResultType; `basic/patterns/mrtr.mdx`; `basic/transports/streamable-http.mdx`
//! § Standard Request Headers). Our notes: `docs/stateless-http.md`.

use super::jsonrpc::{Message, RpcId};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The protocol version every request names (`MCP-Protocol-Version`, `_meta`).
pub const PROTOCOL_VERSION: &str = "2026-07-28";
/// The one endpoint.
pub const ENDPOINT: &str = "/mcp";
/// `_meta` key of the protocol version.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities.
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's self-description.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The key the simulated client's calls name themselves by, in `arguments`.
pub const CALL_ARG: &str = "call";
/// `_meta` key that tags every message of a listen stream with its subscription (the listen request's id).
pub const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
/// The first message of a listen stream.
pub const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
/// A tool-list change, on a listen stream that asked for it.
pub const TOOLS_CHANGED: &str = "notifications/tools/list_changed";

/// `subscriptions/listen` for tool-list changes.
pub fn listen(id: RpcId, client: &str) -> Message {
    Message::Request {
        id,
        method: "subscriptions/listen".into(),
        params: json!({"notifications": {"toolsListChanged": true}, "_meta": meta(client, None)}),
    }
}

/// A listen stream's notification `method`, tagged with subscription `id`.
pub fn on_listen(method: &str, id: &RpcId) -> Message {
    let mut params = json!({"_meta": {META_SUBSCRIPTION: id}});
    if method == ACKNOWLEDGED {
        params["notifications"] = json!({"toolsListChanged": true});
    }
    Message::Notification { method: method.into(), params }
}

/// HeaderMismatch: a standard header disagrees with the body (HTTP 400).
pub const HEADER_MISMATCH: i64 = -32020;
/// Invalid params (also a rejected `requestState` in the reference server).
pub const INVALID_PARAMS: i64 = -32602;

/// A request's `_meta`: protocol version, capabilities (all three input kinds), client info.
pub fn meta(client: &str, progress_token: Option<&str>) -> Value {
    let mut m = json!({
        META_VERSION: PROTOCOL_VERSION,
        META_CAPABILITIES: {"elicitation": {}, "sampling": {}, "roots": {}},
        META_CLIENT_INFO: {"name": client, "version": "mcpsim"},
    });
    if let Some(t) = progress_token {
        m["progressToken"] = json!(t);
    }
    m
}

/// One input an `InputRequiredResult` asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputAsk {
    /// The server's key for it (`inputRequests`, then `inputResponses`).
    pub key: String,
    /// The method it asks (`elicitation/create`, `sampling/createMessage`, `roots/list`).
    pub method: String,
}

/// One answer a retry carried in `inputResponses`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputAnswer {
    /// The key it answers.
    pub key: String,
    /// The method it answers.
    pub method: String,
    /// The client declined it (an elicitation's `action: "decline"`).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub declined: bool,
    /// The answer, as sent.
    pub value: Value,
}

/// One answer an execution acted on, as the application reports it: the
/// key it read, and the value it found there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRead {
    /// The key the application read the answer under.
    pub key: String,
    /// The value it acted on.
    pub value: Value,
}

/// What a retry carries besides the call: the input responses (by the
/// server's keys) and the state, echoed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Continuation {
    /// The `inputRequests` keys and their methods, answered in `inputResponses`.
    pub requests: Vec<(String, String)>,
    /// The `requestState`, as the client presents it.
    pub state: Option<String>,
}

/// `tools/call` of `tool` for the call `call` (its `call` argument), with a
/// continuation when it answers an `InputRequiredResult`: its `answers`
/// ([`answers`]) as `inputResponses`, and its state.
pub fn tool_call(
    id: RpcId,
    client: &str,
    tool: &str,
    call: &str,
    cont: Option<&Continuation>,
    answers: &[InputAnswer],
) -> Message {
    let mut params = json!({
        "name": tool,
        "arguments": {CALL_ARG: call},
        "_meta": meta(client, Some(&format!("{call}/{id}"))),
    });
    if !answers.is_empty() {
        let responses: serde_json::Map<String, Value> =
            answers.iter().map(|a| (a.key.clone(), a.value.clone())).collect();
        params["inputResponses"] = Value::Object(responses);
    }
    if let Some(s) = cont.and_then(|c| c.state.as_ref()) {
        params["requestState"] = json!(s);
    }
    Message::Request { id, method: "tools/call".into(), params }
}

/// The client's answers to a continuation's input requests: what `client`
/// sends for call `call` under each key (`decline`: it declines the
/// elicitations). Each answer names its key, so that an answer read under
/// another key is told apart.
pub fn answers(cont: &Continuation, client: &str, call: &str, decline: bool) -> Vec<InputAnswer> {
    cont.requests
        .iter()
        .map(|(key, method)| {
            let declined = decline && method == "elicitation/create";
            let value = input_response(method, client, call, key, declined);
            InputAnswer { key: key.clone(), method: method.clone(), declined, value }
        })
        .collect()
}

/// The client's answer to one input request (`key`, asking `method`).
fn input_response(method: &str, client: &str, call: &str, key: &str, declined: bool) -> Value {
    let words = format!("{client} answers {key} of {call}");
    match method {
        "sampling/createMessage" => {
            json!({"role": "assistant", "content": {"type": "text", "text": words}, "model": "sim"})
        }
        "roots/list" => json!({"roots": [{"uri": format!("file:///home/{client}/{key}"), "name": words}]}),
        _ if declined => json!({"action": "decline"}),
        _ => json!({"action": "accept", "content": {"confirmed": true, "note": words}}),
    }
}

/// Whether an answer declines (or cancels) what it was asked: an
/// elicitation answered with an action other than `accept`.
pub fn declines(answer: &Value) -> bool {
    answer.get("action").and_then(Value::as_str).is_some_and(|a| a != "accept")
}

/// What an application reports it read: each key and its value.
pub fn reads(inputs: &[(String, Value)]) -> Vec<InputRead> {
    inputs.iter().map(|(key, v)| InputRead { key: key.clone(), value: v.clone() }).collect()
}

/// The server's key for the `i`th of a tool's inputs, `methods`: a word for
/// the method (`confirm`, `summary`, `roots`), numbered when a method repeats.
pub fn input_key(methods: &[String], i: usize) -> String {
    let word = |m: &str| match m {
        "sampling/createMessage" => "summary",
        "roots/list" => "roots",
        _ => "confirm",
    };
    let w = word(&methods[i]);
    let before = methods[..i].iter().filter(|m| word(m) == w).count();
    if before == 0 {
        w.to_string()
    } else {
        format!("{w}{}", before + 1)
    }
}

/// The standard headers a request needs: `Mcp-Method`, and `Mcp-Name` for
/// the methods that name something.
pub fn standard_headers(msg: &Message) -> Vec<(&'static str, String)> {
    let mut out = vec![("mcp-protocol-version", PROTOCOL_VERSION.to_string())];
    if let Message::Request { method, params, .. } = msg {
        out.push(("mcp-method", method.clone()));
        if let Some(name) = params.get("name").or_else(|| params.get("uri")).and_then(Value::as_str) {
            out.push(("mcp-name", name.to_string()));
        }
    }
    out
}

/// A result as the 2026-07-28 client reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResultKind {
    /// `resultType: "complete"`.
    Complete {
        /// The result's `isError`.
        is_error: bool,
        /// The principal whose data the reference tools' result names (`for`).
        data_of: Option<String>,
    },
    /// `resultType: "input_required"`.
    InputRequired(Continuation),
}

/// Reads a result's `resultType` ("every result MUST carry" it); an error
/// says what is missing or unknown.
pub fn result_kind(result: &Value) -> Result<ResultKind, String> {
    match result.get("resultType").and_then(Value::as_str) {
        Some("complete") => Ok(ResultKind::Complete {
            is_error: result.get("isError").and_then(Value::as_bool).unwrap_or(false),
            data_of: result
                .get("structuredContent")
                .and_then(|s| s.get("for"))
                .and_then(Value::as_str)
                .map(str::to_string),
        }),
        Some("input_required") => {
            let requests: Vec<(String, String)> = result
                .get("inputRequests")
                .and_then(Value::as_object)
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| (k.clone(), v.get("method").and_then(Value::as_str).unwrap_or("").to_string()))
                        .collect()
                })
                .unwrap_or_default();
            let state = match result.get("requestState") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => return Err(format!("requestState is not a string: {other}")),
            };
            if requests.is_empty() && state.is_none() {
                return Err("an input_required result with neither inputRequests nor requestState".into());
            }
            Ok(ResultKind::InputRequired(Continuation { requests, state }))
        }
        Some(other) => Err(format!("unknown resultType {other:?}")),
        None => Err("a result without resultType".into()),
    }
}

/// An `InputRequiredResult` asking each `(key, method)` of `asks` (none:
/// no `inputRequests`), with `state` (none: no `requestState`).
pub fn input_required(id: RpcId, asks: &[(String, String)], message: &str, state: Option<&str>) -> Message {
    let params = |method: &str| match method {
        "elicitation/create" => json!({"mode": "form", "message": message,
            "requestedSchema": {"type": "object", "properties": {"confirmed": {"type": "boolean"}}}}),
        "sampling/createMessage" => {
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": message}}], "maxTokens": 16})
        }
        _ => json!({}),
    };
    let mut result = json!({"resultType": "input_required"});
    if !asks.is_empty() {
        let requests: serde_json::Map<String, Value> =
            asks.iter().map(|(k, m)| (k.clone(), json!({"method": m, "params": params(m)}))).collect();
        result["inputRequests"] = Value::Object(requests);
    }
    if let Some(st) = state {
        result["requestState"] = json!(st);
    }
    Message::Response { id, result }
}

/// A tool result that completes the call with an error, in `text`.
pub fn complete_error(id: RpcId, text: &str) -> Message {
    Message::Response {
        id,
        result: json!({"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": true}),
    }
}

/// A complete tool result, naming the principal whose data it carries.
pub fn complete(id: RpcId, text: &str, data_of: &str) -> Message {
    Message::Response {
        id,
        result: json!({
            "resultType": "complete",
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"for": data_of},
            "isError": false,
        }),
    }
}

/// `notifications/progress` for `token`.
pub fn progress(token: &str, n: u64) -> Message {
    Message::Notification {
        method: "notifications/progress".into(),
        params: json!({"progressToken": token, "progress": n, "message": format!("working ({n})")}),
    }
}

/// A state with one character changed near its end (an alphanumeric one,
/// so that a state in plain text stays well-formed and only its meaning changes).
///
/// The change always reaches the bytes a base64 or base64url state encodes:
/// the last character of such a state may carry 2 or 4 bits that decode to
/// nothing (its value is then a multiple of 4 or of 16), and a decoder that
/// ignores them would read a change of those bits as no change at all. So
/// `A` (0) becomes `Q` (16) and `0` (52) becomes `4` (56), not `B` and `1`,
/// which differ from them only in the lowest bit; every other character
/// becomes its predecessor, which for a multiple of 4 changes bit 2 or
/// above. (The TypeScript SDK 2.4.0's codec ignores those bits: an `A`
/// flipped to `B` passed its MAC.)
pub fn flip(state: &str) -> String {
    let mut chars: Vec<char> = state.chars().collect();
    if let Some(i) = (0..chars.len()).rev().find(|&i| chars[i].is_ascii_alphanumeric()) {
        chars[i] = match chars[i] {
            '0' => '4',
            'A' => 'Q',
            '9' => '8',
            'a' => 'b',
            'z' => 'y',
            'Z' => 'Y',
            c => (c as u8 - 1) as char,
        };
    } else if let Some(c) = chars.last_mut() {
        *c = if *c == 'x' { 'y' } else { 'x' };
    } else {
        chars.push('x');
    }
    chars.into_iter().collect()
}

/// A state cut to half its length (at a character boundary).
pub fn truncate(state: &str) -> String {
    state.chars().take(state.chars().count() / 2).collect()
}

/// A short, stable print of a state's text: FNV-1a (64 bits), hex.
pub fn fingerprint(state: &str) -> String {
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    for b in state.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:08x}", h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_carries_responses_and_state_at_the_top_of_params_and_a_new_id() {
        let cont =
            Continuation { requests: vec![("confirm".into(), "elicitation/create".into())], state: Some("S".into()) };
        let m = tool_call(RpcId::Num(2), "alice", "deploy", "d1", Some(&cont), &answers(&cont, "alice", "d1", false));
        let Message::Request { params, id, .. } = &m else { panic!() };
        assert_eq!(*id, RpcId::Num(2));
        assert_eq!(params["requestState"], "S");
        assert_eq!(params["inputResponses"]["confirm"]["action"], "accept");
        assert_eq!(params["arguments"]["call"], "d1");
        assert_eq!(params["_meta"][META_VERSION], PROTOCOL_VERSION);
        let h = standard_headers(&m);
        assert!(h.contains(&("mcp-method", "tools/call".into())) && h.contains(&("mcp-name", "deploy".into())));
    }

    #[test]
    fn result_types_are_read_and_unknown_or_missing_ones_are_errors() {
        let ir = input_required(RpcId::Num(1), &[("k".into(), "elicitation/create".into())], "ok?", Some("st"));
        let Message::Response { result, .. } = ir else { panic!() };
        assert_eq!(
            result_kind(&result).unwrap(),
            ResultKind::InputRequired(Continuation {
                requests: vec![("k".into(), "elicitation/create".into())],
                state: Some("st".into())
            })
        );
        let Message::Response { result, .. } = complete(RpcId::Num(1), "done", "alice") else { panic!() };
        assert_eq!(
            result_kind(&result).unwrap(),
            ResultKind::Complete { is_error: false, data_of: Some("alice".into()) }
        );
        assert!(result_kind(&json!({"content": []})).unwrap_err().contains("without resultType"));
        assert!(result_kind(&json!({"resultType": "partial"})).unwrap_err().contains("unknown resultType"));
        assert!(result_kind(&json!({"resultType": "input_required"})).is_err());
    }

    #[test]
    fn tampering_changes_the_state_and_keeps_plain_text_well_formed() {
        let s = r#"{"p":"alice","n":"ab12"}"#;
        let f = flip(s);
        assert_ne!(f, s);
        assert!(serde_json::from_str::<Value>(&f).is_ok(), "{f}");
        assert_eq!(truncate("abcdef"), "abc");
        // The last character of base64 may carry bits that decode to nothing:
        // the flip must change a bit that decodes (bit 4 for A, bit 2 for 0).
        let b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let value = |c: char| b64.find(c).unwrap();
        for (tail, significant_from) in [("A", 4), ("Q", 4), ("g", 4), ("w", 4), ("E", 2), ("0", 2), ("8", 2)] {
            let f = flip(&format!("xyz{tail}"));
            let changed = value(f.chars().last().unwrap()) ^ value(tail.chars().next().unwrap());
            assert!(changed >> significant_from != 0, "{tail} -> {f}: only bits below {significant_from} changed");
        }
        assert_ne!(fingerprint("a"), fingerprint("b"));
        assert_eq!(fingerprint("a").len(), 8);
    }
}
