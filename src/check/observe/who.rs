//! Questions the checks ask of the index about principals: whose credential
//! a request presented, whom a session is bound to, and whether a server
//! could tell a holder from a thief.

use super::*;
use crate::check::finding::Indistinguishable;

impl Observed<'_> {
    /// The principal whose credential `c`'s request presented: the client's
    /// own unless it had taken another's. The client records what it sent,
    /// so a theft that took no effect (its victim held no session yet, its
    /// thief had crashed) changes nothing here (found by review: guessing
    /// from the steps excused a real leak).
    pub fn presents<'s>(&'s self, c: &'s Conn) -> &'s str {
        c.credential.as_deref().unwrap_or_else(|| self.principal(&c.client))
    }

    /// The principal `client` presented on its latest request at or before
    /// `at` (its own before its first).
    pub fn speaks_as<'s>(&'s self, client: &'s str, at: SimTime) -> &'s str {
        self.conns
            .values()
            .filter(|c| c.client == client && c.request_t.is_some_and(|t| t <= at))
            .max_by_key(|c| (c.request_t, c.conn))
            .map_or_else(|| self.principal(client), |c| self.presents(c))
    }

    /// The principal session `token` is bound to: the one its owner
    /// presented on the request that opened it (found by fuzzing: a client
    /// that took another's credential opens its sessions as that principal).
    pub fn session_principal(&self, token: &str) -> Option<&str> {
        let owner = self.token_owner.get(token)?;
        let opening = self
            .conns
            .values()
            .filter(|c| c.client == *owner && c.learned_token.as_deref() == Some(token))
            .min_by_key(|c| (c.opened, c.conn));
        Some(opening.map_or_else(|| self.principal(owner), |c| self.presents(c)))
    }

    /// Whether a server could tell a request presenting `principal`'s
    /// credential on session `token` from the session's holder: the session
    /// is bound to another principal. So is its owner's own request when it
    /// presents a credential it took since (a server that binds sessions
    /// refuses it and keeps the session; found by review).
    pub fn foreign_as(&self, principal: &str, token: &str) -> bool {
        self.session_principal(token).is_some_and(|p| p != principal)
    }

    /// [`Observed::foreign_as`] for the request on `c`.
    pub fn foreign_on(&self, c: &Conn, token: &str) -> bool {
        self.foreign_as(self.presents(c), token)
    }

    /// Whether a client other than `client` presented session `token` by
    /// `until` with the session's principal: two holders no server can tell
    /// apart then compete for one session.
    pub fn rival_holder(&self, client: &str, token: &str, until: SimTime) -> bool {
        self.conns.values().any(|c| {
            c.client != client
                && c.presented_token.as_deref() == Some(token)
                && c.request_t.is_some_and(|t| t <= until)
                && !self.foreign_on(c, token)
        })
    }

    /// Whether `client` presented session `token` by `until` with another
    /// principal's credential than the session's: a correct server refuses
    /// those requests (its answers, say) even though it opened the session
    /// (found by fuzzing).
    pub fn presented_foreign_credential(&self, client: &str, token: &str, until: SimTime) -> bool {
        let bound = self.session_principal(token);
        self.conns.values().any(|c| {
            c.client == client
                && c.presented_token.as_deref() == Some(token)
                && c.request_t.is_some_and(|t| t <= until)
                && bound.is_some_and(|p| p != self.presents(c))
        })
    }

    /// Why no server could tell connection `c`, presenting session `token`,
    /// from its holder `owner`; `None` when one could (it presented a
    /// credential of its own to a server that authenticates).
    pub fn indistinguishable(&self, c: &Conn, token: &str, owner: &str) -> Option<Indistinguishable> {
        match self.foreign_on(c, token) {
            false => Some(self.why_indistinguishable(token, owner)),
            true if self.unauthenticated => Some(Indistinguishable::Unauthenticated),
            true => None,
        }
    }

    /// Why no server could tell a client presenting session `token` from its
    /// holder `owner`: it presented the owner's credential, or the owner
    /// opened the session with the credential the client presents.
    pub fn why_indistinguishable(&self, token: &str, owner: &str) -> Indistinguishable {
        match self.session_principal(token) {
            Some(p) if p != self.principal(owner) => Indistinguishable::OpenedWith { principal: p.to_string() },
            _ => Indistinguishable::OwnersCredential,
        }
    }

    /// The principal `client` presents (its own name when the trace does not say).
    pub fn principal<'s>(&'s self, client: &'s str) -> &'s str {
        self.principals.get(client).map_or(client, |p| p.as_str())
    }
}
