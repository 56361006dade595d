//! Questions the checks ask of the index: which ids a session or a stream
//! showed, which connections were usable when, who held what.

use super::*;
use crate::check::finding::Indistinguishable;

impl Observed<'_> {
    /// Event ids the server wrote on `stream` before `until`, in order: those
    /// delivered and those written into dropped mappings, each once, with
    /// whether the event carried a JSON-RPC message (priming events do not).
    pub fn stream_ids(&self, stream: &StreamKey, until: SimTime) -> Vec<(SimTime, String, bool)> {
        let mut out: Vec<(SimTime, u64, String, bool)> = Vec::new();
        for c in self.conns.values().filter(|c| c.stream == *stream) {
            for d in c.delivered.iter().filter(|d| d.t < until) {
                if let Some(id) = &d.id {
                    out.push((d.t, d.seq, id.clone(), d.rpc.is_some()));
                }
            }
            if let Some(m) = self.mapping_of(c) {
                for (t, seq, _, evs) in m.dropped_writes.iter().filter(|w| w.0 < until) {
                    out.extend(evs.iter().filter_map(|e| Some((*t, *seq, e.id.clone()?, e.rpc.is_some()))));
                }
            }
        }
        out.sort();
        let mut seen = std::collections::BTreeSet::new();
        out.into_iter().filter(|x| seen.insert(x.2.clone())).map(|(t, _, id, msg)| (t, id, msg)).collect()
    }

    /// Numeric event ids of session `token` that are not `stream`'s to
    /// replay: seen on its other streams, or seen carrying no message
    /// (priming events, which no one replays).
    pub fn ids_not_owed(&self, token: &str, stream: &StreamKey) -> Vec<u64> {
        let mut out = Vec::new();
        for c in self.conns.values().filter(|c| c.token() == Some(token) && !c.stream.is_none()) {
            let other = c.stream != *stream;
            out.extend(c.delivered.iter().filter(|d| other || d.rpc.is_none()).filter_map(Delivered::numeric_id));
            if let Some(m) = self.mapping_of(c) {
                for (_, _, _, evs) in &m.dropped_writes {
                    out.extend(
                        evs.iter()
                            .filter(|e| other || e.rpc.is_none())
                            .filter_map(|e| e.id.as_deref()?.parse::<u64>().ok()),
                    );
                }
            }
        }
        out
    }

    /// Whether a POST of unknown content went out on session `token` by `by`:
    /// one that got no response and left no answer in the trace (an answer
    /// is recorded once its POST completes, so such a POST may be one).
    pub fn unknown_post_by(&self, token: &str, by: SimTime) -> bool {
        self.conns.values().any(|c| {
            c.purpose == Purpose::Post
                && c.presented_token.as_deref() == Some(token)
                && c.request_t.is_some_and(|t| t <= by)
                && c.response.is_none()
                && !self.answers.iter().any(|a| a.client == c.client && a.conn == Some(c.conn))
        })
    }

    /// Whether `client` crashed in `[from, to]`: it lost every session it held.
    pub fn crashed_between(&self, client: &str, from: SimTime, to: SimTime) -> bool {
        self.crashes.iter().any(|(c, t)| c == client && *t >= from && *t <= to)
    }

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

    /// When `client` had a usable uplink for session `token`: from its
    /// acceptance until it ended, its NAT mapping was dropped or reset, the
    /// client crashed, sent a DELETE of the session, or opened another uplink.
    pub fn usable_uplinks(&self, client: &str, token: &str) -> Vec<(SimTime, SimTime)> {
        self.usable_streams(client, token, None)
    }

    /// Like [`Observed::usable_uplinks`], for the connections that carried
    /// `stream` (a tool call's stream, say); `None`: the uplinks that carried
    /// the session's GET stream.
    pub fn usable_streams(&self, client: &str, token: &str, stream: Option<&StreamKey>) -> Vec<(SimTime, SimTime)> {
        let mut out = Vec::new();
        // Standalone messages ride the session's GET stream only: a GET that
        // resumed a tool call's stream (its Last-Event-ID was seen there)
        // carries that call's stream (found by fuzzing: notifications were
        // counted as owed on such a GET).
        let carries = |c: &Conn| match stream {
            None => c.is_uplink() && c.stream.is_get(),
            Some(s) => c.stream == *s,
        };
        // Any uplink the client opens replaces its current one.
        let takes_over = |c: &Conn| match stream {
            None => c.is_uplink(),
            Some(s) => c.stream == *s,
        };
        for c in self.conns.values().filter(|c| c.client == client && carries(c) && c.token() == Some(token)) {
            let Some((200, true, t_acc, _)) = c.response else { continue };
            if c.rejected.is_some() {
                continue;
            }
            let mut end = self.end;
            if let Some((t, _, _)) = &c.ended {
                end = end.min(*t);
            }
            if let Some(m) = self.mapping_of(c) {
                if let Some((t, _, _)) = &m.dropped {
                    end = end.min(*t);
                }
                if let Some((t, _)) = m.reset {
                    end = end.min(t);
                }
            }
            if let Some((_, t)) = self.crashes.iter().find(|(k, t)| k == client && *t >= t_acc) {
                end = end.min(*t);
            }
            // The client's own DELETE of the session ends its use of every
            // stream of it, answered or not (found by hunting: notifications
            // emitted just before the client's DELETE were called lost).
            if let Some(t) = self
                .conns
                .values()
                .filter(|d| d.client == client && d.method == "DELETE" && d.presented_token.as_deref() == Some(token))
                .filter_map(|d| d.request_t)
                .filter(|t| *t >= t_acc)
                .min()
            {
                end = end.min(t);
            }
            // A client that takes over another's session token leaves its own
            // session: it answers on the stolen one from then on (found by
            // fuzzing: guarded flagged for a request its client had left).
            if let Some((t, ..)) = self.thefts.iter().find(|(t, _, to, _)| to == client && *t >= t_acc) {
                end = end.min(*t);
            }
            // A client runs one uplink at a time: a newer one replaces this one,
            // and so does a new session (streamable-http: an initialize POST
            // without a session id). A new session also ends the client's use
            // of the old one's call streams: it left that session (found by
            // fuzzing: a `connect` during a tool call).
            let replaces = |n: &Conn| takes_over(n) || (n.purpose == Purpose::Post && n.presented_token.is_none());
            if let Some(next) = self
                .conns
                .values()
                .filter(|n| n.client == client && replaces(n) && n.opened > c.opened)
                .map(|n| n.opened)
                .min()
            {
                end = end.min(next);
            }
            if end > t_acc {
                out.push((t_acc, end));
            }
        }
        out
    }

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

    /// For a request a call-tool step issued: the stream of its call, the
    /// owner's last tool call (a POST, no `Last-Event-ID`) sent before it
    /// was issued. The request can reach its owner there only.
    pub fn call_stream_of(&self, r: &Request) -> Option<StreamKey> {
        if !self.call_labels.contains(&r.label) {
            return None;
        }
        // The call's POST names its label (found by a replica hunt,
        // streamable-http seed 9803306: with two calls in flight, the
        // latest POST was taken for the stream of the other's request).
        let named = self.conns.values().find(|c| {
            c.client == r.owner && c.sent.as_ref().is_some_and(|s| s.call.as_deref() == Some(r.label.as_str()))
        });
        if let Some(c) = named {
            return Some(StreamKey::Call { client: c.client.clone(), conn: c.conn });
        }
        // Traces written before the label was recorded: the latest call before it.
        self.conns
            .values()
            .filter(|c| c.client == r.owner && c.purpose == Purpose::Call && c.last_event_id.is_none())
            .filter(|c| c.request_t.is_some_and(|t| t <= r.issued.0))
            .max_by_key(|c| (c.request_t, c.conn))
            .map(|c| StreamKey::Call { client: c.client.clone(), conn: c.conn })
    }

    /// The stream request `r` rides: the first that carried one of its ids,
    /// else, for a tool call's request that none carried, its call's stream
    /// (found by hunting: a call whose response never came).
    pub fn carrier_of(&self, r: &Request) -> Option<StreamKey> {
        self.stream_of_request(r).cloned().or_else(|| self.call_stream_of(r))
    }

    /// The stream that first carried one of request `r`'s ids (delivered or
    /// written into a dropped mapping), if any did.
    pub fn stream_of_request(&self, r: &Request) -> Option<&StreamKey> {
        let mut first: Option<(u64, &StreamKey)> = None;
        // Ids are unique only within a session: look at the request's session.
        let of_session = |c: &Conn| r.token().is_none_or(|t| c.token() == Some(t));
        for c in self.conns.values().filter(|c| !c.stream.is_none() && of_session(c)) {
            for d in &c.delivered {
                if d.request_id().is_some_and(|i| r.ids.contains(i)) && first.is_none_or(|(s, _)| d.seq < s) {
                    first = Some((d.seq, &c.stream));
                }
            }
            if let Some(m) = self.mapping_of(c) {
                for (_, seq, _, evs) in &m.dropped_writes {
                    let carried = evs.iter().any(|e| {
                        e.rpc.as_ref().is_some_and(|x| {
                            x.kind == RpcKind::Request && x.id.as_ref().is_some_and(|i| r.ids.contains(i))
                        })
                    });
                    if carried && first.is_none_or(|(s, _)| *seq < s) {
                        first = Some((*seq, &c.stream));
                    }
                }
            }
        }
        first.map(|(_, s)| s)
    }

    /// The first sighting of server request id `id` on request `r`'s
    /// session: `(seq, summary)` of its delivery, or of a dropped write
    /// that carried it, whichever came first.
    pub fn first_sighting(&self, r: &Request, id: &RpcId) -> Option<(u64, &RpcSummary)> {
        let is_it = |rpc: &RpcSummary| rpc.kind == RpcKind::Request && rpc.id.as_ref() == Some(id);
        let of_session = |c: &&Conn| c.client == r.owner && r.token().is_none_or(|t| c.token() == Some(t));
        let mut seen: Vec<(u64, &RpcSummary)> = Vec::new();
        for c in self.conns.values().filter(of_session) {
            seen.extend(c.delivered.iter().filter_map(|d| Some((d.seq, d.rpc.as_ref().filter(|x| is_it(x))?))));
            for (_, seq, _, evs) in self.mapping_of(c).map_or(&[][..], |m| &m.dropped_writes[..]) {
                seen.extend(evs.iter().filter_map(|e| e.rpc.as_ref()).filter(|x| is_it(x)).map(|x| (*seq, x)));
            }
        }
        seen.into_iter().min_by_key(|x| x.0)
    }

    /// The request that JSON-RPC id `id` named on session `token` at time `t`.
    ///
    /// Ids are unique only within a session (servers such as rmcp restart
    /// them at 0 in every session), so the lookup is per session: among the
    /// requests issued on `token` (on any session when the token is unknown),
    /// the one that most recently took `id` (issued or re-issued) by `t`.
    pub fn request_at(&self, token: Option<&str>, id: &RpcId, t: SimTime) -> Option<&Request> {
        self.requests
            .values()
            .filter(|r| token.is_none_or(|tok| r.session.as_ref().is_some_and(|(s, _)| s == tok)))
            .filter_map(|r| r.id_since(id).filter(|since| *since <= t).map(|since| (since, r.issued.1, r)))
            .max_by_key(|(since, seq, _)| (*since, *seq))
            .map(|(_, _, r)| r)
    }

    /// Why no server could tell a client presenting session `token` from its
    /// holder `owner`: it presented the owner's credential, or the owner
    /// opened the session with the credential the client presents.
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

    /// Every numeric id the run shows for a session: delivered, written into
    /// dropped mappings, or reported by the application, up to `until`.
    pub fn ids_seen(&self, token: &str, until: SimTime) -> Vec<u64> {
        self.ids_shown(token, |t, _| t <= until)
    }

    /// The ids a session showed at trace events that `shown(time, seq)` admits.
    fn ids_shown(&self, token: &str, shown: impl Fn(SimTime, u64) -> bool) -> Vec<u64> {
        let mut out = Vec::new();
        for c in self.conns.values().filter(|c| c.token() == Some(token)) {
            out.extend(c.delivered.iter().filter(|d| shown(d.t, d.seq)).filter_map(Delivered::numeric_id));
            if let Some(m) = self.mapping_of(c) {
                for (_, _, _, evs) in m.dropped_writes.iter().filter(|w| shown(w.0, w.1)) {
                    out.extend(evs.iter().filter_map(|ev| ev.id.as_deref()?.parse::<u64>().ok()));
                }
            }
        }
        for r in self.requests.values() {
            if r.token() == Some(token) && shown(r.issued.0, r.issued.1) {
                out.extend(r.event_id.as_deref().and_then(|i| i.parse::<u64>().ok()));
            }
        }
        out.extend(
            self.notified.iter().filter(|(t, at, _, seq)| t == token && shown(*at, *seq)).map(|(_, _, id, _)| *id),
        );
        out
    }

    /// `(time, id)` of every numeric id the application reported minting on
    /// session `token` (a notification, or a server request's event).
    fn reported<'s>(&'s self, token: &'s str) -> impl Iterator<Item = (SimTime, u64)> + 's {
        let notified = self.notified.iter().filter(move |x| x.0 == token).map(|x| (x.1, x.2));
        let issued = self
            .requests
            .values()
            .filter(move |r| r.token() == Some(token))
            .filter_map(|r| Some((r.issued.0, r.event_id.as_deref()?.parse::<u64>().ok()?)));
        notified.chain(issued)
    }

    /// When the application reported minting numeric id `id` on session `token`, if it did.
    pub fn reported_at(&self, token: &str, id: u64) -> Option<SimTime> {
        self.reported(token).filter(|x| x.1 == id).map(|x| x.0).min()
    }

    /// The numeric ids the application reported minting on session `token` at or before `t`.
    pub fn reported_by(&self, token: &str, t: SimTime) -> Vec<u64> {
        self.reported(token).filter(|x| x.0 <= t).map(|x| x.1).collect()
    }

    /// The one rule that tells a gap in a replay from a second writer. A
    /// replay carries only events minted before the new writer was
    /// attached, so an event the application reported minting no later
    /// than one that resumption `c`'s replay (the first burst it
    /// delivered) carried was minted before the attach too: the replay
    /// owed it. Returns the latest such report time, if the replay carried
    /// any reported event. (An event reported before the resuming request
    /// went out was minted before the attach as well.)
    pub fn replay_floor(&self, c: &Conn, token: &str) -> Option<SimTime> {
        let first = c.delivered.first()?.t;
        c.delivered
            .iter()
            .take_while(|d| d.t == first)
            .filter(|d| d.rpc.is_some())
            .filter_map(|d| self.reported_at(token, d.numeric_id()?))
            .max()
    }

    /// Whether the trace proves event `id` of session `token` was minted
    /// before resumption `c`'s writer was attached; `floor` is `c`'s
    /// [`Observed::replay_floor`] (computed once by the caller, which asks
    /// this of every event a dropped mapping received).
    pub fn minted_before_attach(&self, c: &Conn, floor: Option<SimTime>, token: &str, id: u64) -> bool {
        let Some(t) = self.reported_at(token, id) else { return false };
        c.request_t.is_some_and(|r| t < r) || floor.is_some_and(|f| t <= f)
    }

    /// The highest id the run shows for a session up to `until` ([`Observed::ids_seen`]).
    pub fn max_id_seen(&self, token: &str, until: SimTime) -> Option<u64> {
        self.ids_seen(token, until).into_iter().max()
    }

    /// The highest id the run shows for a session before trace event `seq`
    /// (a resumption's acceptance, say: not the events that followed it at
    /// the same instant).
    pub fn max_id_seen_before(&self, token: &str, seq: u64) -> Option<u64> {
        self.ids_shown(token, |_, s| s < seq).into_iter().max()
    }

    /// Whether every id after `last` up to `newest` is a notification the
    /// application reported minting on session `token`'s standalone stream,
    /// and the server says it keeps that many, with room for every id it
    /// may have minted unseen after `newest` by `until`: a POST answered
    /// only after `newest` was minted (found by hunting: a late `initialize`
    /// result pushed the window's edge out), or a request settled otherwise
    /// than by its answer. A replay of them
    /// is then owed: nothing in the window is a request, or another
    /// stream's event, and nothing pushed it out.
    pub fn window_kept(&self, token: &str, last: u64, newest: u64, until: SimTime) -> bool {
        let (Some(retention), Some(minted)) = (self.retention, self.reported_at(token, newest)) else {
            return false;
        };
        // (A tool call's POST too: its stream's events share the session's ids.)
        let late_posts = self
            .conns
            .values()
            .filter(|c| c.method == "POST" && c.presented_token.as_deref() == Some(token))
            .filter(|c| c.opened <= until && c.response.is_none_or(|r| r.2 >= minted))
            .count() as u64;
        // A request settled other than by its answer may mint an event of
        // its own: a re-issue, a failure or a timeout's cancellation (found
        // by hunting: a timed-out call's request pushed the edge out).
        let settled = self
            .requests
            .values()
            .filter(|r| r.token() == Some(token))
            .flat_map(|r| r.outcomes.iter())
            .filter(|x| x.2 != Outcome::Answered && x.0 >= minted && x.0 <= until)
            .count() as u64;
        if self.unreported_per_stream > 0 || newest.saturating_sub(last) + late_posts + settled > retention {
            return false;
        }
        let notified: std::collections::BTreeSet<u64> =
            self.notified.iter().filter(|n| n.0 == token).map(|n| n.2).collect();
        (last + 1..=newest).all(|id| notified.contains(&id))
    }

    /// An upper bound on ids a session may have minted that no one observed
    /// before `until`: a response per POST presenting its token, a new
    /// event per re-issued request, and per stream as many as the server
    /// says it may mint unreported.
    pub fn possible_unseen_ids(&self, token: &str, until: SimTime) -> u64 {
        let posts = self
            .conns
            .values()
            .filter(|c| c.purpose == Purpose::Post && c.presented_token.as_deref() == Some(token) && c.opened <= until)
            .count() as u64;
        let reissues = self
            .requests
            .values()
            .filter(|r| r.session.as_ref().is_some_and(|(t, _)| t == token))
            .flat_map(|r| r.outcomes.iter())
            .filter(|x| x.2 == Outcome::Reissued && x.0 <= until)
            .count() as u64;
        let streams = self.conns.values().filter(|c| c.token() == Some(token) && c.opened <= until).count() as u64;
        posts + reissues + streams * self.unreported_per_stream
    }

    /// The events a client already held for a session before `before`, in order.
    pub fn held_events(&self, client: &str, token: &str, before: SimTime) -> Vec<(&Conn, &Delivered)> {
        let mut out: Vec<(&Conn, &Delivered)> = self
            .conns
            .values()
            .filter(|c| c.client == client && c.token() == Some(token))
            .flat_map(|c| c.delivered.iter().filter(|d| d.t < before).map(move |d| (c, d)))
            .collect();
        out.sort_by_key(|(_, d)| d.seq);
        out
    }

    /// Event ids a client already held for a session before `before`.
    pub fn ids_held(&self, client: &str, token: &str, before: SimTime) -> Vec<u64> {
        self.conns
            .values()
            .filter(|c| c.client == client && c.token() == Some(token))
            .flat_map(|c| c.delivered.iter().filter(|d| d.t < before).filter_map(Delivered::numeric_id))
            .collect()
    }
}

/// What became of a client's own request: the JSON-RPC request a POST carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Its response (a result or a JSON-RPC error) reached the client.
    Answered(SimTime),
    /// The server refused it, or the resumption of its stream, explicitly.
    Refused(SimTime, String),
    /// The client stopped waiting for it without a response: `(time, seq, why)` of the end.
    Lost(SimTime, u64, String),
    /// Still awaited when the run ended.
    Pending,
}

impl Observed<'_> {
    /// What became of the request `c`'s POST carried (`None`: it carried none).
    /// Its response may come on its own stream, on a resumption of that
    /// stream, or (legacy-sse, whose POSTs are answered 202) on the
    /// session's stream; a JSON answer is the response itself.
    pub fn fate(&self, c: &Conn) -> Option<Fate> {
        let sent = c.sent.as_ref()?;
        let since = c.request_t?;
        let answered = self
            .conns
            .values()
            .filter(|d| d.client == c.client && (d.conn == c.conn || (c.token().is_some() && d.token() == c.token())))
            .flat_map(|d| d.delivered.iter())
            .filter(|d| d.t >= since)
            .filter(|d| {
                d.rpc.as_ref().is_some_and(|r| {
                    matches!(r.kind, RpcKind::Response | RpcKind::Error) && r.id.as_ref() == Some(&sent.id)
                })
            })
            .map(|d| d.t)
            .min();
        if let Some(t) = answered {
            return Some(Fate::Answered(t));
        }
        // An enable_tool call reads its answer whole and says what it was.
        if let Some(e) = self.tool_enables.iter().find(|e| e.client == c.client && e.conn == c.conn) {
            return Some(match e.enabled {
                Some(_) => Fate::Answered(e.t),
                None => Fate::Lost(e.t, e.seq, "its answer never came whole".into()),
            });
        }
        let Some((status, is_stream, at, _)) = c.response else {
            return Some(match &c.ended {
                Some((t, seq, why)) => Fate::Lost(*t, *seq, why.clone()),
                None => Fate::Pending,
            });
        };
        match status {
            // The response is owed on the session's stream (legacy-sse).
            202 => return Some(Fate::Pending),
            200 => {}
            s => return Some(Fate::Refused(at, format!("HTTP {s}"))),
        }
        // Its stream, then each resumption of it, in order.
        let own = StreamKey::Call { client: c.client.clone(), conn: c.conn };
        let mut carriers: Vec<&Conn> =
            self.conns.values().filter(|d| d.conn == c.conn && d.client == c.client || d.stream == own).collect();
        carriers.sort_by_key(|d| (d.opened, d.conn));
        for d in &carriers {
            if let Some((t, _, how)) = &d.rejected {
                return Some(Fate::Refused(*t, format!("its resumption was refused ({how})")));
            }
            if let Some((s, _, t, _)) = d.response.filter(|r| r.0 != 200) {
                return Some(Fate::Refused(t, format!("its resumption was answered HTTP {s}")));
            }
        }
        let abandoned = sent.call.as_ref().and_then(|call| {
            self.abandoned_calls.iter().find(|(who, x, t, _, _)| *who == c.client && x == call && *t >= since)
        });
        if let Some((_, _, t, seq, why)) = abandoned {
            return Some(Fate::Lost(*t, *seq, why.clone()));
        }
        let last = carriers.last().copied().unwrap_or(c);
        Some(match (&last.ended, is_stream || last.conn != c.conn) {
            // A tool call's client resumes its stream, or says it gave up
            // (above): it had not yet, or crashed first.
            (Some(_), _) if sent.call.is_some() => Fate::Pending,
            (Some((t, seq, why)), _) => Fate::Lost(*t, *seq, why.clone()),
            // A JSON answer: the body is the response.
            (None, false) => Fate::Answered(at),
            (None, true) => Fate::Pending,
        })
    }
}
