//! `mcpsim serve`: a built-in server on real TCP.

use crate::cli::DialectArg;
use crate::exit;
use mcpsim::live::ServeOptions;
use mcpsim::Error;

pub(crate) fn serve(
    server: String,
    port: Option<u16>,
    dialect: Option<DialectArg>,
    store: Option<String>,
) -> Result<u8, Error> {
    if !mcpsim::server::is_known_server(&server) {
        return Err(Error::usage(format!(
            "unknown server {server:?} (known: {})",
            mcpsim::server::known_servers().join(", ")
        )));
    }
    let dialect = dialect.map(|d| DialectArg::resolve(Some(d), &server));
    // --store wins over $MCPSIM_STORE.
    let env = |k: &str| if k == "MCPSIM_STORE" && store.is_some() { store.clone() } else { std::env::var(k).ok() };
    let opts = ServeOptions::from_env(server, port, dialect, env)?;
    mcpsim::live::serve(&opts)?;
    Ok(exit::OK)
}
