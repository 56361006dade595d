// The Redis-backed stores of server.mjs, used when MCPSIM_STORE names a Redis
// (`redis://host:port`): a deployment of several replicas behind a balancer
// (docs/live-protocol.md, "Deployments"). Written as a user of
// @modelcontextprotocol/server v2 would deploy one: the SDK's
// docs/serving/sessions-state-scaling.md ("Scale across nodes") asks for an
// `EventStore` "over storage every node can reach", "so a dropped stream is
// resumable from any node that shares the store", and leaves the rest
// (sessions, i.e. transports) in each process's memory.
//
// - `connectRedis`: one node-redis client per process. Commands issued while
//   the link is down fail at once (`disableOfflineQueue`: nothing waits in an
//   offline queue for a reconnection that may come too late), a command
//   whose reply does not come within `timeout` fails, and the client
//   reconnects by itself with node-redis's default backoff (2^n * 50 ms, at
//   most 2 s), shortened by MCPSIM_TIME_SCALE as every timing a scenario does
//   not set. Its 'error' events (one per failed reconnection attempt) are
//   logged, on a change only; an unlistened 'error' would end the process.
// - `RedisEventStore`: the SDK's example InMemoryEventStore
//   (inMemoryEventStore.mjs) on Redis, the same interface
//   (`storeEvent`, `replayEventsAfter`; like the example, no
//   `getStreamIdForEventId`) and the same semantics, so that what differs
//   from the in-memory runs is the deployment, not the store's design: event
//   ids `<streamId>_<ms>_<random>`; one hash field per event with its stream
//   id and message, one list per stream id with its event ids in the order
//   stored (both written together); a replay sends every event after
//   `lastEventId` on that id's stream, and an unknown id gets stream id `''`.
//   A failing Redis command rejects the SDK's call (logged here first): the
//   SDK sees the error, as with any store.
// - `RedisOnceRegistry`: the single-use registry of stateless.mjs (`SET NX`
//   with an expiry past the state's lifetime).

import { createClient } from 'redis';

/** The key prefix of everything the adapter keeps in Redis. */
const PREFIX = 'mcpsim:typescript-v2:';

/**
 * Connects to the Redis at `url` (MCPSIM_STORE). Resolves once connected, or
 * after `readyWithinMs` with the client still connecting in the background
 * (commands fail until it is up). Never rejects for an unreachable Redis.
 */
export async function connectRedis(url, { log, timeScale = 1, readyWithinMs = 3000 }) {
    const scaled = ms => Math.max(1, Math.round(ms * timeScale));
    const client = createClient({
        url,
        disableOfflineQueue: true,
        // A reply that does not come in 2 s (scaled) fails its command.
        commandOptions: { timeout: scaled(2000) },
        socket: {
            connectTimeout: scaled(2000),
            // node-redis's default strategy (2^retries * 50 ms, at most 2 s, and up
            // to 200 ms of jitter), at the run's time scale.
            reconnectStrategy: retries => scaled(Math.min(2 ** retries * 50, 2000) + Math.floor(Math.random() * 200))
        }
    });
    // Logged on a change: the first error after the link was up, then how
    // many attempts failed once it is up again.
    let up = false;
    let failed = 0;
    client.on('error', e => {
        if (up || failed === 0) log(`store ${url}: ${e?.message ?? e} (reconnecting; store calls fail until it is back)`);
        up = false;
        failed += 1;
    });
    client.on('ready', () => {
        log(`store ${url}: ready${failed ? ` (after ${failed} failed attempt(s))` : ''}`);
        up = true;
        failed = 0;
    });
    const connecting = client.connect().catch(e => log(`store ${url}: connect gave up: ${e?.message ?? e}`));
    const within = new Promise(resolve => setTimeout(resolve, readyWithinMs).unref());
    await Promise.race([connecting, within]);
    if (!client.isReady) log(`store ${url}: not connected after ${readyWithinMs} ms; serving, store calls fail until it is`);
    return client;
}

/** Runs a store call for the SDK: logs a failure to stderr and rethrows it, so the SDK sees it. */
async function forTheSdk(log, what, call) {
    try {
        return await call();
    } catch (e) {
        log(`store: ${what} failed: ${e?.message ?? e}`);
        throw e;
    }
}

/** The SDK's EventStore over Redis: the example InMemoryEventStore, shared by every replica. */
export class RedisEventStore {
    constructor(client, { log }) {
        this.client = client;
        this.log = log;
    }

    /** Generates a unique event ID for a given stream ID (the example's format). */
    generateEventId(streamId) {
        return `${streamId}_${Date.now()}_${Math.random().toString(36).slice(2, 10)}`;
    }

    /** Stores an event with a generated event ID. Implements EventStore.storeEvent. */
    async storeEvent(streamId, message) {
        const eventId = this.generateEventId(streamId);
        // Two commands written together on one connection, which Redis runs in
        // order (not MULTI: node-redis queues a MULTI while offline instead of
        // failing it, and gives it no timeout).
        await forTheSdk(this.log, `storeEvent(${streamId})`, () =>
            Promise.all([
                this.client.hSet(`${PREFIX}events`, eventId, JSON.stringify({ streamId, message })),
                this.client.rPush(`${PREFIX}stream:${streamId}`, eventId)
            ])
        );
        return eventId;
    }

    /** Replays events that occurred after a specific event ID. Implements EventStore.replayEventsAfter. */
    async replayEventsAfter(lastEventId, { send }) {
        if (!lastEventId) return '';
        const { streamId, later } = await forTheSdk(this.log, `replayEventsAfter(${lastEventId})`, async () => {
            const stored = await this.client.hGet(`${PREFIX}events`, lastEventId);
            if (stored == null) return { streamId: '' };
            const { streamId } = JSON.parse(stored);
            if (!streamId) return { streamId: '' };
            // The stream's events in the order stored; send those after lastEventId.
            const ids = await this.client.lRange(`${PREFIX}stream:${streamId}`, 0, -1);
            const at = ids.indexOf(lastEventId);
            const after = at < 0 ? [] : ids.slice(at + 1);
            const messages = after.length ? await this.client.hmGet(`${PREFIX}events`, after) : [];
            return { streamId, later: after.map((id, i) => [id, messages[i]]) };
        });
        for (const [eventId, stored] of later ?? []) {
            if (stored == null) continue;
            await send(eventId, JSON.parse(stored).message);
        }
        return streamId;
    }
}

/** The single-use registry of `once` states in Redis: the first redemption of `n` wins, on any replica. */
export class RedisOnceRegistry {
    constructor(client, { log, keepMs }) {
        this.client = client;
        this.log = log;
        this.keepMs = keepMs;
    }

    /** Records the redemption of `n`: true the first time, false after; rejects when Redis does not answer. */
    async redeem(n) {
        const reply = await forTheSdk(this.log, `redeem(${n})`, () =>
            this.client.set(`${PREFIX}once:${n}`, '1', { condition: 'NX', expiration: { type: 'PX', value: this.keepMs } })
        );
        return reply === 'OK';
    }
}
