//! `tools/call` on the stateless reference server: the MRTR rounds (a
//! state minted, presented back and checked under the policy) and the
//! execution that follows.

use super::state::Payload;
use super::{error, json, Flaw, Shared};
use crate::scenario::ToolSpec;
use crate::server::http::{sse_response, Body};
use crate::server::plug::ExecutionOf;
use crate::trace::stateless::{ExecStep, StateVerdict};
use crate::wire::body::ChannelBody;
use crate::wire::jsonrpc::{params_digest, RpcId};
use crate::wire::{mrtr, sse};
use bytes::Bytes;
use hyper::{Response, StatusCode};
use rand::RngCore;
use serde_json::Value;
use std::rc::Rc;
use tokio::sync::mpsc::UnboundedSender;

/// `tools/call`: a first round that asks for input, a retry that brings
/// the state back, or a tool that runs at once.
pub(super) async fn call(shared: &Rc<Shared>, id: RpcId, principal: &str, params: &Value) -> Response<Body> {
    let tool_name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let Some(tool) = shared.tools.iter().find(|t| t.name == tool_name).cloned() else {
        return invalid(id, format!("unknown tool {tool_name:?}"));
    };
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    let call = args.get(mrtr::CALL_ARG).and_then(Value::as_str).unwrap_or("").to_string();
    let digest = params_digest(&args);
    let report = &shared.app.report;
    let mut on_behalf_of = None;
    let mut nonce: Option<String> = None;
    let mut inputs = Vec::new();
    if !tool.input.is_empty() {
        let asks: Vec<(String, String)> =
            (0..tool.input.len()).map(|i| (mrtr::input_key(&tool.input, i), tool.input[i].clone())).collect();
        let flaw = shared.policy.flaw;
        let ask = |digest: String| input_required(shared, &tool, &asks, (&call, &id, principal), digest);
        let Some(presented) = params.get("requestState") else { return ask(digest) };
        let Value::String(st) = presented else {
            return invalid(id, format!("requestState must be a string, not {presented}"));
        };
        // Each answer under its own key; none missing (the state is not
        // touched, so a one-time state is not spent on a retry that lacks one).
        let asked = if flaw == Some(Flaw::StateWithoutInputs) { &[][..] } else { &asks[..] };
        inputs = match answers(flaw, asked, params.get("inputResponses")) {
            Ok(inputs) => inputs,
            Err(key) => return invalid(id, format!("inputResponses has no answer under {key:?}")),
        };
        let verdict = check_state(shared, &tool, &digest, (&call, &id, principal), st).await;
        match verdict {
            Ok(_) if flaw == Some(Flaw::AsksForever) => {
                report.state_checked(&call, &id, principal, st, StateVerdict::Accepted);
                return ask(digest);
            }
            Ok(p) => {
                report.state_checked(&call, &id, principal, st, StateVerdict::Accepted);
                on_behalf_of = Some(p.p);
                nonce = Some(p.n);
            }
            Err(why) => {
                report.state_checked(&call, &id, principal, st, StateVerdict::Refused { why: why.clone() });
                return invalid(id, format!("invalid requestState: {why}"));
            }
        }
        // A declined confirmation: the tool does not run.
        if let Some((key, _)) = inputs.iter().find(|(_, v)| mrtr::declines(v)) {
            if flaw != Some(Flaw::IgnoresDecline) {
                return json(
                    StatusCode::OK,
                    &mrtr::complete_error(id, &format!("{} not run: {key} declined", tool.name)),
                );
            }
        }
    }
    let n = shared.durable.execs.get() + 1;
    shared.durable.execs.set(n);
    let run = ExecutionOf {
        tool: tool.name.clone(),
        call,
        id: id.clone(),
        principal: principal.to_string(),
        on_behalf_of,
        inputs,
    };
    report.execution(n, &run, ExecStep::Started);
    let data_of = run.on_behalf_of.clone().unwrap_or_else(|| principal.to_string());
    let execution = Execution { n, run, tool, data_of, nonce };
    if execution.tool.runs.is_zero() {
        return execute_at_once(shared, execution, id).await;
    }
    let (tx, body) = ChannelBody::new();
    let token = params.get("_meta").and_then(|m| m.get("progressToken")).and_then(Value::as_str).map(str::to_string);
    tokio::task::spawn_local(execute_streamed(shared.clone(), execution, tx, token));
    sse_response(body)
}

/// An invalid-params error answering request `id` (status 200: the request was read).
fn invalid(id: RpcId, message: String) -> Response<Body> {
    error(StatusCode::OK, Some(id), mrtr::INVALID_PARAMS, message)
}

/// The `input_required` answer of a first round (or of a retry the
/// [`Flaw::AsksForever`] mutant asks again): a fresh state minted for
/// `digest`, and the inputs `asks` names (as the policy's flaw has it).
fn input_required(
    shared: &Shared,
    tool: &ToolSpec,
    asks: &[(String, String)],
    (call, id, principal): (&str, &RpcId, &str),
    digest: String,
) -> Response<Body> {
    let flaw = shared.policy.flaw;
    let nonce = format!("{:016x}", shared.rng.borrow_mut().next_u64());
    let lifetime = shared.cfg.state_lifetime.0;
    let payload = Payload {
        t: tool.name.clone(),
        a: digest,
        p: principal.to_string(),
        e: now_us() + lifetime.as_micros() as u64,
        n: nonce,
    };
    let st = shared.codec.seal(&payload);
    // The state says when it expires whether or not this policy enforces it.
    shared.app.report.state_minted(call, id, principal, &st, Some(lifetime), tool.once);
    let words = format!("{} needs your confirmation", tool.name);
    let asked = if flaw == Some(Flaw::StateWithoutInputs) { &[][..] } else { asks };
    let st = if flaw == Some(Flaw::BareInputRequired) { None } else { Some(st.as_str()) };
    let asked = if st.is_none() { &[][..] } else { asked };
    json(StatusCode::OK, &mrtr::input_required(id.clone(), asked, &words, st))
}

/// The answers a retry brings for `asked`, each under its own key (the
/// [`Flaw::SwapsAnswers`] mutant reads each under the other's); `Err`: the
/// key of the first one missing.
fn answers<'a>(
    flaw: Option<Flaw>,
    asked: &'a [(String, String)],
    responses: Option<&Value>,
) -> Result<Vec<(String, Value)>, &'a str> {
    let mut inputs = Vec::new();
    for (i, (key, _)) in asked.iter().enumerate() {
        // The swap reads the first answer under the second key and the second under the first.
        let from = match flaw {
            Some(Flaw::SwapsAnswers) if asked.len() == 2 => &asked[1 - i].0,
            _ => key,
        };
        match responses.and_then(|r| r.get(from)) {
            Some(v) => inputs.push((key.clone(), v.clone())),
            None => return Err(key),
        }
    }
    Ok(inputs)
}

/// One execution of a tool under way: its number, what it runs, for whom.
struct Execution {
    n: u32,
    run: ExecutionOf,
    tool: ToolSpec,
    /// Whose data the result is: the state's principal, else the caller's.
    data_of: String,
    /// The nonce of the one-time state it redeemed, if any.
    nonce: Option<String>,
}

/// A tool that takes no time: its effect and its result, as a JSON response to request `id`.
async fn execute_at_once(shared: &Shared, e: Execution, id: RpcId) -> Response<Body> {
    let report = &shared.app.report;
    report.execution(e.n, &e.run, ExecStep::Effect);
    mark_used_late(shared, &e.tool, e.nonce.as_deref()).await;
    report.execution(e.n, &e.run, ExecStep::Completed);
    json(StatusCode::OK, &mrtr::complete(id, &format!("{} done", e.tool.name), &e.data_of))
}

/// A tool that runs a while, in a task of its own: progress on the
/// response stream `tx` (when the request asked, with `token`), then its
/// effect and result; a close of the stream cancels it (as the policy says).
async fn execute_streamed(shared: Rc<Shared>, e: Execution, tx: UnboundedSender<Bytes>, token: Option<String>) {
    let Execution { n, run, tool, data_of, nonce } = e;
    let start = crate::clock::Stamp::now();
    let mut sent = 0u64;
    loop {
        let next = tool.progress_every.map(|p| p * (sent as u32 + 1)).filter(|t| *t < tool.runs).unwrap_or(tool.runs);
        let wait = next.saturating_sub(start.elapsed());
        // Biased: a close that arrived wins over a timer due at the same moment.
        let closed = tokio::select! {
            biased;
            _ = tx.closed(), if shared.policy.cancel_on_close => true,
            _ = crate::clock::sleep(wait) => false,
        };
        if closed {
            shared.app.report.execution(n, &run, ExecStep::Cancelled);
            if shared.policy.flaw == Some(Flaw::CommitsAfterCancel) {
                crate::clock::sleep(std::time::Duration::from_millis(100)).await;
                shared.app.report.execution(n, &run, ExecStep::Effect);
                shared.app.report.execution(n, &run, ExecStep::Completed);
            }
            return;
        }
        if next >= tool.runs {
            break;
        }
        sent += 1;
        if let Some(t) = &token {
            // Into a dead socket, too: the server cannot tell.
            let _ = tx.send(Bytes::from(sse::encode(None, None, &mrtr::progress(t, sent).to_json())));
        }
    }
    shared.app.report.execution(n, &run, ExecStep::Effect);
    mark_used_late(&shared, &tool, nonce.as_deref()).await;
    let result = mrtr::complete(run.id.clone(), &format!("{} done", run.tool), &data_of);
    let _ = tx.send(Bytes::from(sse::encode(None, None, &result.to_json())));
    shared.app.report.execution(n, &run, ExecStep::Completed);
    let _ = tx.send(ChannelBody::END);
}

/// The simulated clock, in microseconds (a state's expiry).
fn now_us() -> u64 {
    crate::clock::now().map_or(0, |d| d.as_micros() as u64)
}

/// The single-use registry's key for a state's nonce.
fn once_key(nonce: &str) -> String {
    format!("mcpsim:once:{nonce}")
}

/// [`Flaw::MarksUsedLate`]: the one-time state marked used after its effect.
async fn mark_used_late(shared: &Shared, tool: &ToolSpec, nonce: Option<&str>) {
    if let (true, Some(Flaw::MarksUsedLate), Some(n)) = (tool.once, shared.policy.flaw, nonce) {
        let _ = shared.app.store.set_nx(&once_key(n), "redeemed", None).await;
    }
}

/// Opens and checks a presented state under the policy: the payload, or why it is refused.
/// `who`: the call, request id and principal of the request that presents it.
async fn check_state(
    shared: &Shared,
    tool: &ToolSpec,
    digest: &str,
    who: (&str, &RpcId, &str),
    st: &str,
) -> Result<Payload, String> {
    let (call, id, principal) = who;
    let p = shared.codec.open(st)?;
    let pol = &shared.policy;
    if pol.bind_request && (p.t != tool.name || p.a != digest) {
        return Err(format!("it was minted for another request ({} with other arguments)", p.t));
    }
    // A server that does not authenticate has no principal to bind to: the
    // name in `Authorization` is self-asserted, and binds nothing.
    if pol.bind_principal && shared.cfg.authenticate && p.p != principal {
        return Err(format!("it was minted for {}, not {principal}", p.p));
    }
    if pol.expiry && now_us() > p.e {
        return Err("it has expired".into());
    }
    if tool.once && pol.single_use && pol.flaw == Some(Flaw::MarksUsedLate) {
        // Looked up now, marked only after the effect (`mark_used_late`).
        let used = shared.app.store.get(&once_key(&p.n)).await;
        return match used {
            Ok(None) => Ok(p),
            Ok(Some(_)) => Err("this one-time state was already redeemed".into()),
            Err(e) => Err(format!("the single-use registry could not be consulted ({e})")),
        };
    }
    if tool.once && pol.single_use {
        let first = if pol.registry_in_store {
            // Kept while the state could still be presented.
            let ttl = pol.expiry.then(|| std::time::Duration::from_micros(p.e.saturating_sub(now_us()) + 1_000_000));
            // The redemption runs to its end in a task of its own: if the
            // request goes away while the store answers (its client closed
            // it), a redemption the store recorded is still reported, so
            // that no state is spent unseen; so is one whose answer never
            // came (a partition lost it): the store may have recorded it,
            // and this server refuses what it cannot confirm.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (store, key) = (shared.app.store.clone(), once_key(&p.n));
            let (report, who) = (shared.app.report.clone(), (call.to_string(), id.clone(), principal.to_string()));
            let state = st.to_string();
            tokio::task::spawn_local(async move {
                let r = store.set_nx(&key, "redeemed", ttl).await;
                let verdict = match &r {
                    Ok(true) => Some(StateVerdict::Accepted),
                    Ok(false) => None,
                    Err(e) => Some(StateVerdict::Refused {
                        why: format!(
                            "the single-use registry could not be consulted ({e}) after the request had gone away: the store may have recorded the redemption"
                        ),
                    }),
                };
                if let (Err(_), Some(verdict)) = (tx.send(r), verdict) {
                    report.state_checked(&who.0, &who.1, &who.2, &state, verdict);
                }
            });
            match rx.await {
                Ok(Ok(first)) => first,
                // Fail closed: better a refused call than a second redemption.
                Ok(Err(e)) => return Err(format!("the single-use registry could not be consulted ({e})")),
                Err(_) => return Err("the single-use registry stopped".into()),
            }
        } else {
            shared.redeemed_here.borrow_mut().insert(p.n.clone())
        };
        if !first {
            return Err("this one-time state was already redeemed".into());
        }
    }
    Ok(p)
}
