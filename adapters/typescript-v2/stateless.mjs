// stateless-http (MCP 2026-07-28) for server.mjs: loaded when
// MCPSIM_DIALECT=stateless-http. See README.md, "stateless-http".
//
// SDK part: createMcpHandler(buildServer) (the SDK's canonical HTTP entry: a
// fresh McpServer from the factory for every POST, no sessions), mounted on the
// Express app of createMcpExpressApp with toNodeHandler, as
// docs/serving/express.md and examples/bearer-auth show; requireBearerAuth in
// front with MCPSIM_AUTH=bearer. requestState is sealed with the SDK's
// createRequestStateCodec (HMAC-SHA-256, a TTL, and the docs' `bind` of method
// and authenticated principal), its `verify` dropped into
// ServerOptions.requestState.verify as examples/mrtr does; tools return
// inputRequired(...) for their input round; subscriptions/listen is the
// entry's own listen router, and a tool-list change is
// handler.notify.toolsChanged() (examples/subscriptions).
// What is the application's (the SDK leaves it to the author): binding the
// state to the tool and its arguments (a field of the sealed payload the
// verify hook compares), and a single-use registry for `once` tools: in
// memory, or in Redis (SET NX, redisStore.mjs) with MCPSIM_EVENT_STORE=redis,
// the default when a deployment hands the replicas a shared store
// (MCPSIM_STORE); a registry that does not answer refuses the state.
// Harness part: the reports (execution, state-minted, state-checked,
// tools-changed); they never change what the SDK sends.

import { createHash, randomUUID } from 'node:crypto';
import * as z from 'zod/v4';
import { createMcpHandler, createRequestStateCodec, inputRequired, inputResponse, McpServer } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpExpressApp } from '@modelcontextprotocol/express';
import { RedisOnceRegistry } from './redisStore.mjs';

const PROTOCOL_VERSION = '2026-07-28';
/** The key of the one input request a tool asks in its first round. */
const INPUT_KEY = 'confirm';

/** The tools of MCPSIM_TOOLS, or a small default set for a server started by hand. */
function toolsFromEnv(log) {
    const raw = process.env.MCPSIM_TOOLS;
    if (raw === undefined || raw === '') {
        return [
            { name: 'echo', runs_ms: 0, once: false, idempotent: true },
            { name: 'confirm', runs_ms: 0, input: 'elicitation/create', once: false, idempotent: false },
            { name: 'redeem', runs_ms: 0, input: 'elicitation/create', once: true, idempotent: false },
            { name: 'slow', runs_ms: 30000, progress_every_ms: 5000, once: false, idempotent: false }
        ];
    }
    try {
        const tools = JSON.parse(raw);
        if (!Array.isArray(tools)) throw new Error('not an array');
        return tools;
    } catch (e) {
        log(`MCPSIM_TOOLS is not a JSON array of tools (${e.message}): ${raw}`);
        process.exit(2);
    }
}

/** The embedded input request of a tool's first round (the shape mcpsim's reference server sends). */
function inputRequest(method, message) {
    switch (method) {
        case 'sampling/createMessage':
            return inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: message } }], maxTokens: 16 });
        case 'roots/list':
            return inputRequired.listRoots();
        default:
            return inputRequired.elicit({
                mode: 'form',
                message,
                requestedSchema: { type: 'object', properties: { confirmed: { type: 'boolean' } } }
            });
    }
}

/** A stable digest of a tool's arguments (what the state is bound to, with the tool). */
function digestOf(args) {
    const canonical = v =>
        v === null || typeof v !== 'object'
            ? JSON.stringify(v)
            : Array.isArray(v)
              ? `[${v.map(canonical).join(',')}]`
              : `{${Object.keys(v)
                    .sort()
                    .map(k => `${JSON.stringify(k)}:${canonical(v[k])}`)
                    .join(',')}}`;
    return createHash('sha256')
        .update(canonical(args ?? {}))
        .digest('base64url')
        .slice(0, 22);
}

/** The principal a request presented: the verified one with MCPSIM_AUTH=bearer, else its Authorization header. */
function presentedPrincipal(authInfo, request) {
    if (authInfo?.clientId) return authInfo.clientId;
    const h = request?.headers.get('authorization') ?? '';
    const m = /^bearer\s+(\S+)/i.exec(h);
    return m ? m[1] : 'anonymous';
}

/** Waits `ms`, or until `signal` aborts; resolves to whether it aborted. */
function waitOrAbort(ms, signal) {
    return new Promise(resolve => {
        if (signal.aborted) return resolve(true);
        const onAbort = () => {
            clearTimeout(timer);
            resolve(true);
        };
        const timer = setTimeout(() => {
            signal.removeEventListener('abort', onAbort);
            resolve(false);
        }, ms);
        signal.addEventListener('abort', onAbort, { once: true });
    });
}

/** The single-use registry in this process's memory (no shared store). */
function localOnceRegistry() {
    const spent = new Set();
    return {
        async redeem(n) {
            if (spent.has(n)) return false;
            spent.add(n);
            return true;
        }
    };
}

export function statelessMain({ PORT, HEARTBEAT_MS, AUTH, log, auth, report, serve, readSse, redis }) {
    const tools = toolsFromEnv(log);
    const lifetimeMs = Number(process.env.MCPSIM_STATE_LIFETIME_MS || 600000); // the codec's default ttl is 600 s
    const seed = process.env.MCPSIM_SEED ?? '0';
    for (const k of ['MCPSIM_REQUEST_TIMEOUT_MS', 'MCPSIM_RETENTION', 'MCPSIM_FIRST_EVENT_ID', 'MCPSIM_FENCE_GRACE_MS', 'MCPSIM_FENCE_DELAY_MS']) {
        if (process.env[k] !== undefined) log(`${k}=${process.env[k]} ignored: nothing in stateless-http uses it`);
    }
    if (process.env.MCPSIM_EVENT_STORE === 'none') log('MCPSIM_EVENT_STORE=none changes nothing in stateless-http but the name and, in a deployment, where the single-use registry is (in memory): there is no event store to leave out');

    // A configured key, as the codec's docs ask of any deployment where another
    // process may see the retry ("the same key must be available to every
    // server instance"): derived from the scenario's seed, so it survives
    // restart-server. (examples/mrtr draws a per-process key instead.)
    const key = createHash('sha256').update(`mcpsim typescript-v2 requestState key ${seed}`).digest();
    const codec = createRequestStateCodec({
        key,
        ttlSeconds: lifetimeMs / 1000,
        // The codec docs' binding: the method and the authenticated principal
        // (none with MCPSIM_AUTH=off: then the state is bound to nobody).
        bind: ctx => `${ctx.mcpReq.method}\0${ctx.http?.authInfo?.clientId ?? ''}`
    });
    // The single-use registry for `once` tools (the codec's docs leave it to
    // the server). In memory: a restart forgets it, as any process would; in
    // a deployment with a shared store (MCPSIM_STORE), in Redis (SET NX), so
    // that a state redeemed on one replica is spent on every other. A key
    // outlives the state it spends (the codec accepts a state up to a second
    // past its ttl, whole-second resolution), then expires.
    const redeemed = redis ? new RedisOnceRegistry(redis, { log, keepMs: lifetimeMs + 2000 }) : localOnceRegistry();
    if (redis) log('single-use registry in Redis', process.env.MCPSIM_STORE);
    let execs = 0;
    let changes = 0;

    /** The factory: one McpServer per request, which knows the request it serves (for the reports). */
    async function buildServer({ authInfo, requestInfo }) {
        let body;
        try {
            body = requestInfo ? await requestInfo.clone().json() : undefined;
        } catch {
            body = undefined;
        }
        const id = body?.id;
        const args = body?.params?.arguments;
        const call = typeof args?.call === 'string' ? args.call : '';
        const toolName = body?.params?.name;
        const principal = presentedPrincipal(authInfo, requestInfo);

        const server = new McpServer(
            { name: 'mcpsim-typescript-v2-app', version: '1.0.0' },
            {
                capabilities: { tools: { listChanged: true } },
                requestState: {
                    // The SDK runs this before the handler; a throw answers -32602
                    // "Invalid or expired requestState".
                    async verify(state, ctx) {
                        const checked = (accepted, why) =>
                            report({ type: 'state-checked', call, id, principal, state, accepted, ...(why && { why }) });
                        let p;
                        try {
                            p = await codec.verify(state, ctx);
                        } catch (e) {
                            checked(false, `the SDK's codec: ${e?.message ?? e}`);
                            throw e;
                        }
                        if (p?.t !== toolName || p?.a !== digestOf(args)) {
                            checked(false, `minted for another request (${p?.t} with other arguments)`);
                            throw new Error('request');
                        }
                        if (p.once) {
                            let first;
                            try {
                                first = await redeemed.redeem(p.n);
                            } catch (e) {
                                // The registry did not answer (the store is cut off): refuse, the
                                // state stays unredeemed here (Redis may have recorded it).
                                checked(false, `the single-use registry did not answer: ${e?.message ?? e}`);
                                throw e;
                            }
                            if (!first) {
                                checked(false, 'this one-time state was already redeemed');
                                throw new Error('redeemed');
                            }
                        }
                        checked(true);
                        return p;
                    }
                }
            }
        );
        for (const tool of tools) {
            server.registerTool(
                tool.name,
                {
                    description: `mcpsim tool ${tool.name}`,
                    inputSchema: z.object({ call: z.string() }),
                    annotations: { idempotentHint: !!tool.idempotent }
                },
                async ({ call }, ctx) => {
                    let onBehalfOf;
                    if (tool.input) {
                        const st = ctx.mcpReq.requestState(); // the verified payload, or undefined
                        const answered = inputResponse(ctx.mcpReq.inputResponses, INPUT_KEY).kind !== 'missing';
                        if (st === undefined || !answered) {
                            // The input round (again, if a retry lacks the answer or the state).
                            const payload = { t: tool.name, a: digestOf(args), p: principal, n: randomUUID(), ...(tool.once && { once: true }) };
                            const state = await codec.mint(payload, ctx);
                            report({ type: 'state-minted', call, id: ctx.mcpReq.id, principal, state, lifetime_ms: lifetimeMs, once: !!tool.once });
                            return inputRequired({
                                inputRequests: { [INPUT_KEY]: inputRequest(tool.input, `${tool.name} needs your confirmation`) },
                                requestState: state
                            });
                        }
                        onBehalfOf = st.p;
                    }
                    const exec = ++execs;
                    const step = s =>
                        report({
                            type: 'execution',
                            exec,
                            tool: tool.name,
                            call,
                            id: ctx.mcpReq.id,
                            principal,
                            ...(onBehalfOf !== undefined && { on_behalf_of: onBehalfOf }),
                            step: s
                        });
                    step('started');
                    const signal = ctx.mcpReq.signal; // aborted by the SDK when the response stream closes
                    const token = ctx.mcpReq._meta?.progressToken;
                    const runs = Number(tool.runs_ms ?? 0);
                    const every = Number(tool.progress_every_ms ?? 0);
                    const start = Date.now();
                    for (let sent = 0; ; ) {
                        const next = every > 0 && every * (sent + 1) < runs ? every * (sent + 1) : runs;
                        const cancelled = await waitOrAbort(Math.max(0, next - (Date.now() - start)), signal);
                        if (cancelled) {
                            step('cancelled');
                            throw new Error('cancelled: the response stream closed');
                        }
                        if (next >= runs) break;
                        sent += 1;
                        if (token !== undefined) {
                            await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: sent } });
                        }
                    }
                    step('effect');
                    step('completed'); // the SDK sends the result once this returns
                    return {
                        content: [{ type: 'text', text: `${tool.name} done` }],
                        structuredContent: { for: onBehalfOf ?? principal }
                    };
                }
            );
        }
        return server;
    }

    const handler = createMcpHandler(buildServer, { keepAliveMs: HEARTBEAT_MS, onerror: e => log('handler:', e?.message ?? e) });
    const node = toNodeHandler(handler);
    const app = createMcpExpressApp(); // host 127.0.0.1: Host and Origin validation on
    app.all('/mcp', auth, (req, res) => void node(req, res, req.body));

    function command(cmd) {
        if (cmd.type === 'tools-changed') {
            const n = ++changes;
            // Every open listen stream that honoured toolsListChanged holds one
            // subscription on the handler's in-process bus (a half-open one too).
            const streams = handler.bus.listenerCount ?? 0;
            handler.notify.toolsChanged();
            report({ type: 'tools-changed', n, streams });
        } else if (cmd.type === 'request' || cmd.type === 'notify') {
            report({ type: 'error', client: cmd.client ?? '', message: 'stateless-http has no sessions to issue on or notify' });
        } else {
            log('ignoring a control message of unknown type:', JSON.stringify(cmd));
        }
    }

    // Harness: warm-up before `ready` (server/discover, tools/list and, if a
    // tool asks for input, its first round), so that the first scenario
    // requests do not pay for lazy loading and JIT. Nothing is reported (the
    // control connection is not open yet).
    async function warmUp() {
        const url = `http://127.0.0.1:${PORT}/mcp`;
        const meta = {
            'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
            'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, sampling: {}, roots: {} },
            'io.modelcontextprotocol/clientInfo': { name: 'warm-up', version: '0' }
        };
        let n = 0;
        const call = async (method, params = {}) => {
            const headers = {
                'content-type': 'application/json',
                accept: 'application/json, text/event-stream',
                'mcp-protocol-version': PROTOCOL_VERSION,
                'mcp-method': method,
                ...(params.name && { 'mcp-name': params.name }),
                ...(AUTH === 'bearer' && { authorization: 'Bearer warm-up' })
            };
            const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: `warm-up-${++n}`, method, params: { ...params, _meta: meta } }) });
            await readSse(res, async () => {});
        };
        await call('server/discover');
        await call('tools/list');
        const asking = tools.find(t => t.input);
        if (asking) await call('tools/call', { name: asking.name, arguments: { call: 'warm-up' } });
    }

    serve(app, warmUp, command, `stateless Streamable HTTP (MCP ${PROTOCOL_VERSION}), tools ${tools.map(t => t.name).join(', ')}`);
}
