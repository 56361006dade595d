// The MCP TypeScript SDK v2 (@modelcontextprotocol/server 2.4.0, with
// @modelcontextprotocol/node and @modelcontextprotocol/express; all pinned in
// package.json) as a server under test for `mcpsim run --live`.
//
//   npm ci --prefix adapters/typescript-v2
//   mcpsim run --live 'node adapters/typescript-v2/server.mjs' FILE --time-scale 0.1
//
// Configurations (environment; see README.md):
//   MCPSIM_EVENT_STORE = memory (default) | none | redis (the default when MCPSIM_STORE is set)
//   MCPSIM_AUTH        = off (default)    | bearer
// The name in `ready` encodes them: typescript-v2, typescript-v2-no-store,
// typescript-v2-redis, each with -auth under bearer.
//
// Deployments (MCPSIM_STORE=redis://HOST:PORT, which mcpsim sets for each
// replica of a `[deployment]` with `store = "shared"`): with `redis`,
// redisStore.mjs keeps in that Redis what the SDK's docs
// (docs/serving/sessions-state-scaling.md, "Scale across nodes") tell a
// multi-node deployment to share: the event store ("point every node at the
// same eventStore"), a port of the example InMemoryEventStore to Redis,
// observed like it; in stateless-http the application's single-use registry
// (SET NX). The sessions themselves (one transport + McpServer each) stay in
// this process's map: the SDK has no other place for them and no way to move
// one, so a request of a session created on another replica gets 404, store
// or not. The client is node-redis (`redis`, pinned in package.json) with
// `disableOfflineQueue`, a command timeout and its own reconnection; a store
// call that fails is logged to stderr and its error handed to the SDK
// (which answers 400/500, or drops the message, README.md); nothing a
// partition does ends the process.
//
// Adapt it: keep the "SDK" parts as your server already has them (or replace
// them with yours), and keep the "harness" parts, which only tell mcpsim what
// the application did (docs/live-protocol.md). The harness never changes what
// the SDK puts on the wire.
//
// SDK part, streamable-http (MCP 2025-11-25): the SDK's sessionful routing of
// docs/serving/sessions-state-scaling.md and examples/sse-polling: the Express
// app of createMcpExpressApp, one NodeStreamableHTTPServerTransport + McpServer
// per session, resumability through the example InMemoryEventStore (one store
// for every session, as in the examples), SSE responses; with MCPSIM_AUTH=bearer
// the SDK's requireBearerAuth in front of /mcp (docs/serving/authorization.md),
// and, since the SDK binds no session to a principal, the routing keys each
// session by (principal, Mcp-Session-Id).
// SDK part, stateless-http (MCP 2026-07-28): createMcpHandler (the SDK's
// canonical entry), mounted with toNodeHandler: stateless.mjs.
// Harness part: the `ask` tool, the control connection, a transport `send`
// observer and an event store subclass that observe (never alter) what the SDK
// sends and stores, to learn the JSON-RPC id and SSE event id of each request
// and notification.

import { randomUUID } from 'node:crypto';
import { AsyncLocalStorage } from 'node:async_hooks';
import net from 'node:net';
import readline from 'node:readline';
import * as z from 'zod/v4';
import { isInitializeRequest, McpServer, OAuthError, OAuthErrorCode, SdkError, SdkErrorCode } from '@modelcontextprotocol/server';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { createMcpExpressApp, requireBearerAuth } from '@modelcontextprotocol/express';
import { InMemoryEventStore } from './inMemoryEventStore.mjs';
import { connectRedis, RedisEventStore } from './redisStore.mjs';

const env = (k, d) => (process.env[k] === undefined || process.env[k] === '' ? d : Number(process.env[k]));
const choice = (k, d, allowed) => {
    const v = (process.env[k] ?? '').trim() || d;
    if (!allowed.includes(v)) {
        console.error(`[typescript-v2] ${k}=${v} is not one of ${allowed.join(', ')}`);
        process.exit(2);
    }
    return v;
};
// A deployment's shared store (redis://127.0.0.1:PORT), when mcpsim runs replicas with `store = "shared"`.
const STORE_URL = (process.env.MCPSIM_STORE ?? '').trim() || undefined;
// `redis` is the default when there is a shared store to use.
const EVENT_STORE = choice('MCPSIM_EVENT_STORE', STORE_URL ? 'redis' : 'memory', ['memory', 'none', 'redis']);
if (EVENT_STORE === 'redis' && !STORE_URL?.startsWith('redis://')) {
    console.error(`[typescript-v2] MCPSIM_EVENT_STORE=redis needs MCPSIM_STORE=redis://HOST:PORT (got ${STORE_URL ?? 'none'})`);
    process.exit(2);
}
const AUTH = choice('MCPSIM_AUTH', 'off', ['off', 'bearer']);
const DIALECT = choice('MCPSIM_DIALECT', 'streamable-http', ['streamable-http', 'stateless-http', 'legacy-sse']);
const NAME = 'typescript-v2' + { memory: '', none: '-no-store', redis: '-redis' }[EVENT_STORE] + (AUTH === 'bearer' ? '-auth' : '');
const PORT = env('MCPSIM_PORT', 3000);
const CONTROL_PORT = env('MCPSIM_CONTROL_PORT', undefined);
const HEARTBEAT_MS = env('MCPSIM_HEARTBEAT_MS', 15000); // SDK default keepAliveMs is 15000
const REQUEST_TIMEOUT_MS = env('MCPSIM_REQUEST_TIMEOUT_MS', 60000); // SDK default request timeout is 60000
const TIME_SCALE = env('MCPSIM_TIME_SCALE', 1);
const REPLICA = process.env.MCPSIM_REPLICA;
const log = (...a) => console.error(`[${NAME}${REPLICA ? ` replica ${REPLICA}` : ''}]`, ...a);
// The dialects this process serves (it serves the one MCPSIM_DIALECT names).
const DIALECTS = ['streamable-http', 'stateless-http'];

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

// What the application is doing when the SDK sends or stores a message: set
// around each SDK call below, read in the send observer and the store. The
// SDK's request() calls transport.send synchronously (protocol.ts), and the
// transport calls storeEvent from send, so both see the message the call made.
const issuing = new AsyncLocalStorage();

/** An event store, observed: every stored message goes to whoever is issuing. */
const observed = Store =>
    class extends Store {
        async storeEvent(streamId, message) {
            const eventId = await super.storeEvent(streamId, message);
            issuing.getStore()?.stored?.(message, eventId);
            return eventId;
        }
    };
/** The example store, observed. */
const ObservedEventStore = observed(InMemoryEventStore);
/** The Redis store of a deployment (redisStore.mjs), observed the same way. */
const ObservedRedisEventStore = observed(RedisEventStore);

/**
 * Observes the transport's send (the one point every outgoing message of the
 * session passes, with or without an event store): once the SDK has written
 * (or stored) a message, whoever is issuing hears of it. Nothing is changed.
 */
function observeSends(transport) {
    const send = transport.send.bind(transport);
    transport.send = async (message, options) => {
        const ctx = issuing.getStore();
        const streamOpen = ctx?.sent && standaloneStreamOpen(transport, options);
        await send(message, options);
        ctx?.sent?.(message, streamOpen);
    };
}

/**
 * Whether a message without a related request has a standalone GET stream to
 * go on (read-only look at the transport's private stream map, for a note in
 * the report: without an event store the SDK drops such a message silently,
 * streamableHttp.ts:1188-1191). Undefined when the private field moved.
 */
function standaloneStreamOpen(transport, options) {
    if (options?.relatedRequestId !== undefined) return undefined;
    const map = transport._webStandardTransport?._streamMapping;
    return map instanceof Map ? map.has('_GET_stream') : undefined;
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

/**
 * Sends server request `method` with `send` (an SDK request function: related
 * to a call or not), reports it issued and then its outcome. Resolves to
 * whether it was answered.
 */
async function issue(send, { session, client, label, method, reissuable = true }) {
    const ctx = {
        id: undefined,
        eventId: undefined,
        stored(message, eventId) {
            if (message.method === method && message.id !== undefined && this.eventId === undefined) this.eventId = eventId;
        },
        sent(message, streamOpen) {
            if (this.id !== undefined || message.method !== method || message.id === undefined) return;
            this.id = message.id;
            report({
                type: 'issued',
                session,
                client,
                label,
                method,
                id: message.id,
                ...(this.eventId !== undefined && { event_id: this.eventId }),
                reissuable
            });
            if (streamOpen === false && EVENT_STORE === 'none') {
                report({ type: 'note', session, note: `${label}: no standalone GET stream open and no event store: the SDK dropped the request` });
            }
        }
    };
    try {
        const req = serverRequest(method, label, client);
        await issuing.run(ctx, () => send(req, { timeout: REQUEST_TIMEOUT_MS }));
        report({ type: 'outcome', label, id: ctx.id, outcome: 'answered', detail: 'the SDK received the answer' });
        return true;
    } catch (e) {
        if (ctx.id === undefined) {
            // It never went out.
            report({ type: 'error', client, message: `the SDK did not send ${label}: ${e?.message ?? e}` });
            return false;
        }
        const outcome = e instanceof SdkError && e.code === SdkErrorCode.RequestTimeout ? 'timed-out' : 'failed';
        report({ type: 'outcome', label, id: ctx.id, outcome, detail: `SDK: ${e?.message ?? e}` });
        return false;
    }
}

/** One McpServer per session, as in the SDK's sessionful examples. */
function buildServer() {
    const server = new McpServer({ name: 'mcpsim-typescript-v2-app', version: '1.0.0' }, { capabilities: { logging: {} } });
    server.registerTool(
        'ask',
        {
            description: 'issues the named server request related to this call',
            inputSchema: z.object({ client: z.string(), label: z.string(), method: z.string() })
        },
        async ({ client, label, method }, ctx) => {
            // ctx.mcpReq.send relates the request to this call: the SDK sends it on the call's POST stream.
            const ok = await issue((req, options) => ctx.mcpReq.send(req, options), { session: ctx.sessionId, client, label, method });
            return { content: [{ type: 'text', text: ok ? `${label} answered` : `${label} was not answered` }], isError: !ok };
        }
    );
    server.registerTool(
        'enable_tool',
        { description: 'enables a tool: the session is told its tool list changed', inputSchema: z.object({ tool: z.string() }) },
        async ({ tool }) => {
            // Not related to this call: the SDK sends it on the session's standalone GET stream.
            // McpServer.sendToolListChanged() drops the promise of the low-level
            // Server's, whose rejection (the event store failing) would then be
            // unhandled: the same call one level down, with its failure logged.
            if (server.isConnected()) server.server.sendToolListChanged().catch(e => log('the SDK could not send tools/list_changed:', e?.message ?? e));
            return { content: [{ type: 'text', text: `${tool} enabled` }] };
        }
    );
    return server;
}

// ---------------------------------------------------------------- SDK: auth
/**
 * The bearer-token verifier (the SDK's OAuthTokenVerifier interface): the token
 * IS the principal's name. requireBearerAuth refuses a token without
 * `expiresAt`, so every token is given an hour.
 */
const verifier = {
    async verifyAccessToken(token) {
        if (!token) throw new OAuthError(OAuthErrorCode.InvalidToken, 'empty token');
        return { token, clientId: token, scopes: [], expiresAt: Math.floor(Date.now() / 1000) + 3600 };
    }
};
const auth = AUTH === 'bearer' ? requireBearerAuth({ verifier }) : (_req, _res, next) => next();
/** The principal a request authenticated as (undefined with MCPSIM_AUTH=off). */
const principalOf = req => req.auth?.clientId;

// ---------------------------------------------------------------- SDK: stateful HTTP (the docs' routing)
const sessions = new Map(); // Mcp-Session-Id -> { transport, server, owner }
// One store for every session (examples/sse-polling, examples/repl); in a
// deployment with a shared store, the Redis one every replica shares (the
// docs' "point every node at the same eventStore"). The sessions themselves
// (transports) stay in this process's `sessions`: the SDK has nothing else.
let eventStore;

function statefulApp() {
    const app = createMcpExpressApp(); // host 127.0.0.1: Host and Origin validation on
    const notFound = res => res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    const route = async (req, res) => {
        const sessionId = req.headers['mcp-session-id'];
        try {
            const session = sessionId ? sessions.get(sessionId) : undefined;
            // The session binding: a session is found only under the principal
            // that created it, as if the map were keyed by (principal, id) --
            // the MCP security best practice "bind session IDs to user-specific
            // information". The SDK's transport compares only the id.
            if (session && session.owner === principalOf(req)) {
                await session.transport.handleRequest(req, res, req.body);
            } else if (!sessionId && req.method === 'POST' && isInitializeRequest(req.body)) {
                const owner = principalOf(req);
                const transport = new NodeStreamableHTTPServerTransport({
                    sessionIdGenerator: () => randomUUID(),
                    ...(eventStore && { eventStore }), // enables resumability
                    keepAliveMs: HEARTBEAT_MS,
                    onsessioninitialized: sid => {
                        sessions.set(sid, { transport, server, owner });
                    }
                });
                transport.onclose = () => {
                    if (transport.sessionId) sessions.delete(transport.sessionId);
                };
                observeSends(transport);
                const server = buildServer();
                await server.connect(transport);
                await transport.handleRequest(req, res, req.body);
            } else if (sessionId) {
                // Unknown session id, or another principal's: the client should start a new session.
                notFound(res);
            } else {
                res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Session ID required' }, id: null });
            }
        } catch (error) {
            log(`error handling ${req.method}:`, error);
            if (!res.headersSent) res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
        }
    };
    app.post('/mcp', auth, route);
    app.get('/mcp', auth, route);
    app.delete('/mcp', auth, route);
    return app;
}

// ---------------------------------------------------------------- harness: control protocol
/** Carries out one command of mcpsim-control/1 (streamable-http). */
function statefulCommand(cmd) {
    if (cmd.type !== 'request' && cmd.type !== 'notify') {
        log('ignoring a control message of unknown type:', JSON.stringify(cmd));
        return;
    }
    const session = sessions.get(cmd.session);
    if (!session) {
        report({ type: 'error', client: cmd.client, message: `no session ${cmd.session}` });
        return;
    }
    const { server } = session;
    if (cmd.type === 'request') {
        // Not related to any call: the SDK sends it on the session's standalone GET stream.
        const s = server.server;
        const send = (req, options) =>
            req.method === 'sampling/createMessage' ? s.createMessage(req.params, options)
            : req.method === 'elicitation/create' ? s.elicitInput(req.params, options)
            : s.listRoots(undefined, options);
        issue(send, { session: cmd.session, client: cmd.client, label: cmd.label, method: cmd.method, reissuable: cmd.reissuable !== false });
    } else {
        (async () => {
            const eventIds = [];
            const ctx = { stored: (m, eventId) => m.method === 'notifications/message' && eventIds.push(eventId) };
            for (let n = 0; n < cmd.count; n++) {
                try {
                    await issuing.run(ctx, () => server.sendLoggingMessage({ level: 'info', data: `note ${n}` }));
                } catch (e) {
                    report({ type: 'error', client: cmd.client, message: `the SDK could not notify: ${e?.message ?? e}` });
                }
            }
            // Without an event store the SDK mints no event ids: the report says so with [].
            report({ type: 'notified', session: cmd.session, client: cmd.client, event_ids: eventIds });
        })();
    }
}

/** Connects to mcpsim, says ready, and hands each command to `onCommand`. */
function connectControl(onCommand) {
    pending = [];
    const socket = net.connect(CONTROL_PORT, '127.0.0.1', () => {
        control = socket;
        report({ type: 'ready', protocol: 'mcpsim-control/1', server: NAME, dialects: DIALECTS, authenticates: AUTH === 'bearer' });
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
        onCommand(cmd);
    });
}

/** Serves `app`, warms it up with `warmUp`, then connects to mcpsim. */
function serve(app, warmUp, onCommand, what) {
    const httpServer = app.listen(PORT, '127.0.0.1', error => {
        if (error) {
            log('cannot serve:', error);
            process.exit(1);
        }
        log(`${what} on http://127.0.0.1:${PORT}/mcp (event store ${EVENT_STORE === 'redis' ? `redis at ${STORE_URL}` : EVENT_STORE}, auth ${AUTH}, keepAliveMs=${HEARTBEAT_MS}, request timeout ${REQUEST_TIMEOUT_MS} ms)`);
        if (CONTROL_PORT === undefined) return; // no live run: just serve
        const t0 = Date.now();
        const limit = new Promise((_, fail) => setTimeout(() => fail(new Error('no end within 3 s')), 3000).unref());
        Promise.race([warmUp(), limit])
            .then(() => log(`warm-up done in ${Date.now() - t0} ms`))
            .catch(e => log('warm-up failed (continuing):', e?.message ?? e))
            .then(() => connectControl(onCommand));
    });
    httpServer.on('error', error => {
        log('cannot serve:', error);
        process.exit(1);
    });
}

// Harness: one throw-away session before `ready` (initialize, tools/list, a
// call of `ask` whose roots/list it answers, DELETE), so that the first
// scenario requests do not pay for Node's lazy loading and JIT (tens of ms:
// whole scenario seconds at --time-scale 0.1). Nothing is reported; the
// session is deleted (its events stay in the shared example store, under
// stream ids no scenario session has).
async function statefulWarmUp() {
    const url = `http://127.0.0.1:${PORT}/mcp`;
    const headers = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(AUTH === 'bearer' && { authorization: 'Bearer warm-up' })
    };
    const post = (body, extra = {}) => fetch(url, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) });
    const init = await post({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: { roots: {} }, clientInfo: { name: 'warm-up', version: '0' } }
    });
    await init.text();
    const sid = init.headers.get('mcp-session-id');
    if (!sid) throw new Error(`initialize answered ${init.status} without a session`);
    const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, h)).text();
    await (await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, h)).text();
    const args = { client: 'warm-up', label: 'warm-up', method: 'roots/list' };
    const call = await post({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'ask', arguments: args } }, h);
    await readSse(call, async m => {
        if (m.method === 'roots/list') await (await post({ jsonrpc: '2.0', id: m.id, result: { roots: [] } }, h)).text();
    });
    await (await fetch(url, { method: 'DELETE', headers: { ...headers, ...h } })).text();
}

/** Reads an SSE (or JSON) response to its end, handing each JSON-RPC message to `onMessage`. */
async function readSse(response, onMessage) {
    if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) {
        const text = await response.text();
        if (text) await onMessage(JSON.parse(text));
        return;
    }
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of response.body) {
        buf += decoder.decode(chunk, { stream: true });
        for (let i; (i = buf.indexOf('\n\n')) >= 0; buf = buf.slice(i + 2)) {
            const data = buf.slice(0, i).split('\n').filter(l => l.startsWith('data:')).map(l => l.slice(5)).join('').trim();
            if (data) await onMessage(JSON.parse(data));
        }
    }
}

// ---------------------------------------------------------------- main
// A deployment's shared store, with MCPSIM_EVENT_STORE=redis (the default when
// MCPSIM_STORE is set): the Redis client of the event store (streamable-http)
// or of the single-use registry (stateless-http).
if (STORE_URL !== undefined && EVENT_STORE !== 'redis') {
    log(`MCPSIM_STORE=${STORE_URL} unused: MCPSIM_EVENT_STORE=${EVENT_STORE} keeps everything in this process`);
}
const redis = EVENT_STORE === 'redis' ? await connectRedis(STORE_URL, { log, timeScale: TIME_SCALE }) : undefined;
if (redis) {
    // Last resort: a store failure in a promise nobody awaits (the SDK has such
    // places, e.g. McpServer.sendToolListChanged) must not end the replica.
    process.on('unhandledRejection', e => log('unhandled rejection (the process goes on):', e?.message ?? e));
}

if (DIALECT === 'stateless-http') {
    const { statelessMain } = await import('./stateless.mjs');
    statelessMain({ PORT, HEARTBEAT_MS, AUTH, log, auth, report, serve, readSse, redis });
} else {
    if (EVENT_STORE === 'memory') eventStore = new ObservedEventStore();
    if (EVENT_STORE === 'redis') eventStore = new ObservedRedisEventStore(redis, { log });
    if (DIALECT !== 'streamable-http') log(`MCPSIM_DIALECT=${DIALECT} is not served (the v2 SDK has no HTTP+SSE server); serving streamable-http`);
    // Settings this SDK has no equivalent for (see README.md).
    for (const k of ['MCPSIM_RETENTION', 'MCPSIM_FIRST_EVENT_ID', 'MCPSIM_FENCE_GRACE_MS', 'MCPSIM_FENCE_DELAY_MS']) {
        if (process.env[k] !== undefined) log(`${k}=${process.env[k]} ignored: the SDK (and its example event store) has no such setting`);
    }
    serve(statefulApp(), statefulWarmUp, statefulCommand, 'stateful Streamable HTTP');
}
