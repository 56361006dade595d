//! Structure-aware: the fuzzer's bytes become a plan (clients, faults,
//! thefts, requests, resumes at chosen times), which runs for a short
//! virtual time against guarded. It must never panic or hang, and guarded
//! must never violate a check (a violation the scenario forces on every
//! server, marked inherent, does not count).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(toml) = plan_toml(data) else { return };
    let Ok(plan) = mcpsim::scenario::Plan::from_toml_str(&toml, "fuzz.toml") else { return };
    let run = mcpsim::run(&plan, "guarded", None).expect("guarded runs any valid plan");
    assert_eq!(run.aborted, None, "{toml}");
    let verdicts = mcpsim::check::judge(&run.trace);
    for v in &verdicts {
        if let Some(x) = v.violations().iter().find(|x| !x.inherent) {
            panic!("guarded violates {}: {}\n{toml}", v.check, x.headline());
        }
    }
});

/// A scenario from bytes: byte 0 picks the dialect and the number of clients
/// (1-3); then every 3 bytes are one step (kind, client, and the time since
/// the previous step in 20 ms units), up to 36 s.
fn plan_toml(data: &[u8]) -> Option<String> {
    let (&head, rest) = data.split_first()?;
    let streamable = head & 1 == 1;
    let clients = ["alice", "bob", "mallory"];
    let n = usize::from(head >> 1) % 3 + 1;
    let mut out = format!(
        "[scenario]\nname = \"fuzz\"\ndialect = \"{}\"\nduration = \"40s\"\n[server]\nfirst_event_id = 1000\nretention = 4\nrequest_timeout = \"20s\"\nheartbeat = \"5s\"\n",
        if streamable { "streamable-http" } else { "legacy-sse" }
    );
    for c in &clients[..n] {
        out.push_str(&format!(
            "[[client]]\nname = \"{c}\"\n[[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"{c}\"\n"
        ));
    }
    let mut labels = 0;
    let mut t_ms = 0u32;
    for chunk in rest.chunks_exact(3).take(24) {
        let c = clients[usize::from(chunk[1]) % n];
        let other = clients[(usize::from(chunk[1]) + 1) % n];
        t_ms += u32::from(chunk[2]) * 20;
        if t_ms > 36_000 {
            break;
        }
        let at = format!("{t_ms}ms");
        let step = match chunk[0] % 12 {
            0 => format!("do = \"notify\"\nclient = \"{c}\"\ncount = {}", chunk[1] % 5 + 1),
            1 | 2 => {
                labels += 1;
                let method = ["sampling/createMessage", "roots/list", "elicitation/create"][usize::from(chunk[1]) % 3];
                format!("do = \"server-request\"\nclient = \"{c}\"\nmethod = \"{method}\"\nlabel = \"r{labels}\"")
            }
            3 => format!("do = \"rebind\"\nclient = \"{c}\""),
            4 => format!("do = \"sever\"\nclient = \"{c}\""),
            5 => format!("do = \"reset\"\nclient = \"{c}\""),
            6 => format!("do = \"resume\"\nclient = \"{c}\"\nlast_event_id = \"last-seen\""),
            7 => format!("do = \"resume\"\nclient = \"{c}\"\nlast_event_id = {}", 1000 + u32::from(chunk[1] % 16)),
            8 if n > 1 => {
                format!("do = \"steal-token\"\nfrom = \"{c}\"\nto = \"{other}\"\ncredential = {}", chunk[1] & 1 == 1)
            }
            9 => format!("do = \"crash-client\"\nclient = \"{c}\""),
            10 => format!("do = \"connect\"\nclient = \"{c}\""),
            11 if streamable => {
                labels += 1;
                format!("do = \"call-tool\"\nclient = \"{c}\"\nmethod = \"roots/list\"\nlabel = \"r{labels}\"")
            }
            _ => continue,
        };
        out.push_str(&format!("[[step]]\nat = \"{at}\"\n{step}\n"));
    }
    Some(out)
}
