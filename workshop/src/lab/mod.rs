//! What a lab is, what it is given to run, and how it fails.
//!
//! A lab is a type implementing [`Lab`]: a name, a one-line summary, its own flags (a clap
//! derive struct) and a `run` that narrates phases and returns a [`LabReport`]. The registry in
//! [`crate::labs`] turns each lab into a [`LabEntry`], so the command line, `workshop list` and
//! dispatch all follow from one line there.

use clap::{ArgMatches, Args, FromArgMatches};

pub mod args;
pub mod deadline;
pub mod report;
pub mod stop;
pub mod target;
pub mod watch;

use report::{LabReport, Narrator};
use stop::Stop;

/// One lab of the workshop.
pub trait Lab {
    /// The subcommand, as typed: `workshop <NAME>`.
    const NAME: &'static str;
    /// One line for `workshop list` and `--help`.
    const SUMMARY: &'static str;
    /// The lab's own flags, besides the ones every lab shares ([`args::CommonArgs`]).
    type Args: Args + FromArgMatches;

    /// Runs the lab to its verdict. Narration goes through `ctx.narrator` as events (never as
    /// text: views render them); every random choice must come from `ctx.seed`.
    fn run(args: &Self::Args, ctx: &mut LabContext) -> Result<LabReport, LabError>;
}

/// A lab as the registry holds it: type-erased, so labs with different flags sit in one list.
pub struct LabEntry {
    pub name: &'static str,
    pub summary: &'static str,
    augment: fn(clap::Command) -> clap::Command,
    run: fn(&ArgMatches, &mut LabContext) -> Result<LabReport, LabError>,
}

impl LabEntry {
    /// The registry entry of lab `L`.
    pub const fn of<L: Lab>() -> Self {
        LabEntry {
            name: L::NAME,
            summary: L::SUMMARY,
            augment: <L::Args as Args>::augment_args,
            run: run_parsed::<L>,
        }
    }

    /// The lab's subcommand with its own flags (the shared ones and the summary are added by
    /// [`crate::cli`]).
    pub fn command(&self) -> clap::Command {
        (self.augment)(clap::Command::new(self.name))
    }

    /// Runs the lab with the flags parsed from its subcommand.
    pub fn run(&self, matches: &ArgMatches, ctx: &mut LabContext) -> Result<LabReport, LabError> {
        (self.run)(matches, ctx)
    }
}

impl std::fmt::Debug for LabEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabEntry")
            .field("name", &self.name)
            .finish()
    }
}

fn run_parsed<L: Lab>(matches: &ArgMatches, ctx: &mut LabContext) -> Result<LabReport, LabError> {
    // The matches came from the command that `L::Args` built, so this only fails on a bug;
    // it is still reported as an error line rather than a panic.
    let args = L::Args::from_arg_matches(matches)
        .map_err(|err| LabError::InvalidInput(args::one_line(&err)))?;
    L::run(&args, ctx)
}

/// Where a lab finds its broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Start one in-process on 127.0.0.1:0 (the default).
    Embedded,
    /// Any Kafka-protocol broker (`--bootstrap HOST:PORT`); labs then use only public Kafka APIs.
    Bootstrap(String),
}

/// What a lab is given to run.
pub struct LabContext {
    /// The seed of every random choice.
    pub seed: u64,
    /// The broker to use, for labs that need one.
    pub target: Target,
    /// Narration for people; nobody listens under `--check`.
    pub narrator: Narrator,
    /// Ctrl-C and SIGTERM (the binary's); a lab on a cluster stops and cleans up when asked.
    pub stop: Stop,
}

/// Why a lab could not reach a verdict (exit code 2). Each message is one line: what went
/// wrong, why, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The flags ask for something the lab cannot do.
    #[error("{0}")]
    InvalidInput(String),
    /// Something the lab relies on did not hold: a bug, not the user's doing.
    #[error("internal error: {0}; this is a bug in the workshop, please report it")]
    Internal(String),
    /// The broker or cluster failed, or refused what the lab asked (unreachable, a request
    /// refused, an answer that never came).
    #[error("{0}")]
    Broker(String),
    /// A phase did not finish within its deadline: which one, what it waited for, how far it
    /// got (see [`crate::lab::deadline`]).
    #[error("{0}")]
    TooSlow(String),
    /// Ctrl-C or SIGTERM: the lab stopped, and what it had created on the cluster was deleted
    /// (exit code 130). The text says what was cleaned up.
    #[error("interrupted{0}")]
    Interrupted(String),
    /// Reading or writing the terminal failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}
