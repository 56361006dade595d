//! The page around the chart: the violations above it, the legend, and
//! the page's style sheet and script.

use super::{esc, Chart};
use crate::check::Verdict;
use crate::trace::Run;
use std::fmt::Write;

/// The violations above the chart, each clickable to its first evidence.
pub(super) fn violation_list(verdicts: &[Verdict]) -> String {
    let mut violations = String::new();
    for v in verdicts {
        for x in v.violations() {
            let _ = writeln!(
                violations,
                "<li class=\"vio\" data-check=\"{}\" data-evidence=\"{}\"><b>{}</b> at {}: {}</li>",
                v.check,
                x.evidence.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(" "),
                v.check,
                x.t,
                esc(&x.headline())
            );
        }
    }
    if violations.is_empty() {
        violations.push_str("<li>no violation</li>");
    }
    violations
}

/// The whole page: header, violations, legend, the chart's layers, and the
/// page's [`STYLE`] and [`SCRIPT`]. One literal, the page's template, so
/// that it reads as the page it makes.
pub(super) fn document(run: &Run, chart: &Chart, violations: &str, end_y: f64) -> String {
    // Room for the labels right of the last lane (a routing marker's are the longest).
    let width = chart.right_x + if chart.replica_x.is_empty() { 420.0 } else { 560.0 };
    let height = end_y + 40.0;
    let lane_svg = chart.lane_svg(end_y);
    let (bars, rows, marks, arrows) = (&chart.bars, &chart.rows, &chart.marks, &chart.arrows);
    // Only a deployment's timeline has routing markers.
    let route_legend = if chart.replica_x.is_empty() {
        ""
    } else {
        "<li><svg width=\"12\" height=\"10\"><rect x=\"2\" y=\"1\" width=\"8\" height=\"8\" fill=\"#36c\"/></svg> the balancer routed a connection to this replica</li>\n"
    };
    format!(
        r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>mcpsim timeline: {scenario} on {server} (seed {seed})</title>
<style>
{style}</style></head><body>
<h1>{scenario} on {server} <small>seed {seed} · {duration} simulated · repro: <code>{repro}</code></small></h1>
<ul class="violations">
{violations}</ul>
<ul class="legend">
<li><svg width="34" height="10"><line x1="2" y1="5" x2="32" y2="5" stroke="#36c" stroke-width="1.5"/></svg> HTTP request / response</li>
<li><svg width="34" height="10"><line x1="2" y1="5" x2="32" y2="5" stroke="#2a6" stroke-width="1.5"/></svg> SSE event delivered</li>
<li><svg width="34" height="10"><line x1="2" y1="5" x2="32" y2="5" stroke="#a6c" stroke-width="1.5"/></svg> answer (POST)</li>
<li><svg width="34" height="10"><line x1="2" y1="5" x2="32" y2="5" stroke="#d60" stroke-width="1.5" stroke-dasharray="6 3"/></svg> server write into a dropped mapping</li>
<li><svg width="34" height="10"><line x1="2" y1="5" x2="32" y2="5" stroke="#d00" stroke-width="3.5"/></svg> evidence of a violation</li>
<li><svg width="12" height="10"><rect x="2" y="1" width="8" height="8" fill="#d00"/></svg> fault, theft, refusal</li>
<li><svg width="12" height="10"><rect x="2" y="1" width="8" height="8" fill="#555"/></svg> application outcome</li>
<li><svg width="12" height="10"><rect x="2" y="1" width="8" height="8" fill="#2a7"/></svg> server fenced the prior writer</li>
<li><svg width="12" height="10"><rect x="2" y="0" width="8" height="10" fill="#9a9"/></svg> a client's open stream (one bar per connection; bright: open at the end)</li>
<li><svg width="12" height="10"><rect x="1" y="0" width="10" height="10" fill="#fbb"/></svg> half-open mapping</li>
<li><svg width="34" height="10"><line x1="2" y1="5" x2="32" y2="5" stroke="#ccc"/></svg> <i>scenario step</i></li>
{route_legend}</ul>
<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}">
<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs>
{lane_svg}{bars}{rows}{marks}{arrows}</svg>
<div id="detail"></div>
<script>
{script}</script>
</body></html>
"##,
        scenario = esc(&run.scenario),
        server = esc(&run.server),
        seed = run.seed,
        duration = crate::scenario::format_duration(run.duration),
        repro = esc(&run.repro()),
        style = STYLE,
        script = SCRIPT,
    )
}

/// The page's style sheet.
const STYLE: &str = r##"body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 6px; }
ul.violations { margin: 6px 0 12px; padding-left: 18px; }
li.vio { color: #b00020; cursor: pointer; }
svg text { font-size: 11px; paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 0 0 8px; padding: 0; list-style: none; font-size: 12px; }
.legend svg { vertical-align: middle; }
.lane line { stroke: #999; stroke-dasharray: 3 3; }
.lane text { font-weight: 600; font-size: 13px; }
.time { fill: #666; }
.msg line { stroke: #2a6; stroke-width: 1.5; }
.msg.http line { stroke: #36c; }
.msg.answer line { stroke: #a6c; }
.msg.dropped line { stroke: #d60; stroke-dasharray: 6 3; }
.msg { cursor: pointer; }
.msg.violation line { stroke: #d00; stroke-width: 3.5; }
.msg.violation text { fill: #d00; font-weight: 700; }
.msg.selected line { stroke-width: 5; }
.step line { stroke: #ddd; }
.step text { fill: #777; font-style: italic; }
.fault circle, .fault rect { fill: #d00; }
.fault text { fill: #d00; }
.app rect { fill: #555; }
.fence rect { fill: #2a7; }
.fence text { fill: #2a7; }
.route rect { fill: #36c; }
.route text { fill: #36c; }
.halfopen { fill: #fbb; opacity: 0.7; }
.uplink { fill: #9a9; opacity: 0.8; }
.uplink.live { fill: #2a2; }
.note { fill: #777; }
#detail { position: fixed; right: 12px; bottom: 12px; max-width: 520px; background: #fff; border: 1px solid #999; padding: 8px; white-space: pre-wrap; font: 11px monospace; display: none; }
"##;

/// The page's script: a click on an arrow shows its event; a click on a
/// violation scrolls to its first evidence.
const SCRIPT: &str = r##"const detail = document.getElementById('detail');
function show(g) {
  document.querySelectorAll('.msg.selected').forEach(x => x.classList.remove('selected'));
  g.classList.add('selected');
  const ev = JSON.parse(g.dataset.event);
  detail.textContent = JSON.stringify(ev, null, 2) + '\n\n' + g.querySelector('title').textContent;
  detail.style.display = 'block';
}
document.querySelectorAll('.msg').forEach(g => g.addEventListener('click', () => show(g)));
document.querySelectorAll('li.vio').forEach(li => li.addEventListener('click', () => {
  const first = li.dataset.evidence.split(' ').map(s => document.querySelector('.msg[data-seq="' + s + '"]')).find(x => x);
  if (first) { first.scrollIntoView({block: 'center'}); show(first); }
}));
"##;
