//! `workshop list`, `workshop <lab> [--bootstrap HOST:PORT] [--seed N] [--step] [--json] [--check]`.
//!
//! Exit code: 0 when the lab showed its phenomenon, 1 when it did not, 2 on an error (one line on
//! stderr, never a backtrace), 130 when Ctrl-C or SIGTERM stopped a lab (after its cleanup).

use std::process::ExitCode;

use clap::error::ErrorKind;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;
use workshop::RunError;

fn main() -> ExitCode {
    // Logs go to stderr (narration is on stdout, or on stderr under --json). Warnings only
    // unless RUST_LOG says otherwise (`RUST_LOG=client=debug` shows every retry), so a lab's own
    // story stays readable. The producer's own logs are off by default: labs make producers fail
    // on purpose (fenced, acknowledgements lost), and every producer error reaches the lab as a
    // result anyway, narrated when it is the point and reported as the lab's error when it is not.
    let quiet = Targets::new()
        .with_default(LevelFilter::WARN)
        .with_target("client::producer", LevelFilter::OFF);
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
        .with(filter.unwrap_or(quiet))
        .init();
    let stop = workshop::lab::stop::Stop::on_signals();
    match workshop::run_until(std::env::args_os().skip(1), stop, |_| {}) {
        Ok(outcome) => match outcome.emit(&mut std::io::stdout().lock()) {
            Ok(code) => ExitCode::from(code),
            Err(err) => fail(&format!("cannot write to stdout: {err}")),
        },
        // Help and version are "errors" to clap; they print themselves, in full.
        Err(RunError::Usage(err))
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            let _ = err.print();
            ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2))
        }
        // As a shell reports a process ended by Ctrl-C; the lab has cleaned up first.
        Err(err @ RunError::Lab(workshop::LabError::Interrupted(_))) => {
            fail(&err.to_string());
            ExitCode::from(130)
        }
        Err(err) => fail(&err.to_string()),
    }
}

fn fail(message: &str) -> ExitCode {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "workshop: error: {message}");
    ExitCode::from(2)
}
