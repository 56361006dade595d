//! The plug-in boundary: a server under test that misbehaves never takes the
//! harness down; the run completes and says what happened.

use mcpsim::scenario::Plan;
use mcpsim::seed::Seed;
use mcpsim::server::{AppHook, ServerPlug};
use mcpsim::trace::What;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

/// Accepts one connection, then panics.
struct Panicky;

impl ServerPlug for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }
    fn serve(&self, listener: mcpsim::net::Listener, _app: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let _ = listener.accept().await;
            panic!("deliberate panic in the server under test");
        })
    }
}

#[test]
fn a_panicking_server_ends_the_run_with_its_message_and_keeps_the_trace() {
    let plan = Plan::from_toml_str(
        "[scenario]\nname = \"p\"\nduration = \"30s\"\n[[client]]\nname = \"alice\"\n[[step]]\nat = \"0s\"\ndo = \"connect\"\nclient = \"alice\"\n",
        "p.toml",
    )
    .unwrap();
    let run = mcpsim::run_with(&plan, Rc::new(Panicky), Seed(3)).expect("the run completes");
    assert_eq!(run.server, "panicky");
    let stopped = run.trace.iter().find(|e| matches!(&e.what, What::ServerStopped { .. })).expect("recorded");
    assert!(stopped.t_us.0 < 1_000_000);
    let why = run.aborted.as_deref().expect("the run says it stopped early");
    assert!(why.contains("deliberate panic in the server under test"), "{why}");
    assert!(why.contains("tests/plug.rs"), "{why}");
    // Nothing recorded before the panic is lost.
    assert!(run.trace.iter().any(|e| matches!(&e.what, What::Connect { client, .. } if client == "alice")));
    assert!(mcpsim::report::text(&run, &mcpsim::check::judge(&run.trace), None).contains("a host panicked"));
}

/// Returns at once: the server host stops listening.
struct Quitter;

impl ServerPlug for Quitter {
    fn name(&self) -> &str {
        "quitter"
    }
    fn serve(&self, _listener: mcpsim::net::Listener, _app: AppHook) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async {})
    }
}

#[test]
fn a_server_that_stops_serving_is_recorded_and_clients_observe_failures() {
    let plan = Plan::from_toml_str(
        "[scenario]\nname = \"q\"\nduration = \"30s\"\n[[client]]\nname = \"alice\"\n[[step]]\nat = \"1s\"\ndo = \"connect\"\nclient = \"alice\"\n",
        "q.toml",
    )
    .unwrap();
    let run = mcpsim::run_with(&plan, Rc::new(Quitter), Seed(3)).expect("the run completes");
    assert!(run.aborted.is_none());
    assert!(run.trace.iter().any(|e| matches!(&e.what, What::ServerStopped { why } if why.contains("quitter"))));
    assert!(run.trace.iter().any(|e| matches!(&e.what, What::UplinkEnded { client, .. } if client == "alice")));
}
