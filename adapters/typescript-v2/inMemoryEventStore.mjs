// The MCP TypeScript SDK's example event store, InMemoryEventStore, as plain
// JavaScript: examples/shared/src/inMemoryEventStore.ts of
// github.com/modelcontextprotocol/typescript-sdk, blob of commit
// b84cd7a1d4c5f9b82cf9846febc57d30050683dc (the version that looks the stream
// id up in the stored event and replays in insertion order). The v2 packages
// do not ship it (the v1 package shipped it under dist/esm/examples); the v2
// docs (docs/serving/sessions-state-scaling.md, "Resume a dropped stream")
// point users to this file, and the v2 examples that use an event store
// (examples/sse-polling, examples/repl) import it from @mcp-examples/shared.
// Only the TypeScript types are removed; the logic is unchanged. Do not fix it
// here: it is part of what is under test.

/**
 * Simple in-memory implementation of the EventStore interface for resumability
 * This is primarily intended for examples and testing, not for production use
 * where a persistent storage solution would be more appropriate.
 */
export class InMemoryEventStore {
    events = new Map();

    /**
     * Generates a unique event ID for a given stream ID
     */
    generateEventId(streamId) {
        return `${streamId}_${Date.now()}_${Math.random().toString(36).slice(2, 10)}`;
    }

    /**
     * Extracts the stream ID from an event ID
     */
    getStreamIdFromEventId(eventId) {
        return this.events.get(eventId)?.streamId ?? '';
    }

    /**
     * Stores an event with a generated event ID
     * Implements EventStore.storeEvent
     */
    async storeEvent(streamId, message) {
        const eventId = this.generateEventId(streamId);
        this.events.set(eventId, { streamId, message });
        return eventId;
    }

    /**
     * Replays events that occurred after a specific event ID
     * Implements EventStore.replayEventsAfter
     */
    async replayEventsAfter(lastEventId, { send }) {
        if (!lastEventId || !this.events.has(lastEventId)) {
            return '';
        }

        // Extract the stream ID from the event ID
        const streamId = this.getStreamIdFromEventId(lastEventId);
        if (!streamId) {
            return '';
        }

        let foundLastEvent = false;

        // Map iteration preserves insertion order, which is the event chronology.
        for (const [eventId, { streamId: eventStreamId, message }] of this.events) {
            // Only include events from the same stream
            if (eventStreamId !== streamId) {
                continue;
            }

            // Start sending events after we find the lastEventId
            if (eventId === lastEventId) {
                foundLastEvent = true;
                continue;
            }

            if (foundLastEvent) {
                await send(eventId, message);
            }
        }
        return streamId;
    }
}
