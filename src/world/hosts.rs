//! What the step loop needs of the hosts beyond the actors' inboxes: starting,
//! crashing and restarting them (turmoil's in a simulation, processes and
//! tasks in a live run).

use super::STORE_HOST;

/// Starting and stopping client hosts: what the step loop needs of the
/// network beyond the actors' inboxes (turmoil in a simulation; tasks in a
/// live run).
pub(crate) trait Hosts {
    /// Stops client `client` at once, as a crash: it forgets everything and
    /// its connections die with it.
    fn crash(&mut self, client: &str);
    /// Starts a crashed client again, with an empty memory.
    fn restart(&mut self, client: &str);
    /// Restarts the server's process (`restart-server`); an error says why it cannot.
    fn restart_server(&mut self) -> Result<(), String>;
    /// Restarts the process on host `host` (a replica of a deployment); an
    /// error says why it cannot.
    fn restart_host(&mut self, host: &str) -> Result<(), String> {
        Err(format!("cannot restart {host} here"))
    }
    /// Crashes the process on host `host` (a replica of a deployment), which
    /// stays down until it is restarted; an error says why it cannot.
    fn crash_host(&mut self, host: &str) -> Result<(), String> {
        Err(format!("cannot crash {host} here"))
    }
    /// Drains the replica on host `host` at the balancer (no new
    /// connection goes to it); an error says why it cannot.
    fn drain_host(&mut self, host: &str) -> Result<(), String> {
        Err(format!("cannot drain {host} here: no balancer"))
    }
    /// Cuts (`cut`) or restores the link between host `host` and the shared
    /// store; an error says why it cannot.
    fn store_link(&mut self, host: &str, cut: bool) -> Result<(), String> {
        let _ = cut;
        Err(format!("cannot partition {host} from the store here"))
    }
}

impl Hosts for turmoil::Sim<'_> {
    fn crash(&mut self, client: &str) {
        turmoil::Sim::crash(self, client);
    }
    fn restart(&mut self, client: &str) {
        self.bounce(client);
    }
    fn restart_server(&mut self) -> Result<(), String> {
        // The host's software starts again: the plug's `serve` runs anew.
        self.bounce("server");
        Ok(())
    }
    fn restart_host(&mut self, host: &str) -> Result<(), String> {
        self.bounce(host);
        Ok(())
    }
    fn crash_host(&mut self, host: &str) -> Result<(), String> {
        turmoil::Sim::crash(self, host);
        Ok(())
    }
    fn store_link(&mut self, host: &str, cut: bool) -> Result<(), String> {
        // Held, not lost: TCP retransmits what a partition delayed, so the
        // connections that carried data across it deliver it once it heals
        // (turmoil's own TCP does not retransmit what `partition` drops).
        if cut {
            self.hold(host, STORE_HOST);
        } else {
            self.release(host, STORE_HOST);
        }
        Ok(())
    }
}
