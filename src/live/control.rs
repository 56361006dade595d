//! The control protocol `mcpsim-control/1` between a live run and the server
//! process under test (`docs/live-protocol.md` is its specification).
//!
//! One TCP connection, which the server process opens to
//! `127.0.0.1:$MCPSIM_CONTROL_PORT`; one JSON object per line each way. The
//! process says `ready` once it serves MCP on `$MCPSIM_PORT`; mcpsim then asks
//! it to issue server requests and notifications on a session, and the
//! process reports what became of them. Every report becomes the same trace
//! event a simulated server's application records, stamped with the time
//! mcpsim read it.

use crate::scenario::{Dialect, ServerConfig, ToolSpec};
use crate::server::AppCommand;
use crate::trace::stateless::{ExecStep, StateVerdict};
use crate::trace::{Outcome, What};
use crate::wire::jsonrpc::RpcId;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The protocol's name and version, as `ready` must state it.
pub const PROTOCOL: &str = "mcpsim-control/1";

/// What the server process says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum FromServer {
    /// The process serves MCP on `$MCPSIM_PORT`; the first line it sends.
    Ready {
        /// Must be [`PROTOCOL`].
        protocol: String,
        /// The server's name in reports.
        server: String,
        /// The dialects it speaks (`legacy-sse`, `streamable-http`,
        /// `stateless-http`); left out: every one, with a warning.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dialects: Option<Vec<String>>,
        /// Whether it authenticates its clients (verifies the bearer
        /// token); `false`: the principal a request names is self-asserted,
        /// and findings between principals are inherent. Left out: it does.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        authenticates: Option<bool>,
    },
    /// It issued the server request `label` as JSON-RPC id `id`.
    Issued {
        /// The session it went out on (legacy `sessionId`, or `Mcp-Session-Id`).
        session: String,
        /// The scenario client the session belongs to, as the command named it.
        client: String,
        /// The scenario's label for the request.
        label: String,
        /// `sampling/createMessage`, `roots/list` or `elicitation/create`.
        method: String,
        /// Its JSON-RPC id.
        id: RpcId,
        /// The SSE event id that carried it, if the server knows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
        /// False when the request must not be re-issued under a new id.
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        reissuable: bool,
    },
    /// What became of request `label`.
    Outcome {
        /// The scenario's label for the request.
        label: String,
        /// The JSON-RPC id the outcome concerns.
        id: RpcId,
        /// Answered, failed, re-issued or timed out.
        outcome: Outcome,
        /// The id a re-issue went out under (`outcome = "reissued"`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        new_id: Option<RpcId>,
        /// Free text for the report.
        #[serde(default)]
        detail: String,
    },
    /// It emitted notifications on a session, with these SSE event ids.
    Notified {
        /// The session they went out on.
        session: String,
        /// The scenario client the session belongs to.
        client: String,
        /// Their SSE event ids, in order.
        event_ids: Vec<String>,
    },
    /// It could not do what it was asked (no such session, say).
    Error {
        /// The scenario client the command named.
        client: String,
        /// What went wrong, for the report.
        message: String,
    },
    /// An explanation of an internal decision; never decides a verdict.
    Note {
        /// The session it concerns.
        session: String,
        /// The explanation, for the timeline.
        note: String,
    },
    /// stateless-http: one step of tool execution `exec` (the application's
    /// own number, unique over the run), serving request `id`.
    Execution {
        /// The application's number for this execution.
        exec: u32,
        /// The tool.
        tool: String,
        /// The request's `call` argument.
        call: String,
        /// The request's JSON-RPC id.
        id: RpcId,
        /// The principal whose credential the request presented.
        principal: String,
        /// The principal its `requestState` was minted for, if it continues one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on_behalf_of: Option<String>,
        /// `started`, `effect`, `cancelled` or `completed`.
        step: Step,
        /// With `started`: the input responses the tool acts on, each under
        /// the key the application read it from (an object: key -> the value
        /// found there). Absent: not said.
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        inputs: serde_json::Map<String, serde_json::Value>,
    },
    /// stateless-http: the application minted a `requestState` in answer to request `id`.
    StateMinted {
        /// The request's `call` argument.
        call: String,
        /// The request's JSON-RPC id.
        id: RpcId,
        /// The principal it was minted for.
        principal: String,
        /// The state's text (or give `fingerprint`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<String>,
        /// Its fingerprint as mcpsim computes it (FNV-1a of the text, hex), instead of `state`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fingerprint: Option<String>,
        /// How long the server will accept it, in the process's (real) milliseconds, if it expires.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lifetime_ms: Option<u64>,
        /// Whether it is a one-time redemption.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        once: bool,
    },
    /// stateless-http: what the application decided about a presented `requestState`.
    StateChecked {
        /// The request's `call` argument.
        call: String,
        /// The request's JSON-RPC id.
        id: RpcId,
        /// The principal whose credential the request presented.
        principal: String,
        /// The state's text, as presented (or give `fingerprint`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<String>,
        /// Its fingerprint, instead of `state`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fingerprint: Option<String>,
        /// Whether the application acted on it.
        accepted: bool,
        /// Why it was refused, for the report.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        why: String,
    },
    /// stateless-http: the tool list changed (the `n`th time), told to `streams` open listen streams.
    ToolsChanged {
        /// Which change this is, from 1.
        n: u32,
        /// How many open listen streams were told.
        streams: usize,
    },
}

/// A step of a tool execution, on the control connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// The execution began.
    Started,
    /// Its side effect happened.
    Effect,
    /// The application stopped it (its stream's close reached the server).
    Cancelled,
    /// Its result was handed to the transport.
    Completed,
}

impl From<Step> for ExecStep {
    fn from(s: Step) -> Self {
        match s {
            Step::Started => ExecStep::Started,
            Step::Effect => ExecStep::Effect,
            Step::Cancelled => ExecStep::Cancelled,
            Step::Completed => ExecStep::Completed,
        }
    }
}

impl From<ExecStep> for Step {
    fn from(s: ExecStep) -> Self {
        match s {
            ExecStep::Started => Step::Started,
            ExecStep::Effect => Step::Effect,
            ExecStep::Cancelled => Step::Cancelled,
            ExecStep::Completed => Step::Completed,
        }
    }
}

/// A state's fingerprint, from its text or as given; a report needs one of them.
fn fingerprint_of(state: Option<String>, fingerprint: Option<String>, what: &str) -> Result<String, String> {
    match (state, fingerprint) {
        (_, Some(fp)) => Ok(fp),
        (Some(text), None) => Ok(crate::wire::mrtr::fingerprint(&text)),
        (None, None) => Err(format!("a `{what}` report needs `state` (the state's text) or `fingerprint`")),
    }
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// What mcpsim asks the server process to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ToServer {
    /// Issue a server request (`sampling/createMessage`, `roots/list`,
    /// `elicitation/create`) on the session `session`, labelled `label`.
    Request {
        /// The session to issue it on.
        session: String,
        /// The scenario client the session belongs to (echo it in reports).
        client: String,
        /// `sampling/createMessage`, `roots/list` or `elicitation/create`.
        method: String,
        /// The scenario's label for it (echo it in reports).
        label: String,
        /// False when it must never be re-issued under a new id.
        reissuable: bool,
    },
    /// Emit `count` notifications on the session `session`.
    Notify {
        /// The session to notify on.
        session: String,
        /// The scenario client the session belongs to (echo it in reports).
        client: String,
        /// How many notifications.
        count: u64,
    },
    /// stateless-http: the tool list changed; tell every open listen stream.
    ToolsChanged,
}

impl From<AppCommand> for ToServer {
    fn from(c: AppCommand) -> Self {
        match c {
            AppCommand::ServerRequest { client, token, method, label, reissuable } => {
                ToServer::Request { session: token, client, method, label, reissuable }
            }
            AppCommand::Notify { client, token, count } => ToServer::Notify { session: token, client, count },
            AppCommand::ToolsChanged => ToServer::ToolsChanged,
        }
    }
}

impl From<ToServer> for AppCommand {
    fn from(c: ToServer) -> Self {
        match c {
            ToServer::Request { session, client, method, label, reissuable } => {
                AppCommand::ServerRequest { client, token: session, method, label, reissuable }
            }
            ToServer::Notify { session, client, count } => AppCommand::Notify { client, token: session, count },
            ToServer::ToolsChanged => AppCommand::ToolsChanged,
        }
    }
}

impl FromServer {
    /// The trace event a report stands for (`None` for `ready`); the
    /// process's real durations become scenario ones at time scale `scale`.
    /// A report the protocol allows but that lacks what the trace needs is
    /// an error, in words.
    pub fn into_what(self, scale: f64) -> Result<Option<What>, String> {
        Ok(Some(match self {
            FromServer::Ready { .. } => return Ok(None),
            FromServer::Issued { session, client, label, method, id, event_id, reissuable } => {
                What::RequestIssued { client, label, method, id, event_id, session: Some(session), reissuable }
            }
            FromServer::Outcome { label, id, outcome, new_id, detail } => {
                What::RequestOutcome { label, id, outcome, new_id, detail }
            }
            FromServer::Notified { session, client, event_ids } => {
                What::Notified { client, event_ids, session: Some(session), stream: None, replica: None }
            }
            FromServer::Error { client, message } => What::AppError { client, error: message },
            FromServer::Note { session, note } => What::ServerNote { session, note, explanation: true, replica: None },
            FromServer::Execution { exec, tool, call, id, principal, on_behalf_of, step, inputs } => What::Execution {
                exec,
                tool,
                call,
                id,
                principal,
                on_behalf_of,
                step: step.into(),
                inputs: inputs
                    .into_iter()
                    .map(|(key, value)| crate::trace::stateless::InputRead { key, value })
                    .collect(),
                replica: None,
            },
            FromServer::StateMinted { call, id, principal, state, fingerprint, lifetime_ms, once } => {
                What::StateMinted {
                    call,
                    id,
                    principal,
                    fp: fingerprint_of(state, fingerprint, "state-minted")?,
                    lifetime_us: lifetime_ms.map(|ms| (ms as f64 * 1000.0 / scale).round() as u64),
                    once,
                    replica: None,
                }
            }
            FromServer::StateChecked { call, id, principal, state, fingerprint, accepted, why } => What::StateChecked {
                call,
                id,
                principal,
                fp: fingerprint_of(state, fingerprint, "state-checked")?,
                verdict: if accepted { StateVerdict::Accepted } else { StateVerdict::Refused { why } },
                replica: None,
            },
            FromServer::ToolsChanged { n, streams } => What::ToolsChanged { n, streams },
        }))
    }

    /// The report a trace event of a server's application stands for (what
    /// `mcpsim serve` sends); `None` for events an application never records.
    pub fn from_what(w: What) -> Option<Self> {
        Some(match w {
            What::RequestIssued { client, label, method, id, event_id, session, reissuable } => FromServer::Issued {
                session: session.unwrap_or_default(),
                client,
                label,
                method,
                id,
                event_id,
                reissuable,
            },
            What::RequestOutcome { label, id, outcome, new_id, detail } => {
                FromServer::Outcome { label, id, outcome, new_id, detail }
            }
            What::Notified { client, event_ids, session, .. } => {
                FromServer::Notified { session: session.unwrap_or_default(), client, event_ids }
            }
            What::AppError { client, error } => FromServer::Error { client, message: error },
            What::ServerNote { session, note, .. } => FromServer::Note { session, note },
            What::Execution { exec, tool, call, id, principal, on_behalf_of, step, inputs, .. } => {
                FromServer::Execution {
                    exec,
                    tool,
                    call,
                    id,
                    principal,
                    on_behalf_of,
                    step: step.into(),
                    inputs: inputs.into_iter().map(|r| (r.key, r.value)).collect(),
                }
            }
            What::StateMinted { call, id, principal, fp, lifetime_us, once, .. } => FromServer::StateMinted {
                call,
                id,
                principal,
                state: None,
                fingerprint: Some(fp),
                lifetime_ms: lifetime_us.map(|us| us.div_ceil(1000)),
                once,
            },
            What::StateChecked { call, id, principal, fp, verdict, .. } => {
                let (accepted, why) = match verdict {
                    StateVerdict::Accepted => (true, String::new()),
                    StateVerdict::Refused { why } => (false, why),
                };
                FromServer::StateChecked { call, id, principal, state: None, fingerprint: Some(fp), accepted, why }
            }
            What::ToolsChanged { n, streams } => FromServer::ToolsChanged { n, streams },
            _ => return None,
        })
    }
}

/// The environment a live run hands the server process: where to serve,
/// where to report, and the server settings of the scenario, with every
/// time multiplied by the time scale.
pub fn environment(
    port: u16,
    control_port: u16,
    dialect: Dialect,
    cfg: &ServerConfig,
    tools: &[ToolSpec],
    scale: f64,
    seed: u64,
) -> Vec<(&'static str, String)> {
    let ms = |d: Duration| d.mul_f64(scale).as_millis().max(1).to_string();
    let tools: Vec<ToolWire> = tools.iter().map(|t| ToolWire::scaled(t, scale)).collect();
    vec![
        ("MCPSIM_TOOLS", serde_json::to_string(&tools).expect("tools serialize")),
        ("MCPSIM_STATE_LIFETIME_MS", ms(cfg.state_lifetime.0)),
        ("MCPSIM_PROTOCOL", PROTOCOL.to_string()),
        ("MCPSIM_PORT", port.to_string()),
        ("MCPSIM_CONTROL_PORT", control_port.to_string()),
        ("MCPSIM_DIALECT", dialect.name().to_string()),
        ("MCPSIM_HEARTBEAT_MS", ms(cfg.heartbeat.0)),
        ("MCPSIM_REQUEST_TIMEOUT_MS", ms(cfg.request_timeout.0)),
        ("MCPSIM_RETENTION", cfg.retention.to_string()),
        ("MCPSIM_FIRST_EVENT_ID", cfg.first_event_id.to_string()),
        ("MCPSIM_FENCE_GRACE_MS", ms(cfg.fence_grace.0)),
        ("MCPSIM_FENCE_DELAY_MS", if cfg.fence_delay.0.is_zero() { "0".into() } else { ms(cfg.fence_delay.0) }),
        ("MCPSIM_TIME_SCALE", scale.to_string()),
        ("MCPSIM_SEED", seed.to_string()),
    ]
    .into_iter()
    .chain((!cfg.authenticate).then(|| ("MCPSIM_AUTHENTICATE", "false".to_string())))
    .collect()
}

/// A `[[tool]]` as `MCPSIM_TOOLS` carries it (a JSON array): its times in
/// the process's real milliseconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolWire {
    /// Its name.
    pub name: String,
    /// How long one execution runs before its side effect and result.
    pub runs_ms: u64,
    /// How often it sends progress (none: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_every_ms: Option<u64>,
    /// The input it asks for first, by method (an MRTR round); none: it runs at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Further inputs it asks for in the same round, by method (the
    /// `inputRequests` keys are [`crate::wire::mrtr::input_key`]'s).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_inputs: Vec<String>,
    /// Its state is a one-time redemption.
    #[serde(default)]
    pub once: bool,
    /// Running it twice does no harm.
    #[serde(default)]
    pub idempotent: bool,
}

impl ToolWire {
    fn scaled(t: &ToolSpec, scale: f64) -> Self {
        let ms = |d: Duration| d.mul_f64(scale).as_millis() as u64;
        ToolWire {
            name: t.name.clone(),
            runs_ms: ms(t.runs),
            progress_every_ms: t.progress_every.map(|p| ms(p).max(1)),
            input: t.input.first().cloned(),
            more_inputs: t.input.iter().skip(1).cloned().collect(),
            once: t.once,
            idempotent: t.idempotent,
        }
    }

    /// The tool, its times as given (real ones, for the process).
    pub fn into_spec(self) -> ToolSpec {
        ToolSpec {
            name: self.name,
            runs: Duration::from_millis(self.runs_ms),
            progress_every: self.progress_every_ms.map(Duration::from_millis),
            input: self.input.into_iter().chain(self.more_inputs).collect(),
            once: self.once,
            idempotent: self.idempotent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_read_as_the_documented_lines() {
        let line = r#"{"type":"outcome","label":"s1","id":7,"outcome":"timed-out"}"#;
        let m: FromServer = serde_json::from_str(line).unwrap();
        assert_eq!(
            m.into_what(1.0).unwrap(),
            Some(What::RequestOutcome {
                label: "s1".into(),
                id: RpcId::Num(7),
                outcome: Outcome::TimedOut,
                new_id: None,
                detail: String::new()
            })
        );
        let ready: FromServer =
            serde_json::from_str(r#"{"type":"ready","protocol":"mcpsim-control/1","server":"x"}"#).unwrap();
        assert_eq!(ready.into_what(1.0).unwrap(), None);
        assert!(serde_json::from_str::<FromServer>(r#"{"type":"outcome","label":"s1"}"#).is_err());
    }

    #[test]
    fn what_an_application_records_survives_the_round_trip() {
        let w = What::RequestIssued {
            client: "alice".into(),
            label: "s1".into(),
            method: "roots/list".into(),
            id: RpcId::Str("a".into()),
            event_id: Some("4".into()),
            session: Some("tok".into()),
            reissuable: false,
        };
        let line = serde_json::to_string(&FromServer::from_what(w.clone()).unwrap()).unwrap();
        let back: FromServer = serde_json::from_str(&line).unwrap();
        assert_eq!(back.into_what(1.0).unwrap(), Some(w));
        let cmd = AppCommand::Notify { client: "bob".into(), token: "t".into(), count: 2 };
        assert_eq!(
            serde_json::to_string(&ToServer::from(cmd.clone())).unwrap(),
            r#"{"type":"notify","session":"t","client":"bob","count":2}"#
        );
        assert_eq!(AppCommand::from(ToServer::from(cmd.clone())), cmd);
    }

    #[test]
    fn every_message_the_protocol_document_shows_is_one_this_code_reads() {
        let doc = include_str!("../../docs/live-protocol.md");
        let blocks: Vec<&str> =
            doc.split("```json\n").skip(1).map(|b| b.split("```").next().expect("a closed block")).collect();
        assert!(blocks.len() >= 12, "{} json blocks", blocks.len());
        for b in blocks {
            let from = serde_json::from_str::<FromServer>(b).map(|_| ());
            let to = serde_json::from_str::<ToServer>(b).map(|_| ());
            assert!(from.is_ok() || to.is_ok(), "docs/live-protocol.md shows a message no side reads: {b}\n{from:?}");
        }
    }

    #[test]
    fn stateless_reports_read_as_documented_and_survive_the_round_trip() {
        // A state given as text becomes its fingerprint; a lifetime in the process's
        // milliseconds becomes scenario time at the run's scale.
        let line =
            r#"{"type":"state-minted","call":"a-1","id":1,"principal":"alice","state":"xyz","lifetime_ms":3000}"#;
        let m: FromServer = serde_json::from_str(line).unwrap();
        assert_eq!(
            m.into_what(0.05).unwrap(),
            Some(What::StateMinted {
                call: "a-1".into(),
                id: RpcId::Num(1),
                principal: "alice".into(),
                fp: crate::wire::mrtr::fingerprint("xyz"),
                lifetime_us: Some(60_000_000),
                once: false,
                replica: None,
            })
        );
        let no_state = r#"{"type":"state-checked","call":"a-1","id":2,"principal":"bob","accepted":true}"#;
        let err = serde_json::from_str::<FromServer>(no_state).unwrap().into_what(1.0).unwrap_err();
        assert!(err.contains("needs `state`"), "{err}");
        let line = r#"{"type":"execution","exec":3,"tool":"deploy","call":"deploy-1","id":2,"principal":"alice","step":"cancelled"}"#;
        let w = serde_json::from_str::<FromServer>(line).unwrap().into_what(1.0).unwrap().unwrap();
        assert!(matches!(&w, What::Execution { exec: 3, step: ExecStep::Cancelled, on_behalf_of: None, .. }), "{w:?}");
        for w in [
            w,
            What::StateChecked {
                call: "a-1".into(),
                id: RpcId::Num(2),
                principal: "bob".into(),
                fp: "0123abcd".into(),
                verdict: StateVerdict::Refused { why: "minted for alice".into() },
                replica: None,
            },
            What::StateMinted {
                call: "a-1".into(),
                id: RpcId::Str("r1".into()),
                principal: "alice".into(),
                fp: "0123abcd".into(),
                lifetime_us: Some(2_000_000),
                once: true,
                replica: None,
            },
            What::ToolsChanged { n: 2, streams: 1 },
        ] {
            let line = serde_json::to_string(&FromServer::from_what(w.clone()).unwrap()).unwrap();
            let back: FromServer = serde_json::from_str(&line).unwrap();
            assert_eq!(back.into_what(1.0).unwrap(), Some(w), "{line}");
        }
        let tools = environment(1, 2, Dialect::StatelessHttp, &ServerConfig::default(), &[], 0.5, 0);
        assert!(tools.contains(&("MCPSIM_STATE_LIFETIME_MS", "30000".into())), "{tools:?}");
    }
}
