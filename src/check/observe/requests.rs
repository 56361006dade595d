//! Questions the checks ask of the index about requests: the stream a
//! server request rides, the request an id named, and the [`Fate`] of a
//! client's own.

use super::*;

impl Observed<'_> {
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
