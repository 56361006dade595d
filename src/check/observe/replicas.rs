//! Questions the checks ask of the index about a deployment of several
//! replicas: which replica a connection reached, and when a partition cut
//! it from the shared store.

use super::*;

impl Observed<'_> {
    /// The mapping that carried a client connection.
    pub fn mapping_of(&self, c: &Conn) -> Option<&Mapping> {
        self.mappings.values().find(|m| m.client == c.client && m.down_port == c.port)
    }

    /// In a deployment: `(replica, seq)` of the balancer sending connection `c` to a replica.
    pub fn replica_of(&self, c: &Conn) -> Option<(u32, u64)> {
        self.mapping_of(c)?.routed
    }

    /// The replica that answered connection `c` with `status`, when a
    /// partition cut it from the shared store while the request was there
    /// (a 503 it could not avoid).
    pub fn store_cut_explains(&self, c: &Conn, status: u16) -> Option<u32> {
        if status != 503 {
            return None;
        }
        self.store_cut_during(c, c.response?.2)
    }

    /// The replica connection `c` was sent to, when a partition cut it from
    /// the shared store between the request and `to`.
    pub fn store_cut_during(&self, c: &Conn, to: SimTime) -> Option<u32> {
        let (replica, _) = self.replica_of(c)?;
        let from = c.request_t?;
        self.store_cuts
            .iter()
            .any(|(r, a, b)| *r == replica && *a <= to && b.is_none_or(|b| b >= from))
            .then_some(replica)
    }

    /// The replica serving one of `client`'s streams of session `token` at
    /// `at` when a partition cut it from the shared store at some moment
    /// from `at` to `until`; with when its link came back, if it did.
    pub fn session_cut_from_store(&self, client: &str, token: &str, at: SimTime, until: SimTime) -> Option<u32> {
        self.session_store_cut(client, token, at, until).map(|(r, _)| r)
    }

    /// [`Observed::session_cut_from_store`], with when the replica's link
    /// to the store came back (`None`: never).
    pub fn session_store_cut(
        &self,
        client: &str,
        token: &str,
        at: SimTime,
        until: SimTime,
    ) -> Option<(u32, Option<SimTime>)> {
        self.conns
            .values()
            .filter(|c| c.client == client && c.is_uplink() && c.token() == Some(token))
            .filter(|c| c.opened <= at && c.ended.as_ref().is_none_or(|e| e.0 >= at))
            .filter_map(|c| self.replica_of(c))
            .find_map(|(r, _)| {
                let cut = self.store_cuts.iter().find(|(x, a, b)| *x == r && *a <= until && b.is_none_or(|b| b >= at));
                cut.filter(|(_, from, _)| !self.served_elsewhere(token, r, *from, at)).map(|(_, _, b)| (r, *b))
            })
    }

    /// Whether a replica other than `replica` served session `token` (a 2xx
    /// to a request presenting it) from `from` to `at`: the session had moved
    /// on, and `replica`, cut from the store, went on as if it held it. A
    /// server that fences across replicas stops it; what it then loses is no
    /// partition's doing (naive and local-fence on fence-lost-to-partition).
    fn served_elsewhere(&self, token: &str, replica: u32, from: SimTime, at: SimTime) -> bool {
        self.conns.values().filter(|d| d.presented_token.as_deref() == Some(token)).any(|d| {
            d.response.is_some_and(|(s, _, t, _)| (200..300).contains(&s) && t >= from && t <= at)
                && self.replica_of(d).is_some_and(|(r, _)| r != replica)
        })
    }

    /// Whether the server locked `client` out of session `token`'s GET
    /// stream from `from` to `to`: she kept reconnecting (no gap longer than
    /// her longest backoff plus a round trip, from `from` to `to`), and
    /// every attempt, two at least, was refused with a client error other
    /// than 404 or 410 (which may be the session's own end), by a replica
    /// that held the session. Returns the first status and the first and
    /// last refusals.
    pub fn locked_out(&self, client: &str, token: &str, from: SimTime, to: SimTime) -> Option<(u16, SimTime, SimTime)> {
        let attempts: Vec<&Conn> = self
            .conns
            .values()
            .filter(|c| c.client == client && c.method == "GET" && c.stream.is_get() && c.token() == Some(token))
            .filter(|c| c.request_t.is_some_and(|t| t >= from && t < to))
            .collect();
        let mut refusals = Vec::new();
        for c in &attempts {
            // A resumption refused, or a plain GET answered with an error.
            let refused = match (c.rejected, c.response) {
                (Some((t, _, Refused::Status(s))), _) => Some((t, s)),
                (None, Some((s, _, t, _))) if s >= 400 => Some((t, s)),
                _ => None,
            };
            match refused {
                Some((t, s)) if (400..500).contains(&s) && s != 404 && s != 410 && !self.never_held(c, token) => {
                    refusals.push((t, s))
                }
                _ => return None,
            }
        }
        // A refusal ends a session (the client re-initializes): a second one
        // on the same session says the server kept it alive and kept
        // refusing its owner. One refusal is the protocol, not a lock-out.
        if refusals.len() < 2 {
            return None;
        }
        refusals.sort();
        let (first, last) = (*refusals.first()?, *refusals.last()?);
        let gap = self.max_backoffs.get(client).map_or(10_000_000, |b| b.0) + 2_000_000;
        let spans = first.0 .0 <= from.0 + gap
            && last.0 .0 + gap >= to.0
            && refusals.windows(2).all(|w| w[1].0 .0 <= w[0].0 .0 + gap);
        spans.then_some((first.1, first.0, last.0))
    }

    /// In a deployment where each replica keeps its own store: whether
    /// connection `c` went to a replica other than the one that created
    /// session `token`, which therefore never held it.
    pub fn never_held(&self, c: &Conn, token: &str) -> bool {
        self.shared_store == Some(false)
            && matches!((self.replica_of(c), self.home_of(token)), (Some((r, _)), Some(home)) if r != home)
    }

    /// In a deployment: the replica whose response handed out session
    /// `token` (where it was created).
    pub fn home_of(&self, token: &str) -> Option<u32> {
        let c = self.conns.values().find(|c| c.learned_token.as_deref() == Some(token))?;
        Some(self.replica_of(c)?.0)
    }
}
