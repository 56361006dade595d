"""The official MCP Python SDK (`mcp`, pinned in requirements.txt) as a server under test for `mcpsim run --live`.

    python3 -m venv adapters/python/.venv
    adapters/python/.venv/bin/pip install -r adapters/python/requirements.txt
    mcpsim run --live 'adapters/python/.venv/bin/python adapters/python/server.py' FILE --time-scale 0.1

The configuration users deploy, chosen by environment variables (README.md):
    MCPSIM_EVENT_STORE=memory (default: the SDK example's InMemoryEventStore)
                       none   (no event store: the SDK's default, no resumability)
                       redis  (the default when MCPSIM_STORE=redis://HOST:PORT is set, as
                               mcpsim sets it for a deployment with a shared store: an
                               EventStore over Redis, shared by every replica; redis-py)
    MCPSIM_AUTH=off    (default: no authentication)
                bearer (the SDK's own auth: a TokenVerifier + AuthSettings, so
                        BearerAuthBackend / RequireAuthMiddleware; the token is
                        the principal's name; the SDK's session manager binds
                        each session to the principal that created it)
The name in `ready` says which: python-sdk, python-sdk-no-store, python-sdk-redis,
each with -auth under MCPSIM_AUTH=bearer.

Adapt it: keep the "SDK" parts as your server already has them (or replace them
with yours), and keep the "harness" parts, which only tell mcpsim what the
application did (docs/live-protocol.md). The harness never changes what the SDK
puts on the wire.

SDK part: the SDK's example examples/servers/simple-streamablehttp (mcp 2.3.0):
a low-level `Server`, `server.streamable_http_app(event_store=...)` (which builds
the `StreamableHTTPSessionManager`: stateful sessions, SSE responses, and
DNS-rebinding protection for 127.0.0.1 because `host` defaults to 127.0.0.1),
one example `InMemoryEventStore` (from the SDK's sdist, see install.sh) shared by every
session (none with MCPSIM_EVENT_STORE=none; behind a load balancer with a shared store,
`RedisEventStore` below, the SDK's `EventStore` interface over Redis, which is how a
deployer makes events outlive a replica: the SDK ships no Redis store), `auth=` and `token_verifier=` with
MCPSIM_AUTH=bearer, served by uvicorn on 127.0.0.1.
Harness part: the `ask` tool, the control connection, and an observer of (never
a change to) what the SDK emits, to learn the JSON-RPC id and SSE event id the
SDK gave each request and notification: an event store subclass with the
memory store, a watch on each session's outgoing message stream without one.
"""

import asyncio
import contextvars
import json
import logging
import os
import sys
from typing import Any
from uuid import uuid4

import httpx2
import mcp.types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.session import ServerSession
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import ValidationError
from sse_starlette import EventSourceResponse

# The SDK's own example store, as its sdist ships it; install.sh puts it in
# the venv (it is not part of the installed package, and not copied here).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".venv", "sdk_example"))
from event_store import InMemoryEventStore  # noqa: E402


def env_int(key: str, default: int | None) -> int | None:
    value = os.environ.get(key, "")
    return int(value) if value else default


def env_choice(key: str, values: tuple[str, ...]) -> str:
    value = os.environ.get(key, "") or values[0]
    if value not in values:
        print(f"[python-sdk] {key}={value}: expected one of {', '.join(values)}", file=sys.stderr)
        sys.exit(2)
    return value


STORE_URL = os.environ.get("MCPSIM_STORE", "")  # a deployment's shared store (redis://HOST:PORT)
EVENT_STORE = env_choice("MCPSIM_EVENT_STORE", ("redis", "memory", "none") if STORE_URL else ("memory", "none", "redis"))
if EVENT_STORE == "redis" and not STORE_URL:
    print("[python-sdk] MCPSIM_EVENT_STORE=redis needs MCPSIM_STORE=redis://HOST:PORT", file=sys.stderr)
    sys.exit(2)
AUTH = env_choice("MCPSIM_AUTH", ("off", "bearer"))
# The key in [expect]: the base name is the default configuration (memory, off).
STORE_SUFFIX = {"memory": "", "none": "-no-store", "redis": "-redis"}[EVENT_STORE]
NAME = "python-sdk" + STORE_SUFFIX + ("-auth" if AUTH == "bearer" else "")

PORT = env_int("MCPSIM_PORT", 3000)
CONTROL_PORT = env_int("MCPSIM_CONTROL_PORT", None)
HEARTBEAT_MS = env_int("MCPSIM_HEARTBEAT_MS", 15000)  # sse-starlette's default ping interval is 15 s
REQUEST_TIMEOUT_MS = env_int("MCPSIM_REQUEST_TIMEOUT_MS", None)  # the SDK's default: no timeout at all
RETENTION = env_int("MCPSIM_RETENTION", 100)  # the example store's default max_events_per_stream is 100

logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format=f"[{NAME}] %(levelname)s %(name)s: %(message)s")
log = logging.getLogger(NAME)
log.setLevel(logging.INFO)

if os.environ.get("MCPSIM_DIALECT", "streamable-http") != "streamable-http":
    log.warning("only streamable-http is served; MCPSIM_DIALECT=%s ignored", os.environ["MCPSIM_DIALECT"])
# Settings the SDK has no equivalent for (see README.md).
for key in ("MCPSIM_FIRST_EVENT_ID", "MCPSIM_FENCE_GRACE_MS", "MCPSIM_FENCE_DELAY_MS") + (
    ("MCPSIM_RETENTION",) if EVENT_STORE == "none" else ()
):
    if key in os.environ:
        log.info("%s=%s ignored: the SDK (and its example event store) has no such setting", key, os.environ[key])

STORE_NAMES = {
    "memory": "the example InMemoryEventStore",
    "none": "none (no resumability)",
    "redis": f"RedisEventStore at {STORE_URL}",
}
log.info(
    "event store: %s; auth: %s",
    STORE_NAMES[EVENT_STORE],
    "bearer (token = principal)" if AUTH == "bearer" else "off",
)

# SSE keep-alive: the SDK does not expose it. Its transport builds sse-starlette
# EventSourceResponses without `ping`, so they take sse-starlette's class default
# (15 s): set that process-wide.
EventSourceResponse.DEFAULT_PING_INTERVAL = HEARTBEAT_MS / 1000


# ---------------------------------------------------------------- harness: reports
control: asyncio.StreamWriter | None = None  # the control connection, when a live run started us


def report(msg: dict[str, Any]) -> None:
    if control is not None and not control.is_closing():
        control.write((json.dumps(msg) + "\n").encode())


# What the application is issuing when the SDK stores an event. The SDK stores
# events in the session's message router task, not in the task that sent the
# message, but the message travels there with a snapshot of the sender's
# contextvars (the SDK's own ContextSendStream), which the store reads.
ISSUING: contextvars.ContextVar["Issuing | None"] = contextvars.ContextVar("issuing", default=None)


class Issuing:
    """Collects what the SDK stored while the application issued one request or a run of notifications."""

    def __init__(self, method: str, on_request=None) -> None:
        self.method = method
        self.on_request = on_request  # called once with (JSON-RPC id, event id)
        self.id: Any = None
        self.event_ids: list[str] = []
        self.changed = asyncio.Event()

    def stored(self, message: Any, event_id: str | None) -> None:
        """The SDK stored `message` as `event_id`, or (no event store: `event_id` None) handed it to the transport."""
        if isinstance(message, types.JSONRPCRequest) and message.method == self.method and self.id is None:
            self.id = message.id
            if self.on_request is not None:
                self.on_request(message.id, event_id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == self.method and event_id is not None:
            self.event_ids.append(event_id)
            self.changed.set()

    async def stored_notifications(self, n: int) -> None:
        """Waits until the SDK has stored `n` notifications (it stores each just after the send returns).

        Gives up after 0.25 s without progress: a notification the SDK dropped
        (a closed session) is never stored.
        """
        while len(self.event_ids) < n:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), 0.25)
            except TimeoutError:
                return


def sender_context() -> contextvars.Context | None:
    """The contextvars of the task whose message the SDK is storing now (None if this SDK version hides it).

    store_event is awaited by the transport's message router
    (StreamableHTTPServerTransport.connect), which reads the message from
    `write_stream_reader`; that stream keeps the sender's context in `last_context`.
    """
    frame = sys._getframe(2)  # 0: here, 1: ObservedEventStore.store_event, 2: the SDK's caller
    reader = frame.f_locals.get("write_stream_reader")
    return getattr(reader, "last_context", None)


# ---------------------------------------------------------------- SDK part: an event store in Redis
class RedisEventStore(EventStore):
    """The SDK's `EventStore` interface over Redis, shared by every replica of a deployment.

    As the example InMemoryEventStore, in Redis: each stream's newest
    `max_events_per_stream` event ids in a list (`mcp:stream:<id>`), each
    event's stream and message under its id (`mcp:event:<id>`), so that any
    replica can replay what another one stored. redis-py's asyncio client;
    a command that Redis does not answer within 2 s fails (the SDK sees the
    error), and the client connects again on the next one.
    """

    def __init__(self, url: str, max_events_per_stream: int = 100):
        import redis.asyncio

        self.max_events_per_stream = max_events_per_stream
        self.redis = redis.asyncio.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)

    async def store_event(self, stream_id: StreamId, message: Any) -> EventId:
        event_id = str(uuid4())
        body = message.model_dump(mode="json", by_alias=True, exclude_unset=True) if message is not None else None
        stream = f"mcp:stream:{stream_id}"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(f"mcp:event:{event_id}", json.dumps({"stream": stream_id, "message": body}))
            pipe.rpush(stream, event_id)
            pipe.ltrim(stream, -self.max_events_per_stream, -1)
            await pipe.execute()
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        last = await self.redis.get(f"mcp:event:{last_event_id}")
        if last is None:
            log.warning("event id %s not found in the Redis store", last_event_id)
            return None
        stream_id = json.loads(last)["stream"]
        ids = [i.decode() for i in await self.redis.lrange(f"mcp:stream:{stream_id}", 0, -1)]
        if last_event_id not in ids:  # evicted: as the example store, nothing to replay from
            log.warning("event id %s is no longer retained in stream %s", last_event_id, stream_id)
            return None
        for event_id in ids[ids.index(last_event_id) + 1 :]:
            raw = await self.redis.get(f"mcp:event:{event_id}")
            body = json.loads(raw)["message"] if raw is not None else None
            if body is not None:  # priming events carry no message
                message = types.jsonrpc_message_adapter.validate_python(body, by_name=False)
                await send_callback(EventMessage(message, event_id))
        return stream_id


# ---------------------------------------------------------------- harness: the observed stores
class Observing:
    """An event store, observed: every stored message goes to whoever was issuing it."""

    blind = False  # warned that this SDK version hides the sender

    async def store_event(self, stream_id, message):
        sender = sender_context() if message is not None else None
        if message is not None and sender is None and not self.blind:
            self.blind = True
            log.warning("cannot see who sent the messages the SDK stores: issued/notified ids will be missing")
        event_id = await super().store_event(stream_id, message)
        issuing = sender.get(ISSUING) if sender is not None else None
        if issuing is not None:
            issuing.stored(message, event_id)
        return event_id


class ObservedEventStore(Observing, InMemoryEventStore):
    """The example store, observed."""


class ObservedRedisEventStore(Observing, RedisEventStore):
    """The Redis store, observed."""


class ObservedWriteStream:
    """A session's outgoing message stream, observed (MCPSIM_EVENT_STORE=none: no store to observe).

    The SDK's JSONRPCDispatcher builds each request (its JSON-RPC id included)
    and sends it, in the sending task, on the write stream the transport gave it
    (`JSONRPCDispatcher._write`); the transport's message router takes it from
    there to the stream it belongs to. Once the router has taken it, it goes to
    whoever is issuing (ISSUING, in the sender's own context here), with no
    event id: none exists. A message the stream refuses (closed) is not reported.
    Everything else is the wrapped stream's.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        issuing = ISSUING.get()
        if issuing is not None:
            issuing.stored(item.message, None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> "ObservedWriteStream":
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)


def observe_outgoing(session: ServerSession) -> None:
    """Watches `session`'s outgoing messages (see ObservedWriteStream); warns once if this SDK version hides them."""
    dispatcher = getattr(getattr(session, "_connection", None), "outbound", None)
    stream = getattr(dispatcher, "_write_stream", None)
    if stream is None:
        log.warning("cannot see the messages the SDK sends: issued ids will be missing")
    elif not isinstance(stream, ObservedWriteStream):
        dispatcher._write_stream = ObservedWriteStream(stream)


# ---------------------------------------------------------------- application
def server_request(method: str, label: str, owner: str) -> tuple[types.ServerRequest, type]:
    """The server request `method`, with content naming `label` and its owner (mcpsim's wire/jsonrpc.rs)."""
    if method == "sampling/createMessage":
        text = types.TextContent(type="text", text=f"{label}: continue {owner}'s conversation")
        params = types.CreateMessageRequestParams(messages=[types.SamplingMessage(role="user", content=text)], max_tokens=256)
        return types.CreateMessageRequest(params=params), types.CreateMessageResult
    if method == "elicitation/create":
        params = types.ElicitRequestFormParams(
            message=f"{label}: {owner}, please confirm", requested_schema={"type": "object", "properties": {}}
        )
        return types.ElicitRequest(params=params), types.ElicitResult
    if method == "roots/list":
        return types.ListRootsRequest(), types.ListRootsResult
    raise ValueError(f"unknown server request method {method}")


async def issue(
    session: ServerSession, *, sid: str, client: str, label: str, method: str, related_request_id=None, reissuable=True
) -> bool:
    """Sends server request `method` through `session`, reports it issued and then its outcome.

    With `related_request_id` the SDK relates it to that call (its POST stream);
    without, it goes on the session's standalone GET stream. Returns whether it was answered.
    """

    def issued(rpc_id, event_id):
        msg = {"type": "issued", "session": sid, "client": client, "label": label, "method": method, "id": rpc_id}
        if event_id is not None:  # none without an event store
            msg["event_id"] = event_id
        msg["reissuable"] = reissuable
        report(msg)

    issuing = Issuing(method, issued)
    token = ISSUING.set(issuing)
    try:
        request, result_type = server_request(method, label, client)
        metadata = ServerMessageMetadata(related_request_id=related_request_id) if related_request_id is not None else None
        timeout = REQUEST_TIMEOUT_MS / 1000 if REQUEST_TIMEOUT_MS is not None else None
        await session.send_request(request, result_type, request_read_timeout_seconds=timeout, metadata=metadata)
        outcome, detail = "answered", "the SDK received the answer"
    except MCPError as e:
        timed_out = e.code == types.REQUEST_TIMEOUT and "timed out" in e.message
        outcome, detail = ("timed-out" if timed_out else "failed"), f"SDK: {e.message} ({e.code})"
    except ValidationError as e:
        outcome, detail = "answered", f"answered, but the SDK rejected the result: {e.error_count()} errors"
    except Exception as e:  # noqa: BLE001 - reported, never hidden
        outcome, detail = "failed", f"SDK: {type(e).__name__}: {e}"
    finally:
        ISSUING.reset(token)
    if issuing.id is None:  # it never went out
        report({"type": "error", "client": client, "message": f"the SDK did not send {label}: {detail}"})
        return False
    report({"type": "outcome", "label": label, "id": issuing.id, "outcome": outcome, "detail": detail})
    return outcome == "answered"


async def handle_list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    schema = {
        "type": "object",
        "properties": {"client": {"type": "string"}, "label": {"type": "string"}, "method": {"type": "string"}},
    }
    enable = {"type": "object", "properties": {"tool": {"type": "string"}}}
    return types.ListToolsResult(
        tools=[
            types.Tool(name="ask", description="issues the named server request related to this call", input_schema=schema),
            types.Tool(name="enable_tool", description="enables a tool: the session is told its tool list changed", input_schema=enable),
        ]
    )


async def handle_call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "enable_tool":
        tool = str((params.arguments or {}).get("tool", ""))
        # Not related to this call: the SDK sends it on the session's standalone GET stream.
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{tool} enabled")])
    if params.name != "ask":
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name}")
    args = params.arguments or {}
    client, label, method = (str(args.get(k, "")) for k in ("client", "label", "method"))
    sid = ctx.request.headers.get("mcp-session-id", "") if ctx.request is not None else ""
    # related_request_id: the SDK sends it on this call's POST stream.
    ok = await issue(ctx.session, sid=sid, client=client, label=label, method=method, related_request_id=ctx.request_id)
    text = f"{label} answered" if ok else f"{label} was not answered"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=not ok)


# ---------------------------------------------------------------- SDK: auth (MCPSIM_AUTH=bearer)
class PrincipalTokenVerifier:
    """The SDK's TokenVerifier protocol: mcpsim's clients present `Authorization: Bearer <principal>`
    (docs/live-protocol.md, section 5), so every token is valid and names its principal.

    The principal goes in `client_id` and `subject`, the components the SDK's
    session manager compares (provider.principal_components); no expiry.
    """

    async def verify_token(self, token: str) -> AccessToken | None:
        return AccessToken(token=token, client_id=token, subject=token, scopes=[])


# ---------------------------------------------------------------- SDK: the example's server
app = Server("mcpsim-python-sdk-app", on_list_tools=handle_list_tools, on_call_tool=handle_call_tool)
# Resumability as in the example, or the SDK's default: none.
event_store: EventStore | None = None
if EVENT_STORE == "memory":
    event_store = ObservedEventStore(max_events_per_stream=RETENTION)
elif EVENT_STORE == "redis":
    event_store = ObservedRedisEventStore(STORE_URL, max_events_per_stream=RETENTION)
auth_options: dict[str, Any] = {}
if AUTH == "bearer":
    # The SDK's resource-server auth: AuthSettings and a token verifier (the
    # pair MCPServer(...) takes too). streamable_http_app then puts BearerAuthBackend and
    # RequireAuthMiddleware (401 without a valid token) in front of /mcp, and its
    # StreamableHTTPSessionManager binds each session to the principal that
    # created it. validate_token_resource=False: these tokens name no resource,
    # and the verifier vouches for them (the SDK warns if it is left unset).
    auth_options = {
        "auth": AuthSettings(
            issuer_url=f"http://127.0.0.1:{PORT}",
            resource_server_url=f"http://127.0.0.1:{PORT}/mcp",
            validate_token_resource=False,
        ),
        "token_verifier": PrincipalTokenVerifier(),
    }
# host 127.0.0.1: DNS-rebinding protection on
starlette_app = app.streamable_http_app(event_store=event_store, **auth_options)

# Harness: each session's ServerSession, to issue standalone requests and
# notifications when mcpsim asks. The low-level Server has no "session
# initialized" hook, so a server middleware notes it from any message that
# carries an Mcp-Session-Id (notifications/initialized is the first).
sessions: dict[str, ServerSession] = {}


async def remember_session(ctx: ServerRequestContext, call_next):
    sid = ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None
    if sid and sid not in sessions:
        sessions[sid] = ctx.session
        if event_store is None:
            observe_outgoing(ctx.session)
    return await call_next(ctx)


app.middleware.append(remember_session)


# ---------------------------------------------------------------- harness: control protocol
async def notify(session: ServerSession, sid: str, client: str, count: int) -> None:
    issuing = Issuing("notifications/message")
    token = ISSUING.set(issuing)
    try:
        for n in range(count):
            note = types.LoggingMessageNotificationParams(level="info", data=f"note {n}")
            # No related request: the SDK sends it on the session's standalone GET stream.
            stored = len(issuing.event_ids)
            await session.send_notification(types.LoggingMessageNotification(params=note))
            if event_store is not None:  # without one there are no event ids: event_ids stays []
                await issuing.stored_notifications(stored + 1)
    finally:
        ISSUING.reset(token)
    report({"type": "notified", "session": sid, "client": client, "event_ids": issuing.event_ids})


def command(cmd: dict[str, Any]) -> None:
    """Carries out one command of mcpsim-control/1."""
    sid, client = cmd.get("session", ""), cmd.get("client", "")
    session = sessions.get(sid)
    if session is None:
        report({"type": "error", "client": client, "message": f"no session {sid}"})
        return
    if cmd.get("type") == "request":
        asyncio.create_task(
            issue(
                session,
                sid=sid,
                client=client,
                label=cmd.get("label", ""),
                method=cmd.get("method", ""),
                reissuable=cmd.get("reissuable", True) is not False,
            )
        )
    elif cmd.get("type") == "notify":
        asyncio.create_task(notify(session, sid, client, int(cmd.get("count", 1))))
    else:
        log.warning("ignoring a control message of unknown type: %s", json.dumps(cmd))


async def control_loop() -> None:
    """Serves the control connection; the process ends with it, however it ends.

    mcpsim closing it means the run is over. Failing to open it, or losing it,
    means mcpsim is gone (a test process that exited, say): a server left
    running would outlive every run.
    """
    global control
    try:
        reader, control = await asyncio.open_connection("127.0.0.1", CONTROL_PORT)
        report({"type": "ready", "protocol": "mcpsim-control/1", "server": NAME, "dialects": ["streamable-http"], "authenticates": AUTH == "bearer"})
        while line := await reader.readline():
            try:
                cmd = json.loads(line)
            except ValueError:
                log.warning("ignoring a control line that is not JSON: %r", line)
                continue
            command(cmd)
    except Exception as e:  # noqa: BLE001
        log.error("control connection to 127.0.0.1:%s failed: %r; exiting", CONTROL_PORT, e)
        os._exit(1)
    os._exit(0)  # mcpsim closed the control connection: the run is over


async def warm_up() -> None:
    """One throw-away session before `ready`, so the first scenario requests do not pay for lazy imports.

    initialize, tools/list, a call of `ask` whose roots/list it answers, DELETE.
    Nothing is reported. Its request ids are strings no client uses, so it adds
    no event to any stream a scenario's session shares in the example store.
    """
    url = f"http://127.0.0.1:{PORT}/mcp"
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if AUTH == "bearer":
        headers["authorization"] = "Bearer warm-up"
    async with httpx2.AsyncClient(timeout=3) as http:
        init = {
            "jsonrpc": "2.0",
            "id": "warm-up-1",
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {"roots": {}}, "clientInfo": {"name": "warm-up", "version": "0"}},
        }
        r = await http.post(url, headers=headers, json=init)
        h = {**headers, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await http.post(url, headers=h, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        await http.post(url, headers=h, json={"jsonrpc": "2.0", "id": "warm-up-2", "method": "tools/list"})
        args = {"client": "warm-up", "label": "warm-up", "method": "roots/list"}
        call = {"jsonrpc": "2.0", "id": "warm-up-3", "method": "tools/call", "params": {"name": "ask", "arguments": args}}
        async with http.stream("POST", url, headers=h, json=call) as resp:
            async for line in resp.aiter_lines():
                if not line.startswith("data:") or not line[5:].strip():
                    continue
                m = json.loads(line[5:])
                if m.get("method") == "roots/list":
                    await http.post(url, headers=h, json={"jsonrpc": "2.0", "id": m["id"], "result": {"roots": []}})
                elif m.get("id") == "warm-up-3":
                    break
        await http.delete(url, headers=h)
    sessions.clear()


async def main() -> None:
    config = uvicorn.Config(starlette_app, host="127.0.0.1", port=PORT, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            log.error("cannot serve on 127.0.0.1:%s", PORT)
            sys.exit(1)
        await asyncio.sleep(0.005)
    log.info(
        "Streamable HTTP on http://127.0.0.1:%s/mcp (SSE ping %s ms, request timeout %s, %s)",
        PORT,
        HEARTBEAT_MS,
        f"{REQUEST_TIMEOUT_MS} ms" if REQUEST_TIMEOUT_MS is not None else "none",
        f"{STORE_NAMES[EVENT_STORE]} keeps {RETENTION} events per stream" if event_store is not None else "no event store",
    )
    if CONTROL_PORT is not None:
        t0 = asyncio.get_running_loop().time()
        try:
            await asyncio.wait_for(warm_up(), 3)
            log.info("warm-up done in %.0f ms", (asyncio.get_running_loop().time() - t0) * 1000)
        except Exception as e:  # noqa: BLE001
            log.warning("warm-up failed (continuing): %r", e)
        asyncio.create_task(control_loop())
    await serving


if __name__ == "__main__":
    asyncio.run(main())
