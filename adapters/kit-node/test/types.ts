// Type check of index.d.ts against a typical use (npm run check).
import { McpServer, type EventStore } from '@modelcontextprotocol/server';
import { serve, settings, type StateClaims } from 'mcpsim-kit';

declare const store: EventStore;
const createServer = () => new McpServer({ name: 'mine', version: '1.0.0' });
const mint = async (claims: StateClaims): Promise<string> => JSON.stringify(claims);

await serve({
    name: 'mine',
    createServer,
    eventStore: store,
    auth: (_req, _res, next) => next(),
    requestState: { mint },
    app: ({ auth }) => (req, res) => auth(req, res, () => res.end(String(settings.port)))
});
