// Observation of what the SDK sends and what the server's event store keeps.
// Nothing here changes a message, an event id or a call: each wrapper calls
// the original with the same arguments and hands back what it returned.

import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What the kit is doing when the SDK sends or stores a message: set around
 * each SDK call the kit makes, read by the send observer and the store
 * observer. The SDK's request() calls transport.send synchronously, and the
 * transport calls storeEvent from send, so both see the message the call made.
 */
export const issuing = new AsyncLocalStorage();

/**
 * The server's own event store, observed: every event it stores is told to
 * whoever is issuing, with the event id the store gave it. A Proxy, so that
 * the SDK sees exactly the methods the store has (`getStreamIdForEventId` or
 * not) and each runs on the store itself.
 */
export function observeEventStore(store) {
    if (!store || typeof store.storeEvent !== 'function') return store;
    return new Proxy(store, {
        get(target, prop) {
            if (prop === 'storeEvent') {
                return async (streamId, message) => {
                    const eventId = await target.storeEvent(streamId, message);
                    issuing.getStore()?.stored?.(message, eventId);
                    return eventId;
                };
            }
            const v = Reflect.get(target, prop, target);
            return typeof v === 'function' ? v.bind(target) : v;
        }
    });
}

/**
 * Observes a transport's send (the one point every outgoing message of a
 * session passes, with or without an event store): once the SDK has written
 * (or stored) a message, whoever is issuing hears of it.
 */
export function observeSends(transport) {
    if (transport.__mcpsimObserved) return;
    transport.__mcpsimObserved = true;
    const send = transport.send.bind(transport);
    transport.send = async (message, options) => {
        const ctx = issuing.getStore();
        const streamOpen = ctx?.sent && standaloneStreamOpen(transport, options);
        await send(message, options);
        ctx?.sent?.(message, streamOpen);
    };
}

/**
 * Whether a message without a related request has a standalone GET stream to
 * go on (a read-only look at the transport's private stream map, for a note
 * in the report: without an event store the SDK 2.4.0 drops such a message
 * silently, streamableHttp.ts:1188-1191). Undefined when the field moved.
 */
function standaloneStreamOpen(transport, options) {
    if (options?.relatedRequestId !== undefined) return undefined;
    const map = transport._webStandardTransport?._streamMapping ?? transport._streamMapping;
    return map instanceof Map ? map.has('_GET_stream') : undefined;
}

/** Reads an SSE (or JSON) response to its end, handing each JSON-RPC message to `onMessage`. */
export async function readSse(response, onMessage) {
    if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) {
        const text = await response.text();
        if (text) await onMessage(JSON.parse(text));
        return;
    }
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of response.body) {
        buf += decoder.decode(chunk, { stream: true });
        for (let i; (i = buf.indexOf('\n\n')) >= 0; buf = buf.slice(i + 2)) {
            const data = buf
                .slice(0, i)
                .split('\n')
                .filter(l => l.startsWith('data:'))
                .map(l => l.slice(5))
                .join('')
                .trim();
            if (data) await onMessage(JSON.parse(data));
        }
    }
}
