//! The `workshop` labs: each one causes, on demand and deterministically, a failure that
//! partitioning brings, measures it, and says whether it appeared.
//!
//! Module map:
//! - [`lab`]: what a lab is (the [`lab::Lab`] trait), what it gets to run ([`lab::LabContext`])
//!   and how it fails ([`lab::LabError`]).
//! - [`labs`]: the registry, one line per lab, and the labs themselves (one folder each).
//! - [`bench`]: `workshop bench`, the broker's and client's figures next to this machine's raw
//!   loopback ceilings (not a lab: it streams JSON lines of its own).
//! - [`cli`]: the command line, assembled from the registry; options every lab shares.
//! - [`target`]: the broker a lab runs against: embedded on 127.0.0.1:0, or `--bootstrap`
//!   (unique names, deleted at the end).
//! - [`report`]: narration for people as a stream of lab events (phases, questions and answers,
//!   tables, lag, log lines, checks, the verdict) and its views (the terminal on stdout), and the
//!   report for machines (one JSON object on stdout, and the verdict as the exit code).
//!
//! The binary is thin: [`run`] does everything that tests also want to do in-process, and
//! [`Outcome::emit`] prints the result and turns it into an exit code.
//!
//! ```no_run
//! // An integration test runs a lab in-process and reads its figures:
//! let outcome = workshop::run(["rehash", "--check", "--keys", "20000"]).unwrap();
//! let report = outcome.report().unwrap();
//! assert!(report.shown);
//! println!("{}", report.figures["mod_3_to_4_kept_of_12"]);
//!
//! // Or records what it tells, as events:
//! let recorder = workshop::report::Recorder::new();
//! let view = recorder.clone();
//! workshop::run_with(["rehash", "--check"], |n| n.subscribe(Box::new(view))).unwrap();
//! println!("{} events", recorder.events().len());
//! ```

pub mod bench;
pub mod cli;
pub mod deadline;
pub mod lab;
pub mod labs;
pub mod report;
pub mod stop;
pub mod target;

use std::ffi::OsString;
use std::io::Write;

pub use lab::{LabContext, LabError};
pub use report::LabReport;

/// What one invocation produced.
#[derive(Debug)]
pub enum Outcome {
    /// `workshop list`: each lab's name and one-line summary.
    List(Vec<(&'static str, &'static str)>),
    /// A lab ran to its verdict. `json` is whether the report goes to stdout.
    Lab { report: LabReport, json: bool },
}

impl Outcome {
    /// The lab's report, if a lab ran.
    pub fn report(&self) -> Option<&LabReport> {
        match self {
            Outcome::Lab { report, .. } => Some(report),
            Outcome::List(_) => None,
        }
    }

    /// Writes what belongs on stdout (the list, or the JSON report when asked for) and returns
    /// the exit code: 0 when the lab showed its phenomenon, 1 when it did not.
    pub fn emit(&self, stdout: &mut dyn Write) -> std::io::Result<u8> {
        match self {
            Outcome::List(labs) => {
                let width = labs.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
                for (name, summary) in labs {
                    writeln!(stdout, "{name:width$}  {summary}")?;
                }
                Ok(0)
            }
            Outcome::Lab { report, json } => {
                if *json {
                    writeln!(stdout, "{}", report.to_json())?;
                }
                Ok(report.exit_code())
            }
        }
    }
}

/// Why an invocation did not reach a verdict.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The command line was not understood (or asked for help, which clap reports the same way).
    #[error("{}", cli::one_line(.0))]
    Usage(#[from] clap::Error),
    /// The lab could not run.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// `workshop bench` could not run, or some of its cases failed.
    #[error(transparent)]
    Bench(#[from] bench::BenchError),
}

/// Parses `args` (without the program name) and runs what they ask for, in-process.
///
/// Narration goes to stdout (stderr under `--json`) unless `--check` is given; the JSON
/// document is not written here (see [`Outcome::emit`]), so tests can call this directly with
/// `--check`. The one exception is `bench`, which writes its JSON lines to stdout as it goes.
pub fn run<I, T>(args: I) -> Result<Outcome, RunError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    run_with(args, |_| {})
}

/// [`run`], with `attach` given the lab's narrator before the lab starts: to add a view of the
/// event stream (a [`report::Recorder`], a browser) or a gate to pace it.
pub fn run_with<I, T>(
    args: I,
    attach: impl FnOnce(&mut report::Narrator),
) -> Result<Outcome, RunError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    run_until(args, stop::Stop::never(), attach)
}

/// [`run_with`], stopped early by `stop` (the binary's Ctrl-C and SIGTERM, or a test's
/// [`stop::Stop::request`]): a lab on a cluster then deletes what it created and fails with
/// [`LabError::Interrupted`].
pub fn run_until<I, T>(
    args: I,
    stop: stop::Stop,
    attach: impl FnOnce(&mut report::Narrator),
) -> Result<Outcome, RunError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    match cli::parse(args)? {
        cli::Invocation::List => Ok(Outcome::List(
            labs::LABS
                .iter()
                .map(|lab| (lab.name, lab.summary))
                .collect(),
        )),
        // The bench streams its JSON lines to stdout as it measures (a full run takes
        // minutes); what it returns is only the verdict that every case ran.
        cli::Invocation::Bench(args) => Ok(Outcome::Lab {
            report: bench::run(args)?,
            json: false,
        }),
        cli::Invocation::Lab {
            entry,
            common,
            matches,
        } => {
            let json = common.json;
            let mut ctx = LabContext::from_common(&common);
            attach(&mut ctx.narrator);
            // A stop lets a narrator waiting at its gate (`--step`) go on to where it is seen.
            if let Some(gate) = ctx.narrator.gate() {
                stop.opens(gate.clone());
            }
            ctx.stop = stop;
            let report = entry.run(&matches, &mut ctx)?;
            Ok(Outcome::Lab { report, json })
        }
    }
}
