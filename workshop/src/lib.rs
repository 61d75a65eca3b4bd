//! The `workshop` labs: each one causes, on demand and deterministically, a failure that
//! partitioning brings, measures it, and says whether it appeared.
//!
//! Module map, one way down (a module names only the ones below it; `tests/import_graph.rs`
//! in the workspace's `tests` crate checks it):
//! - [`cli`]: the command line, assembled from the registry of labs, and dispatch: the lab's
//!   context with its terminal view, the room view, the playground, the bench.
//! - [`playground`]: `workshop playground --web`, source 000's exercise and a free mode.
//! - [`labs`]: the registry, one line per lab, and the labs themselves (one folder each).
//! - [`kit`]: machinery two or more labs (or the playground) use: placement schemes, a group's
//!   offsets and lag, a partition reader, source 000's step model on the broker.
//! - [`view`]: the views of a lab's event stream: the terminal, and the room view in a browser
//!   (`--web`), which is handed a lab's narrator and knows no lab by name.
//! - [`lab`]: the framework every lab runs in: what a lab is (the [`lab::Lab`] trait), what it
//!   gets to run ([`lab::LabContext`]) and how it fails ([`lab::LabError`]); the flags every
//!   lab shares ([`lab::args`]); the event stream and the report for machines
//!   ([`lab::report`]); phase deadlines ([`lab::deadline`]); Ctrl-C ([`lab::stop`]); the
//!   broker a lab runs against ([`lab::target`]) and what views may read of it
//!   ([`lab::watch`]).
//! - [`bench`]: `workshop bench`, the broker's and client's figures next to this machine's raw
//!   loopback ceilings (not a lab: it streams JSON lines of its own).
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
//! let recorder = workshop::lab::report::Recorder::new();
//! let view = recorder.clone();
//! workshop::run_with(["rehash", "--check"], |n| n.subscribe(Box::new(view))).unwrap();
//! println!("{} events", recorder.events().len());
//! ```

pub mod bench;
pub mod cli;
pub mod kit;
pub mod lab;
pub mod labs;
pub mod playground;
pub mod view;

use std::ffi::OsString;
use std::io::Write;

pub use lab::report::LabReport;
pub use lab::{LabContext, LabError};

/// What one invocation produced.
#[derive(Debug)]
pub enum Outcome {
    /// `workshop list`: each lab's name and one-line summary.
    List(Vec<(&'static str, &'static str)>),
    /// A lab ran to its verdict. `json` is whether the report goes to stdout.
    Lab { report: LabReport, json: bool },
    /// `workshop playground` served its page until it was stopped.
    Served,
}

impl Outcome {
    /// The lab's report, if a lab ran.
    pub fn report(&self) -> Option<&LabReport> {
        match self {
            Outcome::Lab { report, .. } => Some(report),
            Outcome::List(_) | Outcome::Served => None,
        }
    }

    /// Writes what belongs on stdout (the list, or the JSON report when asked for) and returns
    /// the exit code: 0 when the lab showed its phenomenon, 1 when it did not.
    pub fn emit(&self, stdout: &mut dyn Write) -> std::io::Result<u8> {
        match self {
            Outcome::List(labs) => {
                for line in cli::list_lines(labs) {
                    writeln!(stdout, "{line}")?;
                }
                Ok(0)
            }
            Outcome::Lab { report, json } => {
                if *json {
                    writeln!(stdout, "{}", report.to_json())?;
                }
                Ok(report.exit_code())
            }
            Outcome::Served => Ok(0),
        }
    }
}

/// Why an invocation did not reach a verdict.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The command line was not understood (or asked for help, which clap reports the same way).
    #[error("{}", lab::args::one_line(.0))]
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
/// event stream (a [`lab::report::Recorder`], a browser) or a gate to pace it.
pub fn run_with<I, T>(
    args: I,
    attach: impl FnOnce(&mut lab::report::Narrator),
) -> Result<Outcome, RunError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    run_until(args, lab::stop::Stop::never(), attach)
}

/// [`run_with`], stopped early by `stop` (the binary's Ctrl-C and SIGTERM, or a test's
/// [`lab::stop::Stop::request`]): a lab on a cluster then deletes what it created and fails with
/// [`LabError::Interrupted`].
pub fn run_until<I, T>(
    args: I,
    stop: lab::stop::Stop,
    attach: impl FnOnce(&mut lab::report::Narrator),
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
        cli::Invocation::Playground(args) => {
            playground::run(&args, &stop)?;
            Ok(Outcome::Served)
        }
        cli::Invocation::Lab {
            entry,
            common,
            matches,
        } => {
            let json = common.json;
            let mut ctx = cli::context(&common);
            let room = common
                .web
                .map(|addr| view::web::Room::attach(addr, &mut ctx.narrator))
                .transpose()?;
            attach(&mut ctx.narrator);
            // A stop lets a narrator waiting at its gate (`--step`, the room view's Reveal) go on
            // to where it is seen.
            if let Some(gate) = ctx.narrator.gate() {
                stop.opens(gate.clone());
            }
            ctx.stop = stop;
            // Clusters the lab opens report to its narrator's watch (the room view reads them).
            let report = ctx.narrator.watch().scope(|| entry.run(&matches, &mut ctx));
            if let Some(room) = room {
                room.finish(report.as_ref());
            }
            Ok(Outcome::Lab {
                report: report?,
                json,
            })
        }
    }
}
