//! The default, timed run: orders keyed by tenant through the broker, one super tenant sending
//! as much as all the others, a consumer group processing every partition at a fixed rate.
//!
//! Phases: the tenant-keyed run (one partition's lag climbs into the millions, the others stay
//! near zero, the average hides it); finding the tenant (the detector's Space-Saving top-k, and
//! whose records make up the hot partition's lag); more partitions (computed with Kafka's
//! partitioner: the tenant stays whole); the salted run (the same traffic with the tenant spread
//! over S sub-keys: the load evens out; the price is measured: its records applied out of order,
//! and an S-way read).

mod flow;
mod story;
mod workers;

use protocol::partitioner::partition_for_key;
use serde::Serialize;

use super::model::{busiest, max_over_avg};
use super::plan::Timed;
use super::sketch::SpaceSaving;
use super::traffic::{loads_by_tenant, sub_key, tenant_key, tenant_of_key, Mix};
use super::verdict;
use crate::kit::offsets::lags;
use crate::kit::reader::PartitionReader;
use crate::lab::report::{max_and_average, round, Checks, Narrator};
use crate::lab::target::Cluster;
use crate::lab::LabError;
use flow::{RunOutcome, RunSpec};

/// Tenants shown in the attribution of the hot partition's lag.
const ATTRIBUTED: usize = 3;
/// The hot partition's lag must be at least this share of the group's: the others "near zero".
const CONCENTRATED: f64 = 0.99;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopEntry {
    pub tenant: String,
    /// Space-Saving's estimate (an overestimate by at most `error`).
    pub count: u64,
    pub error: u64,
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LagShare {
    /// A tenant, or `others`.
    pub tenant: String,
    pub records: u64,
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MorePartitions {
    pub partitions: i32,
    /// The hot tenant's partition under Kafka's partitioner.
    pub hot_partition: i32,
    /// That partition's share of all records.
    pub hot_partition_share: f64,
    pub max_over_avg: f64,
}

/// Everything the timed run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub seed: u64,
    pub partitions: i32,
    pub tenants: u32,
    /// Records in each of the two runs, and their rate.
    pub records: u64,
    pub rate: u64,
    /// Records per second one partition's consumer processes.
    pub consumer_rate: u64,
    /// The group's capacity over the traffic's rate: above 1, it could keep up if spread.
    pub group_capacity_over_traffic: f64,
    /// The tenant the detector put first.
    pub hot_tenant: String,
    /// The tenant the traffic made hot (the consumers were not told).
    pub super_tenant: String,
    /// The partition with the most records.
    pub hot_partition: i32,
    /// The detector's estimate of the top tenant's share of the traffic.
    pub hot_share: f64,
    pub hot_partition_share: f64,
    pub arrivals_before: Vec<u64>,
    pub lag_before: Vec<u64>,
    pub max_lag: u64,
    pub avg_lag: f64,
    /// Busiest partition's records over the mean, keyed by tenant (source 001's max/avg).
    pub max_over_avg_before: f64,
    pub topk: Vec<TopEntry>,
    pub hot_partition_lag_by_tenant: Vec<LagShare>,
    pub more_partitions: Vec<MorePartitions>,
    pub salt_buckets: u32,
    /// Sub-keys a read of the salted tenant must ask (and merge).
    pub read_fanout: u32,
    /// Distinct partitions those sub-keys live on.
    pub read_partitions: usize,
    pub arrivals_after: Vec<u64>,
    pub lag_after: Vec<u64>,
    pub max_lag_after: u64,
    pub avg_lag_after: f64,
    /// Busiest partition's records over the mean, with the hot tenant salted.
    pub max_over_avg_after: f64,
    /// The super tenant's records applied after a later one of its own (per-tenant order).
    pub out_of_order_before: u64,
    pub out_of_order_after: u64,
    /// The super tenant's records applied in the salted run.
    pub applied_after: u64,
}

/// What the wall clock decides: the `measured` object beside the figures, which varies from
/// run to run and machine to machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    /// Wall time of each run, from the first record sent to the last member done.
    pub seconds_before: f64,
    pub seconds_after: f64,
}

impl Figures {
    /// The largest lag of the partitions other than the hot one, keyed by tenant.
    pub fn others_max_lag(&self) -> u64 {
        self.lag_before
            .iter()
            .enumerate()
            .filter(|(p, _)| *p != self.hot_partition as usize)
            .map(|(_, &l)| l)
            .max()
            .unwrap_or(0)
    }
}

pub fn expected(plan: &Timed) -> String {
    format!(
        "Keyed by tenant, the super tenant's partition falls ever further behind (by millions of \
         records at the default scale) while the other {} stay near zero and the group's average \
         hides it (busiest partition above {}x the mean); the sketch names the tenant, more \
         partitions leave it whole, and salting it into {} sub-keys brings the busiest partition \
         near the mean (at most {}x) at the price of its order and a {}-way read.",
        plan.partitions - 1,
        verdict::SKEW_HIGH,
        plan.salt,
        verdict::NEAR_ONE,
        plan.salt
    )
}

pub async fn run(
    cluster: &Cluster,
    n: &mut Narrator,
    plan: Timed,
    seed: u64,
) -> Result<(Figures, Measured, Checks), LabError> {
    let mix = Mix {
        tenants: plan.tenants,
        hot_tenant: plan.hot_tenant,
        salt: None,
    };
    story::keyed_opening(n, &plan, cluster);
    let before = flow::run(
        cluster,
        n,
        RunSpec {
            base: "orders-by-tenant",
            plan,
            mix,
            seed,
            detect: true,
        },
    )
    .await?;
    story::keyed_evidence(n, &plan, &before);

    story::detection_opening(n);
    let sketch = before
        .detector
        .as_ref()
        .ok_or_else(|| LabError::Internal("the tenant-keyed run had no detector".into()))?;
    let topk = top_entries(sketch, plan.top);
    let hot_partition = busiest(&before.arrivals) as i32;
    let attribution = attribute(cluster, n, &before, hot_partition).await?;
    story::detection_evidence(n, &topk, &attribution, hot_partition, sketch);

    let more = more_partitions(&before.sent_by_tenant, plan.partitions, plan.hot_tenant);
    story::more_partitions(n, plan.hot_tenant, &more);

    story::salted_opening(n, &plan);
    let after = flow::run(
        cluster,
        n,
        RunSpec {
            base: "orders-salted",
            plan,
            mix: Mix {
                salt: Some(plan.salt),
                ..mix
            },
            seed,
            detect: false,
        },
    )
    .await?;
    let read_partitions = sub_key_partitions(plan.hot_tenant, plan.salt, plan.partitions);
    story::salted_evidence(n, &plan, &before, &after, read_partitions);

    let figures = figures(
        &plan,
        seed,
        &before,
        &after,
        topk,
        attribution,
        more,
        read_partitions,
    );
    let verdict = verdict(&figures, &before, &after);
    n.summary(&story::summary(&figures));
    let measured = Measured {
        seconds_before: round(before.elapsed.as_secs_f64(), 2),
        seconds_after: round(after.elapsed.as_secs_f64(), 2),
    };
    Ok((figures, measured, verdict))
}

#[allow(clippy::too_many_arguments)]
fn figures(
    plan: &Timed,
    seed: u64,
    before: &RunOutcome,
    after: &RunOutcome,
    topk: Vec<TopEntry>,
    attribution: Vec<LagShare>,
    more: Vec<MorePartitions>,
    read_partitions: usize,
) -> Figures {
    let (max_lag, avg_lag) = max_and_average(&before.lag_rows);
    let (max_lag_after, avg_lag_after) = max_and_average(&after.lag_rows);
    let hot_partition = busiest(&before.arrivals) as i32;
    let total: u64 = before.arrivals.iter().sum();
    Figures {
        seed,
        partitions: plan.partitions,
        tenants: plan.tenants,
        records: plan.records,
        rate: plan.rate,
        consumer_rate: plan.consumer_rate,
        group_capacity_over_traffic: round(
            plan.consumer_rate as f64 * plan.partitions as f64 / plan.rate as f64,
            3,
        ),
        hot_tenant: topk.first().map(|t| t.tenant.clone()).unwrap_or_default(),
        super_tenant: tenant_key(plan.hot_tenant),
        hot_partition,
        hot_share: topk.first().map_or(0.0, |t| t.share),
        hot_partition_share: round(
            before.arrivals[hot_partition as usize] as f64 / total.max(1) as f64,
            4,
        ),
        arrivals_before: before.arrivals.clone(),
        lag_before: lags(&before.lag_rows),
        max_lag,
        avg_lag: round(avg_lag, 1),
        max_over_avg_before: round(max_over_avg(&before.arrivals), 3),
        topk,
        hot_partition_lag_by_tenant: attribution,
        more_partitions: more,
        salt_buckets: plan.salt,
        read_fanout: plan.salt,
        read_partitions,
        arrivals_after: after.arrivals.clone(),
        lag_after: lags(&after.lag_rows),
        max_lag_after,
        avg_lag_after: round(avg_lag_after, 1),
        max_over_avg_after: round(max_over_avg(&after.arrivals), 3),
        out_of_order_before: before.order.out_of_order(plan.hot_tenant),
        out_of_order_after: after.order.out_of_order(plan.hot_tenant),
        applied_after: after.order.applied(plan.hot_tenant),
    }
}

fn verdict(f: &Figures, before: &RunOutcome, after: &RunOutcome) -> Checks {
    let mut v = Checks::new();
    v.check(
        "placed by the partitioner",
        before.predicted == before.arrivals && after.predicted == after.arrivals,
        "records per partition on the broker equal Kafka's partitioner applied to the keys sent",
    );
    verdict::skew_high(
        &mut v,
        "skewed by tenant",
        "keyed by tenant, records per partition",
        f.max_over_avg_before,
    );
    let total_lag: u64 = f.lag_before.iter().sum();
    let hot_lag = f
        .lag_before
        .get(f.hot_partition as usize)
        .copied()
        .unwrap_or(0);
    let others = f.others_max_lag();
    v.check(
        "one partition lags",
        hot_lag > 0 && hot_lag as f64 >= CONCENTRATED * total_lag as f64,
        format!(
            "partition {} lags {} records, the others at most {}; the group average is {:.0}",
            f.hot_partition, hot_lag, others, f.avg_lag
        ),
    );
    v.check(
        "the sketch finds the tenant",
        f.hot_tenant == f.super_tenant,
        format!(
            "the detector's top tenant is {} with {:.1} % of the traffic (the super tenant is {})",
            f.hot_tenant,
            f.hot_share * 100.0,
            f.super_tenant
        ),
    );
    let stays_whole = f
        .more_partitions
        .iter()
        .all(|m| m.hot_partition_share >= f.hot_share.min(0.5) * 0.9);
    v.check(
        "more partitions leave it whole",
        stays_whole,
        format!(
            "with {} partitions the super tenant is still on one partition",
            f.more_partitions
                .iter()
                .map(|m| m.partitions.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    verdict::near_one(
        &mut v,
        "salting spreads it",
        &format!(
            "salted into {} sub-keys, records per partition",
            f.salt_buckets
        ),
        f.max_over_avg_after,
    );
    v.check(
        "salting costs order",
        f.out_of_order_before == 0 && f.out_of_order_after > 0,
        format!(
            "the price: {} of the super tenant's records applied out of order once salted ({} before), \
             and a read of it asks {} sub-keys on {} partitions",
            f.out_of_order_after, f.out_of_order_before, f.read_fanout, f.read_partitions
        ),
    );
    v
}

/// The sketch's top `k`, as tenant names with shares.
fn top_entries(sketch: &SpaceSaving<u32>, k: usize) -> Vec<TopEntry> {
    sketch
        .top(k)
        .into_iter()
        .map(|h| TopEntry {
            tenant: tenant_key(h.key),
            count: h.count,
            error: h.error,
            share: round(h.share, 4),
        })
        .collect()
}

/// Whose records the hot partition's lag is: reads the partition from the group's committed
/// offset to its end (what the group has yet to process) and counts tenants with a sketch.
async fn attribute(
    cluster: &Cluster,
    n: &Narrator,
    run: &RunOutcome,
    partition: i32,
) -> Result<Vec<LagShare>, LabError> {
    let row = run
        .lag_rows
        .get(partition as usize)
        .ok_or_else(|| LabError::Internal(format!("no lag row for partition {partition}")))?;
    let (from, end) = (
        row.current_offset.unwrap_or(0),
        row.log_end_offset.unwrap_or(0),
    );
    let lag = (end - from).max(0) as u64;
    let tp = client::TopicPartition::new(run.topic.clone(), partition);
    let mut reader = PartitionReader::new(
        cluster.client(),
        tp,
        from,
        std::time::Duration::from_millis(100),
    )?;
    let mut sketch = SpaceSaving::new(16);
    let progress = n.progress(lag, "reading the backlog");
    let mut read = 0u64;
    while read < lag {
        let chunk = reader.take(100_000, end).await?;
        if chunk.is_empty() {
            break;
        }
        for record in chunk.iter().filter(|r| r.offset < end) {
            if let Some(tenant) = record.key.as_deref().and_then(tenant_of_key) {
                sketch.add(&tenant);
            }
        }
        read += chunk.len() as u64;
        progress.inc_by(chunk.len() as u64);
    }
    progress.finish();
    let counted = sketch.total().max(1);
    let mut shares: Vec<LagShare> = sketch
        .top(ATTRIBUTED)
        .into_iter()
        .map(|h| LagShare {
            tenant: tenant_key(h.key),
            records: h.count,
            share: round(h.count as f64 / counted as f64, 4),
        })
        .collect();
    let named: u64 = shares.iter().map(|s| s.records).sum();
    if counted > named {
        shares.push(LagShare {
            tenant: "others".into(),
            records: counted - named,
            share: round((counted - named) as f64 / counted as f64, 4),
        });
    }
    Ok(shares)
}

/// What more partitions would do with the same traffic, unsalted: computed with Kafka's
/// partitioner from what each tenant sent.
fn more_partitions(sent_by_tenant: &[u64], partitions: i32, hot: u32) -> Vec<MorePartitions> {
    let total: u64 = sent_by_tenant.iter().sum();
    [1, 2, 4, 8]
        .iter()
        .map(|factor| partitions.saturating_mul(*factor))
        .map(|p| {
            let loads = loads_by_tenant(sent_by_tenant, p);
            let hot_partition = partition_for_key(tenant_key(hot).as_bytes(), p);
            MorePartitions {
                partitions: p,
                hot_partition,
                hot_partition_share: round(
                    loads[hot_partition as usize] as f64 / total.max(1) as f64,
                    4,
                ),
                max_over_avg: round(max_over_avg(&loads), 3),
            }
        })
        .collect()
}

/// Distinct partitions the salted tenant's sub-keys land on.
fn sub_key_partitions(tenant: u32, salt: u32, partitions: i32) -> usize {
    let mut parts: Vec<i32> = (0..salt)
        .map(|s| partition_for_key(sub_key(tenant, s).as_bytes(), partitions))
        .collect();
    parts.sort_unstable();
    parts.dedup();
    parts.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_partitions_keep_the_tenant_whole() {
        let mut sent = vec![0u64; 101];
        sent[42] = 1000;
        for t in (1..=100).filter(|&t| t != 42) {
            sent[t] = 10;
        }
        let more = more_partitions(&sent, 8, 42);
        assert_eq!(
            more.iter().map(|m| m.partitions).collect::<Vec<_>>(),
            [8, 16, 32, 64]
        );
        for m in &more {
            assert!(m.hot_partition_share >= 1000.0 / 1990.0, "{m:?}");
        }
        assert!(more[3].max_over_avg > more[0].max_over_avg);
    }

    #[test]
    fn sub_keys_spread_over_partitions() {
        assert_eq!(sub_key_partitions(42, 1, 8), 1);
        let spread = sub_key_partitions(42, 16, 8);
        assert!((2..=8).contains(&spread), "{spread}");
    }
}
