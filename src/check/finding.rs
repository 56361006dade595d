//! What a check found, as facts: who, which connection, which ids, when, and
//! what became of it. Checks build these; `report` puts them in words (the
//! `Display` of [`Finding`] lives in `report::words`), so the wording can
//! change without touching a judgement, and a finding's kind is a value a
//! program can match on.

use crate::trace::{MappingId, Outcome, Refused, SimTime};
use crate::vocab::ConnId;
use crate::wire::jsonrpc::{RpcId, RpcSummary};

/// An SSE event as the checks name it: the message it carried, if any, and
/// its event type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    /// The JSON-RPC message in its data, if the data parsed as one.
    pub rpc: Option<RpcSummary>,
    /// Its event type.
    pub event: String,
}

/// Why no server could tell a client from a session's holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Indistinguishable {
    /// It presented the owner's credential.
    OwnersCredential,
    /// The owner opened the session with `principal`'s credential, which the
    /// client presents.
    OpenedWith {
        /// The principal the session is bound to.
        principal: String,
    },
    /// The server authenticates no one: a principal is only the name a
    /// request asserts, and the session id is the only credential.
    Unauthenticated,
}

/// Why a request's timeout is inherent, if it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rivalry {
    /// Nothing excuses it.
    None,
    /// A client no server can tell from the owner competes for the session.
    RivalHolder,
    /// The owner presented another principal's credential on the session.
    ForeignCredential,
    /// The owner's answer reached a replica that a partition cut from the
    /// shared store, which could not take it (it answered 503).
    StoreCut,
    /// The replica holding the session was cut from the shared store when
    /// the request was issued: a correct server sends nothing the store has
    /// not taken, so the request waited for the partition to heal.
    HeldForStore(u32),
    /// The owner's answer reached a replica that never held the session (a
    /// store each, and the balancer moved the owner's address), which
    /// refused it as unknown: what an inherent refusal loses is inherent.
    AnsweredElsewhere(u32),
    /// Not an excuse: the owner could not be reached only because the server
    /// refused every reconnection of hers (`status`) from `from` to `until`.
    LockedOut {
        /// The status of the first refusal.
        status: u16,
        /// The first refusal in the request's window.
        from: SimTime,
        /// The last.
        until: SimTime,
    },
}

/// What keeps a client's latest uplink from being live at the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UplinkProblem {
    /// Its resumption was refused.
    Refused(Refused),
    /// It ended, for this reason.
    Ended(String),
    /// Its NAT mapping was dropped (the fault).
    MappingDropped(String),
    /// No event stream ever answered it.
    NeverAnswered,
}

/// Where an id the session minted after a resumption showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MintedWhere {
    /// On a client's POST stream.
    Post {
        /// The client.
        client: String,
        /// Its connection.
        conn: ConnId,
    },
    /// In the application's report.
    Application,
    /// As the priming event of the resumed stream itself.
    Priming,
}

/// When a write into a dropped mapping came, against the new connection's
/// acceptance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LateWrite {
    /// The client whose mapping was dropped.
    pub client: String,
    /// The dropped mapping.
    pub mapping: MappingId,
    /// The connection whose resumption was accepted.
    pub conn: ConnId,
    /// When the client saw that acceptance.
    pub accepted_at: SimTime,
    /// Written before the client saw the acceptance, minted while the
    /// resumption was on its way and never delivered: a second writer, or
    /// a replay that left it out, and the trace cannot tell which.
    pub or_gap: bool,
}

/// One violated property, as facts. Each variant is one shape of headline.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // the fields are named for what they hold; each variant says what it means
pub enum Finding {
    /// A finding of a stateless-http check.
    Stateless(crate::check::stateless::finding::StatelessFinding),

    // ---- session-binding ----
    /// A server request written into a dropped uplink after the new one was
    /// attached.
    RequestToDeadUplink {
        write: LateWrite,
        label: Option<String>,
        msg: Msg,
        method: String,
        event: Option<String>,
        at: SimTime,
        delivered_elsewhere: bool,
        fate: Option<(Outcome, SimTime)>,
    },
    /// Other bytes written into a dropped uplink after the new one was attached.
    SecondWriter { write: LateWrite, bytes: usize, from: SimTime, carried: Option<(Msg, Option<String>)> },

    // ---- replay-integrity ----
    /// A resumption from an id the session had not minted yet, proven by an id minted later.
    MintedLater {
        client: String,
        conn: ConnId,
        from: u64,
        accepted_at: SimTime,
        newest: u64,
        id: String,
        at: SimTime,
        shown: MintedWhere,
    },
    /// A resumption from an id above anything the session showed.
    NeverShownAbove { client: String, conn: ConnId, from: u64, newest: u64, unseen: u64 },
    /// A resumption from an id older than the session retained, replayed from later.
    OlderThanRetained {
        client: String,
        conn: ConnId,
        from: u64,
        lowest: u64,
        replay_from: u64,
        resent: Option<(u64, u64)>,
    },
    /// A replay that started after the id asked for.
    /// `store_cut`: every missing event was minted on this replica while a
    /// partition cut it from the shared store, and no client saw it.
    ReplayStartedLate {
        client: String,
        conn: ConnId,
        from: u64,
        replay_from: u64,
        missing: Vec<u64>,
        store_cut: Option<u32>,
    },
    /// A replay that left ids of its window out.
    /// `store_cut`: as for [`Finding::ReplayStartedLate`].
    WindowGap { client: String, conn: ConnId, from: u64, replay_from: u64, missing: Vec<u64>, store_cut: Option<u32> },
    /// A resumption from an id no event of the session carried.
    NeverCarried { client: String, conn: ConnId, last: String, accepted_at: SimTime },
    /// A replay that skipped owed events.
    Skipped {
        client: String,
        conn: ConnId,
        last: String,
        carried: Vec<String>,
        never: Vec<String>,
        /// The replica that held the session when the events that reached
        /// no socket were minted, if a partition cut it from the shared
        /// store then (inherent: a server that writes through held them
        /// for a store that may never have taken them).
        store_cut: Option<u32>,
    },

    // ---- correlation-consistency ----
    /// A request handed out again after its answer was acknowledged.
    HandedAgain {
        client: String,
        conn: ConnId,
        label: String,
        method: String,
        event: String,
        at: SimTime,
        answered_by: String,
        acked_at: SimTime,
    },
    /// Two requests under one id while the first was pending.
    IdReused {
        client: String,
        conn: ConnId,
        id: RpcId,
        first: (String, String, SimTime),
        second: (String, String, SimTime),
    },

    // ---- inflight-disposition ----
    /// A request marked not reissuable was re-issued.
    ReissuedNotReissuable { label: String, method: String, old: RpcId, new: Option<RpcId>, at: SimTime },
    /// An answer to a tombstoned id was applied.
    AnswerToTombstone { label: String, id: RpcId, at: SimTime, tombstoned_at: SimTime },
    /// A request in flight at a resumption was never re-issued or failed.
    LeftInFlight {
        label: String,
        method: String,
        owner: String,
        conn: ConnId,
        accepted_at: SimTime,
        timed_out: Option<SimTime>,
    },
    /// A re-issue that never reached its owner, who had a usable stream.
    ReissueNeverDelivered { label: String, method: String, owner: String, new: RpcId, at: SimTime, live_since: SimTime },
    /// A message written into a dropped standalone stream after the client
    /// opened a fresh one (no `Last-Event-ID`), and delivered nowhere else.
    LostToOldStream {
        client: String,
        mapping: MappingId,
        /// The connection of the fresh standalone stream.
        conn: ConnId,
        /// When the client saw the fresh stream accepted.
        opened_at: SimTime,
        msg: Msg,
        event: Option<String>,
        at: SimTime,
    },
    /// A re-issue that is not the same request: another method, or other params.
    ReissueChanged {
        label: String,
        old: (RpcId, String),
        new: (RpcId, String),
        /// `"method"` or `"params"`: what differs.
        differs: &'static str,
        at: SimTime,
    },
    /// Two answers applied to one request.
    AnsweredTwice {
        label: String,
        method: String,
        first: (SimTime, RpcId),
        second: (SimTime, RpcId),
        /// Who sent the answer applied second, when it was not the request's owner (a thief).
        by: Option<String>,
    },
    /// An answer applied that no client had sent.
    AnswerWithoutSender { label: String, method: String, id: RpcId, at: SimTime },
    /// A request and its re-issue both reached one connection.
    ReachedTwice {
        label: String,
        client: String,
        conn: ConnId,
        reissued_at: SimTime,
        old: (RpcId, Option<String>, SimTime),
        new: (RpcId, Option<String>, SimTime),
    },

    // ---- confidentiality ----
    /// Messages of a session delivered to another principal.
    Leak {
        client: String,
        principal: String,
        owner: String,
        conn: ConnId,
        count: usize,
        first_id: Option<String>,
        last_id: Option<String>,
        requests: Vec<Msg>,
        why: Option<Indistinguishable>,
        /// The owner's live stream that accepting the resumption ended:
        /// `(owner's client, its conn, when it ended)`.
        ended: Option<(String, ConnId, SimTime)>,
    },
    /// Another principal's resumption was accepted and ended the owner's
    /// live stream, though nothing of the owner's reached it (yet).
    TakenOver {
        client: String,
        principal: String,
        owner: String,
        conn: ConnId,
        at: SimTime,
        /// The owner's stream it ended: `(owner's client, its conn, when it ended)`.
        ended: (String, ConnId, SimTime),
        why: Option<Indistinguishable>,
    },
    /// A session ended by another principal's DELETE.
    ForeignDelete {
        client: String,
        principal: String,
        owner: String,
        conn: ConnId,
        status: u16,
        at: SimTime,
        why: Option<Indistinguishable>,
    },
    /// A tool-list change another principal asked for, on a session it
    /// held by its token: the server enabled the tool, or the owner's stream
    /// was told of a change only the other principal asked for (the
    /// "session hijack prompt injection").
    ForeignToolChange {
        client: String,
        principal: String,
        owner: String,
        conn: ConnId,
        tool: String,
        /// The server answered the call with a tool result.
        enabled: bool,
        /// The owner's first `notifications/tools/list_changed` after the
        /// call: `(the owner's conn, event id, when)`.
        told: Option<(ConnId, Option<String>, SimTime)>,
        why: Option<Indistinguishable>,
    },
    /// An answer only other principals had sent was applied.
    ForeignAnswer { label: String, method: String, owner: String, at: SimTime, by: Vec<(String, String)> },

    // ---- liveness ----
    /// A request timed out unanswered.
    TimedOut { label: String, method: String, issued: SimTime, at: SimTime, rivalry: Rivalry },
    /// A request still unresolved at the end, past the bound.
    Unresolved { label: String, method: String, issued: SimTime, bound: SimTime, rivalry: Rivalry },
    /// A client's tool call whose result never reached it: the client gave
    /// up on the call's stream (`why`), or still waited at the end, longer
    /// than the bound after sending it.
    ResultLost { client: String, call: String, id: RpcId, sent: SimTime, at: SimTime, why: String, rivalry: Rivalry },
    /// A client with no live uplink at the end.
    NoLiveUplink { client: String, end: SimTime, conn: ConnId, problem: UplinkProblem, shared_credential: bool },
    /// A deployment: the balancer sent a request of a live session to a
    /// replica other than the one that created it, which refused it as
    /// unknown. With a store per replica, inherent (no server keeps such a
    /// session); with a shared store, the session was there to take over.
    SessionElsewhere { client: String, conn: ConnId, status: u16, at: SimTime, replica: u32, home: u32, shared: bool },
    /// Notifications that never reached a client whose uplink was live.
    NotificationsLost {
        client: String,
        at: SimTime,
        lost: usize,
        emitted: usize,
        first: String,
        conn: Option<ConnId>,
        live: (SimTime, SimTime),
        /// The replica holding the session, when a partition cut it from
        /// the shared store as they were emitted (inherent: a server that
        /// writes through holds them for the store, and loses them with
        /// the session if the store never took them).
        store_cut: Option<u32>,
    },

    // ---- rejection-protocol ----
    /// A resumption answered 200 with an empty stream.
    SilentRefusal { client: String, conn: ConnId },
    /// streamable-http: a resumption from an id the session never minted,
    /// answered 200 and ended with no event: a refusal in disguise.
    RefusalInDisguise { client: String, conn: ConnId, last: String },
    /// The token still served after the owner's refusal.
    TokenStillWorked { owner: String, refused_at: SimTime, client: String, conn: ConnId, at: SimTime },
    /// A refused owner never obtained a new session.
    NeverRenewed { client: String, refused_at: SimTime },
    /// A thief's refusal killed the owner's session.
    OwnerSessionKilled { thief: String, refused_at: SimTime, owner: String, conn: ConnId, at: SimTime },
    /// A resumption answered with a server error (5xx): a crash, not a refusal.
    /// (`store_cut`: the replica that answered was cut from the shared store
    /// then, which explains a 503: inherent.)
    RefusedByServerError { client: String, conn: ConnId, status: u16, store_cut: Option<u32> },
    /// A resumption the scenario expects accepted was refused.
    ValidRefused { client: String, conn: ConnId, how: Refused, step_at: SimTime },
    /// A resumption the trace proves valid was refused: from an id the
    /// client received, on its own live session, with nothing in the window
    /// but notifications the server keeps (`window`: how many, and the
    /// newest; `None` when the window was empty).
    ValidRefusedProven {
        client: String,
        conn: ConnId,
        how: Refused,
        last: u64,
        at: SimTime,
        /// The notifications in the window: `(count, newest id, retention)`.
        window: Option<(u64, u64, u64)>,
        /// A prior connection was still half-open, yet the refusal came this
        /// soon after the request, within the fence grace (the second value).
        unfenced: Option<(SimTime, SimTime)>,
    },
    /// A resumption's outcome was not the one the scenario expects.
    ExpectationMissed { client: String, conn: ConnId, got: String, expected: String, step_at: SimTime },

    // ---- stream-order ----
    /// A resumed stream re-sent an event the client held.
    ResentHeld { client: String, conn: ConnId, last: String, id: String, at: SimTime },
    /// A resumed stream sent another event under an id the client held.
    HeldIdReused {
        client: String,
        conn: ConnId,
        last: String,
        id: String,
        at: SimTime,
        sent: Msg,
        held: (Msg, ConnId, SimTime),
    },
    /// One connection delivered the same event twice.
    DeliveredTwice { client: String, conn: ConnId, id: String, at: SimTime },
    /// One connection delivered two events under one id.
    TwoEventsOneId { client: String, conn: ConnId, id: String, first: (Msg, SimTime), second: (Msg, SimTime) },
    /// An event after one with a higher id.
    OutOfOrder { client: String, conn: ConnId, id: String, after: String, at: SimTime },
    /// A fresh stream handed an event the client already held.
    FreshStreamResent { client: String, conn: ConnId, id: String, msg: Msg, at: SimTime, held: (ConnId, SimTime) },

    // ---- protocol ----
    /// The server broke HTTP or SSE.
    /// `store_cut`: the replica a partition cut from the shared store while
    /// the request waited (no-headers only).
    Protocol { client: String, conn: ConnId, what: String, store_cut: Option<u32> },
    /// The server answered a request with a server error (5xx).
    /// (`store_cut`: as in [`Finding::RefusedByServerError`].)
    ServerError { client: String, conn: ConnId, method: String, status: u16, store_cut: Option<u32> },
}
