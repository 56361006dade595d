//! Loading: TOML text → a validated [`Plan`], every problem a located error.

use super::raw::*;
use super::*;

mod expect;
mod step;

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
        let dialect = raw.scenario.dialect.as_ref().map(|d| *d.get_ref()).unwrap_or_default();
        let mut l = Loader {
            path,
            text,
            dialect,
            names: BTreeSet::new(),
            labels: BTreeSet::new(),
            step_ids: Vec::new(),
            last_at: Duration::ZERO,
            tools: Vec::new(),
            calls: BTreeMap::new(),
        };
        let network = l.network(&raw.server, raw.network)?;
        l.deployment(&raw.deployment)?;
        l.tools(raw.tools)?;
        let clients = l.clients(raw.clients, &raw.server)?;
        let step_spans: Vec<std::ops::Range<usize>> = raw.steps.iter().map(|s| s.action.span()).collect();
        let steps = raw.steps.into_iter().map(|s| l.step(s)).collect::<Result<Vec<_>>>()?;
        if let Some(last) = steps.iter().rfind(|s| s.after.is_none()) {
            if last.at > raw.scenario.duration.0 {
                return Err(l.err_at_key(
                    "duration",
                    format!(
                        "a step at {} is after the scenario's duration {}",
                        format_duration(last.at),
                        format_duration(raw.scenario.duration.0)
                    ),
                ));
            }
        }
        // [expect_inherent] names, per server, checks its [expect] entry lists.
        for (server, list) in &raw.expect_inherent {
            let plain = raw.expect.get(server.get_ref().as_str()).map(|l| l.get_ref());
            for c in list.get_ref() {
                if !plain.is_some_and(|p| p.iter().any(|x| x.get_ref() == c.get_ref())) {
                    return Err(l.err(
                        c.span(),
                        format!(
                            "[expect_inherent] names {:?} for {}, which its [expect] entry does not list: [expect] lists every check a server violates, [expect_inherent] those of them it violates only inherently",
                            c.get_ref(),
                            server.get_ref()
                        ),
                    ));
                }
            }
        }
        let expect = l.expect("[expect]", raw.expect)?;
        let expect_inherent = l.expect("[expect_inherent]", raw.expect_inherent)?;
        let plan = Plan {
            name: raw.scenario.name,
            description: raw.scenario.description,
            dialect,
            seed: Seed(raw.scenario.seed),
            duration: raw.scenario.duration.0,
            server: raw.server,
            network,
            deployment: raw.deployment,
            clients,
            steps,
            tools: l.tools.clone(),
            expect,
            expect_inherent,
            source: None,
        };
        // The checks above locate each problem exactly; this is the one
        // semantic check every plan passes (hand-built and shrunk ones too).
        plan.validate().map_err(|p| match p.step {
            Some(i) => l.err(step_spans[i].clone(), p.message),
            None => Error::scenario_at(path, text, None, p.message),
        })?;
        Ok(plan)
    }

    /// The client called `name`, if the plan has one.
    pub fn client(&self, name: &str) -> Option<&ClientSpec> {
        self.clients.iter().find(|c| c.name == name)
    }
}

/// What the loader knows while it reads a file from top to bottom: the
/// names defined so far, so that each use is checked against them and every
/// error points at the text that caused it.
struct Loader<'a> {
    path: &'a Path,
    text: &'a str,
    dialect: Dialect,
    names: BTreeSet<String>,
    labels: BTreeSet<String>,
    step_ids: Vec<String>,
    last_at: Duration,
    /// `[[tool]]`, in file order.
    tools: Vec<ToolSpec>,
    /// stateless-http: each `call` step's label, and its tool.
    calls: BTreeMap<String, String>,
}

/// The words for "needs dialect ...": the dialects whose steps include `kind`.
pub(super) fn dialects_with(kind: StepKind) -> String {
    let names: Vec<String> =
        Dialect::ALL.iter().filter(|d| d.step_kinds().contains(&kind)).map(|d| format!("{:?}", d.name())).collect();
    names.join(" or ")
}

impl Loader<'_> {
    fn tools(&mut self, raw: Vec<RawTool>) -> Result<()> {
        for t in raw {
            let name = t.name.get_ref().clone();
            if self.dialect.family() != Family::Stateless {
                return Err(self.err(
                    t.name.span(),
                    "[[tool]] needs dialect = \"stateless-http\" in [scenario] (the other dialects call the built-in `ask` tool)".into(),
                ));
            }
            if name.is_empty() || !name.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch)) {
                return Err(self.err(
                    t.name.span(),
                    format!("tool name {name:?} must be non-empty ASCII letters, digits, '-', '_' or '.'"),
                ));
            }
            if self.tools.iter().any(|x| x.name == name) {
                return Err(self.err(t.name.span(), format!("tool {name:?} is defined twice")));
            }
            let input = match t.input {
                None => Vec::new(),
                Some(m) => {
                    let span = m.span();
                    let methods = m.into_inner().into_vec();
                    if methods.is_empty() {
                        return Err(self.err(span, format!("tool {name:?}: input lists no method")));
                    }
                    if let Some(bad) = methods.iter().find(|m| !SERVER_REQUEST_METHODS.contains(&m.as_str())) {
                        return Err(self.err(
                            span,
                            format!(
                                "unknown input method {bad:?}{} (one of: {})",
                                hint(bad, SERVER_REQUEST_METHODS),
                                SERVER_REQUEST_METHODS.join(", ")
                            ),
                        ));
                    }
                    methods
                }
            };
            if t.progress_every.is_some_and(|d| d.0.is_zero()) {
                return Err(self.err(t.name.span(), format!("tool {name:?}: progress_every must be more than 0s")));
            }
            self.tools.push(ToolSpec {
                name,
                runs: t.runs.map_or(Duration::ZERO, |d| d.0),
                progress_every: t.progress_every.map(|d| d.0),
                input,
                once: t.once.unwrap_or(false),
                idempotent: t.idempotent.unwrap_or(false),
            });
        }
        Ok(())
    }

    /// A stateless call's label that an earlier `call` step made.
    fn call_label(&self, s: &RawStep, field: &Option<Spanned<String>>, name: &str) -> Result<String> {
        let Some(l) = field else {
            return Err(self.err(s.action.span(), format!("step `{}` needs `{name}`", s.action.get_ref())));
        };
        if !self.calls.contains_key(l.get_ref()) {
            return Err(self.err(
                l.span(),
                format!(
                    "{name} {:?} is not the label of an earlier `call` step{}",
                    l.get_ref(),
                    hint(l.get_ref(), self.calls.keys().map(String::as_str))
                ),
            ));
        }
        Ok(l.get_ref().clone())
    }

    fn err(&self, span: std::ops::Range<usize>, msg: String) -> Error {
        Error::scenario_at(self.path, self.text, Some(span), msg)
    }

    /// An error at the first `key =` line.
    fn err_at_key(&self, key: &str, msg: impl Into<String>) -> Error {
        Error::scenario_at(self.path, self.text, find_key(self.text, key), msg)
    }

    /// `[server]` and `[network]` values that the types alone do not rule out.
    fn network(&self, server: &ServerConfig, net: RawNetwork) -> Result<NetworkConfig> {
        if server.retention == 0 {
            return Err(self.err_at_key("retention", "[server] retention must be at least 1"));
        }
        let (latency_min, latency_max) = match net.latency {
            Latency::Fixed(d) => (d.0, d.0),
            Latency::Range(r) => (r.min.0, r.max.0),
        };
        if net.tick.0 < Duration::from_millis(1) || net.tick.0 > Duration::from_secs(1) {
            return Err(self.err_at_key("tick", "[network] tick must be between 1ms and 1s"));
        }
        if latency_min > latency_max {
            return Err(self.err_at_key("latency", "[network] latency: min is greater than max"));
        }
        Ok(NetworkConfig { tick: net.tick.0, latency_min, latency_max, half_open_lifetime: net.half_open_lifetime.0 })
    }

    /// `[deployment]`: a count of replicas the world can build, in a dialect it can build them for.
    fn deployment(&self, d: &Deployment) -> Result<()> {
        match d.problem(self.dialect) {
            // A key left at its default is not in the file: point at `replicas`.
            Some((key, why)) => {
                let key = if find_key(self.text, key).is_some() { key } else { "replicas" };
                Err(self.err_at_key(key, why))
            }
            None => Ok(()),
        }
    }

    fn clients(&mut self, raw: Vec<RawClient>, server: &ServerConfig) -> Result<Vec<ClientSpec>> {
        let mut clients = Vec::new();
        for c in raw {
            let name = c.name.get_ref().clone();
            if name.is_empty() || !name.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_') {
                return Err(self.err(
                    c.name.span(),
                    format!("client name {name:?} must be non-empty ASCII letters, digits, '-' or '_'"),
                ));
            }
            if name == "server" || name == "store" || name.starts_with("nat-") || name.starts_with("replica-") {
                return Err(
                    self.err(c.name.span(), format!("client name {name:?} is reserved for the simulation's own hosts"))
                );
            }
            if !self.names.insert(name.clone()) {
                return Err(self.err(c.name.span(), format!("client {name:?} is defined twice")));
            }
            // The principal travels in an HTTP header: visible ASCII, no spaces.
            if let Some(p) = &c.principal {
                let v = p.get_ref();
                if v.is_empty() || !v.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
                    return Err(self.err(
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
        Ok(clients)
    }

    fn step(&mut self, s: RawStep) -> Result<Step> {
        let (at, after) = self.timing(&s)?;
        let id = match &s.id {
            Some(id) if self.step_ids.contains(id.get_ref()) => {
                return Err(self.err(id.span(), format!("step id {:?} is used twice", id.get_ref())));
            }
            Some(id) => {
                self.step_ids.push(id.get_ref().clone());
                Some(id.get_ref().clone())
            }
            None => None,
        };
        let action = self.action(&s)?;
        self.only_fields_that_apply(&s, &action)?;
        Ok(Step { at, after, id, action, may_miss: s.may_miss })
    }

    /// `at` (in time order) or `after` (an event of an earlier step), not both.
    fn timing(&mut self, s: &RawStep) -> Result<(Duration, Option<After>)> {
        match (&s.at, &s.after) {
            (Some(_), Some(a)) => Err(self.err(a.span(), "a step has either `at` or `after`, not both".into())),
            (None, None) => Err(self.err(s.action.span(), "a step needs `at` (a time) or `after` (an event)".into())),
            (Some(at), None) => {
                if s.delay.is_some() {
                    return Err(self.err(at.span(), "`delay` goes with `after`, not with `at`".into()));
                }
                let t = at.get_ref().0;
                if t < self.last_at {
                    return Err(self.err(
                        at.span(),
                        format!(
                            "step at {} comes before the previous step at {}; steps must be in time order",
                            format_duration(t),
                            format_duration(self.last_at)
                        ),
                    ));
                }
                self.last_at = t;
                Ok((t, None))
            }
            (None, Some(a)) => {
                let trigger = self.trigger(a)?;
                Ok((Duration::ZERO, Some(After { trigger, delay: s.delay.map_or(Duration::ZERO, |d| d.0) })))
            }
        }
    }

    fn trigger(&self, a: &Spanned<RawTrigger>) -> Result<Trigger> {
        let known_label = |label: &String| -> Result<()> {
            if self.labels.contains(label) {
                return Ok(());
            }
            Err(self
                .err(a.span(), format!("trigger names label {label:?}, which no earlier server-request step issues")))
        };
        let known_client = |c: &String| -> Result<()> {
            if self.names.contains(c) {
                return Ok(());
            }
            let h = hint(c, self.names.iter().map(String::as_str));
            Err(self.err(a.span(), format!("trigger names unknown client {c:?}{h}")))
        };
        Ok(match a.get_ref().clone() {
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
                if !self.step_ids.contains(&step) {
                    let h = hint(&step, self.step_ids.iter().map(String::as_str));
                    return Err(self.err(
                        a.span(),
                        format!("trigger names step {step:?}, which is not the id of an earlier step{h}"),
                    ));
                }
                Trigger::Step { step }
            }
        })
    }

    /// A client field that names a defined client.
    fn client(&self, s: &RawStep, f: &Option<Spanned<String>>, field: &str) -> Result<String> {
        let Some(c) = f else {
            return Err(self.err(s.action.span(), format!("step `{}` needs `{field}`", s.action.get_ref())));
        };
        if !self.names.contains(c.get_ref()) {
            return Err(self.err(
                c.span(),
                format!(
                    "unknown client {:?}{} (defined: {})",
                    c.get_ref(),
                    hint(c.get_ref(), self.names.iter().map(String::as_str)),
                    self.names.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        Ok(c.get_ref().clone())
    }

    fn label(&self, s: &RawStep) -> Result<Spanned<String>> {
        s.label.clone().ok_or_else(|| self.err(s.action.span(), format!("step `{}` needs `label`", s.action.get_ref())))
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
