//! Protocol pieces, pure and unit-tested: SSE codec, JSON-RPC/MCP messages,
//! an HTTP/1 response sniffer and a channel-fed streaming body.

pub mod body;
pub mod http1;
pub mod jsonrpc;
pub mod legacy;
pub mod mrtr;
pub mod resp;
pub mod sse;
