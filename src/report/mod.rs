//! Reports: what happened in a run, for a person to read.
//!
//! The text report is a condensed timeline: steps, what each client saw
//! (consecutive SSE events on one connection collapse into one line),
//! resumptions accepted or refused, faults, every server write that carried
//! events into a dropped mapping, and what became of each server request.
//! POST traffic and heartbeat-only writes are summarised, not listed.

mod formats;
mod stateless_words;
mod timeline;
mod words;

pub use formats::{colorize, json, junit, junit_with_errors, Errored, Judged};
pub use timeline::html as timeline_html;

use crate::check::{Expectation, Status, Verdict};
use crate::scenario::Dialect;
use crate::trace::Run;
use crate::trace::{describe_rpc, outcome_word, ConnId, Event, Outcome, Purpose, SimTime, What};
use crate::wire::jsonrpc::{RpcKind, RpcSummary};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The text report of one run: timeline, verdicts with evidence, expectation.
pub fn text(run: &Run, verdicts: &[Verdict], expectation: Option<&Expectation>) -> String {
    let mut out = String::new();
    match &run.live {
        None => {
            let _ = writeln!(
                out,
                "{} · server {} · seed {} · {} simulated",
                run.scenario,
                run.server,
                run.seed,
                crate::scenario::format_duration(run.duration)
            );
        }
        Some(live) => {
            let _ = writeln!(
                out,
                "{} · server {} · LIVE · {} of scenario time at time scale {} · not reproducible byte for byte",
                run.scenario,
                run.server,
                crate::scenario::format_duration(run.duration),
                live.time_scale
            );
        }
    }
    let unreliable = run.live.as_ref().and_then(|l| l.timing_words());
    if let Some(words) = &unreliable {
        let _ = writeln!(out, "{words}");
    } else if let Some(words) = run.live.as_ref().and_then(|l| l.replay_words()) {
        let _ = writeln!(out, "{words}");
    }
    for line in timeline(run) {
        let _ = writeln!(out, "  {:>10}  {}", fmt_time(line.0), line.1);
    }
    let _ = writeln!(out, "checks:");
    out.push_str(&verdicts_text(run, verdicts));
    if let Some(live) = &run.live {
        for note in &live.notes {
            let _ = writeln!(out, "live: {note}");
        }
    }
    let _ = writeln!(out, "outcome: {}", outcome(run));
    // A step that acted on nothing: the run did not play what the scenario
    // describes there, and says so on a line of its own.
    for line in missed_lines(run) {
        let _ = writeln!(out, "{line}");
    }
    match (expectation, &unreliable) {
        (Some(_), Some(_)) => {
            let _ = writeln!(out, "expectation not judged: timing unreliable (see the first line)");
        }
        (Some(e), None) => {
            let _ = writeln!(out, "{}", expectation_line(&run.server, e));
        }
        (None, _) => {}
    }
    let _ = writeln!(out, "repro: {}", run.repro());
    out
}

/// One line per check, and each violation with its evidence.
pub fn verdicts_text(run: &Run, verdicts: &[Verdict]) -> String {
    const MAX_EVIDENCE: usize = 6;
    let mut out = String::new();
    for v in verdicts {
        match &v.status {
            Status::Passed => {
                let _ = writeln!(out, "  {:<24} passed", v.check);
            }
            Status::NotApplicable { why } => {
                let _ = writeln!(out, "  {:<24} not applicable: {why}", v.check);
            }
            Status::Violated { violations } => {
                for (i, x) in violations.iter().enumerate() {
                    let name = if i == 0 { v.check.as_str() } else { "" };
                    // A finding no server could prevent reads INHERENT, never
                    // as the server's failure.
                    let word = if x.inherent { "INHERENT" } else { "VIOLATED" };
                    let _ = writeln!(out, "  {name:<24} {word} at {}: {}", x.t, x.headline());
                    for seq in x.evidence.iter().take(MAX_EVIDENCE) {
                        if let Some(e) = run.trace.events.get(*seq as usize) {
                            let _ =
                                writeln!(out, "  {:<24}   #{seq} {:>10}  {}", "", fmt_time(e.t_us), describe(&e.what));
                        }
                    }
                    if x.evidence.len() > MAX_EVIDENCE {
                        let _ = writeln!(out, "  {:<24}   (+{} more)", "", x.evidence.len() - MAX_EVIDENCE);
                    }
                }
            }
        }
    }
    out
}

/// The report's lines for the steps of a run that acted on nothing.
pub fn missed_lines(run: &Run) -> Vec<String> {
    crate::trace::step_misses(&run.trace)
        .iter()
        .map(|m| format!("MISSED: step {} ({}) at {} acted on nothing: {}", m.index, m.action, fmt_time(m.t), m.why))
        .collect()
}

/// "expected: naive violates [a, b]: met" (or NOT MET with what happened).
pub fn expectation_line(server: &str, e: &Expectation) -> String {
    let list = |v: &[String]| if v.is_empty() { "nothing".to_string() } else { v.join(", ") };
    // What a server violated, its inherent findings apart: "a, b; inherent: c".
    let plain_and_inherent = |all: &[String], inherent: &[String]| {
        let plain: Vec<String> = all.iter().filter(|c| !inherent.contains(c)).cloned().collect();
        match inherent.is_empty() {
            true => list(&plain),
            false => format!("{} (inherent only: {})", list(&plain), inherent.join(", ")),
        }
    };
    if let Some(why) = &e.cut {
        return format!(
            "NOT JUDGED IN FULL: the run was cut short ({why}); judged up to there, {server} violated {}, and a run cut short never counts as expected",
            list(&e.violated)
        );
    }
    if e.gate {
        let new: Vec<String> = e.violated.iter().filter(|c| !e.expected.contains(c)).cloned().collect();
        if e.met && e.expected.is_empty() {
            return format!("gate passed: {server} violates nothing that is not inherent");
        }
        if e.met {
            return format!("gate passed: {server} violates only what the baseline accepts ({})", list(&e.expected));
        }
        let mut why = Vec::new();
        if !new.is_empty() {
            why.push(format!("{server} violated {} (not in the baseline)", new.join(", ")));
        }
        if !e.stale.is_empty() {
            why.push(format!(
                "stale baseline entries: {} no longer fail{} (remove them)",
                e.stale.join(", "),
                if e.stale.len() == 1 { "s" } else { "" }
            ));
        }
        if !e.missed.is_empty() {
            why.push(format!(
                "{} step(s) acted on nothing, so the run did not play what the scenario describes",
                e.missed.len()
            ));
        }
        return format!("GATE FAILED: {}", why.join("; "));
    }
    if e.met {
        return format!("expectation met: {server} violates {}", plain_and_inherent(&e.expected, &e.expected_inherent));
    }
    let mut why = Vec::new();
    let (mut a, mut b) = (e.expected.clone(), e.violated.clone());
    a.sort();
    b.sort();
    let (mut ai, mut bi) = (e.expected_inherent.clone(), e.inherent.clone());
    ai.sort();
    bi.sort();
    if a != b || ai != bi {
        why.push(format!(
            "{server} was expected to violate {}, but violated {}",
            plain_and_inherent(&e.expected, &e.expected_inherent),
            plain_and_inherent(&e.violated, &e.inherent)
        ));
    }
    if !e.missed.is_empty() {
        why.push(format!(
            "{} step(s) acted on nothing, so the run did not play what the scenario describes (a step that may miss says `may_miss = true`)",
            e.missed.len()
        ));
    }
    format!("EXPECTATION NOT MET: {}", why.join("; "))
}

/// " on replica N", for an application report that names its replica.
fn on(replica: &Option<u32>) -> String {
    replica.map(|r| format!(" on replica {r}")).unwrap_or_default()
}

fn fmt_time(t: SimTime) -> String {
    format!("{}.{:03} s", t.0 / 1_000_000, (t.0 % 1_000_000) / 1000)
}

struct Burst {
    t: SimTime,
    client: String,
    conn: ConnId,
    first: Option<String>,
    last: Option<String>,
    count: usize,
    notable: Vec<String>,
}

impl Burst {
    fn line(&self) -> String {
        let ids = match (&self.first, &self.last) {
            (Some(a), Some(b)) if a != b => format!("events {a}–{b}"),
            (Some(a), _) => format!("event {a}"),
            _ => "an event without id".into(),
        };
        let n = if self.count > 1 { format!(" ({} events)", self.count) } else { String::new() };
        let notable = if self.notable.is_empty() { String::new() } else { format!(": {}", self.notable.join(", ")) };
        format!("{} received {ids}{n} on conn {}{notable}", self.client, self.conn)
    }
}

/// How a response reads in the timeline, given what its connection was
/// for and the Last-Event-ID its GET presented (POST answers are not shown).
fn response_line(
    conn_info: Option<&(Purpose, Option<String>)>,
    client: &str,
    conn: ConnId,
    status: u16,
    what: &What,
) -> Option<String> {
    match conn_info {
        Some((Purpose::Uplink, Some(lei))) if status == 200 => {
            Some(format!("{client}'s resumption from {lei} answered 200 on conn {conn}"))
        }
        Some((Purpose::Uplink, None)) if status == 200 => Some(format!("{client} opened an uplink on conn {conn}")),
        Some((Purpose::Call, Some(lei))) if status == 200 => {
            Some(format!("{client}'s resumption of a tool call's stream from {lei} answered 200 on conn {conn}"))
        }
        Some((Purpose::Call, None))
            if status == 200
                && matches!(what, What::HttpResponse { content_type: Some(ct), .. } if ct.starts_with("application/json")) =>
        {
            Some(format!("{client}'s tool call got a JSON response on conn {conn}"))
        }
        Some((Purpose::Call, None)) if status == 200 => {
            Some(format!("{client}'s tool call got its stream on conn {conn}"))
        }
        Some((Purpose::Post, _)) if status < 300 => None,
        _ => Some(describe(what)),
    }
}

impl Burst {
    /// Adds one SSE event to the burst in progress if it is on the same
    /// connection; else starts a new burst and returns the finished one.
    fn extend_or_start(
        burst: &mut Option<Burst>,
        t: SimTime,
        client: &str,
        conn: ConnId,
        id: &Option<String>,
        event: &str,
        rpc: &Option<RpcSummary>,
    ) -> Option<Burst> {
        let notable = match rpc {
            Some(RpcSummary { kind: RpcKind::Notification, .. }) => None,
            _ => Some(describe_rpc(rpc, event)),
        };
        if let Some(b) = burst.as_mut().filter(|b| b.client == client && b.conn == conn) {
            b.count += 1;
            if id.is_some() {
                b.last = id.clone();
            }
            b.notable.extend(notable);
            return None;
        }
        let done = burst.take();
        *burst = Some(Burst {
            t,
            client: client.to_string(),
            conn,
            first: id.clone(),
            last: id.clone(),
            count: 1,
            notable: notable.into_iter().collect(),
        });
        done
    }
}

fn timeline(run: &Run) -> Vec<(SimTime, String)> {
    let mut lines: Vec<(SimTime, String)> = Vec::new();
    let mut burst: Option<Burst> = None;
    // conn → (client, purpose, GET path's Last-Event-ID) so responses can be told apart.
    let mut conns: BTreeMap<(String, ConnId), (Purpose, Option<String>)> = BTreeMap::new();
    let mut heartbeat_only = 0usize;
    for e in run.trace.iter() {
        let Event { t_us: t, what, .. } = e;
        let t = *t;
        if let What::SseEvent { client, conn, id, event, rpc, .. } = what {
            if let Some(done) = Burst::extend_or_start(&mut burst, t, client, *conn, id, event, rpc) {
                lines.push((done.t, done.line()));
            }
            continue;
        }
        if let Some(b) = burst.take() {
            lines.push((b.t, b.line()));
        }
        let line = match what {
            What::Connect { client, conn, purpose, .. } => {
                conns.insert((client.clone(), *conn), (*purpose, None));
                None
            }
            What::HttpRequest { client, conn, method, last_event_id, .. } => {
                if let (Some(c), true) = (conns.get_mut(&(client.clone(), *conn)), method == "GET") {
                    c.1 = last_event_id.clone();
                }
                None
            }
            What::HttpResponse { client, conn, status, .. } => {
                response_line(conns.get(&(client.clone(), *conn)), client, *conn, *status, what)
            }
            What::DroppedWrite { events, response: None, .. } if events.is_empty() => {
                heartbeat_only += 1;
                None
            }
            // The fence is what keeps a resumption safe: show it (an
            // explanation from inside the reference engine, never evidence).
            What::ServerNote { note, .. } if note.contains("fenced before the new writer") => Some(describe(what)),
            What::RunStarted { .. }
            | What::ClientJoined { .. }
            | What::MappingClosed { .. }
            | What::MappingOpened { .. }
            | What::Notified { .. }
            | What::ServerNote { .. } => None,
            _ => Some(describe(what)),
        };
        if let Some(l) = line {
            lines.push((t, l));
        }
    }
    if let Some(b) = burst.take() {
        lines.push((b.t, b.line()));
    }
    if heartbeat_only > 0 {
        let t = lines.last().map_or(SimTime(0), |l| l.0);
        lines.push((t, format!("(and {heartbeat_only} heartbeat-only writes into dropped mappings)")));
    }
    lines
}

/// One line: what became of each server request (of each call, in
/// stateless-http), and the dropped writes.
pub fn outcome(run: &Run) -> String {
    // The report layer's one choice of dialect (docs/design.md §7).
    match run.trace.dialect() {
        Dialect::LegacySse | Dialect::StreamableHttp => stateful_outcome(run),
        Dialect::StatelessHttp => stateless_outcome(run),
    }
}

/// [`outcome`] of a run with sessions.
fn stateful_outcome(run: &Run) -> String {
    let mut last: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut dropped_with_events = 0;
    let mut responses = 0;
    for e in run.trace.iter() {
        match &e.what {
            What::RequestIssued { label, .. } if !order.contains(label) => {
                order.push(label.clone());
            }
            What::RequestOutcome { label, outcome, .. } => {
                last.insert(label.clone(), *outcome);
            }
            What::DroppedWrite { events, .. } if !events.is_empty() => dropped_with_events += 1,
            What::DroppedWrite { response: Some(_), .. } => responses += 1,
            _ => {}
        }
    }
    let reqs: Vec<String> = order
        .iter()
        .map(|l| format!("{l} {}", last.get(l).map_or("unresolved at the end", |o| outcome_word(*o))))
        .collect();
    let reqs = if reqs.is_empty() { "no server requests".to_string() } else { reqs.join(", ") };
    format!(
        "{reqs}{}; {dropped_with_events} write(s) carried events into dropped mappings{}",
        unanswered_words(run),
        responses_words(responses)
    )
}

/// The requests the clients sent whose response never came, if any: a
/// tool call whose result was lost, an `initialize` never answered.
fn unanswered_words(run: &Run) -> String {
    use crate::check::observe::{Fate, Observed};
    let o = Observed::new(&run.trace);
    let lost: Vec<String> = o
        .conns
        .values()
        .filter_map(|c| {
            let sent = c.sent.as_ref()?;
            let what = match sent.call.as_deref() {
                Some(call) => format!("{}'s tools/call for {call}", c.client),
                None => format!("{}'s {} (id {})", c.client, sent.method, sent.id),
            };
            match o.fate(c)? {
                Fate::Lost(t, _, why) => Some(format!("{what} lost at {t} ({why})")),
                Fate::Pending if sent.call.is_some() => Some(format!("{what} still unanswered at the end")),
                _ => None,
            }
        })
        .collect();
    if lost.is_empty() {
        String::new()
    } else {
        format!("; {}", lost.join(", "))
    }
}

/// [`outcome`] of a stateless-http run: each call, and the executions.
fn stateless_outcome(run: &Run) -> String {
    use crate::trace::stateless::{CallEnd, ExecStep};
    let mut calls: Vec<(String, usize, Option<&'static str>)> = Vec::new();
    let (mut execs, mut effects, mut cancelled, mut dropped, mut responses) = (0, 0, 0, 0, 0);
    for e in run.trace.iter() {
        match &e.what {
            What::CallSent { client, call, .. } => {
                let key = format!("{client}/{call}");
                match calls.iter_mut().find(|c| c.0 == key) {
                    // A new attempt: what became of the call is its answer, if any.
                    Some(c) => {
                        c.1 += 1;
                        c.2 = None;
                    }
                    None => calls.push((key, 1, None)),
                }
            }
            What::CallEnded { client, call, end, .. } => {
                let key = format!("{client}/{call}");
                if let Some(c) = calls.iter_mut().find(|c| c.0 == key) {
                    c.2 = Some(match end {
                        CallEnd::Complete { .. } => "completed",
                        CallEnd::InputRequired { .. } => "asked for input",
                        CallEnd::Error { .. } => "refused",
                        CallEnd::Status { .. } => "failed (HTTP)",
                        CallEnd::Lost { .. } => "lost",
                        CallEnd::Garbled { .. } => "unreadable",
                    });
                }
            }
            What::Execution { step, .. } => match step {
                ExecStep::Started => execs += 1,
                ExecStep::Effect => effects += 1,
                ExecStep::Cancelled => cancelled += 1,
                ExecStep::Completed => {}
            },
            What::DroppedWrite { events, .. } if !events.is_empty() => dropped += 1,
            What::DroppedWrite { response: Some(_), .. } => responses += 1,
            _ => {}
        }
    }
    let calls: Vec<String> = calls
        .iter()
        .map(|(k, n, end)| format!("{k} {} ({n} request(s))", end.unwrap_or("unanswered at the end")))
        .collect();
    let calls = if calls.is_empty() { "no calls".to_string() } else { calls.join(", ") };
    format!(
        "{calls}; {execs} execution(s), {effects} side effect(s), {cancelled} cancelled; {dropped} write(s) carried events into dropped mappings{}",
        responses_words(responses)
    )
}

/// The outcome's words for writes into dropped mappings that carried a
/// whole response (a JSON response, not an event stream): none, nothing.
fn responses_words(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(", {n} carried a whole response (not an event stream)")
    }
}

/// One event in words (used for timelines and violation evidence).
pub fn describe(what: &What) -> String {
    match what {
        What::RunStarted { scenario, server, seed, .. } => format!("run of {scenario} on {server}, seed {seed}"),
        What::ClientJoined { client, principal, .. } => format!("client {client} (principal {principal})"),
        What::Step { detail, .. } => format!("step: {detail}"),
        What::StepMissed { index, action, why } => format!("step {index} ({action}) acted on nothing: {why}"),
        What::Connect { client, conn, port, purpose } => {
            format!("{client} opened conn {conn} (port {port}, {purpose:?})")
        }
        What::ConnectFailed { client, conn, error } => format!("{client} could not connect (conn {conn}): {error}"),
        What::HttpRequest { client, conn, method, path, last_event_id, credential, .. } => format!(
            "{client} sent {method} {path} on conn {conn}{}{}",
            last_event_id.as_ref().map(|l| format!(" with Last-Event-ID {l}")).unwrap_or_default(),
            credential.as_ref().map(|p| format!(", presenting principal {p}'s credential")).unwrap_or_default()
        ),
        What::HttpResponse { client, conn, status, .. } => format!("{client} got HTTP {status} on conn {conn}"),
        What::SseEvent { client, conn, id, event, rpc, .. } => format!(
            "{client} received event {} on conn {conn}: {}",
            id.as_deref().unwrap_or("-"),
            describe_rpc(rpc, event)
        ),
        What::UplinkEnded { client, conn, reason } => format!("{client}'s conn {conn} ended: {reason}"),
        What::ProtocolError { client, conn, what, .. } => format!("{client}'s conn {conn}: protocol error: {what}"),
        What::UplinkSilent { client, conn, silent_ms } => {
            format!("{client} gave up on silent conn {conn} after {:.1} s", *silent_ms as f64 / 1000.0)
        }
        What::SessionToken { client, token, .. } => format!("{client} holds session token {token}"),
        What::Answer { client, id, status, .. } => {
            format!("{client} answered {id} ({})", status.map_or("no response".to_string(), |s| format!("HTTP {s}")))
        }
        What::Abandoned { client, id, why } => format!("{client} abandons {id}: {why}"),
        What::Rejected { client, conn, how } => format!("{client}'s resumption refused on conn {conn}: {how}"),
        What::Reinitialize { client, why } => format!("{client} re-initializes: {why}"),
        What::TokenStolen { from, to, credential } => {
            format!("{to} now holds {from}'s session token{}", if *credential { " and credential" } else { "" })
        }
        What::ClientCrashed { client } => format!("{client} crashed"),
        What::ToolEnableEnded { client, conn, tool, enabled } => match enabled {
            Some(true) => format!("{client}'s enable_tool call on conn {conn}: the server enabled {tool}"),
            Some(false) => format!("{client}'s enable_tool call on conn {conn}: refused ({tool} not enabled)"),
            None => format!("{client}'s enable_tool call on conn {conn} got no answer: {tool} may be enabled"),
        },
        What::DeploymentStarted { replicas, routing, store, .. } => {
            let store = if store == "shared" { "one shared store" } else { "a store each" };
            format!("deployment: {replicas} replicas behind a balancer routing {routing}, with {store}")
        }
        What::StorePartitioned { replica } => format!("replica {replica} is cut from the store"),
        What::StoreHealed { replica } => format!("replica {replica}'s link to the store is back"),
        What::ServerBack { replicas } => {
            let (who, it) = match replicas[..] {
                [] => ("the server process is".to_string(), "it"),
                [r] => (format!("replica {r}'s process is"), "it"),
                _ => (
                    format!(
                        "the processes of replicas {} are",
                        replicas.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
                    ),
                    "them",
                ),
            };
            format!("{who} back after the restart (new connections waited for {it} at the NATs)")
        }
        What::ReplicaCrashed { replica, out_after_us } => format!(
            "replica {replica} crashed; the balancer's health check takes it out of rotation {} later",
            crate::scenario::format_duration(std::time::Duration::from_micros(*out_after_us))
        ),
        What::ReplicaDrained { replica } => {
            format!("replica {replica} is drained: the balancer sends it no new connection")
        }
        What::Routed { client, up_port, replica, routing, source } => {
            let from = source.as_ref().map_or_else(|| format!("port {up_port}"), |a| format!("{a}:{up_port}"));
            format!("balancer: {client}'s connection from {from} → replica {replica} ({routing})")
        }
        What::MappingOpened { client, mapping, down_port, up_port } => {
            format!("nat-{client}: mapping {mapping} opened ({down_port} → server from port {up_port})")
        }
        What::MappingDropped { client, mapping, fault, .. } => {
            format!("nat-{client}: mapping {mapping} dropped silently ({fault})")
        }
        What::DroppedWrite { client, mapping, bytes, events, response, closing } => {
            if *closing {
                return format!(
                    "nat-{client}: server wrote {bytes} bytes into dropped mapping {mapping}: the end of its response (it closed the stream)"
                );
            }
            let mut what: Vec<String> = events
                .iter()
                .map(|ev| format!("{} {}", ev.id.as_deref().unwrap_or("-"), describe_rpc(&ev.rpc, &ev.event)))
                .collect();
            what.extend(response.clone());
            let what = if what.is_empty() { "no event (heartbeats)".to_string() } else { what.join(", ") };
            format!("nat-{client}: server wrote {bytes} bytes into dropped mapping {mapping}: {what}")
        }
        What::MappingReset { client, mapping, why, .. } => format!("nat-{client}: mapping {mapping} reset ({why})"),
        What::MappingClosed { client, mapping, by } => format!("nat-{client}: mapping {mapping} closed by the {by}"),
        What::RequestIssued { label, method, event_id, client, .. } => format!(
            "app: {label} ({method}) issued on {client}'s session{}",
            event_id.as_ref().map(|e| format!(" as event {e}")).unwrap_or_default()
        ),
        What::RequestOutcome { label, outcome, detail, .. } => {
            format!("app: {label} {}: {detail}", outcome_word(*outcome))
        }
        What::ServerStopped { why } => why.clone(),
        What::RunCut { why } => format!("the run was cut short here: {why}; the checks judge only up to this moment"),
        What::AppError { client, error } => format!("app error ({client}): {error}"),
        What::Notified { client, event_ids, .. } => {
            format!("app: notified {client}'s session as events {}", event_ids.join(", "))
        }
        What::ServerNote { session, note, replica, .. } => format!("server{} ({session}): {note}", on(replica)),
        What::CallSent { client, conn, call, tool, id, attempt, state, credential, answers } => {
            use crate::trace::stateless::{Attempt, StateHow};
            let why = match attempt {
                Attempt::First => "calls",
                Attempt::Retry => "retries (input responses)",
                Attempt::Reissue => "re-issues",
                Attempt::Presented => "presents state on",
            };
            let st = state.as_ref().map_or(String::new(), |p| match &p.how {
                StateHow::AsReceived => format!(" with requestState {}", p.fp),
                StateHow::Stolen { from } => format!(" with {from}'s requestState {}", p.fp),
                StateHow::Flipped => format!(" with an altered requestState {}", p.fp),
                StateHow::Truncated => format!(" with a truncated requestState {}", p.fp),
                StateHow::Moved { from_call } => format!(" with the requestState of {from_call} ({})", p.fp),
                StateHow::Replayed => format!(" with a spent round's requestState {}", p.fp),
            });
            let cred =
                credential.as_ref().map(|p| format!(", presenting principal {p}'s credential")).unwrap_or_default();
            let answered: Vec<String> = answers
                .iter()
                .map(|a| if a.declined { format!("{} (declined)", a.key) } else { a.key.clone() })
                .collect();
            let answering =
                if answered.is_empty() { String::new() } else { format!(", answering {}", answered.join(", ")) };
            format!("{client} {why} {tool} ({call}) as request {id} on conn {conn}{st}{cred}{answering}")
        }
        What::CallEnded { client, conn, call, id, end } => {
            use crate::trace::stateless::CallEnd;
            let how = match end {
                CallEnd::Complete { is_error: false, .. } => "got the result".to_string(),
                CallEnd::Complete { is_error: true, .. } => "got an error result".to_string(),
                CallEnd::InputRequired { requests, .. } if requests.is_empty() => {
                    "was answered input_required with no inputRequests".to_string()
                }
                CallEnd::InputRequired { requests, .. } => {
                    let asked: Vec<String> = requests.iter().map(|r| format!("{} ({})", r.key, r.method)).collect();
                    format!("was asked for input (input_required: {})", asked.join(", "))
                }
                CallEnd::Error { code, message } => format!("got JSON-RPC error {code} ({message})"),
                CallEnd::Status { status } => format!("got HTTP {status}"),
                CallEnd::Lost { why } => format!("lost the response: {why}"),
                CallEnd::Garbled { what } => format!("could not read the response: {what}"),
            };
            format!("{client}'s request {id} ({call}) on conn {conn} {how}")
        }
        What::ToolOffered { tool, once, idempotent, input } => format!(
            "tool {tool}{}{}{}",
            if input.is_empty() { String::new() } else { format!(" (asks {} first)", input.join(" and ")) },
            if *once { " (one-time state)" } else { "" },
            if *idempotent { " (idempotent)" } else { "" }
        ),
        What::ListenSent { client, conn, id } => {
            format!("{client} listens for tool-list changes (subscriptions/listen {id}) on conn {conn}")
        }
        What::ListenEnded { client, conn, id, end } => {
            use crate::trace::stateless::CallEnd;
            let how = match end {
                CallEnd::Complete { .. } => "was closed by the server with its result".to_string(),
                CallEnd::Error { code, message } => format!("was refused: JSON-RPC error {code} ({message})"),
                CallEnd::Status { status } => format!("was refused: HTTP {status}"),
                CallEnd::Lost { why } => format!("ended: {why}"),
                CallEnd::Garbled { what } => format!("was unreadable: {what}"),
                CallEnd::InputRequired { .. } => "asked for input".to_string(),
            };
            format!("{client}'s listen stream {id} on conn {conn} {how}")
        }
        What::ToolsChanged { n, streams } => {
            format!("app: tool list changed (change {n}); told {streams} open listen stream(s)")
        }
        What::CallAbandoned { client, call, why } => format!("{client} gives up on {call}: {why}"),
        What::Execution { exec, tool, call, id, principal, on_behalf_of, step, inputs, replica } => {
            use crate::trace::stateless::ExecStep;
            let what = match step {
                ExecStep::Started => "started",
                ExecStep::Effect => "did its side effect",
                ExecStep::Cancelled => "was cancelled",
                ExecStep::Completed => "completed",
            };
            let behalf = on_behalf_of
                .as_ref()
                .filter(|b| *b != principal)
                .map(|b| format!(", acting for {b}"))
                .unwrap_or_default();
            let keys: Vec<&str> = inputs.iter().map(|r| r.key.as_str()).collect();
            let read =
                if keys.is_empty() { String::new() } else { format!(" on the answers under {}", keys.join(", ")) };
            format!(
                "app{}: execution E{exec} of {tool} ({call}, request {id} from {principal}{behalf}) {what}{read}",
                on(replica)
            )
        }
        What::StateMinted { call, id, principal, fp, lifetime_us, once, replica } => format!(
            "app{}: minted requestState {fp} for {principal} ({call}, request {id}){}{}",
            on(replica),
            lifetime_us.map(|l| format!(", valid {:.1} s", l as f64 / 1e6)).unwrap_or_default(),
            if *once { ", one-time" } else { "" }
        ),
        What::StateChecked { call, id, principal, fp, verdict, replica } => {
            use crate::trace::stateless::StateVerdict;
            let on = on(replica);
            match verdict {
                StateVerdict::Accepted => {
                    format!("app{on}: accepted requestState {fp} from {principal} ({call}, request {id})")
                }
                StateVerdict::Refused { why } => {
                    format!("app{on}: refused requestState {fp} from {principal} ({call}, request {id}): {why}")
                }
            }
        }
    }
}
