// streamable-http (MCP 2025-11-25): the probe tools `ask` and `enable_tool`,
// registered on each McpServer the server's own factory builds; the control
// commands `request` and `notify`, carried out on the session's own server;
// the reports `issued`, `outcome` and `notified`; and a warm-up.
//
// The sessions, their routing, their transports and their event store are
// the server's: the kit learns a session's server when the server's routing
// connects it to a transport (and observes that transport's sends).

import * as z from 'zod/v4';
import { SdkErrorCode } from '@modelcontextprotocol/server';
import { log, report, settings } from './control.mjs';
import { issuing, observeSends, readSse } from './observe.mjs';

/** Every McpServer the factory built that was connected: { server, transport }. */
const connected = new Set();

/** The server of session `sid` (its transport's Mcp-Session-Id), while it is connected. */
function serverOf(sid) {
    for (const entry of connected) {
        if (!entry.server.isConnected()) connected.delete(entry);
        else if (entry.transport.sessionId === sid) return entry.server;
    }
    return undefined;
}

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
 * Sends server request `method` with `send` (an SDK request function, related
 * to a call or not), reports it `issued` once the SDK wrote it (its JSON-RPC
 * id read from the transport's send, its event id from the store), then its
 * `outcome`. Resolves to whether it was answered.
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
            if (streamOpen === false && this.eventId === undefined) {
                report({ type: 'note', session, note: `${label}: no standalone GET stream open and no event store kept it: the SDK dropped the request` });
            }
        }
    };
    try {
        await issuing.run(ctx, () => send(serverRequest(method, label, client), { timeout: settings.requestTimeoutMs }));
        report({ type: 'outcome', label, id: ctx.id, outcome: 'answered', detail: 'the SDK received the answer' });
        return true;
    } catch (e) {
        if (ctx.id === undefined) {
            report({ type: 'error', client, message: `the SDK did not send ${label}: ${e?.message ?? e}` });
            return false;
        }
        const outcome = e?.code === SdkErrorCode.RequestTimeout ? 'timed-out' : 'failed';
        report({ type: 'outcome', label, id: ctx.id, outcome, detail: `SDK: ${e?.message ?? e}` });
        return false;
    }
}

/**
 * Registers the probe tools on a server the factory built, and learns its
 * transport when the server's routing connects it. The server also declares
 * `logging` (for `notify`), as the probes need it.
 */
export function instrumentStateful(server) {
    if (!server.server.getCapabilities().logging) server.server.registerCapabilities({ logging: {} });
    server.registerTool(
        'ask',
        {
            description: 'mcpsim probe: issues the named server request related to this call',
            inputSchema: z.object({ client: z.string(), label: z.string(), method: z.string() })
        },
        async ({ client, label, method }, ctx) => {
            // Related to this call: the SDK sends it on the call's POST stream.
            const ok = await issue((req, options) => ctx.mcpReq.send(req, options), { session: ctx.sessionId, client, label, method });
            return { content: [{ type: 'text', text: ok ? `${label} answered` : `${label} was not answered` }], isError: !ok };
        }
    );
    server.registerTool(
        'enable_tool',
        { description: 'mcpsim probe: enables a tool; the session is told its tool list changed', inputSchema: z.object({ tool: z.string() }) },
        async ({ tool }) => {
            // Not related to this call: the SDK sends it on the session's standalone GET stream.
            // (McpServer.sendToolListChanged() drops the low-level promise; this one is caught.)
            if (server.isConnected()) server.server.sendToolListChanged().catch(e => log('the SDK could not send tools/list_changed:', e?.message ?? e));
            return { content: [{ type: 'text', text: `${tool} enabled` }] };
        }
    );
    const connect = server.connect.bind(server);
    server.connect = async transport => {
        observeSends(transport);
        connected.add({ server, transport });
        return connect(transport);
    };
    return server;
}

/** Carries out one command of mcpsim-control/1 on a session's own server. */
export function statefulCommand(cmd) {
    if (cmd.type !== 'request' && cmd.type !== 'notify') {
        log('ignoring a control message of unknown type:', JSON.stringify(cmd));
        return;
    }
    const server = serverOf(cmd.session);
    if (!server) {
        report({ type: 'error', client: cmd.client, message: `no session ${cmd.session}` });
        return;
    }
    if (cmd.type === 'request') {
        // Not related to any call: the SDK sends it on the session's standalone GET stream.
        const s = server.server;
        const send = (req, options) =>
            req.method === 'sampling/createMessage' ? s.createMessage(req.params, options)
            : req.method === 'elicitation/create' ? s.elicitInput(req.params, options)
            : s.listRoots(undefined, options);
        issue(send, { session: cmd.session, client: cmd.client, label: cmd.label, method: cmd.method, reissuable: cmd.reissuable !== false });
        return;
    }
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

/**
 * One throw-away session before `ready` (initialize, tools/list, a call of
 * `ask` whose roots/list it answers, DELETE), through the server's own
 * routing, so that the first scenario requests do not pay for Node's lazy
 * loading and JIT. Nothing is reported.
 */
export async function statefulWarmUp(url) {
    const headers = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(settings.auth === 'bearer' && { authorization: 'Bearer warm-up' })
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
