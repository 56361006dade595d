"""FastMCP (`fastmcp`, pinned in requirements.txt) as a server under test for `mcpsim run --live`.

    adapters/fastmcp/install.sh
    mcpsim run --live 'adapters/fastmcp/.venv/bin/python adapters/fastmcp/server.py' FILE --time-scale 0.1

Configurations (environment; see README.md):

    MCPSIM_EVENT_STORE = memory (default) | none | redis (the default when MCPSIM_STORE is set)
    MCPSIM_AUTH        = off (default)    | bearer

Deployments (MCPSIM_STORE=redis://HOST:PORT, which mcpsim sets for a
`[deployment] store = "shared"`, one link to its Redis per replica): FastMCP's
own EventStore over py-key-value-aio's Redis backend, as FastMCP's docs show
it (`EventStore(storage=RedisStore(...))`), with redis-py's own timings
(retry backoff, socket timeouts) shortened by MCPSIM_TIME_SCALE as the run
shortened every other timing. When Redis cannot be reached (a `partition`)
store calls raise; FastMCP and the SDK see the error as a user's deployment
would (a 500, a replay that ends, a session whose message router stops, after
which the SDK's sends on that session block for ever), the adapter logs it to
stderr, and the process runs on; the harness then reports a request it saw
sent but never stored as issued without an event id, so mcpsim can follow it.
With MCPSIM_REPLICAS > 1 the stateless-http requestState is sealed under a
configured key shared by every replica (`RequestStateSecurity(keys=[...])`,
derived from MCPSIM_SEED in place of a deployer's secret) instead of
FastMCP's per-process `ephemeral()` default, as FastMCP and the SDK tell
multi-replica deployments to do. There is no single-use registry (FastMCP
and the SDK offer none), in a store or not. Sessions stay in each process's
memory (the SDK's session manager), whatever the store.

Adapt it: keep the "FastMCP" parts as your server already has them (or replace
them with yours), and keep the "harness" parts, which only tell mcpsim what the
application did (docs/live-protocol.md). The harness never changes what FastMCP
puts on the wire.

FastMCP part, as FastMCP's docs show it (docs/deployment/http.mdx): a
`FastMCP` server with a `@mcp.tool`, `mcp.http_app()` (Streamable HTTP at
/mcp, stateful sessions, SSE responses) served by uvicorn on 127.0.0.1; for
resumability `mcp.http_app(event_store=EventStore())` with FastMCP's own
`fastmcp.server.event_store.EventStore` (in memory); for authentication
`FastMCP(auth=...)` with a `TokenVerifier` subclass.
Harness part: the `ask` tool, the control connection, an event store subclass
that observes (never alters) what FastMCP stores, and an OpenTelemetry tracer
that observes (never alters) the SDK's "MCP send" spans, to learn the JSON-RPC
id and SSE event id of each request and notification.
"""

import asyncio
import contextvars
import hashlib
import json
import logging
import os
import sys
from typing import Any

import httpx2
import mcp.types as types
import uvicorn
from fastmcp import Context, FastMCP
from fastmcp.server.auth import AccessToken, TokenVerifier
from fastmcp.server.event_store import EventStore
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.tools import ToolResult
from mcp.server.request_state import RequestStateSecurity
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import ValidationError
from sse_starlette import EventSourceResponse


def env_int(key: str, default: int | None) -> int | None:
    value = os.environ.get(key, "")
    return int(value) if value else default


def env_choice(key: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(key, "") or default
    if value not in choices:
        sys.exit(f"[fastmcp] {key}={value!r}: expected one of {', '.join(choices)}")
    return value


STORE_URL = os.environ.get("MCPSIM_STORE", "").strip()  # a deployment's shared store: redis://HOST:PORT
EVENT_STORE = env_choice("MCPSIM_EVENT_STORE", "redis" if STORE_URL else "memory", ("memory", "none", "redis"))
if EVENT_STORE == "redis" and not STORE_URL:
    sys.exit("[fastmcp] MCPSIM_EVENT_STORE=redis needs MCPSIM_STORE=redis://HOST:PORT")
AUTH = env_choice("MCPSIM_AUTH", "off", ("off", "bearer"))
NAME = "fastmcp" + {"memory": "", "none": "-no-store", "redis": "-redis"}[EVENT_STORE] + ("-auth" if AUTH == "bearer" else "")

PORT = env_int("MCPSIM_PORT", 3000)
CONTROL_PORT = env_int("MCPSIM_CONTROL_PORT", None)
HEARTBEAT_MS = env_int("MCPSIM_HEARTBEAT_MS", 15000)  # sse-starlette's default ping interval is 15 s
REQUEST_TIMEOUT_MS = env_int("MCPSIM_REQUEST_TIMEOUT_MS", None)  # the SDK's default: no timeout at all
RETENTION = env_int("MCPSIM_RETENTION", 100)  # FastMCP's EventStore keeps 100 events per stream by default
DIALECT = os.environ.get("MCPSIM_DIALECT", "streamable-http")

logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format=f"[{NAME}] %(levelname)s %(name)s: %(message)s")
log = logging.getLogger("mcpsim-adapter")  # not NAME: "fastmcp" is FastMCP's own logger
log.setLevel(logging.INFO)

TOOLS: list[dict[str, Any]] = json.loads(os.environ.get("MCPSIM_TOOLS") or "[]")
STATE_LIFETIME_MS = env_int("MCPSIM_STATE_LIFETIME_MS", None)  # None: FastMCP's default (the SDK's 600 s)
LIFE = env_int("MCPSIM_LIFE", 1)
REPLICA = env_int("MCPSIM_REPLICA", 1)
REPLICAS = env_int("MCPSIM_REPLICAS", 1)
SEED = env_int("MCPSIM_SEED", 0)
TIME_SCALE = float(os.environ.get("MCPSIM_TIME_SCALE") or 1.0)

if DIALECT not in ("streamable-http", "stateless-http"):
    log.warning("only streamable-http and stateless-http are served; MCPSIM_DIALECT=%s ignored", DIALECT)
# Settings FastMCP has no equivalent for (see README.md).
for key in ("MCPSIM_FIRST_EVENT_ID", "MCPSIM_FENCE_GRACE_MS", "MCPSIM_FENCE_DELAY_MS"):
    if key in os.environ:
        log.info("%s=%s ignored: FastMCP (and its EventStore) has no such setting", key, os.environ[key])
if EVENT_STORE == "none" and "MCPSIM_RETENTION" in os.environ:
    log.info("MCPSIM_RETENTION=%s ignored: no event store", os.environ["MCPSIM_RETENTION"])
if STORE_URL and EVENT_STORE != "redis":
    log.info("MCPSIM_STORE=%s unused: MCPSIM_EVENT_STORE=%s, and nothing else here is kept in a store", STORE_URL, EVENT_STORE)

# SSE keep-alive: neither FastMCP nor the SDK exposes it. The SDK's transport
# builds sse-starlette EventSourceResponses without `ping`, so they take
# sse-starlette's class default (15 s): set that process-wide.
EventSourceResponse.DEFAULT_PING_INTERVAL = HEARTBEAT_MS / 1000


# ---------------------------------------------------------------- harness: reports
control: asyncio.StreamWriter | None = None  # the control connection, when a live run started us


def report(msg: dict[str, Any]) -> None:
    if control is not None and not control.is_closing():
        control.write((json.dumps(msg) + "\n").encode())


# What the application is issuing when the SDK sends or FastMCP stores a
# message. See Issuing.
ISSUING: contextvars.ContextVar["Issuing | None"] = contextvars.ContextVar("issuing", default=None)


class Issuing:
    """Collects what the SDK sent (and FastMCP stored) while the application issued one request or a run of notifications.

    Two observers feed it, and neither changes a byte on the wire:

    - `sent(id)`: the SDK's dispatcher opens an OpenTelemetry span
      "MCP send <method>" with the attribute `jsonrpc.request.id` in the
      sender's own task, just before it writes the request (ObservingTracer);
    - `stored(message, event_id)`: FastMCP's EventStore stored the message
      (ObservedEventStore), which gives the SSE event id.

    With an event store, `issued` is reported when the request is stored (id
    and event id together); without one, when it is sent (id only: there is
    no event id).
    """

    def __init__(self, method: str, on_request=None) -> None:
        self.method = method
        self.on_request = on_request  # called once with (JSON-RPC id, event id or None)
        self.id: Any = None
        self.reported = False
        self.event_ids: list[str] = []
        self.sent_notifications = 0
        self.changed = asyncio.Event()

    def _report(self, rpc_id, event_id) -> None:
        self.id = rpc_id
        if not self.reported:
            self.reported = True
            if self.on_request is not None:
                self.on_request(rpc_id, event_id)

    def sent(self, method: str, rpc_id: str | None) -> None:
        if method != self.method:
            return
        if rpc_id is None:  # a notification
            self.sent_notifications += 1
            return
        # The span attribute is str(id); the dispatcher mints int ids.
        wire_id: Any = int(rpc_id) if rpc_id.isdigit() else rpc_id
        if self.id is None:
            self.id = wire_id
        if event_store is None:
            self._report(wire_id, None)

    def store_failed(self, message: Any) -> None:
        """FastMCP's store raised for `message`: a request it was carrying is reported without an event id (none was minted)."""
        if isinstance(message, types.JSONRPCRequest) and message.method == self.method and not self.reported:
            self._report(message.id, None)

    def stored(self, message: Any, event_id: str) -> None:
        if isinstance(message, types.JSONRPCRequest) and message.method == self.method and not self.reported:
            self._report(message.id, event_id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == self.method:
            self.event_ids.append(event_id)
            self.changed.set()

    async def stored_notifications(self, n: int) -> None:
        """Waits until FastMCP has stored `n` notifications (it stores each just after the send returns).

        Gives up after 0.25 s without progress: a notification the SDK dropped
        (a closed session) is never stored.
        """
        while len(self.event_ids) < n:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), 0.25)
            except TimeoutError:
                return


class ObservingTracer(trace.NoOpTracer):
    """OpenTelemetry's own no-op tracer (what runs when no SDK is configured), observed.

    The MCP SDK's dispatcher opens "MCP send <method>" spans (mcp/shared/_otel.py,
    mcp/shared/jsonrpc_dispatcher.py send_raw_request) in the sender's task; this
    tracer hands the method and JSON-RPC id to whoever is issuing, then does
    exactly what the no-op tracer does (no span is recorded, so no trace
    context is injected into `_meta`).
    """

    def start_span(self, name, *args, **kwargs):
        if name.startswith("MCP send "):
            issuing = ISSUING.get()
            attributes = kwargs.get("attributes") or (args[2] if len(args) > 2 else None) or {}
            if issuing is not None:
                issuing.sent(attributes.get("mcp.method.name", name[9:].split(" ")[0]), attributes.get("jsonrpc.request.id"))
        return super().start_span(name, *args, **kwargs)


class ObservingTracerProvider(trace.NoOpTracerProvider):
    def get_tracer(self, *args, **kwargs):
        return ObservingTracer()


trace.set_tracer_provider(ObservingTracerProvider())


def sender_context() -> contextvars.Context | None:
    """The contextvars of the task whose message FastMCP is storing now (None if this SDK version hides it).

    store_event is awaited (through FastMCP's SessionScopedEventStore) by the
    SDK transport's message router (StreamableHTTPServerTransport.connect),
    which reads the message from `write_stream_reader`; that stream keeps the
    sender's context in `last_context`.
    """
    frame = sys._getframe(2)  # 0: here, 1: ObservedEventStore.store_event
    for _ in range(4):  # SessionScopedEventStore.store_event, then the SDK's router
        if frame is None:
            return None
        reader = frame.f_locals.get("write_stream_reader")
        if reader is not None:
            return getattr(reader, "last_context", None)
        frame = frame.f_back
    return None


# How many store calls have failed in this process (Redis unreachable). The
# SDK's message router ends at the first exception a store_event raises in
# it ("Error in message router", mcp/server/streamable_http.py), and then
# every later send on that session blocks for ever, without an error: after
# a failure the harness stops waiting for the store to tell it what was sent
# (see stalled()).
store_failures = 0
STALL = 0.25  # s: how long a send may go unstored, once a store call has failed, before the harness reports what it saw


async def stalled(done, seen) -> None:
    """Returns once a store call has failed and, for STALL s since, `seen()` held and `done()` did not."""
    loop = asyncio.get_running_loop()
    since = None
    while True:
        await asyncio.sleep(STALL / 4)
        if done():
            since = None
            continue
        if store_failures and seen():
            since = loop.time() if since is None else since
            if loop.time() - since >= STALL:
                return
        else:
            since = None


class ObservedEventStore(EventStore):
    """FastMCP's EventStore (over whichever storage it was given), observed: every stored message goes to whoever was issuing it.

    A store call that fails (Redis unreachable) is logged and raised again
    unchanged: FastMCP and the SDK handle it as they would without the harness.
    """

    blind = False  # warned that this SDK version hides the sender

    async def store_event(self, stream_id, message):
        sender = sender_context() if message is not None else None
        if message is not None and sender is None and not self.blind:
            self.blind = True
            log.warning("cannot see who sent the messages FastMCP stores: event ids will be missing")
        issuing = sender.get(ISSUING) if sender is not None else None
        try:
            event_id = await super().store_event(stream_id, message)
        except Exception as e:
            global store_failures
            store_failures += 1
            what = getattr(message, "method", None) or ("a response" if message is not None else "a priming event")
            log.warning("EventStore.store_event (%s) failed: %s: %s; FastMCP sees the error", what, type(e).__name__, e)
            if issuing is not None:
                issuing.store_failed(message)
            raise
        if issuing is not None:
            issuing.stored(message, event_id)
        return event_id

    async def replay_events_after(self, last_event_id, send_callback):
        try:
            return await super().replay_events_after(last_event_id, send_callback)
        except Exception as e:
            log.warning("EventStore.replay_events_after(%s) failed: %s: %s; FastMCP sees the error", last_event_id, type(e).__name__, e)
            raise


def redis_storage(url: str):
    """py-key-value-aio's RedisStore, FastMCP's documented Redis backend for its EventStore.

    FastMCP's docs: `EventStore(storage=RedisStore(url=...))`. That builds
    redis-py's asyncio client with its defaults; this builds the same client
    (`decode_responses=True`, as RedisStore's own) with the timings redis-py
    draws by itself, its retry backoff (10 retries, 10 ms base, 1 s cap) and
    its 5 s socket timeouts, multiplied by MCPSIM_TIME_SCALE, so that a
    store call outlasts a partition as it would at full scale. At scale 1 it
    is exactly the client of `RedisStore(url=...)`.
    """
    from key_value.aio.stores.redis import RedisStore
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialWithJitterBackoff

    s = TIME_SCALE
    client = Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=5 * s,
        socket_connect_timeout=5 * s,
        retry=Retry(backoff=ExponentialWithJitterBackoff(base=0.01 * s, cap=1 * s), retries=10),
    )
    return RedisStore(client=client)


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
        if event_id is not None:
            msg["event_id"] = event_id
        msg["reissuable"] = reissuable
        report(msg)

    issuing = Issuing(method, issued)
    token = ISSUING.set(issuing)

    async def unstored() -> None:
        # Sent by the SDK but never stored, after a store failure: the session's
        # router is gone and the SDK's write blocks for ever. The application
        # did issue it: report it (without an event id) so mcpsim can follow it.
        await stalled(lambda: issuing.reported, lambda: issuing.id is not None)
        log.warning("%s (id %s) was sent to the SDK but never stored: the session's message router is gone", label, issuing.id)
        issuing._report(issuing.id, None)

    watchdog = asyncio.create_task(unstored())
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
        watchdog.cancel()
        ISSUING.reset(token)
    if issuing.id is None:  # it never went out
        report({"type": "error", "client": client, "message": f"the SDK did not send {label}: {detail}"})
        return False
    if not issuing.reported:  # sent, but never stored (an event store that failed): report what was seen
        issuing._report(issuing.id, None)
    report({"type": "outcome", "label": label, "id": issuing.id, "outcome": outcome, "detail": detail})
    return outcome == "answered"


# ---------------------------------------------------------------- stateless-http (MCP 2026-07-28)
# The SDK serves a request whose MCP-Protocol-Version is 2026-07-28 on the same
# /mcp endpoint, sessionless (mcp/server/streamable_http_manager.py,
# _handle_request -> _streamable_http_modern.handle_modern_request). FastMCP
# adds the multi-round-trip tool results and the requestState boundary; it
# registers no `subscriptions/listen` handler.


class WireRequest:
    """What a 2026-07-28 POST carried, as the client sent it (read by WireObserver, never altered)."""

    def __init__(self, principal: str) -> None:
        self.principal = principal
        self.body = b""
        self.id: Any = None
        self.call = ""
        self.state: str | None = None

    def parsed(self) -> None:
        try:
            msg = json.loads(self.body)
        except ValueError:
            return
        if isinstance(msg, dict):
            self.id = msg.get("id")
            params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
            args = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
            self.call = str(args.get("call", ""))
            state = params.get("requestState")
            self.state = state if isinstance(state, str) else None


WIRE: contextvars.ContextVar[WireRequest | None] = contextvars.ContextVar("wire", default=None)


class WireObserver:
    """ASGI wrapper: notes each 2026-07-28 POST's body and bearer in a contextvar the tool handlers inherit.

    The SDK runs a stateless request's handler in a task it starts from the
    ASGI request's task, so the handler (and the SDK's request-state boundary,
    which logs its refusals in that task) sees this request's WireRequest.
    """

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if headers.get("mcp-protocol-version", "") in ("", *HANDSHAKE_PROTOCOL_VERSIONS):
            return await self.app(scope, receive, send)
        auth = headers.get("authorization", "")
        wire = WireRequest(auth[7:] if auth.lower().startswith("bearer ") and auth[7:] else "anonymous")
        token = WIRE.set(wire)

        async def observed_receive():
            message = await receive()
            if message.get("type") == "http.request":
                wire.body += message.get("body", b"")
                if not message.get("more_body", False):
                    wire.parsed()
            return message

        try:
            return await self.app(scope, observed_receive, send)
        finally:
            WIRE.reset(token)


# The application's own requestState (plaintext, which FastMCP seals): who it
# was minted for, for which call, and a nonce. Minted states waiting for the
# boundary to seal them, by plaintext.
minting: dict[str, dict[str, Any]] = {}


class ObservedCodec:
    """The SDK's AES-GCM request-state codec, observed: reports each sealed state as mcpsim's clients will see it."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def seal(self, payload: bytes) -> str:
        token = self.inner.seal(payload)
        try:
            inner_state = json.loads(payload)["s"]
        except (ValueError, KeyError, TypeError):
            return token
        minted = minting.pop(inner_state, None)
        if minted is not None:
            msg = {"type": "state-minted", **minted, "state": token, "lifetime_ms": round(state_security.ttl * 1000)}
            report(msg)
        return token

    def unseal(self, token: str) -> bytes:
        return self.inner.unseal(token)


class StateRefusals(logging.Handler):
    """The SDK's RequestStateBoundary refuses a state with one frozen wire error and logs the reason
    ("requestState rejected on %s: %s", mcp/server/request_state.py _reject): report it."""

    def emit(self, record: logging.LogRecord) -> None:
        wire = WIRE.get()
        if wire is None or not record.msg.startswith("requestState rejected"):
            return
        why = str(record.args[1]) if isinstance(record.args, tuple) and len(record.args) > 1 else record.getMessage()
        report(
            {
                "type": "state-checked",
                "call": wire.call,
                "id": wire.id,
                "principal": wire.principal,
                "state": wire.state or "",
                "accepted": False,
                "why": f"SDK RequestStateBoundary: {why}",
            }
        )


logging.getLogger("mcp.server.request_state").addHandler(StateRefusals())

executions = 0


def input_request(method: str, tool: str) -> Any:
    if method == "elicitation/create":
        params = types.ElicitRequestFormParams(
            message=f"{tool} needs your confirmation", requested_schema={"type": "object", "properties": {}}
        )
        return types.ElicitRequest(params=params)
    if method == "sampling/createMessage":
        text = types.TextContent(type="text", text=f"{tool} needs a completion")
        params = types.CreateMessageRequestParams(messages=[types.SamplingMessage(role="user", content=text)], max_tokens=256)
        return types.CreateMessageRequest(params=params)
    if method == "roots/list":
        return types.ListRootsRequest()
    raise ValueError(f"unknown input request method {method}")


def scenario_tool(spec: dict[str, Any]):
    """The scenario's tool `spec` as a FastMCP tool (docs/live-protocol.md, "Tools")."""
    name = spec["name"]
    runs = float(spec.get("runs_ms") or 0) / 1000
    every = float(spec["progress_every_ms"]) / 1000 if spec.get("progress_every_ms") else None
    method = spec.get("input")
    once = bool(spec.get("once"))

    async def tool(call: str, ctx: Context) -> ToolResult | types.InputRequiredResult:
        global executions
        wire = WIRE.get() or WireRequest("anonymous")
        principal = wire.principal
        on_behalf_of = None
        if method is not None:
            if ctx.request_state is None:
                # The guard pattern of FastMCP's docs: return an InputRequiredResult; FastMCP seals its requestState.
                plain = json.dumps({"p": principal, "call": call, "n": os.urandom(8).hex()})
                minting[plain] = {"call": call, "id": wire.id, "principal": principal, "once": once}
                return types.InputRequiredResult(input_requests={"input": input_request(method, name)}, request_state=plain)
            # The boundary accepted the state (it refuses before the tool runs otherwise).
            report(
                {
                    "type": "state-checked",
                    "call": call,
                    "id": wire.id,
                    "principal": principal,
                    "state": wire.state or "",
                    "accepted": True,
                }
            )
            try:
                on_behalf_of = json.loads(ctx.request_state).get("p")
            except (ValueError, AttributeError):
                on_behalf_of = None
        executions += 1
        run = {"type": "execution", "exec": executions, "tool": name, "call": call, "id": wire.id, "principal": principal}
        if on_behalf_of is not None:
            run["on_behalf_of"] = on_behalf_of
        report({**run, "step": "started"})
        loop = asyncio.get_running_loop()
        start, sent = loop.time(), 0
        try:
            while runs > 0:
                due = every * (sent + 1) if every else runs
                due = due if due < runs else runs
                await asyncio.sleep(max(0.0, start + due - loop.time()))
                if due >= runs:
                    break
                sent += 1
                await ctx.report_progress(sent)  # a notifications/progress if the request has a progress token
        except asyncio.CancelledError:
            report({**run, "step": "cancelled"})
            raise
        report({**run, "step": "effect"})
        result = ToolResult(content=f"{name} done", structured_content={"for": on_behalf_of or principal})
        report({**run, "step": "completed"})  # FastMCP hands the result to the transport once this returns
        return result

    tool.__name__ = name
    return tool


class PrincipalTokenVerifier(TokenVerifier):
    """A FastMCP token verifier whose bearer token is the principal's name (mcpsim's clients send their principal).

    FastMCP's docs' way to check tokens of your own: subclass TokenVerifier and
    return an AccessToken (or None to refuse). Every non-empty token is
    accepted, as the principal it names.
    """

    async def verify_token(self, token: str) -> AccessToken | None:
        if not token:
            return None
        return AccessToken(token=token, client_id=token, scopes=[])


# ---------------------------------------------------------------- FastMCP: the server
# stateless-http (MCP 2026-07-28): FastMCP seals every requestState with the
# SDK's RequestStateBoundary. Without `request_state_security` it installs
# RequestStateSecurity.ephemeral() (a key drawn per process, TTL 600 s); the
# adapter passes the same policy with the scenario's TTL, and observes its codec.
# Behind a balancer (MCPSIM_REPLICAS > 1) FastMCP (fastmcp/server/server.py)
# and the SDK (RequestStateSecurity.ephemeral's docstring) say multi-replica
# deployments must share a key: `RequestStateSecurity(keys=[secret])`, the
# same in every replica and every restart. A deployer reads the secret from
# its configuration; here it is derived from the scenario's seed, which every
# replica is given. The audience is the server's name, the same everywhere.
state_ttl = {"ttl": STATE_LIFETIME_MS / 1000} if STATE_LIFETIME_MS is not None else {}
if REPLICAS > 1:
    state_key = hashlib.sha256(f"mcpsim-fastmcp request-state key, seed {SEED}".encode()).hexdigest()
    state_security = RequestStateSecurity(keys=[state_key], **state_ttl)
else:
    state_security = RequestStateSecurity.ephemeral(**state_ttl)
state_security.codec = ObservedCodec(state_security.codec)

mcp = FastMCP(
    "mcpsim-fastmcp-app",
    auth=PrincipalTokenVerifier() if AUTH == "bearer" else None,
    request_state_security=state_security,
)


@mcp.tool
async def ask(client: str, label: str, method: str, ctx: Context) -> ToolResult:
    """Issues the named server request related to this call."""
    # FastMCP 4 has no sampling/roots helpers on Context (only elicit, without
    # a timeout): the SDK session's send_request, related to this call, so the
    # SDK sends it on this call's POST stream.
    ok = await issue(
        ctx.session,
        sid=ctx.session_id,
        client=client,
        label=label,
        method=method,
        related_request_id=ctx.request_id,
    )
    text = f"{label} answered" if ok else f"{label} was not answered"
    return ToolResult(content=text, is_error=not ok)


@mcp.tool
async def enable_tool(tool: str, ctx: Context) -> ToolResult:
    """Enables a tool: the session is told its tool list changed."""
    # Not related to this call: the SDK session sends it on the session's standalone GET stream.
    await ctx.session.send_tool_list_changed()
    return ToolResult(content=f"{tool} enabled")


# The scenario's tools (stateless-http; MCPSIM_TOOLS), as FastMCP tools.
for _spec in TOOLS:
    if _spec.get("name") == "ask":
        log.warning("MCPSIM_TOOLS: a tool named `ask` is shadowed by the harness tool")
        continue
    mcp.tool(
        scenario_tool(_spec),
        name=_spec["name"],
        annotations=types.ToolAnnotations(idempotent_hint=bool(_spec.get("idempotent"))),
        output_schema=None,
    )


# Harness: each session's ServerSession, to issue standalone requests and
# notifications when mcpsim asks. A FastMCP middleware notes it from the first
# message of a session that carries an Mcp-Session-Id (notifications/initialized).
sessions: dict[str, ServerSession] = {}


class RememberSessions(Middleware):
    async def on_message(self, context: MiddlewareContext, call_next):
        ctx = context.fastmcp_context
        if ctx is not None and ctx.request_context is not None and ctx.request_context.request is not None:
            sid = ctx.request_context.request.headers.get("mcp-session-id")
            if sid and sid not in sessions:
                sessions[sid] = ctx.session
        return await call_next(context)


mcp.add_middleware(RememberSessions())

# As in FastMCP's docs: EventStore() (in memory), or EventStore(storage=RedisStore(...)).
if EVENT_STORE == "memory":
    event_store = ObservedEventStore(max_events_per_stream=RETENTION)
elif EVENT_STORE == "redis":
    event_store = ObservedEventStore(storage=redis_storage(STORE_URL), max_events_per_stream=RETENTION)
else:
    event_store = None
# As in FastMCP's docs: http_app() (Streamable HTTP at /mcp), with an EventStore for resumability.
starlette_app = mcp.http_app(event_store=event_store) if event_store is not None else mcp.http_app()


tool_changes = 0


def tools_changed() -> None:
    """FastMCP 4.2.3 serves no `subscriptions/listen`, so no listen stream can be told: 0 streams."""
    global tool_changes
    tool_changes += 1
    report({"type": "tools-changed", "n": tool_changes, "streams": 0})


# ---------------------------------------------------------------- harness: control protocol
async def notify(session: ServerSession, sid: str, client: str, count: int) -> None:
    issuing = Issuing("notifications/message")
    token = ISSUING.set(issuing)
    try:
        for n in range(count):
            note = types.LoggingMessageNotificationParams(level="info", data=f"note {n}")
            # No related request: the SDK sends it on the session's standalone GET stream.
            stored = len(issuing.event_ids)
            send = asyncio.ensure_future(session.send_notification(types.LoggingMessageNotification(params=note)))
            stall = asyncio.ensure_future(stalled(send.done, lambda: True))
            await asyncio.wait({send, stall}, return_when=asyncio.FIRST_COMPLETED)
            stall.cancel()
            if not send.done():
                # After a store failure: the SDK's send blocks for ever (its router is
                # gone). It stays blocked, as the application would; report what was stored.
                log.warning("notification %d of %d is blocked in the SDK: the session's message router is gone", n + 1, count)
                break
            send.result()
            if event_store is not None:
                await issuing.stored_notifications(stored + 1)
    finally:
        ISSUING.reset(token)
    report({"type": "notified", "session": sid, "client": client, "event_ids": issuing.event_ids})


def command(cmd: dict[str, Any]) -> None:
    """Carries out one command of mcpsim-control/1."""
    sid, client = cmd.get("session", ""), cmd.get("client", "")
    if cmd.get("type") == "tools-changed":
        tools_changed()
        return
    if cmd.get("type") not in ("request", "notify"):
        log.warning("ignoring a control message of unknown type: %s", json.dumps(cmd))
        return
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
    else:
        asyncio.create_task(notify(session, sid, client, int(cmd.get("count", 1))))


async def control_loop() -> None:
    """Serves the control connection; the process ends with it, however it ends.

    mcpsim closing it means the run is over. Failing to open it, or losing it,
    means mcpsim is gone (a test process that exited, say): a server left
    running would outlive every run.
    """
    global control
    try:
        reader, control = await asyncio.open_connection("127.0.0.1", CONTROL_PORT)
        report({"type": "ready", "protocol": "mcpsim-control/1", "server": NAME, "dialects": ["streamable-http", "stateless-http"], "authenticates": AUTH == "bearer"})
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
    Nothing is reported. Its request ids are strings no client uses.
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
    config = uvicorn.Config(WireObserver(starlette_app), host="127.0.0.1", port=PORT, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            log.error("cannot serve on 127.0.0.1:%s", PORT)
            sys.exit(1)
        await asyncio.sleep(0.005)
    log.info(
        "Streamable HTTP (and MCP 2026-07-28, %d scenario tools) on http://127.0.0.1:%s/mcp (%s, %s; SSE ping %s ms, request timeout %s; requestState key %s)",
        len(TOOLS),
        PORT,
        {
            "memory": f"FastMCP EventStore in memory, {RETENTION} events per stream",
            "redis": f"FastMCP EventStore over RedisStore at {STORE_URL}, {RETENTION} events per stream",
            "none": "no event store",
        }[EVENT_STORE],
        "bearer tokens = principals" if AUTH == "bearer" else "no auth",
        HEARTBEAT_MS,
        f"{REQUEST_TIMEOUT_MS} ms" if REQUEST_TIMEOUT_MS is not None else "none",
        f"configured, shared by {REPLICAS} replicas (this is {REPLICA})" if REPLICAS > 1 else "ephemeral (per process)",
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
