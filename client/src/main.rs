//! `client`: the workshop's Kafka command line. Results go to stdout; errors are one line on
//! stderr and a non-zero exit code (1 a check does not hold, 2 it could not be done or checked:
//! see `cli::report`); logs go to stderr when RUST_LOG asks for them.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let filter = std::env::var("RUST_LOG").ok().and_then(|s| s.parse().ok());
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                // Colour only on a terminal, as NO_COLOR and the like allow: logs sent to a file
                // stay text.
                .with_ansi(
                    anstream::AutoStream::choice(&std::io::stderr())
                        != anstream::ColorChoice::Never,
                ),
        )
        .with(filter.unwrap_or(Targets::new().with_default(LevelFilter::ERROR)))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) if failure.is_silent() => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {failure}");
            failure.exit_code()
        }
    }
}
