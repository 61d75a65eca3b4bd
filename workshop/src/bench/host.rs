//! What the bench reads from the machine: where processes run (`--placement`), what a process
//! costs (`/proc/PID/status` and `/proc/PID/stat`), and what the run happened on (git, rustc,
//! kernel, CPUs, load), so that a JSON line can be compared only with runs of the same shape.
//!
//! Pinning goes through `taskset` (util-linux) rather than `sched_setaffinity`: the workspace
//! denies `unsafe` (the broker's writeback call aside), and `taskset` both pins a child at exec
//! and re-pins the bench itself.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::BenchError;

/// Where the broker (or the raw server) and the bench's client run, as performance.md B.7
/// found that it decides latency: a wake-up that crosses vCPUs costs ~20 µs each way here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Placement {
    /// Server and client both on vCPU 0 (no cross-CPU wake-ups; they share one CPU).
    Same,
    /// Server on vCPU 0, client on vCPU 1.
    Split,
    /// Unpinned: what CI and workshops get; runs flip between the two shapes above.
    None,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Same => "same",
            Placement::Split => "split",
            Placement::None => "none",
        }
    }

    /// The vCPU a spawned server is pinned to.
    pub fn server_cpu(self) -> Option<usize> {
        match self {
            Placement::Same | Placement::Split => Some(0),
            Placement::None => None,
        }
    }

    /// The vCPU the bench process (the client side) is pinned to.
    pub fn client_cpu(self) -> Option<usize> {
        match self {
            Placement::Same => Some(0),
            Placement::Split => Some(1),
            Placement::None => None,
        }
    }

    /// Pins every thread of this process to the client's vCPU. Must run before the tokio runtime
    /// starts: threads created later inherit the mask of the thread that creates them.
    pub fn pin_self(self) -> Result<(), BenchError> {
        let Some(cpu) = self.client_cpu() else {
            return Ok(());
        };
        let cpus = cpu_count();
        if cpu >= cpus {
            return Err(BenchError::new(format!(
                "placement {} needs vCPU {cpu}, but this machine has {cpus}; use --placement same or none",
                self.name()
            )));
        }
        let status = Command::new("taskset")
            .args([
                "-a",
                "-p",
                "-c",
                &cpu.to_string(),
                &std::process::id().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(BenchError::new(format!(
                "taskset could not pin the bench to vCPU {cpu} ({s}); use --placement none"
            ))),
            Err(e) => Err(BenchError::new(format!(
                "placement {} needs taskset (util-linux): {e}; install it or use --placement none",
                self.name()
            ))),
        }
    }

    /// The command that runs `program` with this placement's server pinning.
    pub fn server_command(self, program: &Path) -> Command {
        match self.server_cpu() {
            Some(cpu) => {
                let mut cmd = Command::new("taskset");
                cmd.arg("-c").arg(cpu.to_string()).arg(program);
                cmd
            }
            None => Command::new(program),
        }
    }
}

pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// What a process has cost so far, from `/proc`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcUsage {
    /// Resident set now (`VmRSS`), KiB.
    pub rss_kib: u64,
    /// Peak resident set (`VmHWM`), KiB.
    pub peak_rss_kib: u64,
    /// User plus system CPU time, seconds.
    pub cpu_s: f64,
}

impl ProcUsage {
    /// `None` when the process is gone or `/proc` is not there (not Linux).
    pub fn of(pid: u32) -> Option<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Some(Self {
            rss_kib: status_kib(&status, "VmRSS:")?,
            peak_rss_kib: status_kib(&status, "VmHWM:")?,
            cpu_s: cpu_ticks(&stat)? as f64 / clock_ticks_per_second(),
        })
    }

    /// The part of a JSON line that says what the broker cost during a case.
    pub fn to_json(self, cpu_s_in_case: f64) -> Value {
        json!({
            "peak_rss_kib": self.peak_rss_kib,
            "rss_kib": self.rss_kib,
            "cpu_s": round3(cpu_s_in_case),
        })
    }
}

/// CPU seconds this process (the bench, i.e. the client side) has used so far; 0 without /proc.
/// Next to the broker's CPU seconds it shows which side a throughput case is bound by.
pub fn own_cpu_s() -> f64 {
    ProcUsage::of(std::process::id()).map_or(0.0, |u| u.cpu_s)
}

/// A `Vm...:   1234 kB` line of `/proc/PID/status`.
fn status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// `utime + stime` from `/proc/PID/stat`. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted from the last `)`: utime and stime are fields 14 and 15,
/// the 12th and 13th after it.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// `sysconf(_SC_CLK_TCK)` without libc: ask `getconf`, and fall back to Linux's usual 100.
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        command_line("getconf", &["CLK_TCK"])
            .and_then(|s| s.parse().ok())
            .filter(|t: &f64| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// The first line a command prints, if it runs and succeeds.
fn command_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    text.lines().next().map(|l| l.trim().to_string())
}

/// The 1-minute load average: a run on a busy machine is not comparable with a quiet one.
pub fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// What every JSON line carries about the run's machine and build.
pub fn environment(placement: Placement) -> Value {
    json!({
        "git": command_line("git", &["rev-parse", "--short", "HEAD"]),
        "rustc": command_line("rustc", &["--version"]),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string()),
        "nproc": cpu_count(),
        "load1_at_start": load_average(),
        "placement": placement.name(),
        "release_build": !cfg!(debug_assertions),
    })
}

pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_kib() {
        let status = "Name:\tbroker\nVmHWM:\t   9120 kB\nVmRSS:\t    7000 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(7000));
        assert_eq!(status_kib(status, "VmHWM:"), Some(9120));
        assert_eq!(status_kib(status, "VmSwap:"), None);
        assert_eq!(status_kib("VmRSS: lots kB", "VmRSS:"), None);
    }

    #[test]
    fn cpu_ticks_survive_odd_command_names() {
        // Field 2 is "(a) b)"; utime = 13, stime = 7.
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 13 7 0 0 20 0 3 0 5 1000 200";
        assert_eq!(cpu_ticks(stat), Some(20));
        assert_eq!(cpu_ticks("garbage"), None);
        assert_eq!(cpu_ticks("1 (x) S 1"), None);
    }

    #[test]
    fn this_process_can_be_measured() {
        let usage = ProcUsage::of(std::process::id()).expect("/proc is mounted on Linux");
        assert!(usage.rss_kib > 0 && usage.peak_rss_kib >= usage.rss_kib);
    }
}
