//! `mcpsim serve`: a built-in server (a reference engine with its policy, a
//! mutant, rmcp) on real TCP, speaking `mcpsim-control/1` when a live run
//! starts it. Without a control port it is just a server with known
//! behaviour, for people who test their MCP clients against it.

use super::control::{FromServer, ToServer, PROTOCOL};
use crate::error::{Error, Result};
use crate::inbox::Inbox;
use crate::scenario::{Dialect, Dur, ServerConfig, ToolSpec};
use crate::seed::Seed;
use crate::server::{AppCommand, AppHook, AppReporter};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// What `mcpsim serve` serves, and where.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// A built-in server's name (`mcpsim list servers`).
    pub server: String,
    /// The port to serve MCP on, on 127.0.0.1.
    pub port: u16,
    /// Where a live run listens for the control connection, if one started us.
    pub control_port: Option<u16>,
    /// The dialect it speaks.
    pub dialect: Dialect,
    /// The server settings, in real time.
    pub config: ServerConfig,
    /// Seeds its session tokens.
    pub seed: Seed,
    /// The dialects it declares in `ready`: the one given with `--dialect`,
    /// else every dialect the server speaks (it serves the one
    /// `MCPSIM_DIALECT` names).
    pub speaks: Vec<Dialect>,
    /// Which process of the server this is, counted from 1: its life
    /// (`MCPSIM_LIFE`, 1 when fresh; a live run that restarts the process
    /// counts on), and in a deployment its replica (`MCPSIM_REPLICA` of
    /// `MCPSIM_REPLICAS`): the ((life - 1) * replicas + replica)th.
    pub life: u32,
    /// stateless-http: the tools it offers (`MCPSIM_TOOLS`, real times), or
    /// [`default_tools`] when it is started by hand.
    pub tools: Vec<ToolSpec>,
    /// Where it keeps its durable state: a Redis (`MCPSIM_STORE` or
    /// `--store`, `redis://HOST:PORT`), or, when `None`, its own memory.
    pub store: Option<std::net::SocketAddr>,
    /// The wall-clock time (ms since the Unix epoch) that is scenario time 0
    /// (`MCPSIM_CLOCK_ORIGIN_MS`): a deployment's replicas share it, so that
    /// a state's expiry means the same on each. `None`: when it starts.
    pub clock_origin_ms: Option<u64>,
    /// Real seconds per scenario second (`MCPSIM_TIME_SCALE`; 1 when
    /// started by hand): the timings no scenario sets (the shared store's
    /// lease and poll) are shortened by it, as the run shortened the rest.
    pub time_scale: f64,
}

/// What a stateless server started by hand offers: `echo` (at once),
/// `confirm` (asks for an elicitation first), `redeem` (a one-time state)
/// and `slow` (30 s, progress every 5 s).
pub fn default_tools() -> Vec<ToolSpec> {
    let tool = |name: &str, runs: u64, progress: Option<u64>, input: Option<&str>, once: bool| ToolSpec {
        name: name.into(),
        runs: Duration::from_secs(runs),
        progress_every: progress.map(Duration::from_secs),
        input: input.map(str::to_string).into_iter().collect(),
        once,
        idempotent: name == "echo",
    };
    vec![
        tool("echo", 0, None, None, false),
        tool("confirm", 0, None, Some("elicitation/create"), false),
        tool("redeem", 0, None, Some("elicitation/create"), true),
        tool("slow", 30, Some(5), None, false),
    ]
}

impl ServeOptions {
    /// The options a live run hands over in the environment (see
    /// [`super::control::environment`]); `port` and `dialect` given on the
    /// command line win over it.
    pub fn from_env(
        server: String,
        port: Option<u16>,
        dialect: Option<Dialect>,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let env = Env(get);
        let forced = dialect;
        let dialect = match (dialect, env.get("MCPSIM_DIALECT")) {
            (Some(d), _) => d,
            (None, None) => Dialect::StreamableHttp,
            (None, Some(name)) => Dialect::from_name(&name)
                .ok_or_else(|| Error::usage(format!("MCPSIM_DIALECT={name:?} is not a dialect")))?,
        };
        let config = env.config()?;
        let tools = env.tools()?;
        let port = match port {
            Some(p) => p,
            None => env.port("MCPSIM_PORT")?.unwrap_or(8080),
        };
        let control_port = env.port("MCPSIM_CONTROL_PORT")?;
        let seed = Seed(env.num("MCPSIM_SEED")?.unwrap_or(0));
        let speaks = match forced {
            Some(d) => vec![d],
            None => crate::server::dialects(&server),
        };
        let life = env.process()?;
        // The adapter configurations (--event-store, --auth) have no meaning
        // here: each reference engine is one configuration, its own.
        for k in ["MCPSIM_EVENT_STORE", "MCPSIM_AUTH"] {
            if let Some(v) = env.get(k) {
                eprintln!("mcpsim serve: {k}={v} ignored: the reference engine {server} has one configuration");
            }
        }
        let store = match env.get("MCPSIM_STORE") {
            None => None,
            Some(url) => {
                Some(crate::store::redis_address(url.trim()).map_err(|e| Error::usage(format!("MCPSIM_STORE: {e}")))?)
            }
        };
        let clock_origin_ms = env.num("MCPSIM_CLOCK_ORIGIN_MS")?;
        let time_scale = match env.get("MCPSIM_TIME_SCALE") {
            None => 1.0,
            Some(v) => match v.trim().parse::<f64>() {
                Ok(f) if f > 0.0 && f.is_finite() => f,
                _ => return Err(Error::usage(format!("MCPSIM_TIME_SCALE={v} is not a positive number"))),
            },
        };
        Ok(ServeOptions {
            server,
            port,
            control_port,
            dialect,
            config,
            seed,
            tools,
            life,
            speaks,
            store,
            clock_origin_ms,
            time_scale,
        })
    }
}

/// The environment a live run hands a process, read by name.
struct Env<F>(F);

impl<F: Fn(&str) -> Option<String>> Env<F> {
    fn get(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }

    /// A whole number, if set.
    fn num(&self, name: &str) -> Result<Option<u64>> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map(Some)
                .map_err(|_| Error::usage(format!("{name}={v:?} is not a whole number"))),
        }
    }

    /// Milliseconds, if set.
    fn ms(&self, name: &str) -> Result<Option<Dur>> {
        Ok(self.num(name)?.map(|v| Dur(Duration::from_millis(v))))
    }

    /// A port, if set.
    fn port(&self, name: &str) -> Result<Option<u16>> {
        self.num(name)?
            .map(|p| u16::try_from(p).map_err(|_| Error::usage(format!("{name}={p} is not a port"))))
            .transpose()
    }

    /// The server's configuration: the defaults, with what is set.
    fn config(&self) -> Result<ServerConfig> {
        let mut config = ServerConfig::default();
        if let Some(v) = self.ms("MCPSIM_HEARTBEAT_MS")? {
            config.heartbeat = v;
        }
        if let Some(v) = self.ms("MCPSIM_REQUEST_TIMEOUT_MS")? {
            config.request_timeout = v;
        }
        if let Some(v) = self.ms("MCPSIM_FENCE_GRACE_MS")? {
            config.fence_grace = v;
        }
        if let Some(v) = self.ms("MCPSIM_FENCE_DELAY_MS")? {
            config.fence_delay = v;
        }
        if let Some(v) = self.num("MCPSIM_RETENTION")? {
            config.retention = v as usize;
        }
        if let Some(v) = self.num("MCPSIM_FIRST_EVENT_ID")? {
            config.first_event_id = v;
        }
        if let Some(v) = self.ms("MCPSIM_STATE_LIFETIME_MS")? {
            config.state_lifetime = v;
        }
        if let Some(v) = self.get("MCPSIM_AUTHENTICATE") {
            config.authenticate = match v.trim() {
                "false" => false,
                "true" => true,
                _ => return Err(Error::usage(format!("MCPSIM_AUTHENTICATE={v} is neither true nor false"))),
            };
        }
        Ok(config)
    }

    /// The tools a stateless server offers (`MCPSIM_TOOLS`, else the defaults).
    fn tools(&self) -> Result<Vec<ToolSpec>> {
        match self.get("MCPSIM_TOOLS") {
            None => Ok(default_tools()),
            Some(v) => Ok(serde_json::from_str::<Vec<super::control::ToolWire>>(&v)
                .map_err(|e| Error::usage(format!("MCPSIM_TOOLS is not a JSON array of tools: {e}: {v}")))?
                .into_iter()
                .map(super::control::ToolWire::into_spec)
                .collect()),
        }
    }

    /// Which process of its server this is, counted from 1.
    fn process(&self) -> Result<u32> {
        let life = self.num("MCPSIM_LIFE")?.map_or(1, |n| n.clamp(1, u64::from(u32::MAX)) as u32);
        // Replica r of N in its life l is the ((l - 1) * N + r)th process of
        // the deployment, as in simulation (where every replica starts, and
        // restarts, in order): each draws its own per-process key and nonces.
        let replicas = self.num("MCPSIM_REPLICAS")?.map_or(1, |n| n.clamp(1, 64) as u32);
        let replica = self.num("MCPSIM_REPLICA")?.map_or(1, |n| n.clamp(1, u64::from(replicas)) as u32);
        Ok((life - 1).saturating_mul(replicas).saturating_add(replica))
    }
}

/// How long the server waits for its Redis before it gives up on a command.
pub(crate) const STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// The stateless servers (a state's expiry) and the sessions kept in a
/// shared store (their leases) read the time through crate::clock: here
/// that is this process's wall clock, unscaled (the live run already scaled
/// every time it handed over), from the deployment's common origin.
fn process_clock(opts: &ServeOptions) -> Option<crate::clock::LiveClock> {
    (!opts.dialect.has_sessions() || opts.store.is_some()).then(|| {
        let since_origin = opts.clock_origin_ms.and_then(|ms| {
            let origin = std::time::UNIX_EPOCH + Duration::from_millis(ms);
            std::time::SystemTime::now().duration_since(origin).ok()
        });
        let now = std::time::Instant::now();
        let start = since_origin.and_then(|d| now.checked_sub(d)).unwrap_or(now);
        crate::clock::go_live_since(start, 1.0)
    })
}

/// Serves until killed, or until the live run that started it closes the
/// control connection.
pub fn serve(opts: &ServeOptions) -> Result<()> {
    let plug = crate::server::start(&opts.server, opts.dialect, &opts.config, &opts.tools, opts.seed, opts.life)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io(format!("cannot start a runtime: {e}")))?;
    let local = tokio::task::LocalSet::new();
    let _clock = process_clock(opts);
    local.block_on(&rt, async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", opts.port))
            .await
            .map_err(|e| Error::io(format!("cannot serve on 127.0.0.1:{}: {e}", opts.port)))?;
        let (tx, mut rx) = mpsc::unbounded_channel::<FromServer>();
        let commands: Inbox<AppCommand> = Inbox::new();
        let report = AppReporter::forwarding(move |what| {
            if let Some(msg) = FromServer::from_what(what) {
                let _ = tx.send(msg);
            }
        });
        let mut app = AppHook::new(commands.clone(), report).with_time_scale(opts.time_scale);
        if let Some(addr) = opts.store {
            app = app.with_shared_store(std::rc::Rc::new(crate::store::RespStore::tcp(addr, STORE_TIMEOUT)));
        }
        eprintln!(
            "mcpsim serve: {} ({}) on http://127.0.0.1:{}{}",
            opts.server,
            opts.dialect.name(),
            opts.port,
            super::LiveWire::of(opts.dialect).endpoint
        );
        let served = plug.serve(listener.into(), app);
        let Some(control_port) = opts.control_port else {
            // No live run: serve, and let the application's reports go.
            tokio::task::spawn_local(async move { while rx.recv().await.is_some() {} });
            served.await;
            return Ok(());
        };
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", control_port))
            .await
            .map_err(|e| Error::io(format!("cannot reach the control port {control_port}: {e}")))?;
        let (r, mut w) = stream.into_split();
        let dialects = Some(opts.speaks.iter().map(|d| d.name().to_string()).collect());
        // The reference engines take the bearer principal as verified, as in
        // simulation, unless the scenario says `authenticate = false`.
        let ready = FromServer::Ready {
            protocol: PROTOCOL.into(),
            server: opts.server.clone(),
            dialects,
            authenticates: Some(opts.config.authenticate),
        };
        let line = serde_json::to_string(&ready).expect("ready serializes") + "\n";
        w.write_all(line.as_bytes()).await.map_err(|e| Error::io(format!("control connection: {e}")))?;
        tokio::task::spawn_local(async move {
            while let Some(msg) = rx.recv().await {
                let line = serde_json::to_string(&msg).expect("reports serialize") + "\n";
                if w.write_all(line.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
        let read = async move {
            let mut lines = BufReader::new(r).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                match serde_json::from_str::<ToServer>(&line) {
                    Ok(cmd) => commands.push(cmd.into()),
                    Err(e) => eprintln!("mcpsim serve: ignoring a control line that is not {PROTOCOL}: {e}: {line}"),
                }
            }
        };
        tokio::select! {
            biased;
            _ = read => Ok(()),
            _ = served => Ok(()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_environment_a_live_run_hands_over_reads_back_as_the_same_settings() {
        let cfg = ServerConfig {
            heartbeat: Dur(Duration::from_secs(4)),
            request_timeout: Dur(Duration::from_secs(30)),
            fence_delay: Dur(Duration::from_secs(2)),
            retention: 5,
            first_event_id: 0,
            ..ServerConfig::default()
        };
        let env: BTreeMap<_, _> =
            super::super::control::environment(4000, 4001, Dialect::LegacySse, &cfg, &[], 0.5, 9).into_iter().collect();
        let opts = ServeOptions::from_env("guarded".into(), None, None, |k| env.get(k).cloned()).unwrap();
        assert_eq!(
            (opts.port, opts.control_port, opts.dialect, opts.seed),
            (4000, Some(4001), Dialect::LegacySse, Seed(9))
        );
        assert_eq!(opts.config.heartbeat.0, Duration::from_secs(2), "times arrive scaled");
        assert_eq!(opts.config.request_timeout.0, Duration::from_secs(15));
        assert_eq!(opts.config.fence_delay.0, Duration::from_secs(1));
        assert_eq!((opts.config.retention, opts.config.first_event_id), (5, 0));
        assert!(opts.tools.is_empty(), "a stateful scenario has no tools");
        let by_hand = ServeOptions::from_env("guarded".into(), None, None, |_| None).unwrap();
        assert_eq!(by_hand.tools, default_tools(), "no MCPSIM_TOOLS: the tools for people starting it by hand");
        assert_eq!(opts.life, 1);
        // stateless-http: the scenario's tools arrive, their times scaled.
        let tool = ToolSpec {
            name: "deploy".into(),
            runs: Duration::from_secs(120),
            progress_every: Some(Duration::from_secs(10)),
            input: vec!["elicitation/create".into()],
            once: true,
            idempotent: false,
        };
        let env: BTreeMap<_, _> = super::super::control::environment(
            4000,
            4001,
            Dialect::StatelessHttp,
            &cfg,
            std::slice::from_ref(&tool),
            0.5,
            9,
        )
        .into_iter()
        .collect();
        let opts = ServeOptions::from_env("guarded".into(), None, None, |k| env.get(k).cloned()).unwrap();
        let scaled =
            ToolSpec { runs: Duration::from_secs(60), progress_every: Some(Duration::from_secs(5)), ..tool.clone() };
        assert_eq!((opts.dialect, opts.tools), (Dialect::StatelessHttp, vec![scaled]));
        assert_eq!(opts.config.state_lifetime.0, Duration::from_secs(30));
        let bad = ServeOptions::from_env("guarded".into(), None, None, |k| {
            (k == "MCPSIM_TOOLS").then(|| "[{\"name\": 1}]".to_string())
        });
        assert!(bad.unwrap_err().to_string().contains("MCPSIM_TOOLS is not a JSON array of tools"));
        let bad = ServeOptions::from_env("guarded".into(), None, None, |k| {
            (k == "MCPSIM_HEARTBEAT_MS").then(|| "soon".to_string())
        });
        assert!(bad.unwrap_err().to_string().contains("MCPSIM_HEARTBEAT_MS=\"soon\""));
    }
}
