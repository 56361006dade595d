// The live run's side of the kit: the settings mcpsim hands the process
// (docs/live-protocol.md, section 1), the log, and the control connection
// (mcpsim-control/1): `ready` first, reports as JSON lines, commands in.

import net from 'node:net';
import readline from 'node:readline';

const num = (k, d) => (process.env[k] === undefined || process.env[k] === '' ? d : Number(process.env[k]));
const choice = (k, d, allowed) => {
    const v = (process.env[k] ?? '').trim() || d;
    if (!allowed.includes(v)) {
        console.error(`[mcpsim-kit] ${k}=${v} is not one of ${allowed.join(', ')}`);
        process.exit(2);
    }
    return v;
};

/** The tools of MCPSIM_TOOLS (stateless-http), or a small default set for a server started by hand. */
function toolsFromEnv() {
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
        console.error(`[mcpsim-kit] MCPSIM_TOOLS is not a JSON array of tools (${e.message}): ${raw}`);
        process.exit(2);
    }
}

/**
 * What mcpsim asked for, read once from the environment. Every time is in
 * milliseconds and already multiplied by the run's time scale.
 */
export const settings = Object.freeze({
    /** Whether a live run started this process (there is a control port to report to). */
    live: process.env.MCPSIM_CONTROL_PORT !== undefined && process.env.MCPSIM_CONTROL_PORT !== '',
    port: num('MCPSIM_PORT', 3000),
    controlPort: num('MCPSIM_CONTROL_PORT', undefined),
    dialect: choice('MCPSIM_DIALECT', 'streamable-http', ['streamable-http', 'stateless-http', 'legacy-sse']),
    /** `memory` (the default): hand the app the server's own event store; `none`: hand it none. */
    eventStore: choice('MCPSIM_EVENT_STORE', 'memory', ['memory', 'none']),
    /** `off` (the default): no auth middleware; `bearer`: the server's own, with tokens that are principals' names. */
    auth: choice('MCPSIM_AUTH', 'off', ['off', 'bearer']),
    heartbeatMs: num('MCPSIM_HEARTBEAT_MS', 15000),
    requestTimeoutMs: num('MCPSIM_REQUEST_TIMEOUT_MS', 60000),
    stateLifetimeMs: num('MCPSIM_STATE_LIFETIME_MS', 600000),
    timeScale: num('MCPSIM_TIME_SCALE', 1),
    seed: process.env.MCPSIM_SEED ?? '0',
    life: num('MCPSIM_LIFE', 1),
    replica: process.env.MCPSIM_REPLICA || undefined,
    replicas: num('MCPSIM_REPLICAS', 1),
    /** A deployment's shared store (`redis://127.0.0.1:PORT`), for the server's own stores to use. */
    store: (process.env.MCPSIM_STORE ?? '').trim() || undefined,
    clockOriginMs: num('MCPSIM_CLOCK_ORIGIN_MS', undefined),
    /** stateless-http: the scenario's tools, which the kit registers on every server. */
    tools: toolsFromEnv()
});

let tag = 'mcpsim-kit';
/** Logs to stderr (mcpsim quotes the last lines of it in every error). */
export const log = (...a) => console.error(`[${tag}${settings.replica ? ` replica ${settings.replica}` : ''}]`, ...a);
export const setLogTag = name => (tag = name);

let control; // the control connection, once `ready` is written
// Reports made before `ready` (a client retrying against a restarted process
// can reach the app while the control connection opens) wait for it; before
// the connection starts opening (the warm-up), they go nowhere.
let pending = null;

/** Sends one report of mcpsim-control/1 (or queues it until `ready`). */
export function report(msg) {
    if (control) control.write(JSON.stringify(msg) + '\n');
    else if (pending) pending.push(msg);
}

/** Connects to mcpsim, says `ready`, and hands each command to `onCommand`. */
export function connectControl(ready, onCommand) {
    pending = [];
    const socket = net.connect(settings.controlPort, '127.0.0.1', () => {
        control = socket;
        report({ type: 'ready', protocol: 'mcpsim-control/1', ...ready });
        for (const msg of pending) report(msg);
        pending = null;
    });
    socket.on('error', e => {
        log('control connection:', e.message);
        process.exit(1);
    });
    // mcpsim is gone: nothing of the run may outlive it.
    socket.on('close', () => process.exit(0));
    readline.createInterface({ input: socket }).on('line', line => {
        let cmd;
        try {
            cmd = JSON.parse(line);
        } catch {
            return log('ignoring a control line that is not JSON:', line);
        }
        onCommand(cmd);
    });
}

/** The principal a request presented: the verified one (`authInfo.clientId`), else its bearer token, else `anonymous`. */
export function principalOf(authInfo, authorization) {
    if (authInfo?.clientId) return authInfo.clientId;
    const m = /^bearer\s+(\S+)/i.exec(authorization ?? '');
    return m ? m[1] : 'anonymous';
}
