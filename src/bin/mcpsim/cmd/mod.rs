//! One module per group of subcommands.

pub(crate) mod hunt;
pub(crate) mod info;
pub(crate) mod run;
pub(crate) mod serve;
