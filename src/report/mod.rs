//! Reports: what happened in a run, for a person to read.
//!
//! The text report is a condensed timeline: steps, what each client saw
//! (consecutive SSE events on one connection collapse into one line),
//! resumptions accepted or refused, faults, every server write that carried
//! events into a dropped mapping, and what became of each server request.
//! POST traffic and heartbeat-only writes are summarised, not listed.

mod describe;
mod formats;
mod stateless_words;
mod timeline;
mod words;

pub use describe::describe;
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
