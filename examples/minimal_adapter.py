"""A minimal streamable-http MCP server that speaks mcpsim-control/1, written
from docs/live-protocol.md alone, with Python's standard library only.

    mcpsim run --live 'python3 examples/minimal_adapter.py' scenarios/streamable-http/nat-rebind.toml --time-scale 0.1

One SSE stream per session (the GET), its events kept for replay after
Last-Event-ID, the prior stream closed when a new one attaches, sessions bound
to the principal of `Authorization: Bearer`. POSTs are answered with JSON.
Not served: tool calls (`ask`), legacy-sse, stateless-http."""
import itertools, json, os, socket, sys, threading, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

env = lambda k, d: int(os.environ.get(k) or d)
HEARTBEAT, TIMEOUT = env("MCPSIM_HEARTBEAT_MS", 15000) / 1000, env("MCPSIM_REQUEST_TIMEOUT_MS", 300000) / 1000
RETENTION, FIRST_ID = env("MCPSIM_RETENTION", 64), env("MCPSIM_FIRST_EVENT_ID", 1)
lock, sessions, pending = threading.RLock(), {}, {}  # pending: (session, rpc id) -> label
control = socket.create_connection(("127.0.0.1", env("MCPSIM_CONTROL_PORT", 0)))
report = lambda **m: control.sendall((json.dumps(m) + "\n").encode())

class Session:
    def __init__(self, principal):
        self.principal, self.events, self.stream = principal, [], None
        self.next_id, self.rpc = itertools.count(FIRST_ID), itertools.count(1)

    def send(self, message):  # under lock: keep the event for replay, write it to the one live stream
        eid = str(next(self.next_id))
        self.events = (self.events + [(eid, message)])[-RETENTION:]
        if self.stream:
            self.stream.event(eid, message)
        return eid

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_message = lambda *a: None

    def reply(self, status, body=None, headers=()):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for k, v in [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *headers]:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def session(self):  # the request's session, if it exists and belongs to its principal
        s = sessions.get(self.headers.get("Mcp-Session-Id"))
        return s if s and s.principal == self.headers.get("Authorization") else None

    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if msg.get("method") == "initialize":
            sid = uuid.uuid4().hex
            with lock:
                sessions[sid] = Session(self.headers.get("Authorization"))
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {}, "serverInfo": {"name": "minimal", "version": "1"}}
            return self.reply(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result}, [("Mcp-Session-Id", sid)])
        s = self.session()
        if s is None:
            return self.reply(404, {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}})
        if "method" not in msg:  # a client's answer to one of our requests
            with lock:
                label = pending.pop((self.headers["Mcp-Session-Id"], msg.get("id")), None)
            if label:
                report(type="outcome", label=label, id=msg["id"], outcome="answered")
            return self.reply(202)
        if "id" not in msg:  # a notification
            return self.reply(202)
        self.reply(200, {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "not served here"}})

    def do_DELETE(self):
        with lock:
            s = self.session() and sessions.pop(self.headers["Mcp-Session-Id"])
            if s and s.stream:
                s.stream.close()
        self.reply(200 if s else 404)

    def do_GET(self):
        with lock:
            s, last = self.session(), self.headers.get("Last-Event-ID")
            if s is None:
                return self.reply(404)
            ids = [e for e, _ in s.events]
            if last is not None and last not in ids:
                return self.reply(409)  # an id we never minted, or no longer keep: refuse, never guess
            self.send_response(200)
            for k, v in [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("Connection", "close")]:
                self.send_header(k, v)
            self.end_headers()
            if s.stream:
                s.stream.close()  # the fence: one writer per session
            s.stream, self.closed = self, threading.Event()
            for eid, m in s.events[ids.index(last) + 1:] if last is not None else []:
                self.event(eid, m)  # the replay: everything after her id
        while not self.closed.wait(HEARTBEAT):
            with lock:
                if s.stream is self:
                    self.write(b": heartbeat\n\n")
        self.close_connection = True

    def write(self, data):
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close()

    def event(self, eid, message):
        self.write(f"id: {eid}\ndata: {json.dumps(message)}\n\n".encode())

    def close(self):
        self.closed.set()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

def command(cmd):
    with lock:
        s = sessions.get(cmd.get("session"))
        if s is None:
            return report(type="error", client=cmd.get("client"), message=f"no session {cmd.get('session')}")
        if cmd["type"] == "request":
            rid, params = next(s.rpc), {"messages": [], "maxTokens": 1} if cmd["method"] == "sampling/createMessage" else {}
            pending[(cmd["session"], rid)] = cmd["label"]
            eid = s.send({"jsonrpc": "2.0", "id": rid, "method": cmd["method"], "params": params})
            report(type="issued", session=cmd["session"], client=cmd["client"], label=cmd["label"], method=cmd["method"], id=rid, event_id=eid)
            threading.Timer(TIMEOUT, timed_out, (cmd["session"], rid)).start()
        elif cmd["type"] == "notify":
            eids = [s.send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": n}}) for n in range(cmd["count"])]
            report(type="notified", session=cmd["session"], client=cmd["client"], event_ids=eids)
        else:
            print("ignoring control message", cmd, file=sys.stderr)

def timed_out(sid, rid):
    with lock:
        label = pending.pop((sid, rid), None)
    if label:
        report(type="outcome", label=label, id=rid, outcome="timed-out")

server = ThreadingHTTPServer(("127.0.0.1", env("MCPSIM_PORT", 8080)), Handler)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
report(type="ready", protocol="mcpsim-control/1", server="minimal-adapter", dialects=["streamable-http"])
for line in control.makefile():
    command(json.loads(line))
os._exit(0)  # the control connection closed: mcpsim is done with us
