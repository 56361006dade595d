//! What the stateless-http checks find, as facts (their words are in
//! `report::words`).

use crate::trace::SimTime;
use crate::vocab::{ConnId, MappingId};
use crate::wire::jsonrpc::RpcId;

/// One request of a call, as the findings name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Req {
    /// The client that sent it.
    pub client: String,
    /// The call's label.
    pub call: String,
    /// The tool.
    pub tool: String,
    /// Its JSON-RPC id.
    pub id: RpcId,
}

/// A stateless-http finding.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // the fields are named for what they hold; each variant says what it means
pub enum StatelessFinding {
    // ---- cancellation ----
    /// An execution went on to its side effect (or result) after the close
    /// of its request's stream reached the server.
    RanAfterClose { exec: u32, req: Req, closed: &'static str, closed_at: SimTime, what: &'static str, at: SimTime },
    /// An execution went on to its side effect (or result) after the server
    /// itself reported it cancelled: its own order, whatever the clock says.
    WorkAfterOwnCancel { exec: u32, req: Req, cancelled_at: SimTime, what: &'static str, at: SimTime },
    /// An execution whose stream went half-open: the server could not know.
    HalfOpen {
        exec: u32,
        req: Req,
        mapping: MappingId,
        dropped_at: SimTime,
        dead_bytes: usize,
        effect_at: Option<SimTime>,
    },

    // ---- exactly-once ----
    /// A call's side effect happened more than once, and the server had been
    /// shown that one of those requests was cancelled before its effect.
    DuplicateAfterClose {
        call: String,
        tool: String,
        effects: Vec<(u32, SimTime)>,
        cancelled_exec: u32,
        closed_at: SimTime,
    },
    /// A call's side effect happened more than once, and nothing the server
    /// saw told the requests apart: the protocol cannot prevent it.
    DuplicateUnpreventable { call: String, tool: String, effects: Vec<(u32, SimTime)> },
    /// One execution reported more than one side effect for one request.
    OneRequestManyEffects { exec: u32, call: String, tool: String, effects: Vec<SimTime> },
    /// A one-time state acted on twice.
    OnceRedeemedTwice {
        fp: String,
        call: String,
        first: (RpcId, SimTime),
        second: (RpcId, SimTime),
        by: String,
        /// The replicas that accepted it, first and second, in a deployment.
        replicas: Option<(u32, u32)>,
        /// Whether the deployment's replicas share a store. When they do not
        /// and two replicas accepted it, no server could have refused: a
        /// replica never sees another's single-use records (inherent).
        shared_store: bool,
        /// Whether the first redemption was on a replica cut from the shared
        /// store: it redeemed without consulting the single-use registry,
        /// where refusing is the one answer that keeps the state one-time.
        first_cut: bool,
    },

    // ---- state-binding ----
    /// A state minted for one principal acted on for another.
    StolenStateHonoured {
        req: Req,
        victim: String,
        thief_principal: String,
        at: SimTime,
        how: &'static str,
        with_credential: bool,
        /// The server authenticates no one: the thief's principal is as
        /// self-asserted as the owner's.
        unauthenticated: bool,
    },

    // ---- state-integrity ----
    /// An altered or moved state acted on.
    TamperedStateHonoured { req: Req, tamper: String, at: SimTime, how: &'static str },
    /// A state presented after the lifetime the server gave it, acted on.
    ExpiredStateHonoured { req: Req, expired_at: SimTime, sent_at: SimTime, how: &'static str },
    /// An execution acted, under input key `key`, on a value that is not
    /// the answer its request sent under that key (`sent_under`: the key
    /// the request did send it under, if any).
    AnswerMisread { exec: u32, req: Req, key: String, sent_under: Option<String>, at: SimTime },
    /// An execution took its side effect although its request declined the input `key`.
    RanPastDecline { exec: u32, req: Req, key: String, at: SimTime },
    /// An execution of a tool that declares inputs (`input`) ran for a
    /// request that answered none of them.
    RanUnanswered { exec: u32, req: Req, input: Vec<String>, at: SimTime },

    // ---- confidentiality ----
    /// A client received a result carrying another principal's data.
    OtherPrincipalsResult {
        req: Req,
        principal: String,
        data_of: String,
        at: SimTime,
        with_credential: bool,
        /// The server authenticates no one: principals are self-asserted.
        unauthenticated: bool,
    },

    // ---- liveness ----
    /// A call never completed.
    CallNeverCompleted { client: String, call: String, attempts: usize, last: String },
    /// A call that answered every input and had its state accepted was asked
    /// for input again, round after round, with nothing executed.
    AskedAgain { client: String, call: String, rounds: usize, at: SimTime },

    /// A listen was refused while the client had no other listen stream it could use.
    ListenRefused { client: String, id: RpcId, at: SimTime, how: String, times: usize, until: SimTime },
    /// A tool-list change never reached a client whose listen stream was open and live.
    ChangeNotDelivered { client: String, n: u32, changed_at: SimTime, id: RpcId, half_open: bool },

    // ---- protocol ----
    /// A client saw the server break the 2026-07-28 wire.
    Wire { client: String, conn: ConnId, problem: String, what: String },
    /// A server error (5xx) answered a request.
    ServerError { req: Req, status: u16 },
}
