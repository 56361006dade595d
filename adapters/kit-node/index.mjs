// mcpsim-kit: everything a live run of mcpsim needs (docs/live-protocol.md)
// that is not your MCP server, for the TypeScript SDK v2
// (@modelcontextprotocol/server 2.4.0). You hand `serve` your own server:
// your McpServer factory, your app (routing, transport options), your event
// store, your auth middleware, and how your server mints a requestState. The
// kit registers its probe tools on your servers, observes what your
// transports send and your store keeps, and reports it to mcpsim. It never
// verifies, dedupes, binds, routes or resumes anything itself: what the gate
// judges is your server's code. See README.md.

import http from 'node:http';
import { connectControl, log, setLogTag, settings } from './lib/control.mjs';
import { observeEventStore } from './lib/observe.mjs';
import { instrumentStateful, statefulCommand, statefulWarmUp } from './lib/stateful.mjs';
import { instrumentStateless, minterOf, readRequest, statelessCommand, statelessWarmUp } from './lib/stateless.mjs';

export { settings, log, observeEventStore };

const DIALECTS = ['streamable-http', 'stateless-http'];
const passThrough = (_req, _res, next) => next();
const isThenable = v => v !== null && typeof v === 'object' && typeof v.then === 'function';

/**
 * Serves your server under mcpsim: builds your app from the instrumented
 * parts, listens on 127.0.0.1:MCPSIM_PORT, warms it up, and (in a live run)
 * connects to mcpsim and says `ready`. Run without mcpsim, it just serves.
 */
export async function serve(options) {
    const { name, createServer, app, eventStore, auth, requestState, dialects = DIALECTS, warmUp = true } = options ?? {};
    if (typeof name !== 'string' || !name) throw new TypeError('mcpsim-kit serve: `name` (the server name in `ready`) is required');
    if (typeof createServer !== 'function') throw new TypeError('mcpsim-kit serve: `createServer` (your McpServer factory) is required');
    if (typeof app !== 'function') throw new TypeError('mcpsim-kit serve: `app` (builds your HTTP app from the parts) is required');

    // The configuration mcpsim asked for names the server in `ready` (and in [expect]).
    const serverName = name + (settings.eventStore === 'none' ? '-no-store' : '') + (settings.auth === 'bearer' ? '-auth' : '');
    setLogTag(serverName);
    let dialect = settings.dialect;
    if (!dialects.includes(dialect)) {
        log(`MCPSIM_DIALECT=${dialect} is not served (dialects: ${dialects.join(', ')}); serving ${dialects[0]}`);
        dialect = dialects[0];
    }
    if (settings.auth === 'bearer' && typeof auth !== 'function') {
        log('MCPSIM_AUTH=bearer, but serve() was given no `auth` middleware');
        process.exit(2);
    }
    const stateless = dialect === 'stateless-http';
    if (stateless && settings.tools.some(t => t.input) && !minterOf(requestState)) {
        log('a tool of MCPSIM_TOOLS asks for input, but serve() was given no `requestState.mint` (or `requestState.codec`)');
    }
    for (const k of stateless
        ? ['MCPSIM_REQUEST_TIMEOUT_MS', 'MCPSIM_RETENTION', 'MCPSIM_FIRST_EVENT_ID', 'MCPSIM_FENCE_GRACE_MS', 'MCPSIM_FENCE_DELAY_MS']
        : ['MCPSIM_RETENTION', 'MCPSIM_FIRST_EVENT_ID', 'MCPSIM_FENCE_GRACE_MS', 'MCPSIM_FENCE_DELAY_MS']) {
        if (process.env[k] !== undefined) log(`${k}=${process.env[k]} is not handed to the server: the kit knows no equivalent (settings has what it reads)`);
    }

    // The parts your app is built from: yours, instrumented, per configuration.
    const none = settings.eventStore === 'none';
    const parts = {
        dialect,
        settings,
        auth: settings.auth === 'bearer' ? auth : passThrough,
        eventStore:
            typeof eventStore === 'function'
                ? (...a) => (none ? undefined : observeEventStore(eventStore(...a)))
                : none ? undefined : observeEventStore(eventStore),
        createServer: stateless
            ? async ctx => {
                  const request = readRequest(ctx); // before your factory or the SDK reads the body
                  return instrumentStateless(mcpServer(await createServer(ctx)), request, requestState);
              }
            : (...a) => {
                  const built = createServer(...a);
                  return isThenable(built) ? built.then(s => instrumentStateful(mcpServer(s))) : instrumentStateful(mcpServer(built));
              }
    };

    const built = await app(parts);
    const listener = typeof built === 'function' ? built : built?.app;
    const handler = typeof built === 'function' ? undefined : built?.handler;
    if (typeof listener !== 'function') throw new TypeError('mcpsim-kit serve: `app` must return a request listener (an Express app) or { app, handler }');

    const httpServer = http.createServer(listener);
    httpServer.on('error', error => {
        log('cannot serve:', error);
        process.exit(1);
    });
    await new Promise(resolve => httpServer.listen(settings.port, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${settings.port}/mcp`;
    log(`${dialect} on ${url} (event store ${none ? 'none' : eventStore ? 'the server\'s own' : 'none given'}, auth ${settings.auth}, heartbeat ${settings.heartbeatMs} ms, life ${settings.life})`);
    if (!settings.live) return { httpServer, handler };

    if (warmUp) {
        const t0 = Date.now();
        const limit = new Promise((_, fail) => setTimeout(() => fail(new Error('no end within 3 s')), 3000).unref());
        await Promise.race([(stateless ? statelessWarmUp : statefulWarmUp)(url), limit])
            .then(() => log(`warm-up done in ${Date.now() - t0} ms`))
            .catch(e => log('warm-up failed (continuing):', e?.message ?? e));
    }
    connectControl(
        { server: serverName, dialects, authenticates: settings.auth === 'bearer' },
        stateless ? cmd => statelessCommand(cmd, handler) : statefulCommand
    );
    return { httpServer, handler };
}

/** The McpServer a factory built (the probe tools need registerTool). */
function mcpServer(server) {
    if (typeof server?.registerTool !== 'function' || !server.server) {
        throw new TypeError('mcpsim-kit: createServer must build an McpServer (the probe tools are registered on it)');
    }
    return server;
}
