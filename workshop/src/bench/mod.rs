//! `workshop bench`: how fast the broker and client are, each figure next to the ceiling this
//! machine allows for the same traffic shape (performance.md parts B and C).
//!
//! In one run the bench measures the raw loopback ceilings with its own probes ([`raw`]) and the
//! broker ([`produce`], [`consume`], [`e2e`], [`rebalance`], [`startup`], [`lag`]), and prints
//! every figure with its ratio to the ceiling: JSON lines on stdout, a table on stderr
//! ([`report`]). Ratios survive the 2-10x host noise of a shared VM; absolute figures do not.
//!
//! The broker runs in its own process, started from the `broker` binary ([`process`],
//! [`cluster`]); the raw server runs in its own process too (this binary, `--serve-raw`), pinned
//! the same way ([`host::Placement`]); the client side runs in the bench process.

pub mod cluster;
pub mod consume;
pub mod e2e;
pub mod host;
pub mod lag;
pub mod process;
pub mod produce;
pub mod raw;
pub mod rebalance;
pub mod report;
pub mod startup;
pub mod stats;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use host::Placement;
use report::Reporter;

use crate::lab::report::LabReport;

/// `workshop bench` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Every case small: the whole run takes under a minute (what CI runs, to prove it works)
    #[arg(long)]
    pub quick: bool,
    /// Point the client side at this broker instead of starting one (startup is then skipped)
    #[arg(long, value_name = "HOST:PORT", value_parser = crate::lab::args::parse_bootstrap)]
    pub bootstrap: Option<String>,
    /// Where servers and client run: same vCPU, split vCPUs, or unpinned
    #[arg(long, value_enum, default_value_t = Placement::Split)]
    pub placement: Placement,
    /// Only these cases (default: all but raw, whose probes run when a case needs them)
    #[arg(long = "case", value_enum, value_name = "NAME", num_args = 1..)]
    pub cases: Vec<Case>,
    /// The broker binary to start [default: `broker` next to this binary, else
    /// target/release/broker]
    #[arg(long, value_name = "PATH")]
    pub broker_bin: Option<PathBuf>,
    /// Internal: run the raw loopback server (the bench starts it in a process of its own)
    #[arg(long, hide = true)]
    pub serve_raw: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Case {
    /// Every raw ceiling, even those no selected case needs
    Raw,
    /// One producer: 100 B and 1 KiB records, 16 KiB and 1 MiB batches, acks 1 and all
    Produce,
    /// One consumer reading a full partition from offset 0
    Consume,
    /// Latency from scheduled send to consumer at 1k, 10k and 50k records/s
    E2e,
    /// A new group of 10 members, from first poll to everyone assigned
    Rebalance,
    /// Broker spawn to ready, idle RSS, RSS per idle partition
    Startup,
    /// Describing a group's lag over 1,000 and 10,000 partitions
    Lag,
}

impl Case {
    const DEFAULT: [Case; 6] = [
        Case::Produce,
        Case::Consume,
        Case::E2e,
        Case::Rebalance,
        Case::Startup,
        Case::Lag,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::Raw => "raw",
            Case::Produce => "produce",
            Case::Consume => "consume",
            Case::E2e => "e2e",
            Case::Rebalance => "rebalance",
            Case::Startup => "startup",
            Case::Lag => "lag",
        }
    }
}

/// Why the bench (or one of its cases) could not run: one line for the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchError(String);

impl BenchError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

/// How much each case does: `--quick` keeps every case small, the full run follows C.1 (1
/// warm-up, 5 measured runs) within about ten minutes on this 2-vCPU machine. Every run also
/// stops at `deadline`, so a slow or stuck broker bounds the bench's time, not its volume.
#[derive(Debug, Clone)]
pub struct Plan {
    pub quick: bool,
    pub placement: Placement,
    pub bootstrap: Option<String>,
    pub broker_bin: Option<PathBuf>,
    pub warmups: usize,
    pub runs: usize,
    pub deadline: Duration,
    /// Round trips per raw ping-pong run.
    pub ping_pongs: u64,
}

impl Plan {
    pub fn new(args: &BenchArgs) -> Self {
        Self {
            quick: args.quick,
            placement: args.placement,
            bootstrap: args.bootstrap.clone(),
            broker_bin: args.broker_bin.clone(),
            warmups: if args.quick { 0 } else { 1 },
            runs: if args.quick { 1 } else { 5 },
            deadline: Duration::from_secs(if args.quick { 3 } else { 15 }),
            ping_pongs: if args.quick { 5_000 } else { 50_000 },
        }
    }

    /// Bytes per raw sink or fetch run: about a quarter second at the B.4/B.5 medians.
    pub fn raw_bytes(&self, frame: usize) -> u64 {
        let mib: u64 = match (self.quick, frame >= 1 << 20) {
            (true, true) => 64,
            (true, false) => 16,
            (false, true) => 1024,
            (false, false) => 256,
        };
        mib << 20
    }

    /// Records per produce or consume run. 1 KiB records in 1 MiB batches move a GiB, as the
    /// raw 1 MiB probes do: shorter runs are measurably slowed by the producer's start and the
    /// last batches' round trips, and a broker keeping 512 MiB would recycle none of its memory.
    pub fn records(&self, record_bytes: usize, batch_bytes: usize) -> u64 {
        match (self.quick, record_bytes >= 1024, batch_bytes >= 1 << 20) {
            (true, true, _) => 16 << 10,
            (true, false, _) => 100_000,
            (false, true, true) => 1 << 20,
            (false, true, false) => 256 << 10,
            (false, false, _) => 2_000_000,
        }
    }

    /// Warm-ups then measured runs: `true` for the runs that count.
    pub fn schedule(&self) -> impl Iterator<Item = bool> {
        std::iter::repeat_n(false, self.warmups).chain(std::iter::repeat_n(true, self.runs))
    }
}

fn error_line(message: &str) {
    let _ = writeln!(std::io::stderr(), "workshop: error: {message}");
}

/// Runs the selected cases, streaming one JSON line per figure to stdout and the table to
/// stderr. A case that fails is reported on stderr and the others still run; the result is an
/// error if any failed (exit code 2), else a report whose figures count the goals met.
pub fn run(args: BenchArgs) -> Result<LabReport, BenchError> {
    if args.serve_raw {
        raw::server::serve().map_err(|e| BenchError::new(format!("raw server: {e}")))?;
        return Ok(summary(0, 0, 0));
    }
    let plan = Plan::new(&args);
    let mut cases = if args.cases.is_empty() {
        Case::DEFAULT.to_vec()
    } else {
        args.cases.clone()
    };
    cases.sort();
    cases.dedup();
    if cases.iter().any(|c| *c != Case::Raw) && plan.bootstrap.is_none() {
        process::find_broker(plan.broker_bin.as_deref())?;
    }
    // Read before pinning: once pinned, this process sees one CPU.
    let env = host::environment(args.placement);
    plan.placement.pin_self()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::new(format!("cannot start a tokio runtime: {e}")))?;
    if cfg!(debug_assertions) {
        error_line("warning: a debug build; its figures mean little (build with --release)");
    }
    let mut bench = Bench {
        plan,
        reporter: Reporter::new(env),
        raw: raw::Ceilings::default(),
    };
    let mut failed = Vec::new();
    for case in &cases {
        if let Err(e) = runtime.block_on(bench.run_case(*case)) {
            error_line(&format!("bench {}: {e}", case.name()));
            failed.push(case.name());
        }
    }
    // The raw server is stopped while the runtime is still there.
    drop(bench.raw);
    if !failed.is_empty() {
        return Err(BenchError::new(format!(
            "{} of {} cases failed: {} (see above)",
            failed.len(),
            cases.len(),
            failed.join(", ")
        )));
    }
    let (lines, met, missed) = bench.reporter.counts();
    Ok(summary(lines, met, missed))
}

/// The bench's verdict, in the shape of a lab report: "shown" means every case ran; whether
/// goals were met is a figure, not a failure (a noisy machine must not fail CI).
fn summary(lines: usize, met: usize, missed: usize) -> LabReport {
    LabReport {
        lab: "bench",
        expected: "every case runs and prints its figures".to_string(),
        shown: true,
        figures: serde_json::json!({"lines": lines, "goals_met": met, "goals_missed": missed}),
        measured: serde_json::json!({}),
        skipped: Vec::new(),
    }
}

/// What every case gets: the plan, where to report, and the ceilings measured so far.
pub struct Bench {
    pub plan: Plan,
    pub reporter: Reporter,
    pub raw: raw::Ceilings,
}

impl Bench {
    async fn run_case(&mut self, case: Case) -> Result<(), BenchError> {
        match case {
            Case::Raw => self.all_ceilings().await,
            Case::Produce => produce::run(self).await,
            Case::Consume => consume::run(self).await,
            Case::E2e => e2e::run(self).await,
            Case::Rebalance => rebalance::run(self).await,
            Case::Startup => startup::run(self).await,
            Case::Lag => lag::run(self).await,
        }
    }

    async fn all_ceilings(&mut self) -> Result<(), BenchError> {
        for frame in [16 << 10, 1 << 20] {
            for window in [1, 5] {
                let probe = raw::Probe::Sink { frame, window };
                self.raw
                    .throughput(probe, &self.plan, &mut self.reporter)
                    .await?;
            }
        }
        let probe = raw::Probe::Fetch { frame: 1 << 20 };
        self.raw
            .throughput(probe, &self.plan, &mut self.reporter)
            .await?;
        self.raw.ping_pong(&self.plan, &mut self.reporter).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::FromArgMatches;

    fn args(argv: &[&str]) -> BenchArgs {
        let cmd = <BenchArgs as clap::Args>::augment_args(clap::Command::new("bench"));
        let matches = cmd
            .try_get_matches_from(std::iter::once("bench").chain(argv.iter().copied()))
            .unwrap();
        BenchArgs::from_arg_matches(&matches).unwrap()
    }

    #[test]
    fn quick_plans_are_small_and_full_plans_follow_c1() {
        let quick = Plan::new(&args(&["--quick"]));
        assert_eq!(quick.schedule().filter(|m| *m).count(), 1);
        let full = Plan::new(&args(&[]));
        assert_eq!(
            full.schedule().collect::<Vec<_>>(),
            [false, true, true, true, true, true]
        );
        assert!(quick.raw_bytes(1 << 20) < full.raw_bytes(1 << 20));
        assert!(quick.records(100, 16 << 10) < full.records(100, 16 << 10));
        assert!(full.records(1024, 16 << 10) < full.records(1024, 1 << 20));
    }

    #[test]
    fn cases_and_placement_parse() {
        let a = args(&["--case", "produce", "lag", "--placement", "same"]);
        assert_eq!(a.cases, vec![Case::Produce, Case::Lag]);
        assert_eq!(a.placement, Placement::Same);
        let cmd = <BenchArgs as clap::Args>::augment_args(clap::Command::new("bench"));
        assert!(cmd
            .clone()
            .try_get_matches_from(["bench", "--case", "nope"])
            .is_err());
        assert!(cmd
            .try_get_matches_from(["bench", "--bootstrap", "nohost"])
            .is_err());
    }
}
