//! The raw ceilings (performance.md part B, measured again in every run): a server with no
//! protocol in its own process, pinned like the broker, and probes of the same shape as each
//! broker case, run from the bench's own runtime. Each ceiling is measured once per bench run,
//! when a case first needs it, and printed as a `raw` line of its own.

pub mod client;
pub mod disk;
pub mod server;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

use serde_json::json;

use super::process::{own_binary, Kind, Spawned};
use super::report::{Better, Ceiling, Figure, Reporter};
use super::stats::{sig, Runs};
use super::{BenchError, Plan};
use crate::bench::host::Placement;

/// A traffic shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Probe {
    /// Frames of `frame` bytes, at most `window` unacknowledged, appended to a pooled log.
    Sink { frame: usize, window: usize },
    /// `frame` bytes fetched from memory, one request in flight.
    Fetch { frame: usize },
}

impl Probe {
    fn label(self) -> String {
        match self {
            Probe::Sink { frame, window } => {
                format!("sink {}, window {window}, pooled log", size_name(frame))
            }
            Probe::Fetch { frame } => format!("fetch {} from memory", size_name(frame)),
        }
    }
}

/// 64-byte round trips, one in flight: medians over the runs.
#[derive(Debug, Clone, Copy)]
pub struct PingPong {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    pub round_trips_per_s: f64,
}

#[derive(Default)]
pub struct Ceilings {
    server: Option<Spawned>,
    throughput: HashMap<Probe, f64>,
    /// The disk's MiB/s by the bytes of each synced append.
    disk: HashMap<usize, f64>,
    ping_pong: Option<PingPong>,
}

impl Ceilings {
    async fn addr(&mut self, placement: Placement) -> Result<SocketAddr, BenchError> {
        if let Some(server) = &self.server {
            return Ok(server.addr);
        }
        let bin = own_binary()?;
        let server = Spawned::start(Kind::Raw, &bin, &["bench", "--serve-raw"], placement).await?;
        let addr = server.addr;
        self.server = Some(server);
        Ok(addr)
    }

    /// The probe's median MiB/s, measured on first use.
    pub async fn throughput(
        &mut self,
        probe: Probe,
        plan: &Plan,
        reporter: &mut Reporter,
    ) -> Result<Ceiling, BenchError> {
        let value = match self.throughput.get(&probe) {
            Some(v) => *v,
            None => {
                let v = self.measure(probe, plan, reporter).await?;
                self.throughput.insert(probe, v);
                v
            }
        };
        Ok(Ceiling {
            name: format!("raw {}", probe.label()),
            value,
            unit: "MiB/s",
        })
    }

    async fn measure(
        &mut self,
        probe: Probe,
        plan: &Plan,
        reporter: &mut Reporter,
    ) -> Result<f64, BenchError> {
        let addr = self.addr(plan.placement).await?;
        let io = |e: std::io::Error| BenchError::new(format!("raw {}: {e}", probe.label()));
        let mut runs = Runs::default();
        let mut frames = Runs::default();
        // One warm-up always: it faults the pooled segments and the fetch log in, which is what
        // makes them the ceiling.
        for i in 0..=plan.runs {
            let moved = match probe {
                Probe::Sink { frame, window } => {
                    let total = plan.raw_bytes(frame);
                    client::sink(addr, frame, total, window, plan.deadline)
                        .await
                        .map_err(io)?
                }
                Probe::Fetch { frame } => {
                    client::fetch(addr, frame, plan.raw_bytes(frame), plan.deadline)
                        .await
                        .map_err(io)?
                }
            };
            if i > 0 {
                runs.push(moved.mib_per_s());
                frames.push(moved.frames as f64 / moved.elapsed.as_secs_f64().max(1e-9));
            }
        }
        let mut figure = Figure::new("raw", probe.label(), "MiB/s");
        figure.params = match probe {
            Probe::Sink { frame, window } => {
                json!({"shape": "sink", "frame_bytes": frame, "window": window, "bytes_per_run": plan.raw_bytes(frame)})
            }
            Probe::Fetch { frame } => {
                json!({"shape": "fetch", "frame_bytes": frame, "bytes_per_run": plan.raw_bytes(frame)})
            }
        };
        figure.runs = runs;
        figure.extra("frames_per_s", sig(frames.median()));
        let median = figure.median();
        reporter.emit(&figure);
        Ok(median)
    }

    /// The disk's MiB/s for appends of `write` bytes each followed by fdatasync, in `dir` (where
    /// the broker writes), measured on first use.
    pub async fn disk(
        &mut self,
        write: usize,
        dir: &Path,
        plan: &Plan,
        reporter: &mut Reporter,
    ) -> Result<Ceiling, BenchError> {
        let label = format!("disk: append {} + fdatasync", size_name(write));
        let value = match self.disk.get(&write) {
            Some(v) => *v,
            None => {
                // About a quarter second at this machine's ~240 MiB/s, far more under load.
                let total: u64 = if plan.quick { 8 << 20 } else { 64 << 20 };
                let mut runs = Runs::default();
                let mut syncs = Runs::default();
                for i in 0..=plan.runs {
                    let (dir, deadline) = (dir.to_path_buf(), plan.deadline);
                    let run = tokio::task::spawn_blocking(move || {
                        disk::append_and_sync(&dir, write, total, deadline)
                    })
                    .await
                    .map_err(|e| BenchError::new(format!("{label}: {e}")))?
                    .map_err(|e| BenchError::new(format!("{label}: {e}")))?;
                    if i > 0 {
                        runs.push(run.mib_per_s());
                        syncs.push(run.syncs_per_s());
                    }
                }
                let mut figure = Figure::new("raw", label.clone(), "MiB/s");
                figure.params =
                    json!({"shape": "disk", "write_bytes": write, "bytes_per_run": total});
                figure.runs = runs;
                figure.extra("syncs_per_s", sig(syncs.median()));
                let median = figure.median();
                reporter.emit(&figure);
                self.disk.insert(write, median);
                median
            }
        };
        Ok(Ceiling {
            name: label,
            value,
            unit: "MiB/s",
        })
    }

    /// 64-byte ping-pong latency, measured on first use.
    pub async fn ping_pong(
        &mut self,
        plan: &Plan,
        reporter: &mut Reporter,
    ) -> Result<PingPong, BenchError> {
        if let Some(p) = self.ping_pong {
            return Ok(p);
        }
        let addr = self.addr(plan.placement).await?;
        let (mut p50, mut p99, mut p999, mut rate) = (
            Runs::default(),
            Runs::default(),
            Runs::default(),
            Runs::default(),
        );
        for i in 0..=plan.runs {
            let (latency, elapsed) = client::ping_pong(addr, plan.ping_pongs, plan.deadline)
                .await
                .map_err(|e| BenchError::new(format!("raw ping-pong: {e}")))?;
            if i > 0 {
                p50.push(latency.quantile_us(0.5));
                p99.push(latency.quantile_us(0.99));
                p999.push(latency.quantile_us(0.999));
                rate.push(latency.count() as f64 / elapsed.as_secs_f64().max(1e-9));
            }
        }
        let result = PingPong {
            p50_us: p50.median(),
            p99_us: p99.median(),
            p99_9_us: p999.median(),
            round_trips_per_s: rate.median(),
        };
        let mut figure = Figure::new("raw", "ping-pong 64 B, 1 in flight, p50", "us");
        figure.better = Better::Lower;
        figure.params = json!({"shape": "ping-pong", "message_bytes": server::ECHO, "round_trips_per_run": plan.ping_pongs});
        figure.runs = p50;
        figure
            .extra("p99_us", sig(result.p99_us))
            .extra("p99_9_us", sig(result.p99_9_us))
            .extra("round_trips_per_s", sig(result.round_trips_per_s));
        reporter.emit(&figure);
        self.ping_pong = Some(result);
        Ok(result)
    }
}

/// `1 MiB`, `16 KiB`, `100 B`.
pub fn size_name(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size_name(1 << 20), "1 MiB");
        assert_eq!(size_name(16 << 10), "16 KiB");
        assert_eq!(size_name(100), "100 B");
        assert_eq!(size_name(1500), "1500 B");
    }
}
