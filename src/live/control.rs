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

use crate::scenario::{Dialect, ServerConfig};
use crate::server::AppCommand;
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
    /// The trace event a report stands for (`None` for `ready`).
    pub fn into_what(self) -> Option<What> {
        Some(match self {
            FromServer::Ready { .. } => return None,
            FromServer::Issued { session, client, label, method, id, event_id, reissuable } => {
                What::RequestIssued { client, label, method, id, event_id, session: Some(session), reissuable }
            }
            FromServer::Outcome { label, id, outcome, new_id, detail } => {
                What::RequestOutcome { label, id, outcome, new_id, detail }
            }
            FromServer::Notified { session, client, event_ids } => {
                What::Notified { client, event_ids, session: Some(session) }
            }
            FromServer::Error { client, message } => What::AppError { client, error: message },
            FromServer::Note { session, note } => What::ServerNote { session, note, explanation: true },
        })
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
            What::Notified { client, event_ids, session } => {
                FromServer::Notified { session: session.unwrap_or_default(), client, event_ids }
            }
            What::AppError { client, error } => FromServer::Error { client, message: error },
            What::ServerNote { session, note, .. } => FromServer::Note { session, note },
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
    scale: f64,
    seed: u64,
) -> Vec<(&'static str, String)> {
    let ms = |d: Duration| d.mul_f64(scale).as_millis().max(1).to_string();
    vec![
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_read_as_the_documented_lines() {
        let line = r#"{"type":"outcome","label":"s1","id":7,"outcome":"timed-out"}"#;
        let m: FromServer = serde_json::from_str(line).unwrap();
        assert_eq!(
            m.into_what(),
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
        assert_eq!(ready.into_what(), None);
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
        assert_eq!(back.into_what(), Some(w));
        let cmd = AppCommand::Notify { client: "bob".into(), token: "t".into(), count: 2 };
        assert_eq!(
            serde_json::to_string(&ToServer::from(cmd.clone())).unwrap(),
            r#"{"type":"notify","session":"t","client":"bob","count":2}"#
        );
        assert_eq!(AppCommand::from(ToServer::from(cmd.clone())), cmd);
    }
}
