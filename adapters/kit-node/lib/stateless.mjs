// stateless-http (MCP 2026-07-28): the probe tools of MCPSIM_TOOLS,
// registered on each McpServer the server's own factory builds; their
// requestState minted with the server's own `mint` (or codec) and verified by
// the server's own `requestState.verify` hook (and whatever single-use
// registry that hook consults), which the SDK runs before the tool; the
// reports `execution`, `state-minted`, `state-checked` and `tools-changed`;
// and a warm-up.
//
// The kit verifies nothing and dedupes nothing: a tool with `input` runs its
// input round again when the SDK hands it no state or no answer, and
// otherwise runs, on whatever state the server's hook let through. What the
// hook decided is read by wrapping the hook the server installed (the SDK
// keeps it in the private field `Server._requestStateVerify` in 2.4.0): the
// wrapper calls it with the same arguments and returns or throws what it did.

import { randomUUID } from 'node:crypto';
import * as z from 'zod/v4';
import { inputRequired, inputResponse } from '@modelcontextprotocol/server';
import { log, principalOf, report, settings } from './control.mjs';
import { readSse } from './observe.mjs';

export const PROTOCOL_VERSION = '2026-07-28';
/** The key of the one input request a tool asks in its first round. */
const INPUT_KEY = 'confirm';

let execs = 0;
let changes = 0;
let warnedNoHook = false;

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

/**
 * How the probe tools seal a state: the server's own `mint(claims, ctx)`, or
 * its codec's `mint`. The claims are `{ tool, args, principal, nonce, once }`.
 */
export function minterOf(requestState) {
    if (typeof requestState?.mint === 'function') return requestState.mint;
    if (typeof requestState?.codec?.mint === 'function') return (claims, ctx) => requestState.codec.mint(claims, ctx);
    return undefined;
}

/**
 * Starts reading the request a server is built for (a clone of its body),
 * before the server's factory or the SDK reads it. Resolves to what the
 * reports name: the JSON-RPC id, the `call` argument, the principal, the
 * requestState presented.
 */
export function readRequest(factoryCtx) {
    const request = factoryCtx?.requestInfo;
    const principal = principalOf(factoryCtx?.authInfo, request?.headers.get('authorization'));
    let body;
    try {
        body = request ? request.clone().json().catch(() => undefined) : Promise.resolve(undefined);
    } catch {
        body = Promise.resolve(undefined);
    }
    return body.then(b => {
        const args = b?.params?.arguments;
        const state = b?.params?.requestState;
        return { id: b?.id, args, call: typeof args?.call === 'string' ? args.call : '', principal, state: typeof state === 'string' ? state : undefined };
    });
}

/**
 * Registers the probe tools on a server the factory built for one request,
 * and observes the server's requestState hook. `request` is readRequest's
 * promise; `options` the kit's `requestState` option.
 */
export function instrumentStateless(server, request, options) {
    const mint = minterOf(options);
    const onBehalfOf = options?.principalOf ?? (v => (v && typeof v === 'object' && typeof v.principal === 'string' ? v.principal : undefined));
    const low = server.server;
    const hook = low._requestStateVerify;
    const observed = typeof hook === 'function';
    if (observed) {
        low._requestStateVerify = async (state, ctx) => {
            const { call, principal } = await request;
            const checked = (accepted, why) =>
                report({ type: 'state-checked', call, id: ctx.mcpReq.id, principal, state, accepted, ...(why && { why }) });
            let verified;
            try {
                verified = await hook.call(low, state, ctx);
            } catch (e) {
                checked(false, `the server's requestState.verify: ${e?.message ?? e}`);
                throw e;
            }
            checked(true);
            return verified;
        };
    } else if (!warnedNoHook) {
        warnedNoHook = true;
        log(
            '_requestStateVerify' in low
                ? 'the server installs no requestState.verify: the SDK hands each tool the raw requestState, unverified'
                : 'cannot observe the requestState.verify hook (the SDK moved Server._requestStateVerify): state-checked reports only the states a tool received'
        );
    }

    for (const tool of settings.tools) {
        server.registerTool(
            tool.name,
            {
                description: `mcpsim probe tool ${tool.name}`,
                inputSchema: z.object({ call: z.string() }),
                annotations: { idempotentHint: !!tool.idempotent }
            },
            async ({ call }, ctx) => {
                const { args, principal, state: presented } = await request;
                let behalf;
                if (tool.input) {
                    const st = ctx.mcpReq.requestState(); // what the server's hook returned, or the raw state
                    const answered = inputResponse(ctx.mcpReq.inputResponses, INPUT_KEY).kind !== 'missing';
                    if (st === undefined || !answered) {
                        // The input round (again, if a retry lacks the answer or the state).
                        if (!mint) throw new Error('mcpsim-kit: serve({ requestState: { mint } }) is needed for a tool that asks for input');
                        const claims = { tool: tool.name, args: args ?? { call }, principal, nonce: randomUUID(), ...(tool.once && { once: true }) };
                        const state = await mint(claims, ctx);
                        report({ type: 'state-minted', call, id: ctx.mcpReq.id, principal, state, lifetime_ms: options?.lifetimeMs ?? settings.stateLifetimeMs, once: !!tool.once });
                        return inputRequired({
                            inputRequests: { [INPUT_KEY]: inputRequest(tool.input, `${tool.name} needs your confirmation`) },
                            requestState: state
                        });
                    }
                    // No hook observed: the SDK handed the tool this state, so it was accepted.
                    if (!observed && presented !== undefined) report({ type: 'state-checked', call, id: ctx.mcpReq.id, principal, state: presented, accepted: true });
                    behalf = onBehalfOf(st);
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
                        ...(behalf !== undefined && { on_behalf_of: behalf }),
                        step: s
                    });
                step('started');
                // The work: runs_ms, with progress; it stops when the SDK aborts the
                // request's signal (the response stream's close reached the server).
                const signal = ctx.mcpReq.signal;
                const token = ctx.mcpReq._meta?.progressToken;
                const runs = Number(tool.runs_ms ?? 0);
                const every = Number(tool.progress_every_ms ?? 0);
                const start = Date.now();
                for (let sent = 0; ; ) {
                    const next = every > 0 && every * (sent + 1) < runs ? every * (sent + 1) : runs;
                    if (await waitOrAbort(Math.max(0, next - (Date.now() - start)), signal)) {
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
                    structuredContent: { for: behalf ?? principal }
                };
            }
        );
    }
    return server;
}

/** Carries out one command of mcpsim-control/1 in stateless-http; `handler` is the server's createMcpHandler. */
export function statelessCommand(cmd, handler) {
    if (cmd.type === 'tools-changed') {
        const n = ++changes;
        if (!handler?.notify) {
            report({ type: 'error', client: '', message: 'the app handed the kit no handler (createMcpHandler) to tell of a tool-list change' });
            return;
        }
        // Every open listen stream that asked for tool-list changes holds one
        // subscription on the handler's in-process bus (a half-open one too).
        const streams = handler.bus?.listenerCount ?? 0;
        handler.notify.toolsChanged();
        report({ type: 'tools-changed', n, streams });
    } else if (cmd.type === 'request' || cmd.type === 'notify') {
        report({ type: 'error', client: cmd.client ?? '', message: 'stateless-http has no sessions to issue on or notify' });
    } else {
        log('ignoring a control message of unknown type:', JSON.stringify(cmd));
    }
}

/**
 * Warm-up before `ready` (server/discover, tools/list and, if a tool asks for
 * input, its first round), through the server's own app. Nothing is reported.
 */
export async function statelessWarmUp(url) {
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
            ...(settings.auth === 'bearer' && { authorization: 'Bearer warm-up' })
        };
        const body = JSON.stringify({ jsonrpc: '2.0', id: `warm-up-${++n}`, method, params: { ...params, _meta: meta } });
        await readSse(await fetch(url, { method: 'POST', headers, body }), async () => {});
    };
    await call('server/discover');
    await call('tools/list');
    const asking = settings.tools.find(t => t.input);
    if (asking) await call('tools/call', { name: asking.name, arguments: { call: 'warm-up' } });
}
