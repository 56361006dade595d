//! Carrying out a scenario's steps: one dispatcher over every step kind,
//! and one group of methods per family of steps (the session dialects', the
//! stateless dialect's, the network and client faults, the deployment's).

use super::hosts::Hosts;
use super::{balancer, nat, NatCmd, World};
use crate::client::{ClientCmd, ResumeFrom};
use crate::scenario::{Action, LastEventId, SeenOn, Step, Tamper};
use crate::server::AppCommand;
use crate::trace::stateless::StateHow;
use crate::trace::{SimTime, What};
use std::time::Duration;

/// Why a step acted on nothing, when it did.
type Missed = Option<String>;

impl<H: Hosts> World<H> {
    /// Applies step `index` at its due time `at`: records it, then hands it
    /// to the actor that carries it out (a client, a NAT, the server's
    /// application) or, for a crash or a theft, does it here.
    pub(crate) fn apply(&mut self, step: &Step, index: usize, at: Duration) {
        let rec = self.rec.clone();
        // What the step loop itself records happens at the step's time.
        rec.set_loop_now(at);
        let expect = match &step.action {
            Action::Resume { client, expect: Some(e), .. } => {
                Some(crate::trace::StepExpect { client: client.clone(), resumption: e.word().into() })
            }
            _ => None,
        };
        let call = match &step.action {
            Action::CallTool { label, .. } => Some(label.clone()),
            _ => None,
        };
        rec.record_at(
            SimTime::from_duration(at),
            What::Step { index, action: step.action.kind(), detail: step.action.describe(), expect, call },
        );
        let missed = self.act(step, index, at);
        if let Some(why) = missed {
            rec.record_at(SimTime::from_duration(at), What::StepMissed { index, action: step.action.kind(), why });
        }
    }

    /// Carries out step `index` (see [`World::apply`]); returns why it acted
    /// on nothing, when it did. (A NAT fault is judged by the NAT, which
    /// records its own miss: it alone knows which mappings are open.)
    fn act(&mut self, step: &Step, index: usize, at: Duration) -> Missed {
        match &step.action {
            // The session dialects (legacy-sse, streamable-http).
            Action::Connect { client } => self.connect(client, at),
            Action::ServerRequest { client, method, label, reissuable } => {
                self.server_request(client, method, label, *reissuable, at)
            }
            Action::CallTool { client, method, label } => {
                self.client_cmd(client, at, ClientCmd::CallTool { label: label.clone(), method: method.clone() })
            }
            Action::EndSession { client } => self.client_cmd(client, at, ClientCmd::EndSession),
            Action::EnableTool { client, tool } => {
                self.client_cmd(client, at, ClientCmd::EnableTool { tool: tool.clone() })
            }
            Action::Notify { client, count } => self.notify(client, *count, at),
            Action::Answer { client, label } => self.answer(client, label, at),
            Action::Resume { client, last_event_id, .. } => match self.resume_from(client, last_event_id) {
                Some(from) => self.client_cmd(client, at, ClientCmd::Resume(from)),
                None => Some(format!("cannot resume: no id to resume from ({})", step.action.describe())),
            },
            Action::StealToken { from, to, credential } => self.steal_token(from, to, *credential, at),
            // The stateless dialect (stateless-http).
            Action::Call { client, tool, label, decline } => self.client_cmd(
                client,
                at,
                ClientCmd::Call { label: label.clone(), tool: tool.clone(), decline: *decline },
            ),
            Action::StealRequestState { from, to, label, credential } => {
                self.steal_state(from, to, label, *credential, at)
            }
            Action::TamperRequestState { client, label, how } => self.tamper_state(client, label, how, at),
            Action::ReplayRequestState { client, label } => self.replay_state(client, label, at),
            Action::SeverCall { client, label } => self.fault_on_call(client, label, NatCmd::SeverPort, index, at),
            Action::ResetCall { client, label } => self.fault_on_call(client, label, NatCmd::ResetPort, index, at),
            Action::Listen { client } => self.client_cmd(client, at, ClientCmd::Listen),
            Action::ChangeTools => self.change_tools(at),
            // The network and the clients, in every dialect.
            Action::Rebind { client } => self.nat(client, NatCmd::Rebind, index, at),
            Action::Sever { client } => self.nat(client, NatCmd::Sever, index, at),
            Action::Reset { client } => self.nat(client, NatCmd::Reset, index, at),
            Action::CrashClient { client } => self.crash_client(client, at),
            Action::Wait => None,
            // The server and the deployment.
            Action::RestartServer => self.restart_server(),
            Action::RestartReplica { replica } => self.restart_replica(*replica),
            Action::CrashReplica { replica } => self.crash_replica(*replica, at),
            Action::Drain { replica } => self.drain(*replica, at),
            Action::Partition { replica, lasts } => self.partition(*replica, *lasts, at),
        }
    }

    /// Why `client` cannot carry a step: it crashed and has not connected
    /// again, so no host runs it.
    fn down(&self, client: &str) -> Missed {
        self.crashed.iter().any(|c| c == client).then(|| format!("{client} has crashed and not connected again"))
    }

    /// Hands `cmd` to `client` at `at`, unless the client is down.
    fn client_cmd(&self, client: &str, at: Duration, cmd: ClientCmd) -> Missed {
        if let Some(why) = self.down(client) {
            return Some(why);
        }
        self.clients[client].0.push_at(at, cmd);
        None
    }

    /// Hands a fault to `client`'s NAT, which records its own miss.
    fn nat(&self, client: &str, cmd: NatCmd, index: usize, at: Duration) -> Missed {
        self.nats[client].push_at(at, nat::Fault { step: index, cmd });
        None
    }

    // The session dialects.

    fn connect(&mut self, client: &str, at: Duration) -> Missed {
        if let Some(i) = self.crashed.iter().position(|c| c == client) {
            self.crashed.remove(i);
            self.sim.restart(client);
        }
        self.client_cmd(client, at, ClientCmd::Connect)
    }

    fn server_request(&self, client: &str, method: &str, label: &str, reissuable: bool, at: Duration) -> Missed {
        let Some(token) = self.token_of(client) else {
            return Some(format!("cannot issue {label}: {client} holds no session"));
        };
        self.app_of(&token).commands.push_at(
            at,
            AppCommand::ServerRequest {
                client: client.to_string(),
                token,
                method: method.to_string(),
                label: label.to_string(),
                reissuable,
            },
        );
        None
    }

    fn notify(&self, client: &str, count: u64, at: Duration) -> Missed {
        let Some(token) = self.token_of(client) else {
            return Some(format!("cannot notify: {client} holds no session"));
        };
        self.app_of(&token).commands.push_at(at, AppCommand::Notify { client: client.to_string(), token, count });
        None
    }

    fn answer(&self, client: &str, label: &str, at: Duration) -> Missed {
        match self.rec.ids_for_label(label) {
            ids if ids.is_empty() => Some(format!("no request {label} was issued: nothing to answer")),
            ids => self.client_cmd(client, at, ClientCmd::Answer(ids)),
        }
    }

    fn steal_token(&self, from: &str, to: &str, credential: bool, at: Duration) -> Missed {
        let token = self.token_of(from);
        self.rec.record_at(
            SimTime::from_duration(at),
            What::TokenStolen { from: from.to_string(), to: to.to_string(), credential },
        );
        let Some(token) = token else {
            return Some(format!("{from} holds no session token: nothing to steal"));
        };
        let cred = credential.then(|| self.clients[from].1.credential.borrow().clone());
        self.client_cmd(to, at, ClientCmd::Adopt { token, credential: cred })
    }

    /// What `client` resumes from: `None` when the id it names does not exist
    /// (yet) in the run.
    fn resume_from(&self, client: &str, last_event_id: &LastEventId) -> Option<ResumeFrom> {
        match last_event_id {
            LastEventId::LastSeen => Some(ResumeFrom::LastSeen),
            LastEventId::None => Some(ResumeFrom::Nothing),
            LastEventId::Id(n) => Some(ResumeFrom::Id(n.to_string())),
            LastEventId::Raw(s) => Some(ResumeFrom::Id(s.clone())),
            LastEventId::LastSeenPlus(k) => Some(ResumeFrom::LastSeenPlus(*k)),
            // An id of the session the resuming client now holds (a thief: the victim's).
            LastEventId::Seen { client: by, nth, stream } => {
                let purpose = match stream {
                    SeenOn::Uplink => crate::trace::Purpose::Uplink,
                    SeenOn::Call => crate::trace::Purpose::Call,
                };
                self.token_of(client).and_then(|t| self.rec.nth_message_id(by, *nth, &t, purpose)).map(ResumeFrom::Id)
            }
            LastEventId::SeenBefore(label) => {
                self.token_of(client).and_then(|t| self.rec.id_seen_before(client, label, &t)).map(ResumeFrom::Id)
            }
        }
    }

    // The stateless dialect.

    /// The requestState `client` holds for call `label`.
    fn held(&self, client: &str, label: &str) -> Option<crate::client::HeldState> {
        self.clients[client].1.states.borrow().get(label).cloned()
    }

    fn steal_state(&self, from: &str, to: &str, label: &str, credential: bool, at: Duration) -> Missed {
        let Some(held) = self.held(from, label) else {
            return Some(format!("cannot steal: {from} holds no requestState for {label}"));
        };
        let cred = credential.then(|| self.clients[from].1.credential.borrow().clone());
        let how = StateHow::Stolen { from: from.to_string() };
        let (call, tool) = (label.to_string(), held.tool.clone());
        self.client_cmd(to, at, ClientCmd::Present { call, tool, held, how, credential: cred })
    }

    fn tamper_state(&self, client: &str, label: &str, how: &Tamper, at: Duration) -> Missed {
        let Some(mut held) = self.held(client, label) else {
            return Some(format!("cannot tamper: {client} holds no requestState for {label}"));
        };
        let (call, tool, how) = match how {
            Tamper::Flip => {
                held.state = crate::wire::mrtr::flip(&held.state);
                (label.to_string(), held.tool.clone(), StateHow::Flipped)
            }
            Tamper::Truncate => {
                held.state = crate::wire::mrtr::truncate(&held.state);
                (label.to_string(), held.tool.clone(), StateHow::Truncated)
            }
            Tamper::Move { onto, tool } => {
                (onto.clone(), tool.clone(), StateHow::Moved { from_call: label.to_string() })
            }
        };
        self.client_cmd(client, at, ClientCmd::Present { call, tool, held, how, credential: None })
    }

    fn replay_state(&self, client: &str, label: &str, at: Duration) -> Missed {
        let Some(held) = self.held(client, label) else {
            return Some(format!("cannot present again: {client} holds no requestState for {label}"));
        };
        let (call, tool) = (label.to_string(), held.tool.clone());
        self.client_cmd(client, at, ClientCmd::Present { call, tool, held, how: StateHow::Replayed, credential: None })
    }

    /// Severs or resets the connection of `client`'s call `label` in flight, at its NAT.
    fn fault_on_call(&self, client: &str, label: &str, cmd: fn(u16) -> NatCmd, index: usize, at: Duration) -> Missed {
        match self.clients[client].1.open_calls.borrow().get(label).copied() {
            Some(port) => self.nat(client, cmd(port), index, at),
            None => Some(format!("no request of {client}'s call {label} is in flight")),
        }
    }

    fn change_tools(&self, at: Duration) -> Missed {
        for app in std::iter::once(&self.app).chain(&self.replica_apps) {
            app.commands.push_at(at, AppCommand::ToolsChanged);
        }
        None
    }

    // The clients.

    fn crash_client(&mut self, client: &str, at: Duration) -> Missed {
        if let Some(why) = self.down(client) {
            return Some(why);
        }
        self.sim.crash(client);
        self.crashed.push(client.to_string());
        // Crashes fire between ticks (`Schedule::due`): `at` is now.
        self.rec.record_at(SimTime::from_duration(at), What::ClientCrashed { client: client.to_string() });
        None
    }

    // The server and the deployment.

    fn restart_server(&mut self) -> Missed {
        // With replicas, the deployment restarts: every replica's process.
        let restarted = if self.server_hosts == ["server"] {
            self.sim.restart_server()
        } else {
            self.server_hosts.clone().iter().try_for_each(|h| self.sim.restart_host(h))
        };
        restarted.err().map(|why| format!("cannot restart the server: {why}"))
    }

    fn restart_replica(&mut self, replica: u32) -> Missed {
        let host = balancer::replica_host(replica);
        if let Err(why) = self.sim.restart_host(&host) {
            return Some(format!("cannot restart replica {replica}: {why}"));
        }
        self.down_hosts.remove(&host);
        if let Some(b) = &self.balancer {
            b.picker().restarted(replica);
        }
        None
    }

    fn crash_replica(&mut self, replica: u32, at: Duration) -> Missed {
        let host = balancer::replica_host(replica);
        if self.down_hosts.contains(&host) {
            return Some(format!("replica {replica} is already down"));
        }
        if let Err(why) = self.sim.crash_host(&host) {
            return Some(format!("cannot crash replica {replica}: {why}"));
        }
        self.down_hosts.insert(host);
        if let Some(b) = &self.balancer {
            b.picker().crashed(replica, at + balancer::HEALTH_CHECK);
        }
        self.rec.record_at(
            SimTime::from_duration(at),
            What::ReplicaCrashed { replica, out_after_us: balancer::HEALTH_CHECK.as_micros() as u64 },
        );
        None
    }

    fn drain(&mut self, replica: u32, at: Duration) -> Missed {
        let drained = match &self.balancer {
            Some(b) => {
                b.picker().drain(replica);
                Ok(())
            }
            None => self.sim.drain_host(&balancer::replica_host(replica)),
        };
        match drained {
            Ok(()) => {
                self.rec.record_at(SimTime::from_duration(at), What::ReplicaDrained { replica });
                None
            }
            Err(why) => Some(format!("cannot drain replica {replica}: {why}")),
        }
    }

    fn partition(&mut self, replica: u32, lasts: Option<Duration>, at: Duration) -> Missed {
        if let Err(why) = self.sim.store_link(&balancer::replica_host(replica), true) {
            return Some(why);
        }
        self.rec.record_at(SimTime::from_duration(at), What::StorePartitioned { replica });
        self.cut.insert(replica);
        self.heals.extend(lasts.map(|l| (at + l, replica)));
        None
    }

    /// Heals the partitions from the store that are due by `now` (a tick
    /// boundary), recording each.
    pub(super) fn heal_due(&mut self, now: Duration) {
        // Every tick of every run passes here: nothing to do is the usual case.
        if !self.heals.iter().any(|(t, _)| *t <= now) {
            return;
        }
        let (due, later): (Vec<_>, Vec<_>) = self.heals.drain(..).partition(|(t, _)| *t <= now);
        self.heals = later;
        for (_, replica) in due {
            if self.sim.store_link(&balancer::replica_host(replica), false).is_ok() {
                self.cut.remove(&replica);
                self.rec.record_at(SimTime::from_duration(now), What::StoreHealed { replica });
            }
        }
    }
}
