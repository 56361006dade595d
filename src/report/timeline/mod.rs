//! A self-contained HTML sequence chart of one run (`--timeline FILE`).
//!
//! Lanes: each client, its NAT, the server (in a deployment of several
//! replicas, a lane per replica: where each connection was routed, what each
//! replica's application did, and the replica faults). Rows follow the trace in order
//! (idle time is compressed: a row per event, with its simulated time), and
//! heartbeat-only writes into dead mappings collapse into one row. Arrows are
//! the observable messages (HTTP requests and responses, SSE events, answers,
//! server writes into dropped mappings); faults are markers and bands; each
//! client stream is a bar (one column per connection open at once); arrows
//! that prove a violation are highlighted with its headline; a legend names
//! the colours; labels carry a white halo so lane lines do not cross them.
//! Clicking an arrow shows the event. No network is needed.

mod page;

use super::describe;
use crate::check::Verdict;
use crate::trace::describe_rpc;
use crate::trace::Run;
use crate::trace::{ConnId, Event, MappingId, Purpose, SimTime, What};
use page::{document, violation_list};
use std::collections::BTreeMap;
use std::fmt::Write;

const ROW: f64 = 24.0;
const TOP: f64 = 70.0;
const LANE: f64 = 190.0;
const LEFT: f64 = 110.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Writes the timeline of `run` as one HTML document.
pub fn html(run: &Run, verdicts: &[Verdict]) -> String {
    let mut chart = Chart::new(run, verdicts);
    for e in run.trace.iter() {
        chart.event(e);
    }
    let end_y = chart.finish();
    document(run, &chart, &violation_list(verdicts), end_y)
}

/// The chart being drawn, event by event: its lanes, the events that prove
/// a violation, the SVG drawn so far (per layer), and the streams and
/// mappings still open.
struct Chart {
    /// The x of each lane by name (a client, `nat-<client>`).
    lane_x: BTreeMap<String, f64>,
    /// The lanes in order, with their x: client, its NAT, ..., server.
    lanes: Vec<(String, f64)>,
    /// The server's lane; in a deployment, replica 1's.
    server_x: f64,
    /// In a deployment of several replicas, each replica's lane (from replica 1).
    replica_x: Vec<f64>,
    /// The rightmost lane.
    right_x: f64,
    /// In a deployment: the replica each NAT connection was routed to, by
    /// (client, the NAT's source port), and each mapping's source port.
    routed: BTreeMap<(String, u16), u32>,
    mapping_port: BTreeMap<(String, MappingId), u16>,
    /// Evidence: seq -> headlines of the violations it proves.
    evidence: BTreeMap<u64, Vec<String>>,
    /// Layers, drawn in this order: stream bars, time labels, markers, arrows.
    bars: String,
    rows: String,
    marks: String,
    arrows: String,
    /// The next row.
    row: usize,
    /// Streams open now: (client, conn) -> the y where they opened.
    uplink_start: BTreeMap<(String, ConnId), f64>,
    /// Each open stream of a client gets its own bar column (conn 1 and
    /// conn 5 open at once are two bars side by side, not one).
    bar_slot: BTreeMap<(String, ConnId), usize>,
    purposes: BTreeMap<(String, ConnId), Purpose>,
    /// Mappings half-open now: (client, mapping) -> the y where they were dropped.
    dropped_at: BTreeMap<(String, MappingId), f64>,
    /// Heartbeat-only writes into dead mappings (collapsed into a note).
    heartbeats: usize,
}

fn y_of(row: usize) -> f64 {
    TOP + row as f64 * ROW
}

fn slot_x(cx: f64, slot: usize) -> f64 {
    cx - 4.0 - 10.0 * slot as f64
}

impl Chart {
    fn new(run: &Run, verdicts: &[Verdict]) -> Self {
        let mut clients: Vec<String> = Vec::new();
        for e in run.trace.iter() {
            if let What::ClientJoined { client, .. } = &e.what {
                clients.push(client.clone());
            }
        }
        let mut lane_x: BTreeMap<String, f64> = BTreeMap::new();
        let mut lanes: Vec<(String, f64)> = Vec::new();
        for (i, c) in clients.iter().enumerate() {
            let x = LEFT + (2 * i) as f64 * LANE;
            lane_x.insert(c.clone(), x);
            lane_x.insert(format!("nat-{c}"), x + LANE);
            lanes.push((c.clone(), x));
            lanes.push((format!("nat-{c}"), x + LANE));
        }
        let server_x = LEFT + (2 * clients.len()) as f64 * LANE;
        // One server lane, or one per replica of a deployment.
        let replicas = run
            .trace
            .iter()
            .find_map(|e| match &e.what {
                What::DeploymentStarted { replicas, .. } if *replicas > 1 => Some(*replicas),
                _ => None,
            })
            .unwrap_or(1);
        let replica_x: Vec<f64> =
            if replicas > 1 { (0..replicas).map(|i| server_x + i as f64 * LANE).collect() } else { Vec::new() };
        if replica_x.is_empty() {
            lanes.push(("server".into(), server_x));
        }
        for (i, x) in replica_x.iter().enumerate() {
            lanes.push((format!("replica {}", i + 1), *x));
        }
        let right_x = replica_x.last().copied().unwrap_or(server_x);
        let mut evidence: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for v in verdicts {
            for x in v.violations() {
                for seq in &x.evidence {
                    evidence.entry(*seq).or_default().push(format!("{}: {}", v.check, x.headline()));
                }
            }
        }
        Chart {
            lane_x,
            lanes,
            server_x,
            replica_x,
            right_x,
            routed: BTreeMap::new(),
            mapping_port: BTreeMap::new(),
            evidence,
            bars: String::new(),
            rows: String::new(),
            marks: String::new(),
            arrows: String::new(),
            row: 0,
            uplink_start: BTreeMap::new(),
            bar_slot: BTreeMap::new(),
            purposes: BTreeMap::new(),
            dropped_at: BTreeMap::new(),
            heartbeats: 0,
        }
    }

    /// The x of a client's lane and of its NAT's.
    fn client_lanes(&self, client: &str) -> Option<(f64, f64)> {
        Some((*self.lane_x.get(client)?, *self.lane_x.get(&format!("nat-{client}"))?))
    }

    fn nat_lane(&self, client: &str) -> Option<f64> {
        self.lane_x.get(&format!("nat-{client}")).copied()
    }

    /// The lane of replica `r` (from 1); the server's on one server.
    fn replica_lane(&self, r: Option<u32>) -> f64 {
        r.and_then(|r| self.replica_x.get(r.checked_sub(1)? as usize).copied()).unwrap_or(self.server_x)
    }

    /// The lane of the replica that served `client`'s mapping `mapping`.
    fn mapping_lane(&self, client: &str, mapping: MappingId) -> f64 {
        let port = self.mapping_port.get(&(client.to_string(), mapping));
        self.replica_lane(port.and_then(|p| self.routed.get(&(client.to_string(), *p)).copied()))
    }

    /// Starts a row at time `t`; the caller draws it and calls [`Chart::next_row`].
    fn time_label(&mut self, t: SimTime) {
        let _ = writeln!(self.rows, "<text class=\"time\" x=\"8\" y=\"{:.1}\">{}</text>", y_of(self.row) + 4.0, t);
    }

    fn next_row(&mut self) {
        self.row += 1;
    }

    /// An arrow on the current row, highlighted when `e` is evidence of a violation.
    fn arrow(&mut self, e: &Event, from: f64, to: f64, label: &str, class: &str) {
        let y = y_of(self.row);
        let mut classes = format!("msg {class}");
        let mut title = describe(&e.what);
        if let Some(h) = self.evidence.get(&e.seq) {
            classes.push_str(" violation");
            title = format!("{title}\n\n{}", h.join("\n"));
        }
        let detail = esc(&serde_json::to_string(e).unwrap_or_default());
        let mid = (from + to) / 2.0;
        let _ = writeln!(
            self.arrows,
            "<g class=\"{classes}\" data-seq=\"{}\" data-event=\"{detail}\"><title>{}</title>\
             <line x1=\"{from:.1}\" y1=\"{y:.1}\" x2=\"{to:.1}\" y2=\"{y:.1}\" marker-end=\"url(#head)\"/>\
             <text x=\"{mid:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text></g>",
            e.seq,
            esc(&title),
            y - 4.0,
            esc(label)
        );
    }

    /// A square marker with words on the current row, at lane `x`.
    fn marker(&mut self, class: &str, e: &Event, x: f64) {
        let y = y_of(self.row);
        let _ = writeln!(
            self.marks,
            "<g class=\"{class}\" data-seq=\"{}\"><rect x=\"{:.1}\" y=\"{:.1}\" width=\"8\" height=\"8\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            e.seq,
            x - 4.0,
            y - 4.0,
            x + 8.0,
            y + 4.0,
            esc(&describe(&e.what))
        );
    }

    /// Draws one trace event (most take a row; some only change state).
    fn event(&mut self, e: &Event) {
        let t = e.t_us;
        match &e.what {
            What::Step { detail, .. } => self.step(t, detail),
            What::Connect { client, conn, purpose, .. } => {
                self.purposes.insert((client.clone(), *conn), *purpose);
            }
            What::MappingOpened { client, mapping, up_port, .. } => {
                self.mapping_port.insert((client.clone(), *mapping), *up_port);
            }
            What::Routed { .. }
            | What::StorePartitioned { .. }
            | What::StoreHealed { .. }
            | What::ReplicaCrashed { .. }
            | What::ReplicaDrained { .. } => self.deployment_event(e),
            What::HttpRequest { client, conn, method, path, last_event_id, .. } => {
                self.http_request(e, client, *conn, method, path, last_event_id.as_deref())
            }
            What::HttpResponse { client, conn, status, content_type } => {
                self.http_response(e, client, *conn, *status, content_type.as_deref())
            }
            What::SseEvent { .. } | What::Answer { .. } => self.client_arrow(e),
            What::DroppedWrite { client, mapping, events, response, .. } => {
                self.dropped_write(e, client, *mapping, events, response.as_deref())
            }
            What::MappingDropped { client, mapping, fault, .. } => self.mapping_dropped(e, client, *mapping, fault),
            What::MappingReset { client, mapping, why, .. } => self.mapping_reset(t, client, *mapping, why),
            // The reference engine's fence of a prior writer (an explanation, drawn on the server lane).
            What::ServerNote { note, .. } if note.contains("fenced before the new writer") => {
                self.time_label(t);
                self.marker("fence", e, self.replica_lane(e.what.replica()));
                self.next_row();
            }
            What::TokenStolen { .. }
            | What::ClientCrashed { .. }
            | What::Rejected { .. }
            | What::RequestOutcome { .. }
            | What::ServerStopped { .. }
            | What::StepMissed { .. }
            | What::RunCut { .. } => self.outcome_marker(e),
            What::UplinkEnded { client, conn, .. } | What::UplinkSilent { client, conn, .. } => {
                self.stream_ended(client, *conn)
            }
            // stateless-http: each attempt of a call, how it ended, and what the application did.
            What::CallSent { .. } | What::CallEnded { .. } | What::Execution { .. } | What::StateChecked { .. } => {
                self.stateless_event(e)
            }
            _ => {}
        }
    }

    /// A deployment: where the balancer sent each connection, and the
    /// replicas' faults. (Only these events are routed here.)
    fn deployment_event(&mut self, e: &Event) {
        let t = e.t_us;
        match &e.what {
            What::Routed { client, up_port, replica, .. } => {
                self.routed.insert((client.clone(), *up_port), *replica);
                self.time_label(t);
                self.marker("route", e, self.replica_lane(Some(*replica)));
                self.next_row();
            }
            What::StorePartitioned { replica }
            | What::StoreHealed { replica }
            | What::ReplicaCrashed { replica, .. }
            | What::ReplicaDrained { replica } => {
                self.time_label(t);
                self.marker("fault", e, self.replica_lane(Some(*replica)));
                self.next_row();
            }
            _ => {}
        }
    }

    /// An SSE event delivered to a client, or a client's answer: an arrow
    /// between the client and its NAT. (Only these events are routed here.)
    fn client_arrow(&mut self, e: &Event) {
        let t = e.t_us;
        match &e.what {
            What::SseEvent { client, id, event, rpc, .. } => {
                let Some((cx, nx)) = self.client_lanes(client) else { return };
                self.time_label(t);
                let label = format!("{} {}", id.as_deref().unwrap_or("-"), describe_rpc(rpc, event));
                self.arrow(e, nx, cx, &label, "sse");
                self.next_row();
            }
            What::Answer { client, id, status, .. } => {
                let Some((cx, nx)) = self.client_lanes(client) else { return };
                self.time_label(t);
                let st = status.map_or("no response".into(), |s| s.to_string());
                self.arrow(e, cx, nx, &format!("answer {id} ({st})"), "answer");
                self.next_row();
            }
            _ => {}
        }
    }

    /// A theft, a crash, a refusal, a request's outcome, the server's stop, a
    /// missed step, the run's cut: a marker on the lane it concerns.
    fn outcome_marker(&mut self, e: &Event) {
        self.time_label(e.t_us);
        let x = match &e.what {
            What::TokenStolen { to, .. } => self.lane_x.get(to).copied().unwrap_or(self.server_x),
            What::ClientCrashed { client } | What::Rejected { client, .. } => {
                self.lane_x.get(client).copied().unwrap_or(self.server_x)
            }
            _ => self.server_x,
        };
        let class = if matches!(e.what, What::RequestOutcome { .. }) { "app" } else { "fault" };
        self.marker(class, e, x);
        self.next_row();
    }

    /// stateless-http: each attempt of a call, how it ended (an MRTR round
    /// ends with input_required), and what the application did: a side
    /// effect, a cancellation, a refused state. (Only these events are routed here.)
    fn stateless_event(&mut self, e: &Event) {
        let t = e.t_us;
        match &e.what {
            What::CallSent { client, call, tool, id, attempt, state, .. } => {
                let Some((cx, nx)) = self.client_lanes(client) else { return };
                self.time_label(t);
                let round = match attempt {
                    crate::trace::stateless::Attempt::First => "",
                    crate::trace::stateless::Attempt::Retry => " retry",
                    crate::trace::stateless::Attempt::Reissue => " re-issue",
                    crate::trace::stateless::Attempt::Presented => " presented",
                };
                let st = state.as_ref().map_or(String::new(), |p| format!(" state {}", p.fp));
                self.arrow(e, cx, nx, &format!("{tool} {call} #{id}{round}{st}"), "answer");
                self.next_row();
            }
            What::CallEnded { client, end, .. } => {
                use crate::trace::stateless::CallEnd;
                let x = self.lane_x.get(client).copied().unwrap_or(self.server_x);
                self.time_label(t);
                let class = match end {
                    CallEnd::Complete { .. } | CallEnd::InputRequired { .. } => "app",
                    _ => "fault",
                };
                self.marker(class, e, x);
                self.next_row();
            }
            What::Execution {
                step: crate::trace::stateless::ExecStep::Effect | crate::trace::stateless::ExecStep::Cancelled,
                ..
            } => {
                self.time_label(t);
                self.marker("app", e, self.replica_lane(e.what.replica()));
                self.next_row();
            }
            What::StateChecked { verdict: crate::trace::stateless::StateVerdict::Refused { .. }, .. } => {
                self.time_label(t);
                self.marker("fault", e, self.replica_lane(e.what.replica()));
                self.next_row();
            }
            _ => {}
        }
    }

    fn step(&mut self, t: SimTime, detail: &str) {
        self.time_label(t);
        let _ = writeln!(
            self.marks,
            "<g class=\"step\"><line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            self.right_x,
            LEFT + 4.0,
            y_of(self.row) - 4.0,
            esc(&format!("step: {detail}")),
            y = y_of(self.row)
        );
        self.next_row();
    }

    fn http_request(
        &mut self,
        e: &Event,
        client: &str,
        conn: ConnId,
        method: &str,
        path: &str,
        last_event_id: Option<&str>,
    ) {
        let purpose = self.purposes.get(&(client.to_string(), conn)).copied();
        if !matches!(purpose, Some(Purpose::Uplink | Purpose::Call)) {
            return; // POST traffic shows as its answers
        }
        let Some((cx, nx)) = self.client_lanes(client) else { return };
        self.time_label(e.t_us);
        let what = match last_event_id {
            Some(l) => format!("{method} resume, Last-Event-ID {l} (conn {conn})"),
            None if crate::wire::legacy::session_token(path).is_some() => format!("{method} resume (conn {conn})"),
            None if purpose == Some(Purpose::Call) => format!("{method} tools/call (conn {conn})"),
            None => format!("{method} {path} (conn {conn})"),
        };
        self.arrow(e, cx, nx, &what, "http");
        self.next_row();
    }

    fn http_response(&mut self, e: &Event, client: &str, conn: ConnId, status: u16, content_type: Option<&str>) {
        let key = (client.to_string(), conn);
        let streams = matches!(self.purposes.get(&key), Some(Purpose::Uplink | Purpose::Call));
        if !streams && status < 300 {
            return;
        }
        let Some((cx, nx)) = self.client_lanes(client) else { return };
        self.time_label(e.t_us);
        let stream = content_type.is_some_and(|c| c.starts_with("text/event-stream"));
        self.arrow(e, nx, cx, &format!("{status}{}", if stream { " event-stream" } else { "" }), "http");
        if status == 200 && stream {
            self.uplink_start.insert(key.clone(), y_of(self.row));
            let taken: Vec<usize> = self.bar_slot.iter().filter(|((c, _), _)| c == client).map(|(_, s)| *s).collect();
            let slot = (0..).find(|s| !taken.contains(s)).unwrap_or(0);
            self.bar_slot.insert(key, slot);
        }
        self.next_row();
    }

    fn dropped_write(
        &mut self,
        e: &Event,
        client: &str,
        mapping: MappingId,
        events: &[crate::trace::SseSeen],
        response: Option<&str>,
    ) {
        let Some(nx) = self.nat_lane(client) else { return };
        if events.is_empty() && response.is_none() && !self.evidence.contains_key(&e.seq) {
            self.heartbeats += 1;
            return;
        }
        self.time_label(e.t_us);
        let what: Vec<String> = events
            .iter()
            .map(|ev| format!("{} {}", ev.id.as_deref().unwrap_or("-"), describe_rpc(&ev.rpc, &ev.event)))
            .collect();
        let mut what = what;
        what.extend(response.map(String::from));
        let label = if what.is_empty() { "heartbeat".to_string() } else { what.join(", ") };
        let from = self.mapping_lane(client, mapping);
        self.arrow(e, from, nx + 8.0, &format!("{label} into dead mapping {mapping}"), "dropped");
        self.next_row();
    }

    fn mapping_dropped(&mut self, e: &Event, client: &str, mapping: MappingId, fault: &str) {
        let Some(nx) = self.nat_lane(client) else { return };
        self.time_label(e.t_us);
        self.dropped_at.insert((client.to_string(), mapping), y_of(self.row));
        let _ = writeln!(
            self.marks,
            "<g class=\"fault\" data-seq=\"{}\"><circle cx=\"{nx:.1}\" cy=\"{:.1}\" r=\"7\"/><text x=\"{:.1}\" y=\"{:.1}\">{} (mapping {mapping} silent)</text></g>",
            e.seq,
            y_of(self.row),
            nx + 12.0,
            y_of(self.row) + 4.0,
            esc(fault)
        );
        self.next_row();
    }

    fn mapping_reset(&mut self, t: SimTime, client: &str, mapping: MappingId, why: &str) {
        let Some(nx) = self.nat_lane(client) else { return };
        self.time_label(t);
        if let Some(y0) = self.dropped_at.remove(&(client.to_string(), mapping)) {
            let _ = writeln!(
                self.marks,
                "<rect class=\"halfopen\" x=\"{:.1}\" y=\"{y0:.1}\" width=\"10\" height=\"{:.1}\"><title>mapping {mapping} half-open</title></rect>",
                nx - 5.0,
                y_of(self.row) - y0
            );
        }
        let _ = writeln!(
            self.marks,
            "<g class=\"fault\"><text x=\"{:.1}\" y=\"{:.1}\">reset mapping {mapping}: {}</text></g>",
            nx + 12.0,
            y_of(self.row) + 4.0,
            esc(why)
        );
        self.next_row();
    }

    /// A client's stream ended: its bar runs from where it opened to this row.
    fn stream_ended(&mut self, client: &str, conn: ConnId) {
        let key = (client.to_string(), conn);
        if let (Some(y0), Some(&cx)) = (self.uplink_start.remove(&key), self.lane_x.get(client)) {
            let slot = self.bar_slot.remove(&key).unwrap_or(0);
            let _ = writeln!(self.bars, "<rect class=\"uplink\" data-conn=\"{conn}\" x=\"{:.1}\" y=\"{y0:.1}\" width=\"8\" height=\"{:.1}\"><title>{client} conn {conn}</title></rect>", slot_x(cx, slot), (y_of(self.row) - y0).max(2.0));
        }
    }

    /// Closes what is still open at the end (stream bars, half-open bands)
    /// and notes the collapsed heartbeats; returns the chart's bottom y.
    fn finish(&mut self) -> f64 {
        let end_y = y_of(self.row);
        for ((client, conn), y0) in std::mem::take(&mut self.uplink_start) {
            if let Some(&cx) = self.lane_x.get(&client) {
                let slot = self.bar_slot.get(&(client.clone(), conn)).copied().unwrap_or(0);
                let _ = writeln!(self.bars, "<rect class=\"uplink live\" data-conn=\"{conn}\" x=\"{:.1}\" y=\"{y0:.1}\" width=\"8\" height=\"{:.1}\"><title>{client} conn {conn} (open at the end)</title></rect>", slot_x(cx, slot), (end_y - y0).max(2.0));
            }
        }
        // Mappings still half-open at the end: their band runs to the bottom.
        for ((client, mapping), y0) in std::mem::take(&mut self.dropped_at) {
            if let Some(nx) = self.nat_lane(&client) {
                let _ = writeln!(
                    self.marks,
                    "<rect class=\"halfopen\" x=\"{:.1}\" y=\"{y0:.1}\" width=\"10\" height=\"{:.1}\"><title>mapping {mapping} half-open</title></rect>",
                    nx - 5.0,
                    (end_y - y0).max(2.0)
                );
            }
        }
        if self.heartbeats > 0 {
            let _ = writeln!(self.marks, "<text class=\"note\" x=\"{LEFT}\" y=\"{:.1}\">(+{} heartbeat-only writes into dead mappings, collapsed)</text>", end_y + 10.0, self.heartbeats);
        }
        end_y
    }

    /// The lanes: a name on top and a dashed line down to the bottom.
    fn lane_svg(&self, end_y: f64) -> String {
        let mut lane_svg = String::new();
        for (name, x) in &self.lanes {
            let _ = writeln!(
                lane_svg,
                "<g class=\"lane\"><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text><line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/></g>",
                TOP - 40.0,
                esc(name),
                TOP - 30.0,
                end_y + 20.0
            );
        }
        lane_svg
    }
}
