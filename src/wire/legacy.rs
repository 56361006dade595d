//! The legacy HTTP+SSE transport's URLs. The session token travels in the
//! `sessionId` query parameter: the server announces
//! `/mcp/messages?sessionId=<token>` in its `endpoint` event, the client
//! POSTs there and resumes with `GET /mcp/sse?sessionId=<token>`. One
//! place builds and reads them, for the client, the engine and the checks.

/// Where a client opens (or resumes) its SSE stream.
pub const SSE_PATH: &str = "/mcp/sse";
/// Where a client POSTs its messages.
pub const MESSAGES_PATH: &str = "/mcp/messages";

/// `GET` target that resumes the session behind `token`.
pub fn sse_path(token: &str) -> String {
    format!("{SSE_PATH}?sessionId={token}")
}

/// `POST` target (and the `endpoint` event's data) for the session behind `token`.
pub fn messages_path(token: &str) -> String {
    format!("{MESSAGES_PATH}?sessionId={token}")
}

/// The session token in a path or URL (`...?sessionId=<token>&...`), or in
/// a bare query string; `None` when there is none.
pub fn session_token(path_or_query: &str) -> Option<&str> {
    let query = path_or_query.split_once('?').map_or(path_or_query, |(_, q)| q);
    query.split('&').find_map(|kv| kv.strip_prefix("sessionId="))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_round_trips_through_both_paths() {
        for t in ["tok-1", "abc def", ""] {
            assert_eq!(session_token(&sse_path(t)), Some(t));
            assert_eq!(session_token(&messages_path(t)), Some(t));
        }
        assert_eq!(session_token("/mcp/messages?x=1&sessionId=t&y=2"), Some("t"));
        assert_eq!(session_token("sessionId=t"), Some("t"));
        assert_eq!(session_token("/mcp/sse"), None);
        assert_eq!(session_token("/mcp/sse?mySessionId=t"), None);
    }
}
