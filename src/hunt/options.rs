//! A hunt's settings ([`HuntOptions`]) and the commands that replay or repeat it.

use super::{default_dialect, dialect_flag, replicas_flag, PlugFactory};
use crate::scenario::Dialect;
use std::path::PathBuf;
use std::time::Duration;

/// How long a hunt goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Run this many seeds.
    Seeds(u64),
    /// Start new seeds until this much wall-clock time has passed.
    Time(Duration),
}

/// A hunt's settings.
#[derive(Clone, Debug)]
pub struct HuntOptions {
    /// The server to hunt, by its `--server` name.
    pub server: String,
    /// The first seed: shards and threads take seeds from here on.
    pub base_seed: u64,
    /// When to stop.
    pub limit: Limit,
    /// How many worker threads run seeds (at least one).
    pub jobs: usize,
    /// `(k, n)`: this job takes the k-th of n disjoint slices of the seed space (1-based).
    pub shard: (u64, u64),
    /// Where shrunk regressions go; `None`: do not shrink.
    pub out: Option<PathBuf>,
    /// Run every seed twice and report traces that differ.
    pub check_determinism: bool,
    /// Shrinking budget, in runs per new bucket ([`signature`](super::signature)).
    pub shrink_budget: usize,
    /// Stop once this many distinct bugs are found (`--max-findings`;
    /// `--stop-on-first` is 1). The seeds judged are then the first N up to
    /// the one that found the last of them.
    pub max_bugs: Option<usize>,
    /// The dialect of the generated plans.
    pub dialect: Dialect,
    /// How many replicas each generated plan deploys (1: one server).
    pub replicas: u32,
    /// The wall-clock bound on one seed ([`crate::watchdog`]): a seed that
    /// outlives it is a harness failure, and the hunt goes on.
    pub watchdog: Duration,
    /// Hunt this plug-in instead of the built-in server `server` names
    /// (`server` is then only its name in reports). Findings are not shrunk:
    /// shrinking runs servers by name.
    pub plug: Option<PlugFactory>,
    /// Play each generated plan live against this server process instead
    /// (`hunt --live`; `server` is then only its name in reports). Live
    /// findings are shrunk with live runs (at most `shrink_budget` of them);
    /// each bug's reproducer (its first seed when not shrunk) is replayed
    /// live [`LIVE_REPLAYS`] times ([`confirm_live`](super::confirm_live)).
    pub live: Option<crate::live::LiveOptions>,
}

/// How many times a live hunt replays each bug (its reproducer, or its first
/// seed when not shrunk) before it calls the bug reproducible.
pub const LIVE_REPLAYS: u32 = 3;

impl HuntOptions {
    /// A hunt of `server` from base seed 0 on one thread, one shard, no shrinking.
    pub fn new(server: &str, limit: Limit) -> Self {
        HuntOptions {
            server: server.into(),
            base_seed: 0,
            limit,
            jobs: 1,
            shard: (1, 1),
            out: None,
            check_determinism: false,
            shrink_budget: 300,
            max_bugs: None,
            dialect: default_dialect(server),
            replicas: 1,
            watchdog: crate::watchdog::DEFAULT,
            plug: None,
            live: None,
        }
    }

    /// The i-th seed of this shard.
    pub fn seed_at(&self, i: u64) -> u64 {
        let (k, n) = self.shard;
        self.base_seed.wrapping_add(i.wrapping_mul(n)).wrapping_add(k - 1)
    }

    /// The command that replays one seed of this hunt.
    pub fn replay_command(&self, seed: u64) -> String {
        if let Some(l) = &self.live {
            return format!(
                "mcpsim hunt --live {}{} --dialect {}{} --seed {seed} --seeds 1 --no-shrink --time-scale {}",
                crate::trace::run::shell_quote(&l.command),
                l.config.flags(),
                self.dialect.name(),
                replicas_flag(self.replicas),
                l.time_scale
            );
        }
        format!(
            "mcpsim replay --server {}{}{} --seed {seed}",
            self.server,
            dialect_flag(&self.server, self.dialect),
            replicas_flag(self.replicas)
        )
    }

    /// The command that repeats this hunt.
    pub fn repeat_command(&self) -> String {
        let limit = match self.limit {
            Limit::Seeds(n) => format!("--seeds {n}"),
            Limit::Time(d) => format!("--time {}", crate::scenario::format_duration(d)),
        };
        let (k, n) = self.shard;
        if let Some(l) = &self.live {
            let shrink = match self.out {
                Some(_) => format!("--shrink-runs {}", self.shrink_budget),
                None => "--no-shrink".into(),
            };
            return format!(
                "mcpsim hunt --live {}{} --dialect {}{} --seed {} {limit} --jobs {} --shard {k}/{n} {shrink} --time-scale {}",
                crate::trace::run::shell_quote(&l.command),
                l.config.flags(),
                self.dialect.name(),
                replicas_flag(self.replicas),
                self.base_seed,
                self.jobs,
                l.time_scale
            );
        }
        format!(
            "mcpsim hunt --server {}{}{} --seed {} {limit} --jobs {} --shard {k}/{n}",
            self.server,
            dialect_flag(&self.server, self.dialect),
            replicas_flag(self.replicas),
            self.base_seed,
            self.jobs
        )
    }
}
