//! The server process under test: started in its own process group, its
//! output kept (the last lines, for error messages), and the whole group
//! killed when the run ends, however it ends.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::rc::Rc;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// How many of the process's last output lines an error message quotes.
const TAIL_LINES: usize = 12;

/// A running server process.
pub struct Process {
    child: tokio::process::Child,
    /// Its process group (the shell's pid: the group's leader).
    pgid: Option<u32>,
    tail: Rc<RefCell<VecDeque<String>>>,
    /// The tasks reading its stdout and stderr; they end at end of file.
    drains: Vec<tokio::task::JoinHandle<()>>,
}

impl Process {
    /// Starts `command` with `sh -c` in a new process group, with `env` added
    /// to mcpsim's environment. Its stdout and stderr are drained into the
    /// tail (and echoed to mcpsim's stderr when `echo` is set).
    pub fn spawn(command: &str, env: &[(&'static str, String)], echo: bool) -> std::io::Result<Self> {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c").arg(command).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        cmd.kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd.spawn()?;
        let tail: Rc<RefCell<VecDeque<String>>> = Rc::default();
        let mut drains = Vec::new();
        if let Some(out) = child.stdout.take() {
            drains.push(tokio::task::spawn_local(drain(out, tail.clone(), echo)));
        }
        if let Some(err) = child.stderr.take() {
            drains.push(tokio::task::spawn_local(drain(err, tail.clone(), echo)));
        }
        let pgid = child.id();
        Ok(Process { child, pgid, tail, drains })
    }

    /// Lets the last output of a process that exited arrive (briefly: a
    /// process it left behind may hold its pipes open).
    pub async fn settle(&mut self) {
        let drains = std::mem::take(&mut self.drains);
        let _ = tokio::time::timeout(std::time::Duration::from_millis(300), futures::future::join_all(drains)).await;
    }

    /// Its last lines of output, indented, or a note that it printed nothing.
    pub fn tail(&self) -> String {
        let tail = self.tail.borrow();
        if tail.is_empty() {
            return "  (it printed nothing)".into();
        }
        tail.iter().map(|l| format!("  | {l}")).collect::<Vec<_>>().join("\n")
    }

    /// Waits until it exits.
    pub async fn exited(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Its process id (the shell's; with `exec`, the command's), while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Its exit status, if it has exited (without waiting).
    pub fn try_exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the whole process group (the shell and everything it started).
    pub fn kill(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) with a negative pid signals a process group; it
            // touches no memory of ours.
            unsafe {
                libc::kill(-(pgid as i32), libc::SIGKILL);
            }
        }
        let _ = self.child.start_kill();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads `r` line by line into `tail`, keeping the last [`TAIL_LINES`].
async fn drain(r: impl AsyncRead + Unpin, tail: Rc<RefCell<VecDeque<String>>>, echo: bool) {
    let mut lines = BufReader::new(r).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if echo {
            eprintln!("[server] {line}");
        }
        let mut t = tail.borrow_mut();
        if t.len() == TAIL_LINES {
            t.pop_front();
        }
        t.push_back(line);
    }
}

/// How an exit status reads in a message.
pub fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("was killed by signal {sig}");
        }
    }
    match status.code() {
        Some(c) => format!("exited with status {c}"),
        None => "exited".into(),
    }
}
