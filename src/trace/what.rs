//! The event kinds: what a trace event says happened, and its fields in the JSON.

use super::*;

/// The event kinds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum What {
    /// The run's header: what ran, and the bound liveness is judged against.
    RunStarted {
        /// The scenario's name.
        scenario: String,
        /// The server under test, by name.
        server: String,
        /// The dialect the run speaks (`legacy-sse`, `streamable-http`, `stateless-http`):
        /// what the checks read the rest of the trace as. Traces written
        /// before it was recorded are legacy-sse's, the only dialect then.
        #[serde(default)]
        dialect: crate::scenario::Dialect,
        /// The seed of the run.
        seed: u64,
        /// The scenario's duration, in microseconds of simulated time.
        duration_us: u64,
        /// The server's `request_timeout`, in microseconds: `liveness` judges against it.
        liveness_bound_us: u64,
        /// Whether the server authenticates its clients (absent: it does). When it does not, a
        /// principal is only the name a request's `Authorization` header asserts, and findings
        /// between principals are inherent: a thief can assert the owner's name as easily.
        #[serde(default = "super::yes", skip_serializing_if = "super::is_true")]
        authenticates: bool,
        /// How many event ids per stream the server may mint without reporting them, where no
        /// socket shows them either (absent: none). rmcp's tap reports the ids it fails to send
        /// into a closed stream, but not those still queued in the stream's channel when its socket
        /// went: no check may read "not reported" as "never minted".
        #[serde(default, skip_serializing_if = "super::is_zero")]
        unreported_per_stream: u32,
        /// How many events per session the server says it keeps for replay (absent: it does not
        /// say). `rejection-protocol` judges a refusal of a window the server says it keeps.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retention: Option<u64>,
        /// How long the server says a resumption waits for its prior writer
        /// to be fenced, in microseconds (absent: it does not say). A refusal
        /// faster than that did not wait for a fence.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fence_grace_us: Option<u64>,
    },
    /// A client of the scenario and the principal it is.
    ClientJoined {
        /// The client's name.
        client: String,
        /// The credential it presents (`Authorization: Bearer <principal>`).
        principal: String,
        /// Silence on a stream after which it gives up and resumes, in microseconds.
        heartbeat_timeout_us: u64,
        /// How long it takes to answer a server request.
        think_time_us: u64,
        /// The longest wait between its reconnection attempts.
        #[serde(default)]
        max_backoff_us: u64,
    },
    /// The step loop applied a scenario step.
    Step {
        /// The step's index in the plan's `steps`.
        index: usize,
        /// The step's kind (`do = "..."`).
        #[serde(rename = "do")]
        action: StepKind,
        /// What the step does, in words.
        detail: String,
        /// A resume step's expectation (`expect = "accepted"` or `"refused"`).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        expect: Option<StepExpect>,
        /// A call-tool step's request label: the server request the call
        /// issues rides that call's stream, never the session's GET stream.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        call: Option<String>,
    },

    /// A step acted on nothing: its fault found nothing to hit (a rebind before any mapping was
    /// open), or its client could not carry it out (a `call` by a crashed client, a `resume` with
    /// no id to resume from). A run with `[expect]` is not met because of it unless the step says
    /// `may_miss = true`.
    StepMissed {
        /// The step's index in the plan's `steps`.
        index: usize,
        /// The step's kind (`do = "..."`).
        #[serde(rename = "do")]
        action: StepKind,
        /// Why it acted on nothing, in words.
        why: String,
    },

    // ---- observed by clients ----
    /// A client opened a TCP connection (its local port links it to a NAT mapping).
    Connect {
        /// The client that connected.
        client: String,
        /// Its number for the connection: unique per client for the whole run, from 1.
        conn: ConnId,
        /// The connection's local port: a NAT mapping's `down_port`.
        port: u16,
        /// What the connection is for.
        purpose: Purpose,
    },
    /// A client could not open a TCP connection (an error, or no answer within 10 s).
    ConnectFailed {
        /// The client that tried.
        client: String,
        /// The number the connection would have had.
        conn: ConnId,
        /// Why it failed.
        error: String,
    },
    /// A client sent an HTTP request on one of its connections.
    HttpRequest {
        /// The client that sent it.
        client: String,
        /// The connection it went out on.
        conn: ConnId,
        /// The HTTP method (`GET`, `POST`, `DELETE`).
        method: String,
        /// The request path (legacy-sse carries the session token in its `sessionId` query).
        path: String,
        /// The `Last-Event-ID` header, if the request carried one: a resumption.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        last_event_id: Option<String>,
        /// The `Mcp-Session-Id` presented (streamable-http).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        session: Option<String>,
        /// The principal whose credential the request presented, when it is not the client's own
        /// (it took another's in a `steal-token` step): what the server saw, so the checks need not
        /// guess whether a theft took effect.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        credential: Option<String>,
        /// The JSON-RPC request a POST carried (not a notification or an answer): the client waits
        /// for its response, and `liveness` judges whether it came.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        rpc: Option<Sent>,
    },
    /// A client got the head of an HTTP response.
    HttpResponse {
        /// The client that got it.
        client: String,
        /// The connection it came on.
        conn: ConnId,
        /// The HTTP status code.
        status: u16,
        /// The `Content-Type` header, if any.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        content_type: Option<String>,
    },
    /// An SSE event delivered to a client.
    SseEvent {
        /// The client that received it.
        client: String,
        /// The connection whose stream carried it.
        conn: ConnId,
        /// The event's `id:` field, if it set one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        id: Option<String>,
        /// The event type (`message` when the block named none).
        event: String,
        /// The JSON-RPC message in its data, if the data parsed as one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        rpc: Option<RpcSummary>,
        /// The data, cut to 256 characters: enough to show leaked content.
        data: String,
    },
    /// A client's uplink stream ended or failed.
    UplinkEnded {
        /// The client whose connection ended.
        client: String,
        /// The connection (a stream, or a POST that failed).
        conn: ConnId,
        /// Why it ended, in words.
        reason: String,
    },
    /// A client saw the server break HTTP or SSE: `problem` is `garbage`,
    /// `no-headers`, `mid-event`, `too-large`, `drip` or `unsendable` (a session or event id from the server that no URL or header can carry).
    ProtocolError {
        /// The client that saw it.
        client: String,
        /// The connection it happened on.
        conn: ConnId,
        /// The kind of breakage (one of the words above).
        problem: String,
        /// What exactly was wrong, in words.
        what: String,
    },
    /// A client gave up on a silent uplink (missed heartbeats).
    UplinkSilent {
        /// The client that gave up.
        client: String,
        /// The silent connection.
        conn: ConnId,
        /// How long it stayed silent, in milliseconds: the client's heartbeat timeout.
        silent_ms: u64,
    },
    /// A client learned a session token: from the `endpoint` event of its uplink (legacy-sse), or
    /// from the `Mcp-Session-Id` header of the response to its `initialize` POST (streamable-http).
    SessionToken {
        /// The client that learned it.
        client: String,
        /// The connection that carried it.
        conn: ConnId,
        /// The session token.
        token: String,
    },
    /// A client POSTed its answer to a server request; `status` is the
    /// server's HTTP status for it (none if the POST got no response).
    Answer {
        /// The client that answered.
        client: String,
        /// The id of the server request it answered.
        id: RpcId,
        /// The method of that request.
        method: String,
        /// The HTTP status of the POST, if it got a response.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        status: Option<u16>,
        /// The session token the POST presented (JSON-RPC ids are unique
        /// only within a session: servers restart them per session).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        session: Option<String>,
        /// The connection the POST went out on (its request shows when it was sent).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        conn: Option<ConnId>,
    },
    /// A client dropped a request it will not answer (it waits for a re-issue).
    Abandoned {
        /// The client that dropped it.
        client: String,
        /// The id of the server request.
        id: RpcId,
        /// Why it will not answer, in words.
        why: String,
    },
    /// A client saw its resumption refused.
    Rejected {
        /// The client whose resumption was refused.
        client: String,
        /// The connection that carried the resumption.
        conn: ConnId,
        /// How the server refused it.
        how: Refused,
    },
    /// The client dropped its session and starts a fresh one.
    Reinitialize {
        /// The client that starts over.
        client: String,
        /// Why it dropped its session, in words.
        why: String,
    },
    /// A `steal-token` step: one client now holds another's session token.
    TokenStolen {
        /// The client whose token was taken.
        from: String,
        /// The client that holds it now.
        to: String,
        /// Whether the thief took the victim's credential too.
        credential: bool,
    },
    /// A client's `enable-tool` call (`tools/call` of `enable_tool`) ended.
    ToolEnableEnded {
        /// The client that called it.
        client: String,
        /// The connection its POST went out on.
        conn: ConnId,
        /// The tool it asked the server to enable.
        tool: String,
        /// Whether the server enabled it (HTTP 200, a tool result that is
        /// not an error); `None`: the POST got no answer, so it may have.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        enabled: Option<bool>,
    },
    /// A `crash-client` step stopped a client host: it forgets everything.
    ClientCrashed {
        /// The client that crashed.
        client: String,
    },

    // ---- a deployment of several replicas (docs/replicas.md) ----
    /// The run's server is this many replicas behind a balancer (recorded
    /// after the header, and only when there is more than one).
    DeploymentStarted {
        /// How many replicas serve.
        replicas: u32,
        /// The balancer's routing rule (`round-robin`, `least-connections`, `source`).
        routing: String,
        /// Where the replicas keep durable state: `shared` or `per-replica`.
        store: String,
        /// How long a replica waits for the shared store's answer (µs).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        store_timeout_us: Option<u64>,
    },
    /// A `partition` step cut the link between a replica and the store.
    StorePartitioned {
        /// The replica, from 1.
        replica: u32,
    },
    /// A partition between a replica and the store ended (`partition` with `for`).
    StoreHealed {
        /// The replica, from 1.
        replica: u32,
    },
    /// Live only: server processes a restart step restarted are ready again
    /// (in a deployment, back in HAProxy's rotation). New connections waited
    /// for this at the NATs: a simulated restart takes no time.
    ServerBack {
        /// The replicas, from 1; empty for a single server.
        replicas: Vec<u32>,
    },
    /// A `crash-replica` step stopped a replica's host; the balancer takes
    /// it out of rotation `out_after_us` later (its health check).
    ReplicaCrashed {
        /// The replica, from 1.
        replica: u32,
        /// How long the balancer's health check takes to notice (µs).
        out_after_us: u64,
    },
    /// A `drain` step: the balancer sends the replica no new connection.
    ReplicaDrained {
        /// The replica, from 1.
        replica: u32,
    },
    /// The balancer sent a client's connection to a replica.
    Routed {
        /// The client whose NAT opened the connection.
        client: String,
        /// The NAT's source port: a `mapping-opened` event's `up_port`.
        up_port: u16,
        /// The replica, from 1.
        replica: u32,
        /// The routing rule that picked it.
        routing: String,
        /// The client's public address, as the NAT's PROXY line stated it.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        source: Option<String>,
    },
    // ---- observed by the NAT ----
    /// The NAT opened a mapping for a new client connection.
    MappingOpened {
        /// The client whose NAT it is.
        client: String,
        /// The mapping's number: unique per NAT, from 1.
        mapping: MappingId,
        /// The client's port on the downstream side: a `connect` event's `port`.
        down_port: u16,
        /// The NAT's source port on the upstream connection to the server.
        up_port: u16,
    },
    /// The NAT silently stopped forwarding a mapping (both sockets stay open).
    MappingDropped {
        /// The client whose NAT it is.
        client: String,
        /// The mapping's number.
        mapping: MappingId,
        /// The fault that dropped it (`rebind` or `sever`).
        fault: String,
        /// The scenario step that dropped it, by index (what the step acted on).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        step: Option<usize>,
    },
    /// Bytes the server wrote into a dropped mapping, and the SSE events in them.
    DroppedWrite {
        /// The client whose NAT it is.
        client: String,
        /// The dropped mapping's number.
        mapping: MappingId,
        /// How many bytes arrived from the server in one read.
        bytes: usize,
        /// The complete SSE events in those bytes (none when they held only heartbeats).
        events: Vec<SseSeen>,
        /// A response that is not an event stream (a JSON response, say an
        /// MRTR `input_required`) whose body these bytes carried, in words.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        response: Option<String>,
        /// The bytes only ended the response (a chunked body's last chunk):
        /// the server closing the stream, which is its fence, not a write.
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        closing: bool,
    },
    /// The NAT reset a mapping (a fault, or keepalive expiry of a half-open one).
    MappingReset {
        /// The client whose NAT it is.
        client: String,
        /// The mapping's number.
        mapping: MappingId,
        /// Why: the reset fault, or the keepalive expiry.
        why: String,
        /// The scenario step that reset it, by index (none for an expiry).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        step: Option<usize>,
    },
    /// One side closed a live mapping (`client` or `server`).
    MappingClosed {
        /// The client whose NAT it is.
        client: String,
        /// The mapping's number.
        mapping: MappingId,
        /// The side that closed it: `client`, `server`, or `balancer` (a
        /// deployment's balancer cut it when one of its timeouts ran out).
        by: String,
    },

    // ---- reported by the server's application ----
    /// The application issued a server request on a client's session.
    RequestIssued {
        /// The client whose session it went to.
        client: String,
        /// The scenario's label for the request.
        label: String,
        /// The JSON-RPC method (e.g. `sampling/createMessage`).
        method: String,
        /// The JSON-RPC id the server gave it.
        id: RpcId,
        /// The SSE event id it was sent as, if the server exposes it.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        event_id: Option<String>,
        /// The session token it was issued on, when the application says.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        session: Option<String>,
        /// False for a request that must not be re-issued under a fresh id.
        #[serde(skip_serializing_if = "super::is_true", default = "super::yes")]
        reissuable: bool,
    },
    /// What became of a server request, as the application saw it.
    RequestOutcome {
        /// The scenario's label for the request.
        label: String,
        /// The request's id (for a re-issue, the old one).
        id: RpcId,
        /// What became of it.
        outcome: Outcome,
        /// The fresh id of a re-issue.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        new_id: Option<RpcId>,
        /// The application's words on it.
        detail: String,
    },
    /// The server host's software stopped (its `serve` returned or panicked).
    ServerStopped {
        /// What stopped, in words.
        why: String,
    },
    /// The run was cut short here (Ctrl-C, a live process that died, the
    /// watchdog, a panic): the checks judge only up to this moment.
    RunCut {
        /// Why, in words.
        why: String,
    },
    /// The application emitted notifications on a client's session, as these event ids.
    Notified {
        /// The client whose session they went to.
        client: String,
        /// Their SSE event ids, in order (empty if the server does not expose them).
        event_ids: Vec<String>,
        /// The session token they were emitted on, when the application says.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        session: Option<String>,
        /// The server's name for the stream they were minted on, when it is not the session's
        /// standalone stream (a tool call's POST stream): the standalone stream never owes them.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        stream: Option<String>,
        /// The replica that minted them (from 1), in a deployment of several:
        /// two replicas with counters of their own can mint the same id.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        replica: Option<u32>,
    },
    /// The application could not act (no such session, server down).
    AppError {
        /// The client the command was for.
        client: String,
        /// What went wrong, in words.
        error: String,
    },

    // ---- stateless-http (MCP 2026-07-28) ----
    /// The run's header: a tool the scenario declares (`[[tool]]`).
    ToolOffered {
        /// Its name.
        tool: String,
        /// Its `requestState` is a one-time redemption.
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        once: bool,
        /// Running it twice does no harm.
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        idempotent: bool,
        /// The inputs it asks for before it runs, by method.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        input: Vec<String>,
    },
    /// A client sent one attempt of a tool call (every attempt has its own JSON-RPC id).
    CallSent {
        /// The client that sent it.
        client: String,
        /// The connection it went out on.
        conn: ConnId,
        /// The scenario's label for the call (the client sends it as the `call` argument).
        call: String,
        /// The tool.
        tool: String,
        /// This attempt's JSON-RPC id.
        id: RpcId,
        /// Why this attempt.
        attempt: stateless::Attempt,
        /// The `requestState` it carried, if any.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        state: Option<stateless::Presented>,
        /// The principal whose credential it presented, when not the client's own.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        credential: Option<String>,
        /// The answers it carried in `inputResponses`, by key.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        answers: Vec<stateless::InputAnswer>,
    },
    /// How a client saw one attempt of a call end.
    CallEnded {
        /// The client.
        client: String,
        /// The connection that carried the attempt.
        conn: ConnId,
        /// The call's label.
        call: String,
        /// The attempt's JSON-RPC id.
        id: RpcId,
        /// How it ended.
        #[serde(flatten)]
        end: stateless::CallEnd,
    },
    /// A client opened a `subscriptions/listen` stream (request `id`).
    ListenSent {
        /// The client.
        client: String,
        /// The connection it went out on.
        conn: ConnId,
        /// The listen request's JSON-RPC id (the subscription's id).
        id: RpcId,
    },
    /// How a client saw a listen stream end (or be refused).
    ListenEnded {
        /// The client.
        client: String,
        /// The connection.
        conn: ConnId,
        /// The listen request's id.
        id: RpcId,
        /// How it ended: `complete` when the server closed it with a result.
        #[serde(flatten)]
        end: stateless::CallEnd,
    },
    /// The application reports that the tool list changed, the `n`th time,
    /// and how many open listen streams it told.
    ToolsChanged {
        /// Which change (1, 2, ...).
        n: u32,
        /// How many listen streams it sent `notifications/tools/list_changed` to.
        streams: usize,
    },
    /// A client gave up on a call: it will send no more attempts.
    CallAbandoned {
        /// The client.
        client: String,
        /// The call's label.
        call: String,
        /// Why, in words.
        why: String,
    },
    /// The application reports one step of a tool execution.
    Execution {
        /// The server's number for the execution (1, 2, ... per server process).
        exec: u32,
        /// The tool.
        tool: String,
        /// The `call` argument of the request it serves.
        call: String,
        /// The JSON-RPC id of the request it serves.
        id: RpcId,
        /// The principal whose credential the request presented.
        principal: String,
        /// The principal the execution acts for: the one its `requestState` was minted for, if it continues one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        on_behalf_of: Option<String>,
        /// What happened.
        #[serde(flatten)]
        step: stateless::ExecStep,
        /// The answers it acted on, by the key it read them under (on its
        /// start; none when the application does not say).
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        inputs: Vec<stateless::InputRead>,
        /// The replica that did it (from 1), in a deployment of several.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        replica: Option<u32>,
    },
    /// The application minted a `requestState` (an `InputRequiredResult`).
    StateMinted {
        /// The `call` argument of the request it answers.
        call: String,
        /// The JSON-RPC id of that request.
        id: RpcId,
        /// The principal it was minted for.
        principal: String,
        /// The state's fingerprint (FNV-1a of its text, hex).
        fp: String,
        /// How long the server will accept it (µs), if it expires.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        lifetime_us: Option<u64>,
        /// Whether it is a one-time redemption.
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        once: bool,
        /// The replica that did it (from 1), in a deployment of several.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        replica: Option<u32>,
    },
    /// The application checked a presented `requestState`.
    StateChecked {
        /// The `call` argument of the request that carried it.
        call: String,
        /// That request's JSON-RPC id.
        id: RpcId,
        /// The principal whose credential that request presented.
        principal: String,
        /// The presented state's fingerprint.
        fp: String,
        /// What the application decided.
        #[serde(flatten)]
        verdict: stateless::StateVerdict,
        /// The replica that did it (from 1), in a deployment of several.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        replica: Option<u32>,
    },

    // ---- explanation only ----
    /// The reference engine's internal decision; never decides a verdict.
    /// Serialized with `"explanation": true` so a reader of the JSONL sees it.
    ServerNote {
        /// The session it is about (the engine names them `S1`, `S2`, ...).
        session: String,
        /// The decision, in words.
        note: String,
        /// Always true: marks the event as an explanation.
        explanation: bool,
        /// The replica whose process wrote it, in a deployment of more than one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replica: Option<u32>,
    },
}
