//! The broker under test, as the bench's client side sees it: the `broker` binary started in a
//! process of its own (one per case, so each case's peak RSS and CPU seconds are its own), or
//! whatever `--bootstrap` names. Topics get unique names and are deleted when a case is done
//! with them, so a long run on a shared broker does not pile up data.

use std::sync::atomic::{AtomicU64, Ordering};

use client::{Admin, Client, ClientConfig, NewTopic, OffsetSpec};
use serde_json::{json, Value};

use super::process::{find_broker, Kind, Spawned};
use super::{BenchError, Plan};

static TOPICS: AtomicU64 = AtomicU64::new(0);

pub struct Cluster {
    spawned: Option<Spawned>,
    pub addr: String,
    pub admin: Admin,
}

impl Cluster {
    /// Starts a broker (or connects to `--bootstrap`) and connects an admin client.
    pub async fn start(plan: &Plan) -> Result<Self, BenchError> {
        Self::start_with(plan, &[]).await
    }

    /// The same with more broker flags (ignored with `--bootstrap`), e.g. `--data-dir DIR`.
    pub async fn start_with(plan: &Plan, flags: &[&str]) -> Result<Self, BenchError> {
        let (spawned, addr) = match &plan.bootstrap {
            Some(addr) => (None, addr.clone()),
            None => {
                let bin = find_broker(plan.broker_bin.as_deref())?;
                let mut args = vec![
                    "--listen",
                    "127.0.0.1:0",
                    // Kafka's 3 s default would be the whole of a new group's rebalance time.
                    "--group-initial-rebalance-delay-ms",
                    "0",
                ];
                args.extend_from_slice(flags);
                let broker = Spawned::start(Kind::Broker, &bin, &args, plan.placement).await?;
                let addr = broker.addr.to_string();
                (Some(broker), addr)
            }
        };
        let admin = Admin::new(connect(&addr).await?);
        Ok(Self {
            spawned,
            addr,
            admin,
        })
    }

    /// A new client of its own: members of a group, producers and consumers that must not share
    /// connections (a parked JoinGroup or Fetch holds up the requests behind it).
    pub async fn client(&self) -> Result<Client, BenchError> {
        connect(&self.addr).await
    }

    /// A topic with a name no other run uses.
    pub async fn create_topic(
        &self,
        case: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<String, BenchError> {
        let name = format!(
            "bench-{case}-{}-{}",
            std::process::id(),
            TOPICS.fetch_add(1, Ordering::Relaxed)
        );
        self.admin
            .create_topic(&NewTopic {
                configs: configs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..NewTopic::new(&name, partitions)
            })
            .await
            .map_err(|e| BenchError::new(format!("cannot create topic {name}: {e}")))?;
        Ok(name)
    }

    /// Deletes a topic the bench created; a failure is only worth a warning.
    pub async fn delete_topic(&self, name: &str) {
        if let Err(e) = self.admin.delete_topic(name).await {
            tracing::warn!(topic = name, "bench topic not deleted: {e}");
        }
    }

    /// The sum of the topic's log end offsets: how many records it holds.
    pub async fn records_in(&self, topic: &str) -> Result<i64, BenchError> {
        let ends = self
            .admin
            .list_offsets(topic, OffsetSpec::Latest)
            .await
            .map_err(|e| BenchError::new(format!("cannot read the end offsets of {topic}: {e}")))?;
        Ok(ends.iter().map(|o| o.offset.max(0)).sum())
    }

    /// The broker process's peak RSS and the CPU seconds it spent since the previous call, as
    /// the `broker` field of a JSON line; `None` when the broker is not ours (`--bootstrap`).
    pub fn usage_since_last(&mut self) -> Option<Value> {
        let (usage, spent) = self.spawned.as_mut()?.checkpoint()?;
        Some(usage.to_json(spent))
    }

    /// Starts the CPU clock of the next figure now (setup work is not the figure's).
    pub fn reset_usage(&mut self) {
        let _ = self.usage_since_last();
    }
}

/// An admin client for a broker the bench started outside a [`Cluster`].
pub async fn connect_admin(addr: &str) -> Result<Admin, BenchError> {
    Ok(Admin::new(connect(addr).await?))
}

async fn connect(addr: &str) -> Result<Client, BenchError> {
    let mut config = ClientConfig::new(addr);
    config.client_id = "workshop-bench".to_string();
    Client::connect(config)
        .await
        .map_err(|e| BenchError::new(format!("cannot connect to the broker at {addr}: {e}")))
}

/// `{"record_bytes": ...}`-style params, with the broker's address when it is not ours.
pub fn with_target(mut params: Value, plan: &Plan) -> Value {
    if let (Some(addr), Some(map)) = (&plan.bootstrap, params.as_object_mut()) {
        map.insert("bootstrap".into(), json!(addr));
    }
    params
}
