// Types of mcpsim-kit (index.mjs). See README.md.

import type { Server as HttpServer, IncomingMessage, ServerResponse } from 'node:http';
import type { EventStore, McpHttpHandler, McpRequestContext, McpServer, ServerContext } from '@modelcontextprotocol/server';

/** What mcpsim asked for (docs/live-protocol.md, section 1). Times are in ms, already scaled. */
export interface Settings {
    /** Whether a live run started this process (MCPSIM_CONTROL_PORT is set). */
    readonly live: boolean;
    readonly port: number;
    readonly controlPort: number | undefined;
    readonly dialect: 'streamable-http' | 'stateless-http' | 'legacy-sse';
    /** `memory` (default): your event store is handed to your app; `none`: none is. */
    readonly eventStore: 'memory' | 'none';
    /** `off` (default): no auth in front; `bearer`: your `auth` middleware, tokens are principals' names. */
    readonly auth: 'off' | 'bearer';
    readonly heartbeatMs: number;
    readonly requestTimeoutMs: number;
    readonly stateLifetimeMs: number;
    readonly timeScale: number;
    readonly seed: string;
    /** 1, then 2 after the first restart-server step, and so on. */
    readonly life: number;
    readonly replica: string | undefined;
    readonly replicas: number;
    /** A deployment's shared store (`redis://127.0.0.1:PORT`) for your own stores to use. */
    readonly store: string | undefined;
    readonly clockOriginMs: number | undefined;
    /** stateless-http: the scenario's tools (MCPSIM_TOOLS), which the kit registers on your servers. */
    readonly tools: ReadonlyArray<ProbeTool>;
}

export interface ProbeTool {
    name: string;
    runs_ms: number;
    progress_every_ms?: number;
    input?: 'elicitation/create' | 'sampling/createMessage' | 'roots/list';
    once?: boolean;
    idempotent?: boolean;
}

/** The claims of a probe tool's input round, sealed by your `mint`; your verify hook should return them. */
export interface StateClaims {
    tool: string;
    /** The call's arguments (`{ call }`), as the request carried them. */
    args: Record<string, unknown>;
    /** The principal the request presented (its bearer token, or `anonymous`). */
    principal: string;
    /** A fresh random id: what a single-use registry remembers. */
    nonce: string;
    /** A one-time state: your hook should let it through once. */
    once?: true;
}

/** A Connect/Express middleware. */
export type Middleware = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => unknown;

/** A Node request listener (an Express app is one). */
export type RequestListener = (req: IncomingMessage, res: ServerResponse) => unknown;

/** Your parts, instrumented, as the kit hands them to your `app`. */
export interface Parts {
    /** The dialect to serve (MCPSIM_DIALECT, or the first of `dialects`). */
    dialect: 'streamable-http' | 'stateless-http';
    settings: Settings;
    /** Your `createServer`, wrapped: use it wherever your app builds an McpServer. */
    createServer: (ctx?: McpRequestContext) => McpServer | Promise<McpServer>;
    /** Your event store, observed (in the form you gave it), or undefined under MCPSIM_EVENT_STORE=none. */
    eventStore: EventStore | ((...args: unknown[]) => EventStore | undefined) | undefined;
    /** Your `auth` under MCPSIM_AUTH=bearer, else a middleware that lets everything through. */
    auth: Middleware;
}

export interface ServeOptions {
    /** The server's name in `ready`; `-no-store` and `-auth` are added for those configurations. */
    name: string;
    /** The dialects your app serves. Default: both. */
    dialects?: Array<'streamable-http' | 'stateless-http'>;
    /**
     * Your McpServer factory. The kit registers its probe tools on every
     * server it builds (`ask` and `enable_tool` in streamable-http, the
     * MCPSIM_TOOLS tools in stateless-http) and observes its transport and
     * its `requestState.verify` hook.
     */
    createServer: (ctx?: McpRequestContext) => McpServer | Promise<McpServer>;
    /** Your HTTP app, built from the parts: a request listener, or `{ app, handler }` with your createMcpHandler (stateless-http). */
    app: (parts: Parts) => RequestListener | { app: RequestListener; handler?: McpHttpHandler } | Promise<RequestListener | { app: RequestListener; handler?: McpHttpHandler }>;
    /** Your event store: one for every session, or a factory your app calls (say, per session). */
    eventStore?: EventStore | ((...args: unknown[]) => EventStore);
    /** Your auth middleware (it sets `req.auth`), used under MCPSIM_AUTH=bearer. */
    auth?: Middleware;
    /** stateless-http: how your server seals a requestState. */
    requestState?: {
        /** Seals the claims as your server seals its own states. */
        mint?: (claims: StateClaims, ctx: ServerContext) => Promise<string>;
        /** Or your codec (createRequestStateCodec): its `mint` seals the claims as they are. */
        codec?: { mint(payload: StateClaims, ctx?: ServerContext): Promise<string> };
        /** The principal a verified state was minted for. Default: `verified.principal`. */
        principalOf?: (verified: unknown) => string | undefined;
        /** How long your server accepts a state, in ms (reported in `state-minted`). Default: settings.stateLifetimeMs. */
        lifetimeMs?: number;
    };
    /** Warm the app up through HTTP before `ready` (default true). */
    warmUp?: boolean;
}

/** Serves your server under mcpsim (or, without a live run, just serves it). */
export function serve(options: ServeOptions): Promise<{ httpServer: HttpServer; handler?: McpHttpHandler }>;

/** The settings of this run. */
export const settings: Settings;

/** Logs to stderr with the server's name (mcpsim quotes the last lines in its errors). */
export function log(...args: unknown[]): void;

/** Your event store, observed: every event stored is reported with its id; nothing else changes. */
export function observeEventStore<S extends EventStore | undefined>(store: S): S;
