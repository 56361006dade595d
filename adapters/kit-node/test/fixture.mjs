// A small server of "our own" for the kit's tests (kit.test.mjs): the SDK's
// sessionful routing, or createMcpHandler with a codec whose verify hook
// also checks the request the state was minted for.
import { randomUUID } from 'node:crypto';
import * as z from 'zod/v4';
import { createMcpHandler, createRequestStateCodec, isInitializeRequest, McpServer } from '@modelcontextprotocol/server';
import { NodeStreamableHTTPServerTransport, toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpExpressApp } from '@modelcontextprotocol/express';
import { serve, settings } from 'mcpsim-kit';

const codec = createRequestStateCodec({ key: 'k'.repeat(32), ttlSeconds: 60 });
let call;
const createServer = ctx => {
    call = ctx?.requestInfo?.clone().json();
    const server = new McpServer(
        { name: 'fixture', version: '1.0.0' },
        {
            requestState: {
                async verify(state, vctx) {
                    const claims = await codec.verify(state, vctx);
                    if (claims.tool !== (await call)?.params?.name) throw new Error('another tool');
                    return claims;
                }
            }
        }
    );
    server.registerTool('own', { inputSchema: z.object({}) }, async () => ({ content: [{ type: 'text', text: 'mine' }] }));
    return server;
};

await serve({
    name: 'fixture',
    createServer,
    eventStore: {
        events: new Map(),
        async storeEvent(streamId, message) {
            const id = `${streamId}_${this.events.size}`;
            this.events.set(id, message);
            return id;
        },
        async replayEventsAfter() {
            return '';
        }
    },
    requestState: { codec },
    app: ({ dialect, createServer, eventStore, auth }) => {
        const app = createMcpExpressApp();
        if (dialect === 'stateless-http') {
            const handler = createMcpHandler(createServer);
            const node = toNodeHandler(handler);
            app.all('/mcp', auth, (req, res) => void node(req, res, req.body));
            return { app, handler };
        }
        const transports = new Map();
        app.all('/mcp', auth, async (req, res) => {
            const sid = req.headers['mcp-session-id'];
            if (sid && transports.has(sid)) return transports.get(sid).handleRequest(req, res, req.body);
            if (!isInitializeRequest(req.body)) return res.status(404).end();
            const transport = new NodeStreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                eventStore,
                keepAliveMs: settings.heartbeatMs,
                onsessioninitialized: id => transports.set(id, transport)
            });
            await createServer().connect(transport);
            await transport.handleRequest(req, res, req.body);
        });
        return app;
    }
});
