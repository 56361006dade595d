//! The words for what the checks found: one line per [`Finding`], that a
//! person can read without the code. Checks state facts; this is the only
//! place that phrases them (the JSON's `headline` is this text too).

use crate::check::finding::{Finding, Indistinguishable, LateWrite, MintedWhere, Msg, Rivalry, UplinkProblem};
use crate::check::Violation;
use crate::trace::{describe_rpc, outcome_word, SimTime};
use serde::ser::{Serialize, SerializeStruct, Serializer};
use std::fmt;

impl Violation {
    /// One line a person can read without the code.
    pub fn headline(&self) -> String {
        self.finding.to_string()
    }
}

/// The JSON keeps the shape it always had: the finding as its headline.
impl Serialize for Violation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut v = s.serialize_struct("Violation", if self.inherent { 5 } else { 4 })?;
        v.serialize_field("check", &self.check)?;
        v.serialize_field("headline", &self.headline())?;
        v.serialize_field("t", &self.t)?;
        v.serialize_field("evidence", &self.evidence)?;
        if self.inherent {
            v.serialize_field("inherent", &self.inherent)?;
        } else {
            v.skip_field("inherent")?;
        }
        v.end()
    }
}

/// `"4.9 s"`: a duration between two times.
fn secs_between(a: SimTime, b: SimTime) -> String {
    format!("{:.1} s", (b.0.saturating_sub(a.0)) as f64 / 1e6)
}

/// A delivered event in a few words: "a priming event", "req sampling/createMessage".
fn what(m: &Msg) -> String {
    match &m.rpc {
        None if m.event == "message" || m.event.is_empty() => "a priming event (no message)".into(),
        _ => describe_rpc(&m.rpc, &m.event),
    }
}

/// `event 7`, `events 7–9` or `events 7, 9`.
fn range(ids: &[u64]) -> String {
    let (a, b) = (ids[0], ids[ids.len() - 1]);
    if a == b {
        format!("event {a}")
    } else if (b - a + 1) as usize == ids.len() {
        format!("events {a}–{b}")
    } else {
        format!("events {}", ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
    }
}

/// Why a thief's act is inherent, as a parenthesis.
fn why(why: &Option<Indistinguishable>, client: &str, owner: &str) -> String {
    match why {
        None => String::new(),
        Some(Indistinguishable::OwnersCredential) => {
            " (it held the owner's credential: no server can tell them apart)".to_string()
        }
        Some(Indistinguishable::Unauthenticated) => {
            " (the server authenticates no one: the session id is the only credential, and it held it; its principal is a name it asserted, as the owner's is)".to_string()
        }
        Some(Indistinguishable::OpenedWith { principal }) => format!(
            " ({owner} opened the session with principal {principal}'s credential, which {client} presents: no server can tell them apart)"
        ),
    }
}

/// Why events a replay left out may never have reached the store.
fn unstored(store_cut: Option<u32>) -> String {
    store_cut.map_or(String::new(), |r| {
        format!(
            "; they were minted on replica {r} while a partition cut it from the shared store, and no client saw them: a server that writes through sends nothing the store has not taken, and loses what it held with the session (inherent)"
        )
    })
}

fn rivalry(r: Rivalry) -> String {
    match r {
        Rivalry::None => String::new(),
        Rivalry::RivalHolder => " (a thief with the owner's credential competes for the session)".into(),
        Rivalry::ForeignCredential => {
            " (the owner took another principal's credential: its answers speak as that principal)".into()
        }
        Rivalry::StoreCut => {
            " (the owner's answer reached a replica that a partition cut from the shared store, which could not take it: inherent)".into()
        }
        Rivalry::LockedOut { status, from, until } => format!(
            " (its owner held no live stream only because the server refused every reconnection of hers, HTTP {status}, from {from} to {until}: a lock-out, not an excuse)"
        ),
        Rivalry::AnsweredElsewhere(replica) => format!(
            " (the owner's answer reached replica {replica}, which never held the session and refused it as unknown: with a store each, no replica can take another's answers: inherent)"
        ),
        Rivalry::HeldForStore(replica) => format!(
            " (replica {replica}, which held the session, was cut from the shared store before the request reached its owner: a server that writes through sends nothing the store has not taken, so it waited for the partition to end, too long to be answered in time: inherent)"
        ),
    }
}

/// When a late write came against the acceptance of `w.conn`.
fn late(w: &LateWrite, at: SimTime) -> String {
    if at > w.accepted_at {
        format!("{} after conn {} was accepted", secs_between(w.accepted_at, at), w.conn)
    } else if w.or_gap {
        format!(
            "newer than conn {}'s replay, before its acceptance reached the client (minted while the resumption was on its way: a second writer, or a replay that left it out; the trace cannot tell which)",
            w.conn
        )
    } else {
        format!("newer than conn {}'s replay, before its acceptance reached the client", w.conn)
    }
}

impl fmt::Display for Finding {
    // One arm per finding kind: a long match is the clearest form here (it
    // counts toward the house's 12 long functions, docs/design.md §9).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Stateless(s) => write!(f, "{s}"),
            Finding::RequestToDeadUplink { write, label, msg, method, event, at, delivered_elsewhere, fate } => {
                let label = label.clone().unwrap_or_else(|| describe_rpc(&msg.rpc, &msg.event));
                let client = &write.client;
                let delivered = if *delivered_elsewhere {
                    format!("delivered to {client} elsewhere")
                } else {
                    format!("never delivered to {client}")
                };
                let fate = fate.as_ref().map_or(String::new(), |(o, t)| format!("; {} at {t}", outcome_word(*o)));
                write!(
                    f,
                    "{label} ({method}, event {}) written to {client}'s dropped uplink (mapping {}) at {at}, {}; {delivered}{fate}",
                    event.as_deref().unwrap_or("-"),
                    write.mapping,
                    late(write, *at)
                )
            }
            Finding::LostToOldStream { client, mapping, conn, opened_at, msg, event, at } => write!(
                f,
                "{} (event {}) written to {client}'s dropped standalone stream (mapping {mapping}) at {at}, {} after conn {conn} opened a fresh one, and delivered nowhere else: lost to a second writer (several streams may be open, but each message goes on one, and this one went on the dead one)",
                describe_rpc(&msg.rpc, &msg.event),
                event.as_deref().unwrap_or("-"),
                secs_between(*opened_at, *at)
            ),
            Finding::SecondWriter { write, bytes, from, carried } => {
                let carried = carried.as_ref().map_or(" (heartbeats only)".to_string(), |(m, id)| {
                    format!(", among them {} (event {})", describe_rpc(&m.rpc, &m.event), id.as_deref().unwrap_or("-"))
                });
                let (client, mapping, conn) = (&write.client, write.mapping, write.conn);
                if *from <= write.accepted_at && write.or_gap {
                    write!(
                        f,
                        "{bytes} bytes written to {client}'s dropped uplink (mapping {mapping}) from {from}, events newer than conn {conn}'s replay, before its acceptance reached the client and never delivered: a second writer, or a replay that left them out (they were minted while the resumption was on its way; the trace cannot tell which){carried}"
                    )
                } else if *from <= write.accepted_at {
                    write!(
                        f,
                        "{bytes} bytes written to {client}'s dropped uplink (mapping {mapping}) from {from}, events newer than conn {conn}'s replay, before its acceptance reached the client: a second writer{carried}"
                    )
                } else {
                    write!(
                        f,
                        "{bytes} bytes written to {client}'s dropped uplink (mapping {mapping}) from {from}, {} after conn {conn} was accepted: a second writer{carried}",
                        secs_between(write.accepted_at, *from)
                    )
                }
            }
            Finding::MintedLater { client, conn, from, accepted_at, newest, id, at, shown } => {
                let where_ = match shown {
                    MintedWhere::Post { client, conn } => format!("on {client}'s conn {conn}"),
                    MintedWhere::Application => "reported by the application".to_string(),
                    MintedWhere::Priming => "as the priming event of that very stream".to_string(),
                };
                write!(
                    f,
                    "{client}'s resumption from {from} was accepted on conn {conn} at {accepted_at}, but the session's newest id then was {newest}: it minted {id} as new at {at} ({where_})"
                )
            }
            Finding::NeverShownAbove { client, conn, from, newest, unseen } => write!(
                f,
                "{client}'s resumption from {from} was accepted on conn {conn}, but the session never showed an id above {newest} (at most {unseen} more could have been minted unseen)"
            ),
            Finding::OlderThanRetained { client, conn, from, lowest, replay_from, resent } => {
                let resent = match resent {
                    Some((a, b)) if a == b => format!("; it re-sent event {a}, which {client} already held"),
                    Some((a, b)) => format!("; it re-sent events {a}–{b}, which {client} already held"),
                    None => String::new(),
                };
                write!(
                    f,
                    "{client}'s resumption from {from} was accepted on conn {conn}, though the session's lowest id is {lowest}: {from} is older than anything it retained (or was never minted), and the replay started at {replay_from}{resent}"
                )
            }
            Finding::ReplayStartedLate { client, conn, from, replay_from, missing, store_cut } => write!(
                f,
                "{client}'s resumption from {from} on conn {conn} replayed from {replay_from} instead of {}: {} silently lost{}",
                from + 1,
                range(missing),
                unstored(*store_cut)
            ),
            Finding::WindowGap { client, conn, from, replay_from, missing, store_cut } => write!(
                f,
                "{client}'s resumption from {from} on conn {conn} left {} of its replay window out (replayed from {replay_from}): silently lost{}",
                range(missing),
                unstored(*store_cut)
            ),
            Finding::NeverCarried { client, conn, last, accepted_at } => write!(
                f,
                "{client}'s resumption from {last:?} was accepted on conn {conn} at {accepted_at}, but no event of the session ever carried that id: it lies in no window"
            ),
            Finding::Skipped { client, conn, last, carried, never, store_cut } => {
                let what = match (carried.is_empty(), never.is_empty()) {
                    (_, true) => format!(
                        "the stream had carried after it and the client never received ({})",
                        carried.join(", ")
                    ),
                    (true, false) => format!(
                        "minted after it that reached no socket (the application reported minting them): {}",
                        never.join(", ")
                    ),
                    (false, false) => format!(
                        "after it that the client never received: {} carried by the stream, {} reached no socket (the application reported minting them)",
                        carried.join(", "),
                        never.join(", ")
                    ),
                };
                write!(
                    f,
                    "{client}'s resumption from {last} on conn {conn} skipped {} event(s) {what}{}",
                    carried.len() + never.len(),
                    unstored(*store_cut)
                )
            }
            Finding::HandedAgain { client, conn, label, method, event, at, answered_by, acked_at } => {
                if answered_by == client {
                    write!(
                        f,
                        "{client} was handed {label} ({method}, event {event}) again on conn {conn} at {at}; its answer was acknowledged at {acked_at}"
                    )
                } else {
                    write!(
                        f,
                        "{client} was handed {label} ({method}, event {event}) on conn {conn} at {at}, a request {answered_by} already answered on this session (acknowledged at {acked_at})"
                    )
                }
            }
            Finding::IdReused { client, conn, id, first, second } => write!(
                f,
                "{client}'s conn {conn} delivered {} ({}) under JSON-RPC id {id} at {} while {} ({}) under the same id (at {}) was still pending: an answer to {id} cannot be told apart",
                second.0, second.1, second.2, first.0, first.1, first.2
            ),
            Finding::ReissuedNotReissuable { label, method, old, new, at } => {
                let new = new.as_ref().map_or(String::new(), |n| format!(" as {n}"));
                write!(
                    f,
                    "{label} ({method}) was marked not reissuable, yet the server re-issued it{new} at {at} (old id {old}): a request that cannot be re-issued must be failed explicitly, or the resumption refused"
                )
            }
            Finding::AnswerToTombstone { label, id, at, tombstoned_at } => write!(
                f,
                "the application applied an answer to {label} ({id}) at {at}, an id tombstoned at {tombstoned_at}"
            ),
            Finding::LeftInFlight { label, method, owner, conn, accepted_at, timed_out } => {
                let fate = timed_out.map_or("still open at the end".to_string(), |t| format!("timed out at {t}"));
                write!(
                    f,
                    "{label} ({method}) was in flight when {owner}'s resumption was accepted on conn {conn} at {accepted_at}; never re-issued or failed, {fate}"
                )
            }
            Finding::ReissueNeverDelivered { label, method, owner, new, at, live_since } => write!(
                f,
                "{label} ({method}) was re-issued as {new} at {at}, but {new} never reached {owner}, whose stream was usable from {live_since}: the re-issue went to no live uplink"
            ),
            Finding::ReissueChanged { label, old, new, differs, at } => write!(
                f,
                "{label} was re-issued as {} ({}) at {at}, but the re-issue's {differs} differ from those of {} ({}): a re-issue is the same request under a fresh id",
                new.0, new.1, old.0, old.1
            ),
            Finding::AnsweredTwice { label, method, first, second, by } => write!(
                f,
                "the application applied two answers to {label} ({method}): at {} (id {}) and again at {} (id {}{}); a server request is settled once",
                first.0,
                first.1,
                second.0,
                second.1,
                by.as_ref().map(|b| format!(", an answer {b} sent")).unwrap_or_default()
            ),
            Finding::AnswerWithoutSender { label, method, id, at } => write!(
                f,
                "the application reported {label} ({method}) answered at {at} under id {id}, but no client had sent an answer to {id} on its session by then: an answer applied to the wrong request"
            ),
            Finding::ReachedTwice { label, client, conn, reissued_at, old, new } => write!(
                f,
                "{label} reached {client} twice on conn {conn}: as {} (event {}) at {} and, re-issued at {reissued_at}, as {} (event {}) at {}; the client does the work twice",
                old.0,
                old.1.as_deref().unwrap_or("-"),
                old.2,
                new.0,
                new.1.as_deref().unwrap_or("-"),
                new.2
            ),
            Finding::Leak { client, principal, owner, conn, count, first_id, last_id, requests, why: w, ended } => {
                let ids = match (first_id, last_id) {
                    (Some(a), Some(b)) if a != b => format!("events {a}–{b}"),
                    (Some(a), _) => format!("event {a}"),
                    _ => "events".into(),
                };
                let requests: Vec<String> = requests.iter().map(|m| describe_rpc(&m.rpc, &m.event)).collect();
                let including =
                    if requests.is_empty() { String::new() } else { format!(", including {}", requests.join(", ")) };
                let took = match ended {
                    Some((c, n, t)) => format!(", and accepting it ended {c}'s live stream (conn {n}) at {t}"),
                    None => String::new(),
                };
                write!(
                    f,
                    "{client} (principal {principal}) received {count} message(s) of {owner}'s session on conn {conn}: {ids}{including}{took}{}",
                    why(w, client, owner)
                )
            }
            Finding::TakenOver { client, principal, owner, conn, at, ended: (c, n, t), why: w } => write!(
                f,
                "{client} (principal {principal}) took over {owner}'s session stream on conn {conn} at {at}: the server accepted its resumption and ended {c}'s live stream (conn {n}) at {t}{}",
                why(w, client, owner)
            ),
            Finding::ForeignDelete { client, principal, owner, conn, status, at, why: w } => write!(
                f,
                "{client} (principal {principal}) ended {owner}'s session with DELETE on conn {conn} (HTTP {status}) at {at}: only the session's owner may end it{}",
                why(w, client, owner)
            ),
            Finding::ForeignToolChange { client, principal, owner, conn, tool, enabled, told, why: w } => {
                let acted = if *enabled {
                    format!("the server enabled {tool} (a tool result)")
                } else {
                    "the call got no tool result".to_string()
                };
                let reached = match told {
                    Some((c, id, at)) => format!(
                        ", and {owner}'s stream was told its tool list changed ({} on conn {c} at {at}), a change only {client} asked for: the session-hijack prompt injection",
                        id.as_deref().map_or("an event".to_string(), |i| format!("event {i}"))
                    ),
                    None => String::new(),
                };
                write!(
                    f,
                    "{client} (principal {principal}) called enable_tool on {owner}'s session on conn {conn}: {acted}{reached}; only the session's owner may act on it{}",
                    why(w, client, owner)
                )
            }
            Finding::ForeignAnswer { label, method, owner, at, by } => {
                let who: Vec<String> = by.iter().map(|(c, p)| format!("{c} (principal {p})")).collect();
                write!(
                    f,
                    "the application applied an answer to {label} ({method}) of {owner}'s session at {at} that only {} had sent: an answer from a principal other than the session's owner",
                    who.join(", ")
                )
            }
            Finding::TimedOut { label, method, issued, at, rivalry: r } => write!(
                f,
                "{label} ({method}) issued at {issued} timed out at {at} without an answer{}",
                rivalry(*r)
            ),
            Finding::Unresolved { label, method, issued, bound, rivalry: r } => write!(
                f,
                "{label} ({method}) issued at {issued} was still unresolved at the end, more than {bound} later{}",
                rivalry(*r)
            ),
            Finding::ResultLost { client, call, id, sent, at, why, rivalry: r } => write!(
                f,
                "{client}'s tools/call for {call} (id {id}), sent at {sent}, never got its result: by {at} {why}{}",
                rivalry(*r)
            ),
            Finding::NoLiveUplink { client, end, conn, problem, shared_credential } => {
                let problem = match problem {
                    UplinkProblem::Refused(how) => format!("refused ({how})"),
                    UplinkProblem::Ended(why) => format!("ended: {why}"),
                    UplinkProblem::MappingDropped(fault) => format!("its NAT mapping was dropped ({fault})"),
                    UplinkProblem::NeverAnswered => "never answered with an event stream".into(),
                };
                let note = if *shared_credential { " (it shares a stolen credential with another client)" } else { "" };
                write!(f, "{client} has no live uplink at the end ({end}): its latest uplink, conn {conn}, {problem}{note}")
            }
            Finding::SessionElsewhere { client, conn, status, at, replica, home, shared: false } => write!(
                f,
                "{client}'s request on conn {conn} was sent to replica {replica}, which never saw its session (created on replica {home}), and refused it at {at} (HTTP {status}): with a store per replica, no server keeps a session that the balancer sends to a replica which never saw it"
            ),
            Finding::SessionElsewhere { client, conn, status, at, replica, home, shared: true } => write!(
                f,
                "{client}'s request on conn {conn} was sent to replica {replica}, which refused its live session as unknown at {at} (HTTP {status}), though the replicas share a store: the session (created on replica {home}) was not kept where another replica could take it over"
            ),
            Finding::NotificationsLost { client, at, lost, emitted, first, conn, live, store_cut } => {
                let on = conn.map_or(String::new(), |c| format!(" (conn {c})"));
                let what = if *lost == 1 { format!("event {first}") } else { format!("events {first} on") };
                let count = if lost == emitted {
                    format!("{emitted} notification(s)")
                } else {
                    format!("{lost} of {emitted} notifications")
                };
                write!(
                    f,
                    "{count} emitted on {client}'s session at {at} never reached it ({what}), though its uplink{on} was live from {} to {}",
                    live.0, live.1
                )?;
                match store_cut {
                    Some(r) => write!(f, "; replica {r}, which held the session, was cut from the shared store as they were emitted, and a server that writes through sends nothing the store has not taken: inherent"),
                    None => Ok(()),
                }
            }
            Finding::RefusedByServerError { client, conn, status, store_cut: None } => write!(
                f,
                "{client}'s resumption on conn {conn} was answered HTTP {status}: the server failed, it did not refuse (an explicit refusal is a 4xx or an error event)"
            ),
            Finding::RefusedByServerError { client, conn, status, store_cut: Some(r) } => write!(
                f,
                "{client}'s resumption on conn {conn} was answered HTTP {status} by replica {r}, which a partition cut from the shared store: inherent, it cannot serve a session kept there"
            ),
            Finding::RefusalInDisguise { client, conn, last } => write!(
                f,
                "{client}'s resumption on conn {conn} from {last}, an id the session never minted, was answered 200 and its stream ended with no event: a refusal in disguise, not an explicit one (SSE polling resumes from an id the session holds)"
            ),
            Finding::SilentRefusal { client, conn } => write!(
                f,
                "{client}'s resumption on conn {conn} was answered 200 with an empty stream: a silent refusal"
            ),
            Finding::TokenStillWorked { owner, refused_at, client, conn, at } => write!(
                f,
                "{owner}'s token still worked after the refusal at {refused_at}: {client}'s conn {conn} was served at {at} (the seed analysis: a refused resumption must invalidate the session token)"
            ),
            Finding::NeverRenewed { client, refused_at } => {
                write!(f, "{client} never obtained a new session after its resumption was refused at {refused_at}")
            }
            Finding::OwnerSessionKilled { thief, refused_at, owner, conn, at } => write!(
                f,
                "{thief}'s refused resumption at {refused_at} killed {owner}'s session: {owner}'s conn {conn} found it gone (HTTP 404) at {at}"
            ),
            Finding::ValidRefused { client, conn, how, step_at } => write!(
                f,
                "{client}'s resumption on conn {conn} was refused ({how}), but the scenario expects it accepted (step at {step_at}): a valid resumption refused costs the client its session"
            ),
            Finding::ValidRefusedProven { client, conn, how, last, at, window, unfenced } => {
                write!(f, "{client}'s resumption on conn {conn} from {last} was refused ({how}) at {at}, yet ")?;
                match window {
                    None => write!(f, "{last} was the newest id its session had minted, {client} had received it, and the session was alive and its own: nothing lay in the window to refuse")?,
                    Some((n, newest, retention)) => write!(f, "{client} had received {last}, the window held only {n} notification(s) up to {newest}, which the server keeps (retention {retention}), and the session was alive and its own: the window was valid")?,
                }
                if let Some((took, grace)) = unfenced {
                    write!(f, "; a prior connection was still half-open, but the refusal came {took} after the request, sooner than the server's fence grace of {grace}: it never waited for the fence")?;
                }
                write!(f, ", and the refusal costs {client} its session")
            }
            Finding::ExpectationMissed { client, conn, got, expected, step_at } => write!(
                f,
                "{client}'s resumption on conn {conn} was {got}, but the scenario expects it {expected} (step at {step_at})"
            ),
            Finding::ResentHeld { client, conn, last, id, at } => {
                write!(f, "{client} resumed from {last} on conn {conn} and was sent event {id} again at {at}")
            }
            Finding::HeldIdReused { client, conn, last, id, at, sent, held } => write!(
                f,
                "{client} resumed from {last} on conn {conn} and at {at} was sent {} under id {id}, an id it already held for {} (conn {}, {}): two events share one id",
                what(sent),
                what(&held.0),
                held.1,
                held.2
            ),
            Finding::DeliveredTwice { client, conn, id, at } => {
                write!(f, "{client}'s conn {conn} delivered event {id} twice (again at {at})")
            }
            Finding::TwoEventsOneId { client, conn, id, first, second } => write!(
                f,
                "{client}'s conn {conn} delivered two events under id {id}: {} at {}, then {} at {}",
                what(&first.0),
                first.1,
                what(&second.0),
                second.1
            ),
            Finding::OutOfOrder { client, conn, id, after, at } => {
                write!(f, "{client}'s conn {conn} delivered event {id} after event {after} at {at}")
            }
            Finding::FreshStreamResent { client, conn, id, msg, at, held } => write!(
                f,
                "{client} opened a fresh stream on its session (conn {conn}, no Last-Event-ID) and was handed event {id} ({}) at {at}, which it had already received on conn {} at {}",
                what(msg),
                held.0,
                held.1
            ),
            Finding::Protocol { client, conn, what, store_cut: None } => write!(f, "{client}'s conn {conn}: {what}"),
            Finding::Protocol { client, conn, what, store_cut: Some(r) } => write!(
                f,
                "{client}'s conn {conn}: {what}, from replica {r}, which a partition cut from the shared store while the request waited: inherent, its store commands wait out their timeout first"
            ),
            Finding::ServerError { client, conn, method, status, store_cut: None } => write!(
                f,
                "{client}'s {method} on conn {conn} was answered HTTP {status}: an unhandled server error, not an answer a client can act on"
            ),
            Finding::ServerError { client, conn, method, status, store_cut: Some(r) } => write!(
                f,
                "{client}'s {method} on conn {conn} was answered HTTP {status} by replica {r}, which a partition cut from the shared store: inherent, it cannot serve a session kept there"
            ),
        }
    }
}
