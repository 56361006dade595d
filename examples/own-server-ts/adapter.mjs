// The notes server (server.mjs, our own) under mcpsim live mode, through
// mcpsim-kit: the kit speaks to mcpsim, registers its probe tools on our
// servers and reports what they do; everything judged is server.mjs.
//
//   mcpsim run --live 'node adapter.mjs' --gate --baseline mcpsim-baseline.toml \
//     mcpsim/scenarios/streamable-http mcpsim/scenarios/stateless-http --time-scale 0.1
import { createHash } from 'node:crypto';
import { serve, settings } from 'mcpsim-kit';
import { notesServer } from './server.mjs';

const notes = notesServer({
    // Every process of a run (after a restart, on each replica) must open the
    // states the others sealed: a key from the run's seed, not a random one.
    stateKey: createHash('sha256').update(`notes requestState ${settings.seed}`).digest(),
    stateTtlSeconds: settings.stateLifetimeMs / 1000
});

await serve({
    name: 'own-server-ts',
    createServer: notes.createServer,
    eventStore: () => new notes.EventStore(), // one per session, as our app builds them
    auth: notes.bearerAuth, // in front of /mcp under --auth bearer
    requestState: { mint: notes.mintState },
    app: ({ dialect, createServer, eventStore, auth }) =>
        notes.createApp({ dialect, createServer, eventStore, auth, keepAliveMs: settings.heartbeatMs })
});
