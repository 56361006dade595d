//! Questions the checks ask of the index about ids and streams: which ids
//! a session or a stream showed or a client held, which the application
//! reported minting, and when a stream was usable.

use super::*;

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
