//! `[expect]` and `[expect_inherent]`: the servers and checks of the
//! scenario's dialect, each list sorted and unique.

use super::*;

/// What a scenario's `[expect]` may name in its dialect: the simulated
/// servers, the live-only ones, and the checks.
struct Known {
    servers: Vec<&'static str>,
    live: &'static [&'static str],
    checks: Vec<&'static str>,
}

impl Known {
    /// The servers and the checks of the dialect's family.
    fn of(dialect: Dialect) -> Known {
        let stateful = dialect.has_sessions();
        let servers: Vec<&str> = crate::vocab::SERVERS
            .iter()
            .copied()
            .filter(|s| {
                if stateful {
                    crate::vocab::speaks_stateful(s)
                } else {
                    crate::vocab::STATELESS_SERVERS.contains(s)
                }
            })
            .collect();
        let live: &[&str] = if stateful { crate::vocab::LIVE_SERVERS } else { crate::vocab::LIVE_STATELESS };
        let checks: Vec<&str> =
            if stateful { crate::vocab::CheckId::STATEFUL } else { crate::vocab::CheckId::STATELESS }
                .iter()
                .map(|c| c.as_str())
                .collect();
        Known { servers, live, checks }
    }
}

impl Loader<'_> {
    /// `[expect]`: known servers, known checks, each list sorted and unique.
    pub(super) fn expect(
        &self,
        table: &str,
        raw: BTreeMap<Spanned<String>, Spanned<Vec<Spanned<String>>>>,
    ) -> Result<BTreeMap<String, Vec<String>>> {
        let mut expect = BTreeMap::new();
        // A scenario's [expect] names the servers and the checks of its dialect.
        let known = Known::of(self.dialect);
        for (server, list) in raw {
            let name = server.get_ref().as_str();
            if !known.servers.contains(&name) && !known.live.contains(&name) {
                return Err(self.err(server.span(), self.unknown_server(table, name, &known)));
            }
            let mut ids = Vec::new();
            for c in list.into_inner() {
                if !known.checks.contains(&c.get_ref().as_str()) {
                    return Err(self.err(c.span(), self.unknown_check(table, c.get_ref(), &known.checks)));
                }
                ids.push(c.into_inner());
            }
            ids.sort();
            ids.dedup();
            expect.insert(server.into_inner(), ids);
        }
        Ok(expect)
    }

    /// Why `table` may not name server `name`: another dialect's, or no server at all.
    fn unknown_server(&self, table: &str, name: &str, known: &Known) -> String {
        let Known { servers, live, .. } = known;
        let other = crate::vocab::expect_keys().any(|k| k == name);
        if other {
            format!(
                "{table} names server {name:?}, which does not speak dialect {:?} (those that do: {})",
                self.dialect.name(),
                servers.join(", ")
            )
        } else if live.is_empty() {
            format!(
                "{table} names unknown server {name:?}{} (known: {})",
                hint(name, servers.iter().copied()),
                servers.join(", ")
            )
        } else {
            format!(
                "{table} names unknown server {name:?}{} (known: {}; live only: {})",
                hint(name, servers.iter().chain(live.iter()).copied()),
                servers.join(", "),
                short_live_names(live)
            )
        }
    }

    /// Why `table` may not name check `check`: another dialect's, or no check at all.
    fn unknown_check(&self, table: &str, check: &str, checks: &[&str]) -> String {
        if CHECK_IDS.contains(&check) {
            format!(
                "{table} names check {check:?}, which dialect {:?} does not have (its checks: {})",
                self.dialect.name(),
                checks.join(", ")
            )
        } else {
            format!(
                "{table} names unknown check {check:?}{} (known: {})",
                hint(check, checks.iter().copied()),
                checks.join(", ")
            )
        }
    }
}

/// The live-only names for an error message: each adapter once, its
/// configurations (`-no-store`, `-redis`, `-auth`, ...) said once for all.
fn short_live_names(live: &[&str]) -> String {
    const CONFIGS: [&str; 5] = ["-no-store-auth", "-redis-auth", "-no-store", "-redis", "-auth"];
    let is_config = |n: &str| CONFIGS.iter().any(|c| n.strip_suffix(c).is_some_and(|base| live.contains(&base)));
    let bases: Vec<&str> = live.iter().copied().filter(|n| !is_config(n)).collect();
    let configured = live.iter().any(|n| is_config(n));
    let mut out = bases.join(", ");
    if configured {
        out.push_str(
            "; each adapter also as <name>-no-store, <name>-auth, <name>-no-store-auth, and the SDK adapters as \
             <name>-redis, <name>-redis-auth (a deployment's shared store)",
        );
    }
    out
}
