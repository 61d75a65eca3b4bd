//! `broker`: run a Kafka-protocol broker until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;

use broker::{Broker, BrokerConfig};
use clap::Parser;
use tracing_subscriber::EnvFilter;

/// A single-node broker that speaks the Kafka wire protocol.
///
/// Example: `broker --listen 127.0.0.1:9092 --auto-create-topics`, then
/// `kcat -b 127.0.0.1:9092 -L`.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Address to listen on. Loopback by default; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    listen: SocketAddr,
    /// Partitions of auto-created topics and of topics created with -1 partitions.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..=10_000))]
    default_partitions: i32,
    /// Create unknown topics on Metadata (when the client allows it) and on Produce.
    #[arg(long)]
    auto_create_topics: bool,
    /// Largest request frame accepted (Kafka's socket.request.max.bytes).
    #[arg(long, default_value_t = protocol::frame::DEFAULT_MAX_FRAME_BYTES)]
    max_request_bytes: usize,
    /// Largest record batch accepted (Kafka's message.max.bytes).
    #[arg(long, default_value_t = broker::config::DEFAULT_MAX_MESSAGE_BYTES)]
    max_message_bytes: usize,
    /// Keep topics in this directory and recover them at start (default: memory only). Produces
    /// with acks=all are synced to disk before they are acknowledged.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<std::path::PathBuf>,
    /// Inject a fault, repeatable: drop-ack[:topic=T,partition=N,count=N|probability=P,seed=S],
    /// delay:ms=N[,api=produce], close-after:requests=N.
    #[arg(long = "fault", value_name = "SPEC")]
    faults: Vec<broker::faults::Fault>,
    /// Serve Prometheus metrics (partition offsets, consumer-group lag) on http://ADDR/metrics.
    /// Give a loopback address unless the metrics are meant to be reachable from elsewhere.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// How long a new consumer group's first rebalance waits for more members (Kafka's
    /// group.initial.rebalance.delay.ms; Kafka's own default is 3000).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    group_initial_rebalance_delay_ms: u64,
    // Limits on what one request or one slow peer can hold (README: "Limits").
    /// The most one batch's records may decompress to; a produce past it gets MESSAGE_TOO_LARGE.
    #[arg(long, value_name = "BYTES", default_value_t = BrokerConfig::default().max_uncompressed_batch_bytes)]
    max_uncompressed_batch_bytes: usize,
    /// Partitions one CreateTopics or CreatePartitions may add (Kafka's controller: 10,000).
    #[arg(long, value_name = "N", default_value_t = broker::config::DEFAULT_MAX_PARTITIONS_PER_REQUEST)]
    max_partitions_per_request: usize,
    /// Partitions the broker holds at most, however they are created.
    #[arg(long, value_name = "N", default_value_t = BrokerConfig::default().max_partitions)]
    max_partitions: usize,
    /// Longest a Fetch waits for data, whatever its max_wait_ms asks.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    max_fetch_wait_ms: u64,
    /// Longest one response may take to be written; slower readers are disconnected.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    write_timeout_ms: u64,
    /// Bytes of fetch answers built but not yet written, across all connections.
    #[arg(long, value_name = "BYTES", default_value_t = BrokerConfig::default().fetch_memory_bytes)]
    fetch_memory_bytes: usize,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(run(args))
}

async fn run(args: Args) -> ExitCode {
    let config = BrokerConfig {
        listen: args.listen,
        default_partitions: args.default_partitions,
        auto_create_topics: args.auto_create_topics,
        max_request_bytes: args.max_request_bytes,
        max_message_bytes: args.max_message_bytes,
        faults: args.faults,
        data_dir: args.data_dir,
        metrics: args.metrics,
        group_initial_rebalance_delay: std::time::Duration::from_millis(
            args.group_initial_rebalance_delay_ms,
        ),
        max_uncompressed_batch_bytes: args.max_uncompressed_batch_bytes,
        max_partitions_per_request: args.max_partitions_per_request,
        max_partitions: args.max_partitions,
        max_fetch_wait: std::time::Duration::from_millis(args.max_fetch_wait_ms),
        write_timeout: std::time::Duration::from_millis(args.write_timeout_ms),
        fetch_memory_bytes: args.fetch_memory_bytes,
        ..BrokerConfig::default()
    };
    let broker = match Broker::start(config).await {
        Ok(broker) => broker,
        Err(e) => {
            eprintln!(
                "error: cannot start on {}: {e} (another broker on that port? pick another, or 127.0.0.1:0 for a free one; a data directory that cannot be read? check --data-dir)",
                args.listen
            );
            return ExitCode::from(2);
        }
    };
    // The one line on stdout: scripts and tests read the bound address from its last word.
    println!("broker listening on {}", broker.addr());
    wait_for_signal().await;
    broker.shutdown().await;
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
