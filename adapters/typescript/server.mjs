// The official MCP TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// package.json) as a server under test for `mcpsim run --live`.
//
//   npm ci --prefix adapters/typescript
//   mcpsim run --live 'node adapters/typescript/server.mjs' FILE --time-scale 0.1
//
// The configuration users deploy, chosen by environment variables (README.md):
//   MCPSIM_EVENT_STORE=memory (default: the SDK's example InMemoryEventStore)
//                      none   (no event store: the SDK's default, no resumability)
//   MCPSIM_AUTH=off    (default: no authentication)
//               bearer (the SDK's requireBearerAuth with an OAuthTokenVerifier
//                       whose token is the principal's name; sessions bound to
//                       the principal that opened them, in the routing below)
// The name in `ready` says which: typescript-sdk, typescript-sdk-no-store,
// typescript-sdk-auth, typescript-sdk-no-store-auth.
//
// Adapt it: keep the "SDK" parts as your server already has them (or replace
// them with yours), and keep the "harness" parts, which only tell mcpsim what
// the application did (docs/live-protocol.md). The harness never changes what
// the SDK puts on the wire.
//
// SDK part: the stateful Streamable HTTP server of the SDK's example
// src/examples/server/simpleStreamableHttp.ts: createMcpExpressApp, one
// StreamableHTTPServerTransport + McpServer per session, resumability through
// the example InMemoryEventStore (imported from the package's examples) unless
// MCPSIM_EVENT_STORE=none, SSE responses (enableJsonResponse left false), and
// with MCPSIM_AUTH=bearer the example's --oauth wiring (requireBearerAuth on
// every /mcp route) with a token verifier of our own.
// Harness part: the `ask` tool, the control connection, and an observer of
// (never a change to) what the SDK emits, to learn the JSON-RPC id and SSE
// event id the SDK gave each request and notification: an event store subclass
// with the memory store, a transport subclass that watches send() without one.

import { randomUUID } from 'node:crypto';
import { AsyncLocalStorage } from 'node:async_hooks';
import net from 'node:net';
import readline from 'node:readline';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import {
    CreateMessageResultSchema,
    ElicitResultSchema,
    ErrorCode,
    isInitializeRequest,
    ListRootsResultSchema
} from '@modelcontextprotocol/sdk/types.js';
// The SDK's own example store, imported from the package (not copied): the
// store its README and examples point users to for resumability.
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';

const env = (k, d) => (process.env[k] === undefined || process.env[k] === '' ? d : Number(process.env[k]));
const choice = (k, values) => {
    const v = process.env[k] === undefined || process.env[k] === '' ? values[0] : process.env[k];
    if (values.includes(v)) return v;
    console.error(`[typescript-sdk] ${k}=${v}: expected one of ${values.join(', ')}`);
    process.exit(2);
};
const EVENT_STORE = choice('MCPSIM_EVENT_STORE', ['memory', 'none']);
const AUTH = choice('MCPSIM_AUTH', ['off', 'bearer']);
// The key in [expect]: the base name is the default configuration (memory, off).
const NAME = 'typescript-sdk' + (EVENT_STORE === 'none' ? '-no-store' : '') + (AUTH === 'bearer' ? '-auth' : '');
const PORT = env('MCPSIM_PORT', 3000);
const CONTROL_PORT = env('MCPSIM_CONTROL_PORT', undefined);
const HEARTBEAT_MS = env('MCPSIM_HEARTBEAT_MS', 15000); // SDK default keepAliveMs is 15000
const REQUEST_TIMEOUT_MS = env('MCPSIM_REQUEST_TIMEOUT_MS', 60000); // SDK default request timeout is 60000
const log = (...a) => console.error(`[${NAME}]`, ...a);

if ((process.env.MCPSIM_DIALECT ?? 'streamable-http') !== 'streamable-http') {
    log(`only streamable-http is served; MCPSIM_DIALECT=${process.env.MCPSIM_DIALECT} ignored`);
}
// Settings this SDK has no equivalent for (see README.md).
for (const k of ['MCPSIM_RETENTION', 'MCPSIM_FIRST_EVENT_ID', 'MCPSIM_FENCE_GRACE_MS', 'MCPSIM_FENCE_DELAY_MS']) {
    if (process.env[k] !== undefined) log(`${k}=${process.env[k]} ignored: the SDK (and its example event store) has no such setting`);
}
log(`event store: ${EVENT_STORE === 'memory' ? 'the example InMemoryEventStore' : 'none (no resumability)'}; auth: ${AUTH === 'bearer' ? 'bearer (token = principal)' : 'off'}`);

// ---------------------------------------------------------------- harness: reports
let control; // the control connection, when a live run started us
// Reports made while the control connection opens wait for `ready`, which
// must be its first line (a client retrying against a restarted process can
// reach the application before then); before that, the warm-up's go nowhere.
let pending = null;
const report = msg => {
    if (control) control.write(JSON.stringify(msg) + '\n');
    else if (pending) pending.push(msg);
};

// What the application is doing when the SDK stores an event: set around each
// SDK call below, read in the store. The SDK calls storeEvent synchronously
// from request()/notification(), so the store sees the message the call made.
const issuing = new AsyncLocalStorage();

/** The example store, observed: every stored message goes to whoever is issuing. */
class ObservedEventStore extends InMemoryEventStore {
    async storeEvent(streamId, message) {
        const eventId = await super.storeEvent(streamId, message);
        issuing.getStore()?.stored(message, eventId);
        return eventId;
    }
}

/**
 * Without an event store (MCPSIM_EVENT_STORE=none) there is nothing to observe
 * there: the transport, observed instead. Protocol.request()/notification()
 * call send() synchronously with the message they built (the JSON-RPC id
 * included); once send() has handed it on (written to the stream it belongs
 * to, or dropped for want of one, as the SDK does), it goes to whoever is
 * issuing, with no event id: none exists. A send() that throws (no stream for
 * the related request) is not reported, as the store never sees it either.
 */
class ObservedTransport extends StreamableHTTPServerTransport {
    async send(message, options) {
        const ctx = issuing.getStore();
        await super.send(message, options);
        ctx?.stored(message, undefined);
    }
}

// ---------------------------------------------------------------- application
/** The server request `method`, with content naming `label` and its owner (mcpsim's wire/jsonrpc.rs). */
function serverRequest(method, label, owner) {
    switch (method) {
        case 'sampling/createMessage':
            return {
                method,
                params: {
                    messages: [{ role: 'user', content: { type: 'text', text: `${label}: continue ${owner}'s conversation` } }],
                    maxTokens: 256
                }
            };
        case 'elicitation/create':
            return {
                method,
                params: { mode: 'form', message: `${label}: ${owner}, please confirm`, requestedSchema: { type: 'object', properties: {} } }
            };
        case 'roots/list':
            return { method };
        default:
            throw new Error(`unknown server request method ${method}`);
    }
}
const RESULT_SCHEMA = {
    'sampling/createMessage': CreateMessageResultSchema,
    'elicitation/create': ElicitResultSchema,
    'roots/list': ListRootsResultSchema
};

/**
 * Sends server request `method` with `send` (the SDK's request function:
 * related to a call or not), reports it issued and then its outcome.
 * Resolves to whether it was answered.
 */
async function issue(send, { session, client, label, method, reissuable = true }) {
    const ctx = {
        id: undefined,
        stored(message, eventId) {
            if (this.id !== undefined || message.method !== method || message.id === undefined) return;
            this.id = message.id;
            report({ type: 'issued', session, client, label, method, id: message.id, event_id: eventId, reissuable });
        }
    };
    try {
        const req = serverRequest(method, label, client);
        await issuing.run(ctx, () => send(req, RESULT_SCHEMA[method], { timeout: REQUEST_TIMEOUT_MS }));
        report({ type: 'outcome', label, id: ctx.id, outcome: 'answered', detail: 'the SDK received the answer' });
        return true;
    } catch (e) {
        if (ctx.id === undefined) {
            // It never went out.
            report({ type: 'error', client, message: `the SDK did not send ${label}: ${e?.message ?? e}` });
            return false;
        }
        const outcome = e?.code === ErrorCode.RequestTimeout ? 'timed-out' : 'failed';
        report({ type: 'outcome', label, id: ctx.id, outcome, detail: `SDK: ${e?.message ?? e}` });
        return false;
    }
}

/** One McpServer per session, as in the SDK example. */
function getServer() {
    const server = new McpServer({ name: 'mcpsim-typescript-sdk-app', version: '1.0.0' }, { capabilities: { logging: {} } });
    server.registerTool(
        'ask',
        {
            description: 'issues the named server request related to this call',
            inputSchema: { client: z.string(), label: z.string(), method: z.string() }
        },
        async ({ client, label, method }, extra) => {
            // extra.sendRequest relates the request to this call: the SDK sends it on the call's POST stream.
            const ok = await issue(extra.sendRequest, { session: extra.sessionId, client, label, method });
            return { content: [{ type: 'text', text: ok ? `${label} answered` : `${label} was not answered` }], isError: !ok };
        }
    );
    server.registerTool(
        'enable_tool',
        { description: 'enables a tool: the session is told its tool list changed', inputSchema: { tool: z.string() } },
        async ({ tool }) => {
            // Not related to this call: the SDK sends it on the session's standalone GET stream.
            server.sendToolListChanged();
            return { content: [{ type: 'text', text: `${tool} enabled` }] };
        }
    );
    return server;
}

// ---------------------------------------------------------------- SDK: auth (MCPSIM_AUTH=bearer)
// The example's --oauth wiring: requireBearerAuth in front of every /mcp route,
// with an OAuthTokenVerifier. mcpsim's clients present `Authorization: Bearer
// <principal>` (docs/live-protocol.md, section 5), so the verifier takes the
// token to be the principal's name: every token is valid, and its principal is
// the token itself (clientId). requireBearerAuth refuses a token without an
// expiry (bearerAuth.js:46), so it gets one an hour away.
const verifier = {
    async verifyAccessToken(token) {
        return { token, clientId: token, scopes: [], expiresAt: Math.floor(Date.now() / 1000) + 3600 };
    }
};
const authMiddleware = AUTH === 'bearer' ? [requireBearerAuth({ verifier })] : [];

// Session binding. The SDK does not bind a session to the principal that
// opened it: the transport compares only the Mcp-Session-Id
// (webStandardStreamableHttp.js:737-760, validateSession) and hands req.auth to
// handlers as authInfo, nothing else. So the routing does it, as the MCP
// security best practices ask of a server that authenticates: the session map
// keeps the principal of the initialize request, and a request on a session
// from any other principal is answered exactly as an unknown session is (the
// example's 404 "Session not found", the SDK's own answer to a session id it
// does not hold), so a stranger learns nothing about the session, and the
// session itself is left untouched. This is what the Python SDK's session
// manager does itself (streamable_http_manager.py:272-280).
const principalOf = req => req.auth?.clientId;
const foreign = (session, req) => AUTH === 'bearer' && session.principal !== principalOf(req);
const sessionNotFound = res => res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });

// ---------------------------------------------------------------- SDK: HTTP (the example's routing)
const sessions = new Map(); // Mcp-Session-Id -> { transport, server, principal }
const app = createMcpExpressApp(); // host 127.0.0.1: DNS-rebinding protection on
// With an event store: the SDK's transport, and resumability through the
// observed example store. Without: the transport, observed.
const Transport = EVENT_STORE === 'memory' ? StreamableHTTPServerTransport : ObservedTransport;

app.post('/mcp', ...authMiddleware, async (req, res) => {
    const sessionId = req.headers['mcp-session-id'];
    try {
        const session = sessionId ? sessions.get(sessionId) : undefined;
        if (session && foreign(session, req)) {
            log(`refused a request on session ${sessionId} of ${session.principal} from ${principalOf(req)}: 404`);
            sessionNotFound(res);
        } else if (session) {
            await session.transport.handleRequest(req, res, req.body);
        } else if (!sessionId && isInitializeRequest(req.body)) {
            const server = getServer();
            const principal = principalOf(req);
            const transport = new Transport({
                sessionIdGenerator: () => randomUUID(),
                ...(EVENT_STORE === 'memory' ? { eventStore: new ObservedEventStore() } : {}), // enables resumability
                keepAliveMs: HEARTBEAT_MS,
                onsessioninitialized: sid => sessions.set(sid, { transport, server, principal })
            });
            transport.onclose = () => {
                if (transport.sessionId) sessions.delete(transport.sessionId);
            };
            await server.connect(transport);
            await transport.handleRequest(req, res, req.body);
        } else if (sessionId) {
            sessionNotFound(res);
        } else {
            res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
        }
    } catch (error) {
        log('error handling MCP request:', error);
        if (!res.headersSent) res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
    }
});

// GET (standalone stream, or resumption with Last-Event-ID) and DELETE.
const existing = async (req, res) => {
    const sessionId = req.headers['mcp-session-id'];
    if (!sessionId) return void res.status(400).send('Missing session ID');
    const session = sessions.get(sessionId);
    if (!session) return void sessionNotFound(res);
    if (foreign(session, req)) {
        log(`refused a ${req.method} on session ${sessionId} of ${session.principal} from ${principalOf(req)}: 404`);
        return void sessionNotFound(res);
    }
    try {
        await session.transport.handleRequest(req, res);
    } catch (error) {
        log(`error handling ${req.method}:`, error);
        if (!res.headersSent) res.status(500).send('Internal server error');
    }
};
app.get('/mcp', ...authMiddleware, existing);
app.delete('/mcp', ...authMiddleware, existing);

// ---------------------------------------------------------------- harness: control protocol
/** Carries out one command of mcpsim-control/1. */
function command(cmd) {
    const session = sessions.get(cmd.session);
    if (!session) {
        report({ type: 'error', client: cmd.client, message: `no session ${cmd.session}` });
        return;
    }
    const { server } = session;
    if (cmd.type === 'request') {
        // Not related to any call: the SDK sends it on the session's standalone GET stream.
        const s = server.server;
        const send = (req, _schema, options) =>
            req.method === 'sampling/createMessage' ? s.createMessage(req.params, options)
            : req.method === 'elicitation/create' ? s.elicitInput(req.params, options)
            : s.listRoots(undefined, options);
        issue(send, { session: cmd.session, client: cmd.client, label: cmd.label, method: cmd.method, reissuable: cmd.reissuable !== false });
    } else if (cmd.type === 'notify') {
        (async () => {
            const eventIds = [];
            // Without an event store there are no event ids: event_ids stays [].
            const ctx = { stored: (m, eventId) => m.method === 'notifications/message' && eventId !== undefined && eventIds.push(eventId) };
            for (let n = 0; n < cmd.count; n++) {
                try {
                    await issuing.run(ctx, () => server.sendLoggingMessage({ level: 'info', data: `note ${n}` }));
                } catch (e) {
                    report({ type: 'error', client: cmd.client, message: `the SDK could not notify: ${e?.message ?? e}` });
                }
            }
            report({ type: 'notified', session: cmd.session, client: cmd.client, event_ids: eventIds });
        })();
    } else {
        log('ignoring a control message of unknown type:', JSON.stringify(cmd));
    }
}

app.listen(PORT, '127.0.0.1', error => {
    if (error) {
        log('cannot serve:', error);
        process.exit(1);
    }
    log(`Streamable HTTP on http://127.0.0.1:${PORT}/mcp (keepAliveMs=${HEARTBEAT_MS}, request timeout ${REQUEST_TIMEOUT_MS} ms)`);
    if (CONTROL_PORT === undefined) return; // no live run: just serve
    const t0 = Date.now();
    const limit = new Promise((_, fail) => setTimeout(() => fail(new Error('no end within 3 s')), 3000).unref());
    Promise.race([warmUp(), limit])
        .then(() => log(`warm-up done in ${Date.now() - t0} ms`))
        .catch(e => log('warm-up failed (continuing):', e?.message ?? e))
        .then(() => {
            pending = [];
            const socket = net.connect(CONTROL_PORT, '127.0.0.1', () => {
                control = socket;
                report({ type: 'ready', protocol: 'mcpsim-control/1', server: NAME, dialects: ['streamable-http'], authenticates: AUTH === 'bearer' });
                for (const msg of pending) report(msg);
                pending = null;
            });
            socket.on('error', e => {
                log('control connection:', e.message);
                process.exit(1);
            });
            socket.on('close', () => process.exit(0));
            readline.createInterface({ input: socket }).on('line', line => {
                let cmd;
                try {
                    cmd = JSON.parse(line);
                } catch {
                    return log('ignoring a control line that is not JSON:', line);
                }
                command(cmd);
            });
        });
});

// Harness: one throw-away session before `ready` (initialize, a call of `ask`
// whose roots/list it answers, DELETE), so that the first scenario requests do
// not pay for Node's lazy loading and JIT (tens of ms: whole scenario seconds
// at --time-scale 0.1). Nothing is reported and nothing is left behind.
async function warmUp() {
    const url = `http://127.0.0.1:${PORT}/mcp`;
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    if (AUTH === 'bearer') headers.authorization = 'Bearer warm-up';
    const post = (body, extra = {}) => fetch(url, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) });
    const init = await post({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'warm-up', version: '0' } }
    });
    await init.text();
    const sid = init.headers.get('mcp-session-id');
    const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, h)).text();
    await (await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, h)).text();
    const args = { client: 'warm-up', label: 'warm-up', method: 'roots/list' };
    const call = await post({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'ask', arguments: args } }, h);
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of call.body) {
        buf += decoder.decode(chunk, { stream: true });
        for (let i; (i = buf.indexOf('\n\n')) >= 0; buf = buf.slice(i + 2)) {
            const data = buf.slice(0, i).split('\n').filter(l => l.startsWith('data:')).map(l => l.slice(5)).join('').trim();
            const m = data ? JSON.parse(data) : {};
            if (m.method === 'roots/list') await (await post({ jsonrpc: '2.0', id: m.id, result: { roots: [] } }, h)).text();
        }
    }
    const { authorization } = headers;
    await (await fetch(url, { method: 'DELETE', headers: authorization ? { ...h, authorization } : h })).text();
}
