//! Loading: TOML text → a validated [`Plan`], every problem a located error.

use super::raw::*;
use super::*;

/// `", did you mean \"x\"?"` when `word` looks like a typo of a candidate.
fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    crate::error::did_you_mean(word, candidates).map_or(String::new(), |c| format!(", did you mean {c:?}?"))
}

/// Adds a suggestion to toml's "unknown field `x`, expected one of `a`, `b`"
/// (and "unknown variant") messages.
fn with_suggestion(message: &str) -> String {
    if message.contains("untagged enum LastEventIdRaw") {
        return LAST_EVENT_ID_FORMS.into();
    }
    let quoted = |s: &str| -> Vec<String> { s.split('`').skip(1).step_by(2).map(str::to_string).collect() };
    for kind in ["unknown field", "unknown variant"] {
        if let Some(rest) = message.trim().strip_prefix(kind) {
            let (word, expected) = match rest.split_once("expected") {
                Some((w, e)) => (quoted(w), quoted(e)),
                None => (quoted(rest), Vec::new()),
            };
            if let Some(word) = word.first() {
                if let Some(s) = crate::error::did_you_mean(word, expected.iter().map(String::as_str)) {
                    return format!("{}; did you mean `{s}`?", message.trim());
                }
            }
        }
    }
    message.trim().to_string()
}

/// The byte range of the first `key =` line in `text` (for errors about a value).
fn find_key(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('=')) {
            let start = offset + (line.len() - trimmed.len());
            return Some(start..start + key.len());
        }
        offset += line.len();
    }
    None
}

impl Plan {
    /// Loads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Plan> {
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::io(format!("{}: cannot read: {e}", path.display())))?;
        let mut plan = Self::from_toml_str(&text, path)?;
        plan.source = Some(path.to_path_buf());
        Ok(plan)
    }

    /// Parses and validates scenario text; `path` only names it in errors.
    pub fn from_toml_str(text: &str, path: impl AsRef<Path>) -> Result<Plan> {
        let path = path.as_ref();
        let raw: RawFile = toml::from_str(text)
            .map_err(|e| Error::scenario_at(path, text, e.span(), with_suggestion(&e.message().replace('\n', "; "))))?;
        let err = |span: std::ops::Range<usize>, msg: String| Error::scenario_at(path, text, Some(span), msg);
        let at_key = |key: &str| find_key(text, key);

        let dialect = raw.scenario.dialect.as_ref().map(|d| *d.get_ref()).unwrap_or_default();
        let server = raw.server;
        if server.retention == 0 {
            return Err(Error::scenario_at(path, text, at_key("retention"), "[server] retention must be at least 1"));
        }
        let (latency_min, latency_max) = match raw.network.latency {
            Latency::Fixed(d) => (d.0, d.0),
            Latency::Range(r) => (r.min.0, r.max.0),
        };
        if raw.network.tick.0 < Duration::from_millis(1) || raw.network.tick.0 > Duration::from_secs(1) {
            return Err(Error::scenario_at(path, text, at_key("tick"), "[network] tick must be between 1ms and 1s"));
        }
        if latency_min > latency_max {
            return Err(Error::scenario_at(
                path,
                text,
                at_key("latency"),
                "[network] latency: min is greater than max",
            ));
        }

        let mut clients = Vec::new();
        let mut names = BTreeSet::new();
        for c in raw.clients {
            let name = c.name.get_ref().clone();
            if name.is_empty() || !name.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_') {
                return Err(err(
                    c.name.span(),
                    format!("client name {name:?} must be non-empty ASCII letters, digits, '-' or '_'"),
                ));
            }
            if name == "server" || name.starts_with("nat-") {
                return Err(err(
                    c.name.span(),
                    format!("client name {name:?} is reserved for the simulation's own hosts"),
                ));
            }
            if !names.insert(name.clone()) {
                return Err(err(c.name.span(), format!("client {name:?} is defined twice")));
            }
            // The principal travels in an HTTP header: visible ASCII, no spaces.
            if let Some(p) = &c.principal {
                let v = p.get_ref();
                if v.is_empty() || !v.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
                    return Err(err(
                        p.span(),
                        format!("principal {v:?} must be non-empty visible ASCII without spaces (it is sent as a bearer credential)"),
                    ));
                }
            }
            clients.push(ClientSpec {
                principal: c.principal.map_or_else(|| name.clone(), Spanned::into_inner),
                name,
                think_time: c.think_time.map_or(Duration::from_secs(1), |d| d.0),
                heartbeat_timeout: c.heartbeat_timeout.map_or(server.heartbeat.0 * 5 / 2, |d| d.0),
                auto_answer: c.auto_answer.unwrap_or(true),
            });
        }

        let mut steps = Vec::new();
        let mut labels = BTreeSet::new();
        let mut last_at = Duration::ZERO;
        let mut step_ids: Vec<String> = Vec::new();
        let step_spans: Vec<std::ops::Range<usize>> = raw.steps.iter().map(|s| s.action.span()).collect();
        for s in raw.steps {
            let (at, after) = match (&s.at, &s.after) {
                (Some(_), Some(a)) => {
                    return Err(err(a.span(), "a step has either `at` or `after`, not both".into()));
                }
                (None, None) => {
                    return Err(err(s.action.span(), "a step needs `at` (a time) or `after` (an event)".into()));
                }
                (Some(at), None) => {
                    if s.delay.is_some() {
                        return Err(err(at.span(), "`delay` goes with `after`, not with `at`".into()));
                    }
                    let t = at.get_ref().0;
                    if t < last_at {
                        return Err(err(
                            at.span(),
                            format!(
                                "step at {} comes before the previous step at {}; steps must be in time order",
                                format_duration(t),
                                format_duration(last_at)
                            ),
                        ));
                    }
                    last_at = t;
                    (t, None)
                }
                (None, Some(a)) => {
                    let known_label = |label: &String| -> Result<()> {
                        if labels.contains(label) {
                            return Ok(());
                        }
                        Err(err(
                            a.span(),
                            format!("trigger names label {label:?}, which no earlier server-request step issues"),
                        ))
                    };
                    let known_client = |c: &String| -> Result<()> {
                        if names.contains(c) {
                            return Ok(());
                        }
                        let h = hint(c, names.iter().map(String::as_str));
                        Err(err(a.span(), format!("trigger names unknown client {c:?}{h}")))
                    };
                    let trigger = match a.get_ref().clone() {
                        RawTrigger::Delivered { label, client } => {
                            known_label(&label)?;
                            client.as_ref().map(known_client).transpose()?;
                            Trigger::Delivered { label, client }
                        }
                        RawTrigger::Answered { label } => {
                            known_label(&label)?;
                            Trigger::Answered { label }
                        }
                        RawTrigger::Accepted { client } => {
                            known_client(&client)?;
                            Trigger::Accepted { client }
                        }
                        RawTrigger::Step { step } => {
                            if !step_ids.contains(&step) {
                                let h = hint(&step, step_ids.iter().map(String::as_str));
                                return Err(err(
                                    a.span(),
                                    format!("trigger names step {step:?}, which is not the id of an earlier step{h}"),
                                ));
                            }
                            Trigger::Step { step }
                        }
                    };
                    (Duration::ZERO, Some(After { trigger, delay: s.delay.map_or(Duration::ZERO, |d| d.0) }))
                }
            };
            let id = match &s.id {
                Some(id) if step_ids.contains(id.get_ref()) => {
                    return Err(err(id.span(), format!("step id {:?} is used twice", id.get_ref())));
                }
                Some(id) => {
                    step_ids.push(id.get_ref().clone());
                    Some(id.get_ref().clone())
                }
                None => None,
            };
            let action_name = s.action.get_ref().as_str();
            let need_client = |f: &Option<Spanned<String>>, field: &str| -> Result<String> {
                let Some(c) = f else {
                    return Err(err(s.action.span(), format!("step `{action_name}` needs `{field}`")));
                };
                if !names.contains(c.get_ref()) {
                    return Err(err(
                        c.span(),
                        format!(
                            "unknown client {:?}{} (defined: {})",
                            c.get_ref(),
                            hint(c.get_ref(), names.iter().map(String::as_str)),
                            names.iter().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                Ok(c.get_ref().clone())
            };
            let need_label = |field: &str| -> Result<Spanned<String>> {
                s.label.clone().ok_or_else(|| err(s.action.span(), format!("step `{action_name}` needs `{field}`")))
            };
            let action = match action_name {
                "connect" => Action::Connect { client: need_client(&s.client, "client")? },
                "call-tool" | "end-session" if dialect != Dialect::StreamableHttp => {
                    return Err(err(
                        s.action.span(),
                        format!("step `{action_name}` needs dialect = \"streamable-http\" in [scenario]"),
                    ))
                }
                "server-request" | "call-tool" => {
                    let method = s
                        .method
                        .clone()
                        .ok_or_else(|| err(s.action.span(), format!("step `{action_name}` needs `method`")))?;
                    if !SERVER_REQUEST_METHODS.contains(&method.get_ref().as_str()) {
                        return Err(err(
                            method.span(),
                            format!(
                                "unknown server request method {:?}{} (one of: {})",
                                method.get_ref(),
                                hint(method.get_ref(), SERVER_REQUEST_METHODS),
                                SERVER_REQUEST_METHODS.join(", ")
                            ),
                        ));
                    }
                    let label = need_label("label")?;
                    // Labels name requests in JSON-RPC ids, reports and file names.
                    let l = label.get_ref();
                    if l.is_empty() || l.chars().any(|ch| ch.is_control()) {
                        return Err(err(
                            label.span(),
                            format!("label {l:?} must be non-empty, without control characters"),
                        ));
                    }
                    if !labels.insert(label.get_ref().clone()) {
                        return Err(err(label.span(), format!("label {:?} is used twice", label.get_ref())));
                    }
                    let (client, method, label) =
                        (need_client(&s.client, "client")?, method.into_inner(), label.into_inner());
                    if action_name == "call-tool" {
                        Action::CallTool { client, method, label }
                    } else {
                        let reissuable = s.reissuable.as_ref().is_none_or(|r| *r.get_ref());
                        Action::ServerRequest { client, method, label, reissuable }
                    }
                }
                "notify" => Action::Notify {
                    client: need_client(&s.client, "client")?,
                    count: s.count.as_ref().map_or(1, |c| *c.get_ref()),
                },
                "answer" => {
                    let label = need_label("label")?;
                    if !labels.contains(label.get_ref()) {
                        return Err(err(
                            label.span(),
                            format!("label {:?} is not issued by an earlier server-request step", label.get_ref()),
                        ));
                    }
                    Action::Answer { client: need_client(&s.client, "client")?, label: label.into_inner() }
                }
                "rebind" => Action::Rebind { client: need_client(&s.client, "client")? },
                "sever" => Action::Sever { client: need_client(&s.client, "client")? },
                "reset" => Action::Reset { client: need_client(&s.client, "client")? },
                "resume" => {
                    let last_event_id = match &s.last_event_id {
                        None => LastEventId::LastSeen,
                        Some(v) => match v.get_ref() {
                            LastEventIdRaw::Id(n) => LastEventId::Id(*n),
                            LastEventIdRaw::Word(w) if w == "last-seen" => LastEventId::LastSeen,
                            LastEventIdRaw::Word(w) if w == "none" => LastEventId::None,
                            LastEventIdRaw::Word(w) => {
                                return Err(err(v.span(), format!("{LAST_EVENT_ID_FORMS}, not {w:?}")))
                            }
                            LastEventIdRaw::Raw(RawIdRaw { raw }) => {
                                // Sent as an HTTP header value: visible ASCII and spaces only.
                                if raw.is_empty() || !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
                                    return Err(err(
                                        v.span(),
                                        format!("raw Last-Event-ID {raw:?} must be non-empty visible ASCII (it is sent as a header)"),
                                    ));
                                }
                                LastEventId::Raw(raw.clone())
                            }
                            LastEventIdRaw::Seen(SeenRaw { seen_by, nth, stream }) => {
                                if !names.contains(seen_by) {
                                    return Err(err(v.span(), format!("seen_by names unknown client {seen_by:?}")));
                                }
                                if *nth == 0 {
                                    return Err(err(v.span(), "nth counts from 1".into()));
                                }
                                LastEventId::Seen { client: seen_by.clone(), nth: *nth, stream: *stream }
                            }
                            LastEventIdRaw::LastSeenPlus(LastSeenPlusRaw { last_seen_plus }) => {
                                LastEventId::LastSeenPlus(*last_seen_plus)
                            }
                        },
                    };
                    Action::Resume {
                        client: need_client(&s.client, "client")?,
                        last_event_id,
                        expect: s.expect.as_ref().map(|e| *e.get_ref()),
                    }
                }
                "end-session" => Action::EndSession { client: need_client(&s.client, "client")? },
                "steal-token" => {
                    let from = need_client(&s.from, "from")?;
                    let to = need_client(&s.to, "to")?;
                    if from == to {
                        return Err(err(s.action.span(), "steal-token needs two different clients".into()));
                    }
                    Action::StealToken { from, to, credential: s.credential.as_ref().is_some_and(|c| *c.get_ref()) }
                }
                "crash-client" => Action::CrashClient { client: need_client(&s.client, "client")? },
                "wait" => Action::Wait,
                other => {
                    return Err(err(
                        s.action.span(),
                        format!(
                            "unknown step kind {other:?}{} (one of: {})",
                            hint(other, STEP_KINDS.iter().copied()),
                            STEP_KINDS.join(", ")
                        ),
                    ))
                }
            };
            // Fields that mean nothing for this step kind are mistakes, not noise.
            let allowed: &[&str] = match &action {
                Action::Connect { .. }
                | Action::Rebind { .. }
                | Action::Sever { .. }
                | Action::Reset { .. }
                | Action::EndSession { .. }
                | Action::CrashClient { .. } => &["client"],
                Action::ServerRequest { .. } => &["client", "method", "label", "reissuable"],
                Action::CallTool { .. } => &["client", "method", "label"],
                Action::Notify { .. } => &["client", "count"],
                Action::Answer { .. } => &["client", "label"],
                Action::Resume { .. } => &["client", "last_event_id", "expect"],
                Action::StealToken { .. } => &["from", "to", "credential"],
                Action::Wait => &[],
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
            ];
            for (field, span) in present {
                if let Some(span) = span {
                    if !allowed.contains(&field) {
                        return Err(err(span, format!("`{field}` does not apply to step `{action_name}`")));
                    }
                }
            }
            steps.push(Step { at, after, id, action });
        }
        if let Some(last) = steps.iter().rfind(|s| s.after.is_none()) {
            if last.at > raw.scenario.duration.0 {
                return Err(Error::scenario_at(
                    path,
                    text,
                    at_key("duration"),
                    format!(
                        "a step at {} is after the scenario's duration {}",
                        format_duration(last.at),
                        format_duration(raw.scenario.duration.0)
                    ),
                ));
            }
        }

        let mut expect = BTreeMap::new();
        for (server, checks) in raw.expect {
            if !crate::vocab::SERVERS.contains(&server.get_ref().as_str()) {
                return Err(err(
                    server.span(),
                    format!(
                        "[expect] names unknown server {:?}{} (known: {})",
                        server.get_ref(),
                        hint(server.get_ref(), crate::vocab::SERVERS.iter().copied()),
                        crate::vocab::SERVERS.join(", ")
                    ),
                ));
            }
            let mut ids = Vec::new();
            for c in checks.into_inner() {
                if !CHECK_IDS.contains(&c.get_ref().as_str()) {
                    return Err(err(
                        c.span(),
                        format!(
                            "[expect] names unknown check {:?}{} (known: {})",
                            c.get_ref(),
                            hint(c.get_ref(), CHECK_IDS.iter().copied()),
                            CHECK_IDS.join(", ")
                        ),
                    ));
                }
                ids.push(c.into_inner());
            }
            ids.sort();
            ids.dedup();
            expect.insert(server.into_inner(), ids);
        }

        let plan = Plan {
            name: raw.scenario.name,
            description: raw.scenario.description,
            dialect: raw.scenario.dialect.map(Spanned::into_inner).unwrap_or_default(),
            seed: Seed(raw.scenario.seed),
            duration: raw.scenario.duration.0,
            server,
            network: NetworkConfig {
                tick: raw.network.tick.0,
                latency_min,
                latency_max,
                half_open_lifetime: raw.network.half_open_lifetime.0,
            },
            clients,
            steps,
            expect,
            source: None,
        };
        // The checks above locate each problem exactly; this is the one
        // semantic check every plan passes (hand-built and shrunk ones too).
        plan.validate().map_err(|p| match p.step {
            Some(i) => err(step_spans[i].clone(), p.message),
            None => Error::scenario_at(path, text, None, p.message),
        })?;
        Ok(plan)
    }

    pub fn client(&self, name: &str) -> Option<&ClientSpec> {
        self.clients.iter().find(|c| c.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "[scenario]\nname = \"t\"\nduration = \"60s\"\n[[client]]\nname = \"alice\"\n";

    fn load(extra: &str) -> Result<Plan> {
        Plan::from_toml_str(&format!("{HEAD}{extra}"), "t.toml")
    }

    #[test]
    fn defaults_and_steps() {
        let p = load("[[step]]\nat = \"1s\"\ndo = \"resume\"\nclient = \"alice\"\nlast_event_id = 1007\n").unwrap();
        assert_eq!(
            p.steps[0].action,
            Action::Resume { client: "alice".into(), last_event_id: LastEventId::Id(1007), expect: None }
        );
        assert_eq!(p.server.retention, 64);
        assert_eq!(p.clients[0].principal, "alice");
        assert_eq!(p.clients[0].heartbeat_timeout, Duration::from_millis(37_500));
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let e = load("[[step]]\nat = \"1s\"\ndo = \"connect\"\nclient = \"bob\"\n").unwrap_err();
        assert!(e.to_string().starts_with("t.toml:9:10: unknown client \"bob\" (defined: alice)\n"), "{e}");
        let e = load("[[step]]\nat = \"1s\"\ndo = \"conect\"\nclient = \"alice\"\n").unwrap_err();
        assert!(e.to_string().starts_with("t.toml:8:6: unknown step kind \"conect\""), "{e}");
        let e = load("[[step]]\nat = \"1 fortnight\"\ndo = \"wait\"\n").unwrap_err();
        assert!(e.to_string().contains("unknown unit"), "{e}");
        let e = load("[network]\nlatncy = \"1ms\"\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `latncy`"), "{e}");
        let e = load("[[step]]\nat = \"2s\"\ndo = \"wait\"\n[[step]]\nat = \"1s\"\ndo = \"wait\"\n").unwrap_err();
        assert!(e.to_string().contains("time order"), "{e}");
        let e = load("[expect]\nnaive = [\"liveliness\"]\n").unwrap_err();
        assert!(e.to_string().contains("unknown check \"liveliness\""), "{e}");
        let e = load("[expect]\n\"naïve\" = []\n").unwrap_err();
        assert!(e.to_string().contains("unknown server"), "{e}");
        let e = load("[[step]]\nat = \"1s\"\ndo = \"rebind\"\nclient = \"alice\"\nlabel = \"x\"\n").unwrap_err();
        assert!(e.to_string().contains("`label` does not apply to step `rebind`"), "{e}");
        let e = load("[[step]]\nat = \"1s\"\ndo = \"answer\"\nclient = \"alice\"\nlabel = \"x\"\n").unwrap_err();
        assert!(e.to_string().contains("not issued by an earlier"), "{e}");
        assert_eq!(e.exit_code(), 3);
    }
}
