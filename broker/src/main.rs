//! `broker`: run a Kafka-protocol broker until Ctrl-C or SIGTERM.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use broker::{Broker, BrokerConfig};
use clap::Parser;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

/// A single-node broker that speaks the Kafka wire protocol.
///
/// Example: `broker --listen 127.0.0.1:9092 --auto-create-topics`, then
/// `kcat -b 127.0.0.1:9092 -L`.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Address to listen on, HOST:PORT (a host name is resolved). Loopback by default; port 0
    /// picks a free port.
    #[arg(long, default_value = "127.0.0.1:9092", value_name = "HOST:PORT")]
    listen: String,
    /// Brokers to run in this process, each with its own node id (1..=N) and listener: node k
    /// on --listen's port + k - 1 (each on a free port with port 0). Partition leaders and group
    /// coordinators are spread over them; every node serves the same single copy of the data.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    nodes: u16,
    /// The HOST:PORT clients are told to connect to (Kafka's advertised.listeners), when it is
    /// not the listen address: behind NAT or port forwarding, or with --listen 0.0.0.0:PORT,
    /// which otherwise advertises this machine's host name.
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_host_port)]
    advertised_listener: Option<(String, u16)>,
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
    /// With --data-dir: partition files kept open at once; others are opened when used
    /// [default: half the open-files limit]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_open_files: Option<u64>,
    /// With --data-dir: segment size of topics without segment.bytes (Kafka's
    /// log.segment.bytes; retention.bytes deletes whole segments)
    #[arg(long, value_name = "BYTES", default_value_t = broker::topics::DEFAULT_SEGMENT_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    log_segment_bytes: u64,
    /// With --data-dir: the append that brings a partition's unsynced records to N is answered
    /// only once synced; 1 syncs before every answer (Kafka's log.flush.interval.messages,
    /// topic flush.messages) [default: unset: answers never wait for the disk]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    log_flush_interval_messages: Option<u64>,
    /// With --data-dir: written data is synced in the background within MS (Kafka's
    /// log.flush.interval.ms, topic flush.ms) [default: unset: within 30 s, as the kernel]
    #[arg(long, value_name = "MS")]
    log_flush_interval_ms: Option<u64>,
    // Limits on what one request or one slow peer can hold (docs/broker.md: "Limits").
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
    /// Longest transaction timeout a producer may ask for (Kafka's transaction.max.timeout.ms)
    #[arg(long, value_name = "MS", default_value_t = BrokerConfig::default().transaction_max_timeout_ms,
          value_parser = clap::value_parser!(i32).range(1..))]
    transaction_max_timeout_ms: i32,
    /// How often retention.ms is applied (Kafka's log.retention.check.interval.ms)
    #[arg(long, value_name = "MS", default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(1..))]
    log_retention_check_interval_ms: u64,
    /// How often compacted topics are cleaned (Kafka's log.cleaner.backoff.ms)
    #[arg(long, value_name = "MS", default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(1..))]
    log_cleaner_backoff_ms: u64,
    /// Memory for a cleaning pass's map of keys, 32 bytes a key; a log with more keys is cleaned
    /// in passes (Kafka's log.cleaner.dedupe.buffer.size)
    #[arg(long, value_name = "BYTES", default_value_t = BrokerConfig::default().log_cleaner_dedupe_buffer_bytes as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    log_cleaner_dedupe_buffer_size: u64,
    /// How long an Empty group keeps its committed offsets (Kafka's offsets.retention.minutes)
    #[arg(long, value_name = "MINUTES", default_value_t = 10_080, value_parser = clap::value_parser!(u64).range(1..))]
    offsets_retention_minutes: u64,
    /// How often expired offsets are removed (Kafka's offsets.retention.check.interval.ms)
    #[arg(long, value_name = "MS", default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..))]
    offsets_retention_check_interval_ms: u64,
    /// A partition forgets a producer id idle this long (Kafka's producer.id.expiration.ms)
    #[arg(long, value_name = "MS", default_value_t = BrokerConfig::default().producer_id_expiration_ms,
          value_parser = clap::value_parser!(i64).range(1..))]
    producer_id_expiration_ms: i64,
    /// The coordinator forgets a transactional id idle this long (Kafka's
    /// transactional.id.expiration.ms)
    #[arg(long, value_name = "MS", default_value_t = BrokerConfig::default().transactional_id_expiration_ms,
          value_parser = clap::value_parser!(i64).range(1..))]
    transactional_id_expiration_ms: i64,
    /// How often idle producer ids and transactional ids are expired (Kafka's
    /// producer.id.expiration.check.interval.ms)
    #[arg(long, value_name = "MS", default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..))]
    producer_id_expiration_check_interval_ms: u64,
    /// Stop when the process that started this one is gone, so a test run that is killed leaves
    /// no broker behind (what a reaper does for a Kafka container)
    #[arg(long)]
    exit_with_parent: bool,
}

fn main() -> ExitCode {
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
        .with(filter.unwrap_or(Targets::new().with_default(LevelFilter::INFO)))
        .init();
    let args = Args::parse();
    // Read first: a parent that dies while the broker starts must not be missed.
    #[cfg(unix)]
    let parent = args
        .exit_with_parent
        .then(std::os::unix::process::parent_id);
    #[cfg(not(unix))]
    let parent = None;
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(run(args, parent))
}

/// `parent`: with --exit-with-parent, the parent's process id at start.
async fn run(args: Args, parent: Option<u32>) -> ExitCode {
    let listen = match resolve(&args.listen).await {
        Ok(listen) => listen,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    if let Some(dir) = &args.data_dir {
        // Checked before anything else, so its error names the directory, not the port.
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("error: {}", data_dir_failure(dir, &e));
            return ExitCode::from(2);
        }
    }
    let config = BrokerConfig {
        listen,
        nodes: usize::from(args.nodes),
        default_partitions: args.default_partitions,
        auto_create_topics: args.auto_create_topics,
        max_request_bytes: args.max_request_bytes,
        max_message_bytes: args.max_message_bytes,
        faults: args.faults,
        data_dir: args.data_dir.clone(),
        metrics: args.metrics,
        group_initial_rebalance_delay: std::time::Duration::from_millis(
            args.group_initial_rebalance_delay_ms,
        ),
        max_open_files: args.max_open_files.map(|n| n as usize),
        log_segment_bytes: args.log_segment_bytes,
        log_flush: broker::group_commit::FlushDefaults {
            messages: args.log_flush_interval_messages,
            ms: args.log_flush_interval_ms,
        },
        advertised_listener: args.advertised_listener,
        max_uncompressed_batch_bytes: args.max_uncompressed_batch_bytes,
        max_partitions_per_request: args.max_partitions_per_request,
        max_partitions: args.max_partitions,
        max_fetch_wait: std::time::Duration::from_millis(args.max_fetch_wait_ms),
        write_timeout: std::time::Duration::from_millis(args.write_timeout_ms),
        fetch_memory_bytes: args.fetch_memory_bytes,
        transaction_max_timeout_ms: args.transaction_max_timeout_ms,
        log_retention_check_interval: std::time::Duration::from_millis(
            args.log_retention_check_interval_ms,
        ),
        log_cleaner_backoff: std::time::Duration::from_millis(args.log_cleaner_backoff_ms),
        log_cleaner_dedupe_buffer_bytes: usize::try_from(args.log_cleaner_dedupe_buffer_size)
            .unwrap_or(usize::MAX),
        offsets_retention: std::time::Duration::from_secs(
            args.offsets_retention_minutes.saturating_mul(60),
        ),
        offsets_retention_check_interval: std::time::Duration::from_millis(
            args.offsets_retention_check_interval_ms,
        ),
        producer_id_expiration_ms: args.producer_id_expiration_ms,
        transactional_id_expiration_ms: args.transactional_id_expiration_ms,
        producer_id_expiration_check_interval: std::time::Duration::from_millis(
            args.producer_id_expiration_check_interval_ms,
        ),
        ..BrokerConfig::default()
    };
    let advertised = config.clone();
    let broker = match Broker::start(config).await {
        Ok(broker) => broker,
        Err(e) => {
            let failure = start_failure(&args.listen, listen, args.data_dir.as_deref(), &e);
            eprintln!("error: {failure}");
            return ExitCode::from(2);
        }
    };
    let (host, port) = advertised.advertised(broker.addr());
    tracing::info!("clients are told to connect to {host}:{port}");
    // Stdout has these lines only: scripts and tests read each bound address from its last
    // word, the listeners' first (one line per node, in node order).
    for addr in broker.addrs() {
        println!("broker listening on {addr}");
    }
    if let Some(metrics) = broker.metrics_addr() {
        println!("metrics listening on {metrics}");
    }
    tokio::select! {
        () = wait_for_signal() => {}
        () = parent_gone(parent) => {
            tracing::info!("the process that started the broker is gone: stopping");
        }
    }
    broker.shutdown().await;
    ExitCode::SUCCESS
}

/// Returns once the process whose id was `parent` at start is no longer the parent: an orphan
/// is re-parented (to init or a subreaper), so its parent's id changes. Looked at every 100 ms
/// rather than asked of the kernel (Linux's PR_SET_PDEATHSIG fires when the parent *thread*
/// ends, which a multi-threaded test runner does while it lives on). Never, without a parent.
async fn parent_gone(parent: Option<u32>) {
    #[cfg(unix)]
    if let Some(parent) = parent {
        let mut every = tokio::time::interval(std::time::Duration::from_millis(100));
        loop {
            every.tick().await;
            if std::os::unix::process::parent_id() != parent {
                return;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = parent;
    std::future::pending::<()>().await
}

/// `--listen`: an address, or a host name and a port (the first IPv4 address it resolves to,
/// else the first address).
async fn resolve(listen: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = listen.parse() {
        return Ok(addr);
    }
    let (host, _) = parse_host_port(listen).map_err(|e| format!("--listen {listen}: {e}"))?;
    let found: Vec<SocketAddr> = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| format!("--listen {listen}: the name {host} does not resolve ({e})"))?
        .collect();
    found
        .iter()
        .find(|a| a.is_ipv4())
        .or(found.first())
        .copied()
        .ok_or_else(|| format!("--listen {listen}: the name {host} resolves to no address"))
}

/// HOST:PORT with a port number; brackets allowed around an IPv6 host.
fn parse_host_port(text: &str) -> Result<(String, u16), String> {
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!("'{text}' is not HOST:PORT"));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port
        .parse()
        .map_err(|_| format!("'{port}' in '{text}' is not a port number"))?;
    if host.is_empty() {
        return Err(format!("'{text}' has no host before the port"));
    }
    Ok((host.to_string(), port))
}

/// Why the broker did not start, with the hint for that cause: the listen address, or the data
/// directory (whose first check, in `run`, already passed).
fn start_failure(listen: &str, addr: SocketAddr, data_dir: Option<&Path>, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::AddrInUse => format!(
            "cannot listen on {listen}: {e} (another broker on that port? pick another, or \
             127.0.0.1:0 for a free one)"
        ),
        io::ErrorKind::AddrNotAvailable => format!(
            "cannot listen on {listen}: {e} (not an address of this machine: try 127.0.0.1 or \
             0.0.0.0)"
        ),
        io::ErrorKind::PermissionDenied if data_dir.is_none() || addr.port() < 1024 => format!(
            "cannot listen on {listen}: {e} (ports below 1024 need privileges: pick a higher one)"
        ),
        _ => match data_dir {
            Some(dir) => data_dir_failure(dir, e),
            None => format!("cannot start on {listen}: {e}"),
        },
    }
}

fn data_dir_failure(dir: &Path, e: &io::Error) -> String {
    let hint = match e.kind() {
        io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory => {
            "a file is in the way: give a directory, or a path to create one at"
        }
        io::ErrorKind::PermissionDenied => "check its permissions, or give another directory",
        io::ErrorKind::StorageFull => "the disk is full",
        _ => "check what it holds, or give another directory",
    };
    format!("cannot use --data-dir {}: {e} ({hint})", dir.display())
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
