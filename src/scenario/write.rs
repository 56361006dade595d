//! Writing: a [`Plan`] back to scenario TOML that loads to the same plan.

use super::*;
use std::fmt::Write;

/// A TOML string.
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A duration as a TOML string ("1500ms", "2s").
fn d(d: Duration) -> String {
    q(&format_duration(d))
}

impl Plan {
    /// Writes the plan as a scenario file that loads back to the same plan.
    /// `header` lines become `#` comments at the top.
    pub fn to_toml(&self, header: &[String]) -> String {
        let mut out = String::new();
        for h in header {
            let _ = writeln!(out, "# {h}");
        }
        if !header.is_empty() {
            out.push('\n');
        }
        self.write_tables(&mut out);
        for c in &self.clients {
            let _ = writeln!(
                out,
                "[[client]]\nname = {}\nprincipal = {}\nthink_time = {}\nheartbeat_timeout = {}\nauto_answer = {}\n",
                q(&c.name),
                q(&c.principal),
                d(c.think_time),
                d(c.heartbeat_timeout),
                c.auto_answer
            );
        }
        for t in &self.tools {
            let _ = writeln!(out, "[[tool]]\nname = {}\nruns = {}", q(&t.name), d(t.runs));
            if let Some(p) = t.progress_every {
                let _ = writeln!(out, "progress_every = {}", d(p));
            }
            match t.input.as_slice() {
                [] => {}
                [m] => {
                    let _ = writeln!(out, "input = {}", q(m));
                }
                ms => {
                    let list: Vec<String> = ms.iter().map(|m| q(m)).collect();
                    let _ = writeln!(out, "input = [{}]", list.join(", "));
                }
            }
            let _ = writeln!(out, "once = {}\nidempotent = {}\n", t.once, t.idempotent);
        }
        for step in &self.steps {
            write_step(&mut out, step);
        }
        if !self.expect.is_empty() {
            out.push_str("[expect]\n");
            for (server, checks) in &self.expect {
                let list: Vec<String> = checks.iter().map(|c| q(c)).collect();
                let _ = writeln!(out, "{server} = [{}]", list.join(", "));
            }
        }
        if !self.expect_inherent.is_empty() {
            out.push_str("\n[expect_inherent]\n");
            for (server, checks) in &self.expect_inherent {
                let list: Vec<String> = checks.iter().map(|c| q(c)).collect();
                let _ = writeln!(out, "{server} = [{}]", list.join(", "));
            }
        }
        out
    }

    /// `[scenario]`, `[server]` and `[network]`.
    fn write_tables(&self, out: &mut String) {
        let _ = writeln!(out, "[scenario]\nname = {}", q(&self.name));
        if !self.description.is_empty() {
            let _ = writeln!(out, "description = {}", q(&self.description));
        }
        let dialect = self.dialect.name();
        let _ = writeln!(out, "dialect = {}\nseed = {}\nduration = {}\n", q(dialect), self.seed.0, d(self.duration));
        let s = &self.server;
        let dflt = ServerConfig::default();
        if self.dialect.has_sessions() {
            let _ = writeln!(
                out,
                "[server]\nfirst_event_id = {}\nretention = {}\nheartbeat = {}\nfence_grace = {}\nrequest_timeout = {}\n",
                s.first_event_id,
                s.retention,
                d(s.heartbeat.0),
                d(s.fence_grace.0),
                d(s.request_timeout.0)
            );
        } else {
            // stateless-http has no event ids, replay window or fence: only
            // what differs from the defaults of those is written.
            let _ = writeln!(
                out,
                "[server]\nheartbeat = {}\nrequest_timeout = {}",
                d(s.heartbeat.0),
                d(s.request_timeout.0)
            );
            if s.first_event_id != dflt.first_event_id {
                let _ = writeln!(out, "first_event_id = {}", s.first_event_id);
            }
            if s.retention != dflt.retention {
                let _ = writeln!(out, "retention = {}", s.retention);
            }
            if s.fence_grace != dflt.fence_grace {
                let _ = writeln!(out, "fence_grace = {}", d(s.fence_grace.0));
            }
            out.push('\n');
        }
        if !s.fence_delay.0.is_zero() {
            // Before the blank line the writer above ends the table with.
            out.pop();
            let _ = writeln!(out, "fence_delay = {}\n", d(s.fence_delay.0));
        }
        if !s.authenticate {
            out.push_str("authenticate = false\n");
        }
        if s.state_lifetime != ServerConfig::default().state_lifetime {
            out.pop();
            let _ = writeln!(out, "state_lifetime = {}\n", d(s.state_lifetime.0));
        }
        let n = &self.network;
        let latency = if n.latency_min == n.latency_max {
            d(n.latency_min)
        } else {
            format!("{{ min = {}, max = {} }}", d(n.latency_min), d(n.latency_max))
        };
        let _ = writeln!(
            out,
            "[network]\nlatency = {latency}\nhalf_open_lifetime = {}\ntick = {}\n",
            d(n.half_open_lifetime),
            d(n.tick)
        );
        if !self.deployment.is_single() {
            let _ = writeln!(
                out,
                "[deployment]\nreplicas = {}\nrouting = {}\nstore = {}\n",
                self.deployment.replicas,
                q(self.deployment.routing.name()),
                q(self.deployment.store.name())
            );
        }
    }
}

/// One `[[step]]` table: when (`at`, or `after` a trigger), then what.
fn write_step(out: &mut String, step: &Step) {
    out.push_str("[[step]]\n");
    if let Some(id) = &step.id {
        let _ = writeln!(out, "id = {}", q(id));
    }
    match &step.after {
        None => {
            let _ = writeln!(out, "at = {}", d(step.at));
        }
        Some(after) => {
            let _ = writeln!(out, "after = {}", trigger_toml(&after.trigger));
            if !after.delay.is_zero() {
                let _ = writeln!(out, "delay = {}", d(after.delay));
            }
        }
    }
    let _ = writeln!(out, "do = {}", q(step.action.name()));
    if step.may_miss {
        out.push_str("may_miss = true\n");
    }
    write_fields(out, &step.action);
    out.push('\n');
}

/// The fields of a step's `do`, one `key = value` line each.
fn write_fields(out: &mut String, action: &Action) {
    match action {
        Action::Connect { client }
        | Action::Rebind { client }
        | Action::Sever { client }
        | Action::Reset { client }
        | Action::EndSession { client }
        | Action::CrashClient { client } => {
            let _ = writeln!(out, "client = {}", q(client));
        }
        Action::ServerRequest { client, method, label, .. } | Action::CallTool { client, method, label } => {
            let _ = writeln!(out, "client = {}\nmethod = {}\nlabel = {}", q(client), q(method), q(label));
            if let Action::ServerRequest { reissuable: false, .. } = action {
                let _ = writeln!(out, "reissuable = false");
            }
        }
        Action::Notify { client, count } => {
            let _ = writeln!(out, "client = {}\ncount = {count}", q(client));
        }
        Action::EnableTool { client, tool } => {
            let _ = writeln!(out, "client = {}\ntool = {}", q(client), q(tool));
        }
        Action::Answer { client, label } => {
            let _ = writeln!(out, "client = {}\nlabel = {}", q(client), q(label));
        }
        Action::Resume { client, last_event_id, expect } => {
            let _ = writeln!(out, "client = {}\nlast_event_id = {}", q(client), last_event_id_toml(last_event_id));
            if let Some(e) = expect {
                let _ = writeln!(out, "expect = {}", q(e.word()));
            }
        }
        Action::StealToken { from, to, credential } => {
            let _ = writeln!(out, "from = {}\nto = {}\ncredential = {credential}", q(from), q(to));
        }
        Action::Wait | Action::RestartServer | Action::ChangeTools => {}
        Action::RestartReplica { replica } | Action::CrashReplica { replica } | Action::Drain { replica } => {
            let _ = writeln!(out, "replica = {replica}");
        }
        Action::Partition { replica, lasts } => {
            let _ = writeln!(out, "replica = {replica}");
            if let Some(l) = lasts {
                let _ = writeln!(out, "for = {}", d(*l));
            }
        }
        Action::Listen { client } => {
            let _ = writeln!(out, "client = {}", q(client));
        }
        Action::Call { client, tool, label, decline } => {
            let _ = writeln!(out, "client = {}\ntool = {}\nlabel = {}", q(client), q(tool), q(label));
            if *decline {
                let _ = writeln!(out, "decline = true");
            }
        }
        Action::StealRequestState { from, to, label, credential } => {
            let _ =
                writeln!(out, "from = {}\nto = {}\nlabel = {}\ncredential = {credential}", q(from), q(to), q(label));
        }
        Action::TamperRequestState { client, label, how } => {
            let _ = writeln!(out, "client = {}\nlabel = {}\nhow = {}", q(client), q(label), q(how.word()));
            if let Tamper::Move { onto, .. } = how {
                let _ = writeln!(out, "onto = {}", q(onto));
            }
        }
        Action::ReplayRequestState { client, label }
        | Action::SeverCall { client, label }
        | Action::ResetCall { client, label } => {
            let _ = writeln!(out, "client = {}\nlabel = {}", q(client), q(label));
        }
    }
}

/// A step's `after` trigger as an inline table.
fn trigger_toml(trigger: &Trigger) -> String {
    match trigger {
        Trigger::Delivered { label, client: Some(c) } => {
            format!("{{ event = \"delivered\", label = {}, client = {} }}", q(label), q(c))
        }
        Trigger::Delivered { label, client: None } => format!("{{ event = \"delivered\", label = {} }}", q(label)),
        Trigger::Answered { label } => format!("{{ event = \"answered\", label = {} }}", q(label)),
        Trigger::Accepted { client } => format!("{{ event = \"accepted\", client = {} }}", q(client)),
        Trigger::Step { step } => format!("{{ event = \"step\", step = {} }}", q(step)),
    }
}

/// A resume's `last_event_id` as TOML.
fn last_event_id_toml(id: &LastEventId) -> String {
    match id {
        LastEventId::LastSeen => q("last-seen"),
        LastEventId::None => q("none"),
        LastEventId::Id(n) => n.to_string(),
        LastEventId::Raw(s) => format!("{{ raw = {} }}", q(s)),
        LastEventId::LastSeenPlus(k) => format!("{{ last_seen_plus = {k} }}"),
        LastEventId::SeenBefore(label) => format!("{{ seen_before = {} }}", q(label)),
        LastEventId::Seen { client: by, nth, stream: SeenOn::Uplink } => {
            format!("{{ seen_by = {}, nth = {nth} }}", q(by))
        }
        LastEventId::Seen { client: by, nth, stream: SeenOn::Call } => {
            format!("{{ seen_by = {}, nth = {nth}, stream = \"call\" }}", q(by))
        }
    }
}

#[cfg(test)]
mod to_toml_tests {
    use super::*;

    #[test]
    fn bundled_scenarios_round_trip_through_to_toml() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let twins = std::fs::read_dir(dir.join("streamable-http")).unwrap();
        let stateless = std::fs::read_dir(dir.join("stateless-http")).unwrap();
        let replicas = std::fs::read_dir(dir.join("replicas")).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap().chain(twins).chain(stateless).chain(replicas) {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "toml") {
                continue;
            }
            let plan = Plan::load(&path).unwrap();
            let text = plan.to_toml(&["a header".into()]);
            let back = Plan::from_toml_str(&text, "round-trip.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(Plan { source: plan.source.clone(), ..back }, plan, "{}", path.display());
        }
    }
}
