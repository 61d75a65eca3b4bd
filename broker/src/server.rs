//! Starting and stopping a broker: bind, accept with a connection limit, drain on shutdown.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::info;

use crate::accept::accept_loop;
use crate::capacity::PartitionBudget;
use crate::cluster::moves::Moves;
use crate::cluster::Cluster;
use crate::config::BrokerConfig;
use crate::connection;
use crate::faults::Faults;
use crate::fetch_memory::FetchMemory;
use crate::group::offsets_log::OffsetsLog;
use crate::group::state::Timing;
use crate::group::GroupCoordinator;
use crate::identity;
use crate::producer::ProducerIds;
use crate::state::BrokerState;
use crate::topics::{StorageConfig, Topics};
use crate::txn::TxnCoordinator;

/// Committed offsets in the data directory. '@' is not allowed in topic names, so no topic's
/// folder can collide with it.
const OFFSETS_FILE: &str = "@consumer-offsets";

/// A running broker. Dropping it stops accepting and closes every connection; `shutdown` does
/// the same and waits until each connection task has finished.
#[derive(Debug)]
pub struct Broker {
    /// Each node's listener, in node order (one unless `config.nodes`).
    addrs: Vec<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    state: Arc<BrokerState>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Broker {
    /// Recovers the topics of `config.data_dir` if there is one, binds `config.listen` and starts
    /// serving on the current tokio runtime.
    pub async fn start(config: BrokerConfig) -> io::Result<Broker> {
        let listeners = crate::cluster::listeners::bind(&config).await?;
        let addrs = listeners
            .iter()
            .map(TcpListener::local_addr)
            .collect::<io::Result<Vec<_>>>()?;
        let addr = addrs[0];
        let faults = Arc::new(Faults::default());
        for fault in &config.faults {
            faults.add(fault.clone());
        }
        let shutdown = CancellationToken::new();
        let group_timing = Timing {
            initial_rebalance_delay: config.group_initial_rebalance_delay,
            ..Timing::default()
        };
        if let Some(dir) = &config.data_dir {
            std::fs::create_dir_all(dir)?;
        }
        let storage = StorageConfig {
            max_open_files: config.max_open_files,
            segment_bytes: config.log_segment_bytes,
            flush: config.log_flush,
        };
        let topics = match &config.data_dir {
            Some(dir) => Topics::open(dir, storage)?,
            None => Topics::default(),
        };
        let held = topics
            .all()
            .iter()
            .map(|t| usize::try_from(t.partition_count()).unwrap_or(0))
            .sum();
        let producer_ids = match &config.data_dir {
            Some(dir) => ProducerIds::persisted(dir)?,
            None => ProducerIds::default(),
        };
        let (txns, unfinished) = match &config.data_dir {
            Some(dir) => TxnCoordinator::open(dir, &producer_ids)?,
            None => (TxnCoordinator::default(), Vec::new()),
        };
        let groups = GroupCoordinator::new(group_timing, shutdown.child_token());
        let groups = match &config.data_dir {
            Some(dir) => {
                let exists = |topic: &str| topics.get(topic).is_some();
                let (log, replayed) = OffsetsLog::open(&dir.join(OFFSETS_FILE), exists)?;
                groups.persist_to(log, replayed)
            }
            None => groups,
        };
        let moves = match &config.data_dir {
            Some(dir) => Moves::open(dir)?,
            None => Moves::default(),
        };
        let cluster = Cluster::new(crate::cluster::listeners::nodes(&config, &addrs)?, moves);
        let (advertised_host, advertised_port) = config.advertised(addr);
        let state = Arc::new(BrokerState {
            advertised_host,
            advertised_port: i32::from(advertised_port),
            cluster_id: match &config.data_dir {
                Some(dir) => identity::cluster_id(dir)?,
                None => identity::new_cluster_id(),
            },
            topics,
            partitions: PartitionBudget::new(config.max_partitions, held),
            producer_ids,
            txns,
            faults,
            // Never below one batch: a batch larger than the budget could never be served.
            fetch_memory: FetchMemory::new(config.fetch_memory_bytes.max(config.max_message_bytes)),
            groups,
            cluster,
            config,
        });
        // Transactions a crash left decided: their markers and offsets, before any request.
        for ending in &unfinished {
            crate::txn_end::finish(&state, ending)
                .await
                .map_err(|e| io::Error::other(format!("cannot finish a transaction: {e:?}")))?;
        }
        let tasks = TaskTracker::new();
        // Bound before anything is spawned, so a failure leaves nothing running.
        let metrics_addr = match state.config.metrics {
            Some(metrics) => {
                Some(crate::metrics::start(metrics, state.clone(), shutdown.clone(), &tasks).await?)
            }
            None => None,
        };
        crate::log_tasks::spawn(state.clone(), shutdown.clone(), &tasks);
        crate::txn_end::spawn(state.clone(), shutdown.clone(), &tasks);
        let expiring = state.clone();
        tasks.spawn(async move {
            let config = &expiring.config;
            let (period, retention) = (
                config.offsets_retention_check_interval,
                config.offsets_retention,
            );
            expiring
                .groups
                .expire_offsets_every(period, retention)
                .await;
        });
        crate::producer_expiry::spawn(state.clone(), shutdown.clone(), &tasks);
        let node_ids: Vec<i32> = state.cluster.nodes().iter().map(|n| n.id).collect();
        for ((listener, addr), node) in listeners.into_iter().zip(&addrs).zip(node_ids) {
            let serving = state.clone();
            let stop = shutdown.clone();
            tasks.spawn(accept_loop(
                listener,
                state.config.max_connections,
                shutdown.clone(),
                tasks.clone(),
                move |stream, peer| {
                    connection::serve(stream, peer, node, serving.clone(), stop.clone())
                },
            ));
            info!(%addr, node, "broker listening");
        }
        Ok(Broker {
            addrs,
            metrics_addr,
            state,
            shutdown,
            tasks,
        })
    }

    /// The address actually bound (the real port when the config asked for port 0); with
    /// several nodes, the first node's.
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    /// Every node's bound address, in node order.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Where `GET /metrics` is served, when the config asked for it.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Stops accepting, closes every connection after its current request, and waits for them.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// The faults in force; add or clear them while the broker runs.
    pub fn faults(&self) -> Arc<Faults> {
        self.state.faults.clone()
    }

    #[doc(hidden)]
    pub fn state(&self) -> &BrokerState {
        &self.state
    }

    /// `retention.ms` and one log cleaner pass, at once, as the background tasks run them every
    /// interval: for tests that assert what they leave.
    #[doc(hidden)]
    pub fn maintain_logs(&self, now_ms: i64) -> (usize, crate::log::cleaner::CleanStats) {
        let expired = crate::log_tasks::expire_all(&self.state, now_ms);
        (expired, crate::log_tasks::clean_all(&self.state, now_ms))
    }

    /// Aborts the transactions open past their timeout at `now_ms`, as the background task does
    /// every interval; how many. For tests.
    #[doc(hidden)]
    pub async fn abort_timed_out_transactions(&self, now_ms: i64) -> usize {
        crate::txn_end::abort_timed_out(&self.state, now_ms).await
    }

    /// Expires producer ids and transactional ids idle at `now_ms`, as the background task does
    /// every `producer.id.expiration.check.interval.ms`. For tests.
    #[doc(hidden)]
    pub async fn expire_producer_state(&self, now_ms: i64) -> crate::producer_expiry::Expired {
        crate::producer_expiry::expire(&self.state, now_ms).await
    }

    /// One request frame (without its size prefix) through the handlers as a connection passes
    /// it, and the answer's bytes; `None` where the connection would send nothing or close. For
    /// the fuzz targets, which drive the handlers without sockets.
    #[doc(hidden)]
    pub async fn handle_frame(&self, frame: bytes::Bytes) -> Option<Vec<u8>> {
        let node = self.state.node_id();
        match crate::handler::handle(&self.state, node, self.addr(), frame).await {
            crate::handler::Reply::Frame(out, _) => {
                let mut wire = Vec::new();
                out.write_to(&mut wire).await.ok()?;
                Some(wire)
            }
            _ => None,
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
