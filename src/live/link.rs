//! The control connection of each server process: the commands the step
//! loop sends it, and the reports it sends back into the trace.

use super::control::PROTOCOL;
use super::control::{FromServer, ToServer};
use super::startup::{Lines, Writer};
use crate::inbox::Inbox;
use crate::server::{AppHook, AppReporter};
use crate::trace::What;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// Execution numbers as the trace shows them: each process numbers its own
/// from 1 (again after a restart); the trace numbers every execution of
/// the run once, in the order they are first reported.
#[derive(Default)]
pub(super) struct ExecNumbers {
    next: u32,
    /// (replica index, life, the process's own number) → the trace's.
    map: BTreeMap<(usize, u32, u32), u32>,
}

impl ExecNumbers {
    pub(super) fn number(&mut self, replica: usize, life: u32, own: u32) -> u32 {
        *self.map.entry((replica, life, own)).or_insert_with(|| {
            self.next += 1;
            self.next
        })
    }
}

/// The control connection's side of a live run: what a (re)started
/// process's reports and commands go through.
pub(super) struct Control {
    pub(super) fatal: Rc<RefCell<Option<String>>>,
    pub(super) scale: f64,
    pub(super) listener: TcpListener,
}

/// The two tasks serving one process's control connection.
pub(super) struct ControlTasks(tokio::task::AbortHandle, tokio::task::AbortHandle);

impl ControlTasks {
    pub(super) fn abort(&self) {
        self.0.abort();
        self.1.abort();
    }
}

impl Control {
    /// Forwards `app`'s commands to, and records through `app` the reports
    /// of, a process that said `ready`: replica `who.0` (from 0) in its
    /// life `who.1`, whose execution numbers `execs` maps to the trace's.
    pub(super) fn spawn(
        &self,
        app: &AppHook,
        writer: Writer,
        lines: Lines,
        who: (usize, u32),
        execs: &Rc<RefCell<ExecNumbers>>,
    ) -> ControlTasks {
        let fwd = tokio::task::spawn_local(forward_commands(app.commands.clone(), writer, self.fatal.clone()));
        let read = tokio::task::spawn_local(read_reports(
            lines,
            app.report.clone(),
            self.fatal.clone(),
            self.scale,
            (who, execs.clone()),
        ));
        ControlTasks(fwd.abort_handle(), read.abort_handle())
    }
}

/// Sends the step loop's application commands to the process, each at its
/// due time.
pub(super) async fn forward_commands(
    commands: Inbox<crate::server::AppCommand>,
    mut w: Writer,
    fatal: Rc<RefCell<Option<String>>>,
) {
    loop {
        let cmd = ToServer::from(commands.recv().await);
        let mut line = serde_json::to_string(&cmd).expect("commands serialize");
        line.push('\n');
        if let Err(e) = w.write_all(line.as_bytes()).await {
            fatal.borrow_mut().get_or_insert(format!("the control connection broke while sending a command: {e}"));
            return;
        }
    }
}

/// Records what the process reports; a line outside the protocol ends the run.
pub(super) async fn read_reports(
    mut lines: Lines,
    rec: AppReporter,
    fatal: Rc<RefCell<Option<String>>>,
    scale: f64,
    ((replica, life), execs): ((usize, u32), Rc<RefCell<ExecNumbers>>),
) {
    loop {
        match lines.next_line().await {
            Ok(Some(line)) if line.trim().is_empty() => {}
            Ok(Some(line)) => match serde_json::from_str::<FromServer>(&line)
                .map_err(|e| e.to_string())
                .and_then(|m| m.into_what(scale))
            {
                Ok(Some(mut what)) => {
                    if let What::Execution { exec, .. } = &mut what {
                        *exec = execs.borrow_mut().number(replica, life, *exec);
                    }
                    rec.record(what)
                }
                Ok(None) => {}
                Err(e) => {
                    fatal.borrow_mut().get_or_insert(format!("the server process broke {PROTOCOL}: {e}: {line}"));
                    return;
                }
            },
            Ok(None) => {
                // The process may be exiting: the step loop names that first.
                tokio::time::sleep(Duration::from_millis(200)).await;
                fatal.borrow_mut().get_or_insert("the server process closed the control connection".into());
                return;
            }
            Err(e) => {
                fatal.borrow_mut().get_or_insert(format!("the control connection failed: {e}"));
                return;
            }
        }
    }
}
