// "notes": an MCP server of our own on the TypeScript SDK v2
// (@modelcontextprotocol/server 2.4.0). It is the user's code in this
// example: nothing in it knows mcpsim. adapter.mjs hands it to mcpsim-kit.
//
// It serves either HTTP dialect the SDK speaks:
// - streamable-http (MCP 2025-11-25): the SDK docs' sessionful routing, one
//   transport + McpServer per session, each session bound to the principal
//   that opened it, resumable through our event store;
// - stateless-http (MCP 2026-07-28): createMcpHandler, with a sealed
//   requestState (the SDK's codec) that our verify hook checks against the
//   request, and a single-use registry for one-time states.
//
// BREAK plants one bug of ours, for the gate to catch:
//   skip-state-check  the verify hook reads the state without checking its seal
//   registry-forgets  the single-use registry never remembers a redemption
//   no-event-store    the session transports are built without the event store
//   work-after-close  a hand-wired HTTP bridge that never tells the SDK the client left
//
// Run on its own: node server.mjs (streamable-http on 127.0.0.1:8080/mcp).

import { createHash, randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import * as z from 'zod/v4';
import {
    createMcpHandler,
    createRequestStateCodec,
    inputRequired,
    inputResponse,
    isInitializeRequest,
    McpServer,
    OAuthError,
    OAuthErrorCode
} from '@modelcontextprotocol/server';
import { NodeStreamableHTTPServerTransport, toNodeHandler, toWebRequest } from '@modelcontextprotocol/node';
import { createMcpExpressApp, requireBearerAuth } from '@modelcontextprotocol/express';

const BREAK = process.env.BREAK ?? '';

/**
 * Our event store: the SDK's example InMemoryEventStore
 * (examples/shared/src/inMemoryEventStore.ts), one per session.
 */
export class EventStore {
    events = new Map();

    generateEventId(streamId) {
        return `${streamId}_${Date.now()}_${Math.random().toString(36).slice(2, 10)}`;
    }

    async storeEvent(streamId, message) {
        const eventId = this.generateEventId(streamId);
        this.events.set(eventId, { streamId, message });
        return eventId;
    }

    async replayEventsAfter(lastEventId, { send }) {
        const streamId = this.events.get(lastEventId)?.streamId;
        if (!streamId) return '';
        let found = false;
        for (const [eventId, event] of this.events) {
            if (event.streamId !== streamId) continue;
            if (found) await send(eventId, event.message);
            else found = eventId === lastEventId;
        }
        return streamId;
    }
}

/** Our one-time states: the first redemption of a nonce wins. */
class SingleUseRegistry {
    #spent = new Set();

    async redeem(nonce) {
        if (BREAK === 'registry-forgets') return true;
        if (this.#spent.has(nonce)) return false;
        this.#spent.add(nonce);
        return true;
    }
}

/** Our bearer auth (development tokens: the token is the user's name). */
export const bearerAuth = requireBearerAuth({
    verifier: {
        async verifyAccessToken(token) {
            if (!token) throw new OAuthError(OAuthErrorCode.InvalidToken, 'empty token');
            return { token, clientId: token, scopes: [], expiresAt: Math.floor(Date.now() / 1000) + 3600 };
        }
    }
});

/** A canonical JSON text of a value (object keys sorted). */
const canonical = v =>
    v === null || typeof v !== 'object'
        ? JSON.stringify(v)
        : Array.isArray(v)
          ? `[${v.map(canonical).join(',')}]`
          : `{${Object.keys(v)
                .sort()
                .map(k => `${JSON.stringify(k)}:${canonical(v[k])}`)
                .join(',')}}`;
const digest = v => createHash('sha256').update(canonical(v ?? {})).digest('base64url').slice(0, 22);

/** The tool call a request carries ({ name, args }), read from a copy of its body. */
async function callOf(request) {
    const body = await request
        ?.clone()
        .json()
        .catch(() => undefined);
    return body?.method === 'tools/call' ? { name: body.params?.name, args: body.params?.arguments } : undefined;
}

/**
 * The notes server. `stateKey` seals every requestState (the same key on
 * every instance a retry may reach); `stateTtlSeconds` is how long one lasts.
 */
export function notesServer({ stateKey, stateTtlSeconds = 600 }) {
    const notes = new Map(); // principal -> [text]
    const registry = new SingleUseRegistry();
    const codec = createRequestStateCodec({
        key: stateKey,
        ttlSeconds: stateTtlSeconds,
        bind: ctx => `${ctx.mcpReq.method}\0${ctx.http?.authInfo?.clientId ?? ''}`
    });

    /**
     * Seals the claims of an input round: { tool, args, principal, nonce, once }.
     * The arguments go in as a digest.
     */
    const mintState = (claims, ctx) => codec.mint({ ...claims, args: digest(claims.args) }, ctx);

    /** Our requestState.verify hook: the seal, then the request it was minted for, then single use. */
    async function verifyState(state, ctx, call) {
        const claims =
            BREAK === 'skip-state-check'
                ? JSON.parse(Buffer.from(state.split('.')[1] ?? '', 'base64url').toString()).p // read, not checked
                : await codec.verify(state, ctx);
        if (claims?.tool !== call?.name || claims?.args !== digest(call?.args)) throw new Error('minted for another request');
        if (claims.once && !(await registry.redeem(claims.nonce))) throw new Error('already redeemed');
        return claims;
    }

    /** One McpServer per session (streamable-http) or per request (stateless-http). */
    function createServer({ requestInfo, authInfo } = {}) {
        const call = callOf(requestInfo); // before the SDK reads the body
        const server = new McpServer(
            { name: 'notes', version: '1.0.0' },
            { requestState: { verify: async (state, ctx) => verifyState(state, ctx, await call) } }
        );
        const owner = ctx => ctx.http?.authInfo?.clientId ?? authInfo?.clientId ?? 'anonymous';
        server.registerTool('add_note', { description: 'Adds a note', inputSchema: z.object({ text: z.string() }) }, async ({ text }, ctx) => {
            const mine = notes.get(owner(ctx)) ?? [];
            notes.set(owner(ctx), [...mine, text]);
            return { content: [{ type: 'text', text: `${mine.length + 1} notes` }] };
        });
        server.registerTool('clear_notes', { description: 'Deletes all your notes, once confirmed', inputSchema: z.object({}) }, async (args, ctx) => {
            const st = ctx.mcpReq.requestState();
            if (st === undefined || inputResponse(ctx.mcpReq.inputResponses, 'confirm').kind === 'missing') {
                const claims = { tool: 'clear_notes', args, principal: owner(ctx), nonce: randomUUID(), once: true };
                const requestState = await mintState(claims, ctx);
                const confirm = inputRequired.elicit({ mode: 'form', message: 'Delete all notes?', requestedSchema: { type: 'object', properties: {} } });
                return inputRequired({ inputRequests: { confirm }, requestState });
            }
            notes.delete(st.principal);
            return { content: [{ type: 'text', text: 'notes cleared' }] };
        });
        return server;
    }

    /** The HTTP app: `auth` in front of /mcp, the dialect's routing behind it. */
    function createApp({ dialect = 'streamable-http', createServer: build = createServer, eventStore, auth = bearerAuth, keepAliveMs }) {
        const app = createMcpExpressApp(); // Host and Origin validation for 127.0.0.1
        if (dialect === 'stateless-http') {
            const handler = createMcpHandler(build, { keepAliveMs, onerror: e => console.error('[notes]', e?.message ?? e) });
            if (BREAK === 'work-after-close') {
                // Our own Node bridge: it never hands the Request an abort signal.
                app.all('/mcp', auth, async (req, res) => {
                    const response = await handler.fetch(await toWebRequest(req, req.body), { authInfo: req.auth, parsedBody: req.body });
                    res.writeHead(response.status, Object.fromEntries(response.headers));
                    if (response.body) for await (const chunk of response.body) res.write(chunk);
                    res.end();
                });
            } else {
                const node = toNodeHandler(handler);
                app.all('/mcp', auth, (req, res) => void node(req, res, req.body));
            }
            return { app, handler };
        }
        const sessions = new Map(); // Mcp-Session-Id -> { transport, owner }
        const route = async (req, res) => {
            const sid = req.headers['mcp-session-id'];
            const session = sid ? sessions.get(sid) : undefined;
            if (session && session.owner === req.auth?.clientId) return session.transport.handleRequest(req, res, req.body);
            if (!sid && req.method === 'POST' && isInitializeRequest(req.body)) {
                const owner = req.auth?.clientId;
                const store = typeof eventStore === 'function' ? eventStore() : eventStore;
                const transport = new NodeStreamableHTTPServerTransport({
                    sessionIdGenerator: () => randomUUID(),
                    ...(store && BREAK !== 'no-event-store' && { eventStore: store }),
                    ...(keepAliveMs !== undefined && { keepAliveMs }),
                    onsessioninitialized: id => sessions.set(id, { transport, owner })
                });
                transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
                await build().connect(transport);
                return transport.handleRequest(req, res, req.body);
            }
            if (sid) return res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
            res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Session ID required' }, id: null });
        };
        app.all('/mcp', auth, (req, res) =>
            route(req, res).catch(e => {
                console.error('[notes]', e);
                if (!res.headersSent) res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
            })
        );
        return app;
    }

    return { createServer, createApp, mintState, EventStore, bearerAuth };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
    const key = process.env.NOTES_STATE_KEY ?? randomUUID() + randomUUID();
    const notes = notesServer({ stateKey: key });
    notes.createApp({ eventStore: () => new EventStore() }).listen(8080, '127.0.0.1', () => console.error('[notes] http://127.0.0.1:8080/mcp'));
}
