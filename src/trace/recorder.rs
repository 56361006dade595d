//! The recorder every actor writes to during a run, and the clock it reads.

use super::*;

/// Where a recorder reads the time: the clock of the actor that is
/// executing, or `None` between actors (the step loop's time is used then).
/// The world passes the simulator's clock; a recorder without one uses only
/// the step loop's time.
pub type Clock = Rc<dyn Fn() -> Option<Duration>>;

/// The shared recorder every actor writes to during a run.
#[derive(Clone, Default)]
pub struct Recorder {
    inner: Rc<RecorderInner>,
}

#[derive(Default)]
struct RecorderInner {
    events: RefCell<Vec<Event>>,
    /// The step loop's time, used when no actor is executing.
    loop_now: Cell<Duration>,
    clock: Option<Clock>,
}

impl Recorder {
    /// A recorder that reads only the step loop's time.
    pub fn new() -> Self {
        Self::default()
    }

    /// A recorder that reads the executing actor's time from `clock`.
    pub fn with_clock(clock: Clock) -> Self {
        Self { inner: Rc::new(RecorderInner { clock: Some(clock), ..RecorderInner::default() }) }
    }

    /// Now: the executing actor's clock, or the step loop's.
    pub fn now(&self) -> SimTime {
        let actor = self.inner.clock.as_ref().and_then(|c| c());
        SimTime::from_duration(actor.unwrap_or(self.inner.loop_now.get()))
    }

    pub(crate) fn set_loop_now(&self, d: Duration) {
        self.inner.loop_now.set(d);
    }

    /// Records an event at the current time (see [`Recorder::now`]).
    pub fn record(&self, what: What) {
        self.record_at(self.now(), what);
    }

    /// Records an event at a known time (a step's scheduled time).
    pub fn record_at(&self, t_us: SimTime, what: What) {
        let mut events = self.inner.events.borrow_mut();
        let seq = events.len() as u64;
        events.push(Event { seq, t_us, what });
    }

    /// The finished trace, ordered by time (see the module docs).
    pub fn take(&self) -> Trace {
        let mut events = std::mem::take(&mut *self.inner.events.borrow_mut());
        if !events.is_sorted_by_key(|e| e.t_us) {
            // Stable: events of one instant keep their recording order.
            events.sort_by_key(|e| e.t_us);
            for (i, e) in events.iter_mut().enumerate() {
                e.seq = i as u64;
            }
        }
        Trace { events }
    }
}

impl Recorder {
    /// How many events were recorded so far.
    pub fn len(&self) -> usize {
        self.inner.events.borrow().len()
    }

    /// Whether it holds no events (none recorded yet, or all taken).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The time of the first event at or after index `from` that matches.
    pub fn find_from(&self, from: usize, matches: impl Fn(&What) -> bool) -> Option<SimTime> {
        self.inner.events.borrow().iter().skip(from).find(|e| matches(&e.what)).map(|e| e.t_us)
    }

    /// Every JSON-RPC id the application reported for a label (original and re-issued).
    /// The id of the `nth` (from 1) event carrying a message that `client`
    /// received on its connections of `purpose` (uplinks, or tool calls'
    /// streams) of session `token`.
    pub fn nth_message_id(&self, client: &str, nth: usize, token: &str, purpose: Purpose) -> Option<String> {
        let events = self.inner.events.borrow();
        event_ids(&events, client, token, purpose, true).into_iter().nth(nth.checked_sub(1)?).map(|(_, id)| id)
    }

    /// The id of the last event (a priming event too) that `client` received
    /// on its uplinks of session `token` before the application reported
    /// request `label` issued (not the request's own event, if the client
    /// received that first).
    pub fn id_seen_before(&self, client: &str, label: &str, token: &str) -> Option<String> {
        let events = self.inner.events.borrow();
        let (at, own) = events.iter().enumerate().find_map(|(i, e)| match &e.what {
            What::RequestIssued { label: l, event_id, .. } if l == label => Some((i, event_id.clone())),
            _ => None,
        })?;
        event_ids(&events, client, token, Purpose::Uplink, false)
            .into_iter()
            .rev()
            .find(|(i, id)| *i < at && Some(id) != own.as_ref())
            .map(|(_, id)| id)
    }

    /// Every JSON-RPC id the application reported for `label` (issued with
    /// it, or given to it by a re-issue), in recording order.
    pub fn ids_for_label(&self, label: &str) -> Vec<RpcId> {
        let mut ids = Vec::new();
        for e in self.inner.events.borrow().iter() {
            match &e.what {
                What::RequestIssued { label: l, id, .. } if l == label => ids.push(id.clone()),
                What::RequestOutcome { label: l, new_id: Some(id), .. } if l == label => ids.push(id.clone()),
                _ => {}
            }
        }
        ids
    }
}

/// The ids, with their places in `events`, of the events that `client`
/// received on its connections of `purpose` of session `token`: only those
/// carrying a message when `messages`.
fn event_ids(events: &[Event], client: &str, token: &str, purpose: Purpose, messages: bool) -> Vec<(usize, String)> {
    let of_session: Vec<ConnId> = events
        .iter()
        .filter_map(|e| match &e.what {
            What::HttpRequest { client: c, conn, session: Some(t), .. } if c == client && t == token => Some(*conn),
            What::HttpRequest { client: c, conn, path, .. } if c == client && path.ends_with(&format!("={token}")) => {
                Some(*conn)
            }
            What::SessionToken { client: c, conn, token: t } if c == client && t == token => Some(*conn),
            _ => None,
        })
        .collect();
    let conns: Vec<ConnId> = events
        .iter()
        .filter_map(|e| match &e.what {
            What::Connect { client: c, conn, purpose: p, .. }
                if c == client && *p == purpose && of_session.contains(conn) =>
            {
                Some(*conn)
            }
            _ => None,
        })
        .collect();
    events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.what {
            What::SseEvent { client: c, conn, id: Some(id), rpc, .. }
                if c == client && conns.contains(conn) && (rpc.is_some() || !messages) =>
            {
                Some((i, id.clone()))
            }
            _ => None,
        })
        .collect()
}
