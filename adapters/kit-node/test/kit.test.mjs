// The kit against a fake mcpsim: a control port that reads the reports, and
// a client that plays MCP over HTTP (npm test; needs no mcpsim binary).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import readline from 'node:readline';

const fixture = new URL('./fixture.mjs', import.meta.url).pathname;
const freePort = () =>
    new Promise(resolve => {
        const s = net.createServer().listen(0, '127.0.0.1', () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
    });

/** Starts the fixture under a fake mcpsim; resolves to { port, next(type), send(cmd), stop() }. */
async function start(env) {
    const port = await freePort();
    const reports = [];
    const waiting = [];
    let socket;
    const control = net.createServer(s => {
        socket = s;
        readline.createInterface({ input: s }).on('line', line => {
            reports.push(JSON.parse(line));
            for (const w of waiting.splice(0)) w();
        });
    });
    await new Promise(r => control.listen(0, '127.0.0.1', r));
    const child = spawn(process.execPath, [fixture], {
        env: { ...process.env, MCPSIM_PORT: String(port), MCPSIM_CONTROL_PORT: String(control.address().port), ...env },
        stdio: ['ignore', 'ignore', 'inherit']
    });
    const next = async type => {
        for (;;) {
            const i = reports.findIndex(r => r.type === type);
            if (i >= 0) return reports.splice(i, 1)[0];
            await new Promise(r => waiting.push(r));
        }
    };
    return {
        port,
        next,
        send: cmd => socket.write(JSON.stringify(cmd) + '\n'),
        stop: () => {
            child.kill('SIGKILL');
            control.close();
            socket?.destroy();
        }
    };
}

const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const messages = async res => {
    const text = await res.text();
    return res.headers.get('content-type')?.includes('text/event-stream')
        ? text.split('\n').filter(l => l.startsWith('data:') && l.slice(5).trim()).map(l => JSON.parse(l.slice(5)))
        : text ? [JSON.parse(text)] : [];
};

test('streamable-http: ready, then notify on a session the app created, with the store\'s event ids', async () => {
    const run = await start({ MCPSIM_DIALECT: 'streamable-http' });
    try {
        const ready = await run.next('ready');
        assert.deepEqual(ready, { type: 'ready', protocol: 'mcpsim-control/1', server: 'fixture', dialects: ['streamable-http', 'stateless-http'], authenticates: false });
        const url = `http://127.0.0.1:${run.port}/mcp`;
        const init = await fetch(url, {
            method: 'POST',
            headers,
            body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } })
        });
        await init.text();
        const session = init.headers.get('mcp-session-id');
        const h = { ...headers, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };
        await (await fetch(url, { method: 'POST', headers: h, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
        const list = await messages(await fetch(url, { method: 'POST', headers: h, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) }));
        assert.deepEqual(list[0].result.tools.map(t => t.name).sort(), ['ask', 'enable_tool', 'own']);
        const get = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' } });
        assert.equal(get.status, 200);
        run.send({ type: 'notify', session, client: 'alice', count: 2 });
        const notified = await run.next('notified');
        assert.equal(notified.session, session);
        assert.equal(notified.event_ids.length, 2);
        assert.ok(notified.event_ids.every(id => id.startsWith('_GET_stream_')), notified.event_ids.join());
        run.send({ type: 'notify', session: 'nobody', client: 'bob', count: 1 });
        assert.deepEqual(await run.next('error'), { type: 'error', client: 'bob', message: 'no session nobody' });
        await get.body.cancel();
    } finally {
        run.stop();
    }
});

test('stateless-http: the state is minted with the server\'s codec and checked by its own hook', async () => {
    const tools = [{ name: 'approve', runs_ms: 0, input: 'elicitation/create', once: false, idempotent: false }];
    const run = await start({ MCPSIM_DIALECT: 'stateless-http', MCPSIM_TOOLS: JSON.stringify(tools) });
    try {
        await run.next('ready');
        const url = `http://127.0.0.1:${run.port}/mcp`;
        const meta = {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
            'io.modelcontextprotocol/clientInfo': { name: 't', version: '0' }
        };
        const callTool = (id, name, extra = {}) =>
            fetch(url, {
                method: 'POST',
                headers: { ...headers, authorization: 'Bearer alice', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': name },
                body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: { call: 'a-1' }, _meta: meta, ...extra } })
            }).then(messages);
        const [first] = await callTool(1, 'approve');
        const state = first.result.requestState;
        const minted = await run.next('state-minted');
        assert.equal(minted.state, state);
        assert.equal(minted.principal, 'alice');
        const answer = { inputResponses: { confirm: { action: 'accept', content: {} } } };
        // The hook refuses a state moved to another tool: the kit reports what the hook decided.
        const [moved] = await callTool(2, 'own', { ...answer, requestState: state });
        assert.equal(moved.error.code, -32602);
        const refused = await run.next('state-checked');
        assert.equal(refused.accepted, false);
        assert.match(refused.why, /another tool/);
        const [done] = await callTool(3, 'approve', { ...answer, requestState: state });
        assert.deepEqual(done.result.structuredContent, { for: 'alice' });
        const accepted = await run.next('state-checked');
        assert.equal(accepted.accepted, true);
        const started = await run.next('execution');
        assert.equal(started.step, 'started');
        assert.equal(started.on_behalf_of, 'alice');
    } finally {
        run.stop();
    }
});
