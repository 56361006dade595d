//! A step's `do` and the fields it needs, each checked against what the
//! file defined before it.

use super::*;

impl Loader<'_> {
    /// A step's action: its kind, which must exist in the dialect, then
    /// that kind's fields (each family's kinds read by a helper of its own).
    pub(super) fn action(&mut self, s: &RawStep) -> Result<Action> {
        let action_name = s.action.get_ref().as_str();
        if let Some(kind) = StepKind::from_name(action_name).filter(|k| !self.dialect.step_kinds().contains(k)) {
            return Err(self.err(
                s.action.span(),
                format!("step `{action_name}` needs dialect = {} in [scenario]", dialects_with(kind)),
            ));
        }
        // The families' kinds are disjoint but for `sever` and `reset` with a
        // `label` (stateless-http: aimed at a call), read as the stateless ones.
        if let Some(action) = self.stateless_action(s)? {
            return Ok(action);
        }
        if let Some(action) = self.session_action(s)? {
            return Ok(action);
        }
        if let Some(action) = self.fault_action(s)? {
            return Ok(action);
        }
        Err(self.unknown_kind(s))
    }

    /// The stateful dialects' own kinds (`None`: `s` is of another kind).
    fn session_action(&mut self, s: &RawStep) -> Result<Option<Action>> {
        let client = |l: &Self| l.client(s, &s.client, "client");
        Ok(Some(match s.action.get_ref().as_str() {
            "connect" => Action::Connect { client: client(self)? },
            "server-request" | "call-tool" => self.request(s)?,
            "notify" => Action::Notify { client: client(self)?, count: s.count.as_ref().map_or(1, |c| *c.get_ref()) },
            "answer" => {
                let label = self.label(s)?;
                if !self.labels.contains(label.get_ref()) {
                    return Err(self.err(
                        label.span(),
                        format!("label {:?} is not issued by an earlier server-request step", label.get_ref()),
                    ));
                }
                Action::Answer { client: client(self)?, label: label.into_inner() }
            }
            "resume" => Action::Resume {
                last_event_id: self.last_event_id(s)?,
                client: client(self)?,
                expect: s.expect.as_ref().map(|e| *e.get_ref()),
            },
            "end-session" => Action::EndSession { client: client(self)? },
            "enable-tool" => {
                let Some(tool) = &s.tool else {
                    return Err(self.err(s.action.span(), "step `enable-tool` needs `tool`".into()));
                };
                let name = tool.get_ref();
                if name.is_empty() || name.chars().any(|ch| ch.is_control()) {
                    return Err(
                        self.err(tool.span(), format!("tool {name:?} must be non-empty, without control characters"))
                    );
                }
                Action::EnableTool { client: client(self)?, tool: name.clone() }
            }
            "steal-token" => {
                let from = self.client(s, &s.from, "from")?;
                let to = self.client(s, &s.to, "to")?;
                if from == to {
                    return Err(self.err(s.action.span(), "steal-token needs two different clients".into()));
                }
                Action::StealToken { from, to, credential: s.credential.as_ref().is_some_and(|c| *c.get_ref()) }
            }
            _ => return Ok(None),
        }))
    }

    /// stateless-http's own kinds (`None`: `s` is of another kind).
    fn stateless_action(&mut self, s: &RawStep) -> Result<Option<Action>> {
        let action_name = s.action.get_ref().as_str();
        let client = |l: &Self| l.client(s, &s.client, "client");
        Ok(Some(match action_name {
            "sever" | "reset" if s.label.is_some() && self.dialect.family() == Family::Stateless => {
                let label = self.call_label(s, &s.label, "label")?;
                let client = client(self)?;
                if action_name == "sever" {
                    Action::SeverCall { client, label }
                } else {
                    Action::ResetCall { client, label }
                }
            }
            "call" => self.call(s)?,
            "steal-request-state" => {
                let from = self.client(s, &s.from, "from")?;
                let to = self.client(s, &s.to, "to")?;
                if from == to {
                    return Err(self.err(s.action.span(), "steal-request-state needs two different clients".into()));
                }
                let label = self.call_label(s, &s.label, "label")?;
                Action::StealRequestState {
                    from,
                    to,
                    label,
                    credential: s.credential.as_ref().is_some_and(|c| *c.get_ref()),
                }
            }
            "tamper-request-state" => {
                let label = self.call_label(s, &s.label, "label")?;
                let how = self.tamper(s, &label)?;
                Action::TamperRequestState { client: client(self)?, label, how }
            }
            "restart-server" => Action::RestartServer,
            "listen" => Action::Listen { client: client(self)? },
            "change-tools" => Action::ChangeTools,
            "replay-request-state" => {
                Action::ReplayRequestState { label: self.call_label(s, &s.label, "label")?, client: client(self)? }
            }
            _ => return Ok(None),
        }))
    }

    /// How a `tamper-request-state` step on call `label` alters the state.
    fn tamper(&self, s: &RawStep, label: &str) -> Result<Tamper> {
        Ok(match s.how.as_ref().map(|h| *h.get_ref()) {
            None => {
                return Err(self.err(
                    s.action.span(),
                    "step `tamper-request-state` needs `how` (\"flip\", \"truncate\" or \"move\")".into(),
                ))
            }
            Some(TamperHow::Flip) => Tamper::Flip,
            Some(TamperHow::Truncate) => Tamper::Truncate,
            Some(TamperHow::Move) => {
                let onto = self.call_label(s, &s.onto, "onto")?;
                if onto == label {
                    return Err(self.err(s.action.span(), "`onto` must name another call than `label`".into()));
                }
                let tool = self.calls[&onto].clone();
                Tamper::Move { onto, tool }
            }
        })
    }

    /// The kinds of every family: a client's network faults and crash,
    /// `wait`, and a deployment's replica faults (`None`: `s` is of another kind).
    fn fault_action(&mut self, s: &RawStep) -> Result<Option<Action>> {
        let action_name = s.action.get_ref().as_str();
        let client = |l: &Self| l.client(s, &s.client, "client");
        let replica = |l: &Self| match &s.replica {
            Some(r) => Ok(*r.get_ref()),
            None => Err(l.err(s.action.span(), format!("step `{action_name}` needs `replica` (from 1)"))),
        };
        Ok(Some(match action_name {
            "rebind" => Action::Rebind { client: client(self)? },
            "sever" => Action::Sever { client: client(self)? },
            "reset" => Action::Reset { client: client(self)? },
            "crash-client" => Action::CrashClient { client: client(self)? },
            "wait" => Action::Wait,
            "restart-replica" => Action::RestartReplica { replica: replica(self)? },
            "crash-replica" => Action::CrashReplica { replica: replica(self)? },
            "drain" => Action::Drain { replica: replica(self)? },
            "partition" => {
                Action::Partition { replica: replica(self)?, lasts: s.lasts.as_ref().map(|d| d.get_ref().0) }
            }
            _ => return Ok(None),
        }))
    }

    /// The error for a `do` that no dialect has: the kinds of this dialect's
    /// family, and a guess at the one meant.
    fn unknown_kind(&self, s: &RawStep) -> Error {
        let other = s.action.get_ref().as_str();
        // The kinds of this dialect's family (the stateful dialects share their words).
        let family = self.dialect.family();
        let kinds: Vec<&str> = StepKind::ALL
            .iter()
            .filter(|k| Dialect::ALL.iter().any(|d| d.family() == family && d.step_kinds().contains(k)))
            .map(|k| k.as_str())
            .collect();
        self.err(
            s.action.span(),
            format!("unknown step kind {other:?}{} (one of: {})", hint(other, kinds.iter().copied()), kinds.join(", ")),
        )
    }

    /// `server-request` and `call-tool`: a known method and a new label.
    fn request(&mut self, s: &RawStep) -> Result<Action> {
        let action_name = s.action.get_ref().as_str();
        let method = s
            .method
            .clone()
            .ok_or_else(|| self.err(s.action.span(), format!("step `{action_name}` needs `method`")))?;
        if !SERVER_REQUEST_METHODS.contains(&method.get_ref().as_str()) {
            return Err(self.err(
                method.span(),
                format!(
                    "unknown server request method {:?}{} (one of: {})",
                    method.get_ref(),
                    hint(method.get_ref(), SERVER_REQUEST_METHODS),
                    SERVER_REQUEST_METHODS.join(", ")
                ),
            ));
        }
        let label = self.label(s)?;
        // Labels name requests in JSON-RPC ids, reports and file names.
        let l = label.get_ref();
        if l.is_empty() || l.chars().any(|ch| ch.is_control()) {
            return Err(self.err(label.span(), format!("label {l:?} must be non-empty, without control characters")));
        }
        if !self.labels.insert(label.get_ref().clone()) {
            return Err(self.err(label.span(), format!("label {:?} is used twice", label.get_ref())));
        }
        let (client, method, label) = (self.client(s, &s.client, "client")?, method.into_inner(), label.into_inner());
        Ok(if action_name == "call-tool" {
            Action::CallTool { client, method, label }
        } else {
            let reissuable = s.reissuable.as_ref().is_none_or(|r| *r.get_ref());
            Action::ServerRequest { client, method, label, reissuable }
        })
    }

    /// stateless-http's `call`: a tool `[[tool]]` declares, and a new call label.
    fn call(&mut self, s: &RawStep) -> Result<Action> {
        let client = self.client(s, &s.client, "client")?;
        let Some(tool) = &s.tool else {
            return Err(self.err(s.action.span(), "step `call` needs `tool`".into()));
        };
        if !self.tools.iter().any(|t| &t.name == tool.get_ref()) {
            let known: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(self.err(
                tool.span(),
                format!(
                    "unknown tool {:?}{} (declared in [[tool]]: {})",
                    tool.get_ref(),
                    hint(tool.get_ref(), known.iter().copied()),
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ),
            ));
        }
        let label = self.label(s)?;
        let l = label.get_ref();
        if l.is_empty() || !l.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch)) {
            return Err(self.err(
                label.span(),
                format!("call label {l:?} must be non-empty ASCII letters, digits, '-', '_' or '.'"),
            ));
        }
        if !self.labels.insert(l.clone()) {
            return Err(self.err(label.span(), format!("label {l:?} is used twice")));
        }
        self.calls.insert(l.clone(), tool.get_ref().clone());
        let decline = s.decline.as_ref().is_some_and(|d| *d.get_ref());
        Ok(Action::Call { client, tool: tool.get_ref().clone(), label: label.into_inner(), decline })
    }

    /// A `resume` step's `last_event_id`, in any of its forms.
    fn last_event_id(&self, s: &RawStep) -> Result<LastEventId> {
        let Some(v) = &s.last_event_id else { return Ok(LastEventId::LastSeen) };
        Ok(match v.get_ref() {
            LastEventIdRaw::Id(n) => LastEventId::Id(*n),
            LastEventIdRaw::Word(w) if w == "last-seen" => LastEventId::LastSeen,
            LastEventIdRaw::Word(w) if w == "none" => LastEventId::None,
            LastEventIdRaw::Word(w) => return Err(self.err(v.span(), format!("{LAST_EVENT_ID_FORMS}, not {w:?}"))),
            LastEventIdRaw::Raw(RawIdRaw { raw }) => {
                // Sent as an HTTP header value: visible ASCII and spaces only.
                if raw.is_empty() || !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
                    return Err(self.err(
                        v.span(),
                        format!("raw Last-Event-ID {raw:?} must be non-empty visible ASCII (it is sent as a header)"),
                    ));
                }
                LastEventId::Raw(raw.clone())
            }
            LastEventIdRaw::Seen(SeenRaw { seen_by, nth, stream }) => {
                if !self.names.contains(seen_by) {
                    return Err(self.err(v.span(), format!("seen_by names unknown client {seen_by:?}")));
                }
                if *nth == 0 {
                    return Err(self.err(v.span(), "nth counts from 1".into()));
                }
                LastEventId::Seen { client: seen_by.clone(), nth: *nth, stream: *stream }
            }
            LastEventIdRaw::LastSeenPlus(LastSeenPlusRaw { last_seen_plus }) => {
                LastEventId::LastSeenPlus(*last_seen_plus)
            }
            LastEventIdRaw::SeenBefore(SeenBeforeRaw { seen_before }) => LastEventId::SeenBefore(seen_before.clone()),
        })
    }

    /// Fields that mean nothing for this step kind are mistakes, not noise.
    pub(super) fn only_fields_that_apply(&self, s: &RawStep, action: &Action) -> Result<()> {
        let allowed: &[&str] = match action {
            Action::Connect { .. }
            | Action::Rebind { .. }
            | Action::Sever { .. }
            | Action::Reset { .. }
            | Action::EndSession { .. }
            | Action::CrashClient { .. } => &["client"],
            Action::ServerRequest { .. } => &["client", "method", "label", "reissuable"],
            Action::CallTool { .. } => &["client", "method", "label"],
            Action::EnableTool { .. } => &["client", "tool"],
            Action::Notify { .. } => &["client", "count"],
            Action::Answer { .. } => &["client", "label"],
            Action::Resume { .. } => &["client", "last_event_id", "expect"],
            Action::StealToken { .. } => &["from", "to", "credential"],
            Action::Wait => &[],
            Action::Call { .. } => &["client", "tool", "label", "decline"],
            Action::StealRequestState { .. } => &["from", "to", "label", "credential"],
            Action::TamperRequestState { .. } => &["client", "label", "how", "onto"],
            Action::ReplayRequestState { .. } => &["client", "label"],
            Action::RestartServer | Action::ChangeTools => &[],
            Action::Listen { .. } => &["client"],
            Action::SeverCall { .. } | Action::ResetCall { .. } => &["client", "label"],
            Action::Partition { .. } => &["replica", "for"],
            Action::RestartReplica { .. } | Action::CrashReplica { .. } | Action::Drain { .. } => &["replica"],
        };
        let present = [
            ("client", s.client.as_ref().map(|x| x.span())),
            ("method", s.method.as_ref().map(|x| x.span())),
            ("label", s.label.as_ref().map(|x| x.span())),
            ("count", s.count.as_ref().map(|x| x.span())),
            ("last_event_id", s.last_event_id.as_ref().map(|x| x.span())),
            ("from", s.from.as_ref().map(|x| x.span())),
            ("to", s.to.as_ref().map(|x| x.span())),
            ("credential", s.credential.as_ref().map(|x| x.span())),
            ("expect", s.expect.as_ref().map(|x| x.span())),
            ("reissuable", s.reissuable.as_ref().map(|x| x.span())),
            ("decline", s.decline.as_ref().map(|x| x.span())),
            ("tool", s.tool.as_ref().map(|x| x.span())),
            ("how", s.how.as_ref().map(|x| x.span())),
            ("onto", s.onto.as_ref().map(|x| x.span())),
            ("replica", s.replica.as_ref().map(|x| x.span())),
            ("for", s.lasts.as_ref().map(|x| x.span())),
        ];
        for (field, span) in present {
            if let Some(span) = span {
                if !allowed.contains(&field) {
                    return Err(self.err(span, format!("`{field}` does not apply to step `{}`", s.action.get_ref())));
                }
            }
        }
        Ok(())
    }
}
