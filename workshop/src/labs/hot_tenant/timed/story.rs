//! The timed run's narration: each phase's opening and evidence, and the summary. Every number
//! shown is passed in from what the lab measured.

use super::super::plan::Timed;
use super::super::sketch::SpaceSaving;
use super::super::traffic::tenant_key;
use super::flow::{RunOutcome, Sample, DETECTOR_COUNTERS};
use super::{Figures, LagShare, MorePartitions, TopEntry};
use crate::kit::offsets::lag_title;
use crate::lab::report::{
    bar, max_and_average, percent, thousands, Align, Narrator, Panel, Phase, Summary, Table,
};
use crate::lab::target::Cluster;

pub fn keyed_opening(n: &mut Narrator, plan: &Timed, cluster: &Cluster) {
    n.say(&format!("Running against {}.", cluster.describe()));
    let capacity = plan.consumer_rate * plan.partitions as u64;
    let ratio = capacity as f64 / plan.rate as f64;
    let about = format!(
        "A topic of {} partitions keyed by tenant id (Kafka's murmur2 partitioner). {} tenants send \
         orders; one of them sends as much as all the others together (source 001's super tenant). The \
         producer sends {} records at {} a second. A consumer group with one member per partition \
         processes each partition at a fixed {} records a second: together {} a second, {ratio:.1}x the \
         traffic, {}.",
        plan.partitions,
        plan.tenants,
        thousands(plan.records),
        thousands(plan.rate),
        thousands(plan.consumer_rate),
        thousands(capacity),
        if ratio > 1.0 {
            "so the group has capacity to spare"
        } else {
            "so the group cannot keep up even with the load spread evenly"
        }
    );
    n.phase(Phase {
        title: "Keyed by tenant",
        about: &about,
        predict:
            "what will the group's average lag say, and what will the busiest partition's lag say?",
    });
}

pub fn keyed_evidence(n: &mut Narrator, plan: &Timed, run: &RunOutcome) {
    n.answer();
    n.say(&lag_title(
        &run.group,
        &format!(
            "after {:.1} s of traffic ({:.1} s on this machine)",
            plan.seconds(),
            run.elapsed.as_secs_f64()
        ),
    ));
    n.lag(&run.lag_rows);
    n.say("How it got there, second by second of traffic:");
    n.table(&timeline(&run.timeline));
    n.say(&hidden_by_the_average(run));
}

/// What the lag table says against what its average says.
fn hidden_by_the_average(run: &RunOutcome) -> String {
    let (max, avg) = max_and_average(&run.lag_rows);
    if max == 0 {
        return "No partition is behind: the group kept up on every partition.".to_string();
    }
    let behind: Vec<i32> = run
        .lag_rows
        .iter()
        .filter(|r| r.lag().unwrap_or(0) > 0)
        .map(|r| r.partition)
        .collect();
    let busiest: Vec<u64> = run
        .timeline
        .iter()
        .map(|s| s.lags.iter().flatten().copied().max().unwrap_or(0))
        .collect();
    let growing = busiest.len() > 1 && busiest.windows(2).all(|w| w[1] > w[0]);
    let who = match behind.as_slice() {
        [one] => format!("Partition {one} is"),
        many => format!("{} partitions are", many.len()),
    };
    format!(
        "{who} behind, the busiest by {} records{}; the other {} keep up. A dashboard of the group's \
         average shows {}: {:.0}x less than the busiest partition.",
        thousands(max),
        if growing { " and growing" } else { "" },
        run.lag_rows.len() - behind.len(),
        thousands(avg.round() as u64),
        if avg > 0.0 { max as f64 / avg } else { 0.0 }
    )
}

fn timeline(samples: &[Sample]) -> Table {
    let mut table = Table::new(&[
        ("traffic", Align::Right),
        ("busiest partition", Align::Right),
        ("others (max)", Align::Right),
        ("group average", Align::Right),
        ("", Align::Left),
    ]);
    let top = samples
        .iter()
        .flat_map(|s| s.lags.iter().flatten().copied())
        .max()
        .unwrap_or(0);
    for s in samples {
        // As in the lag table: a partition without a commit has no lag, and no place in the mean.
        let mut sorted: Vec<u64> = s.lags.iter().flatten().copied().collect();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let max = sorted.first().copied().unwrap_or(0);
        let second = sorted.get(1).copied().unwrap_or(0);
        let avg = sorted.iter().sum::<u64>() as f64 / sorted.len().max(1) as f64;
        table.row([
            format!("{:.1} s", s.seconds),
            thousands(max),
            thousands(second),
            thousands(avg.round() as u64),
            bar(max, top, 30),
        ]);
    }
    table
}

pub fn detection_opening(n: &mut Narrator) {
    n.phase(Phase {
        title: "Who is it?",
        about: &format!(
            "The consumers were not told which tenant is big. A detector reads the same records as a \
             consumer of its own (it only counts keys, so it keeps up) and keeps a Space-Saving sketch \
             of {DETECTOR_COUNTERS} counters: the top-k heavy hitters with bounded error, in fixed memory, \
             however many tenants there are. Then the hot partition's backlog (committed offset to log \
             end) is read to see whose records the lag is made of."
        ),
        predict: "what share of the traffic does the top tenant have, and of the hot partition's lag?",
    });
}

pub fn detection_evidence(
    n: &mut Narrator,
    topk: &[TopEntry],
    attribution: &[LagShare],
    hot_partition: i32,
    sketch: &SpaceSaving<u32>,
) {
    n.answer();
    n.panel(tenants_panel(attribution, hot_partition));
    let mut table = Table::new(&[
        ("rank", Align::Right),
        ("tenant", Align::Left),
        ("records (estimate)", Align::Right),
        ("error at most", Align::Right),
        ("share", Align::Right),
        ("", Align::Left),
    ]);
    for (i, t) in topk.iter().enumerate() {
        table.row([
            (i + 1).to_string(),
            t.tenant.clone(),
            thousands(t.count),
            thousands(t.error),
            percent(t.share),
            bar((t.share * 1000.0) as u64, 1000, 30),
        ]);
    }
    n.table(&table);
    n.say(&format!(
        "{} records seen; any tenant above 1/{} of them is guaranteed a counter.",
        thousands(sketch.total()),
        sketch.capacity()
    ));
    let mut table = Table::new(&[
        ("tenant", Align::Left),
        ("records in the lag", Align::Right),
        ("share", Align::Right),
    ]);
    for s in attribution {
        table.row([s.tenant.clone(), thousands(s.records), percent(s.share)]);
    }
    n.say(&format!("The lag of partition {hot_partition}, by tenant:"));
    n.table(&table);
    if let (Some(top), Some(first)) = (topk.first(), attribution.first()) {
        n.say(&if top.tenant == first.tenant {
            format!(
                "The sketch's top tenant, {}, sent {} of the traffic and makes up {} of partition \
                 {hot_partition}'s lag.",
                top.tenant,
                percent(top.share),
                percent(first.share)
            )
        } else {
            format!(
                "The sketch's top tenant is {}, but partition {hot_partition}'s lag is mostly {}.",
                top.tenant, first.tenant
            )
        });
    }
}

/// The tenants inside the hot partition's lag, each under its name, the largest marked.
fn tenants_panel(attribution: &[LagShare], hot_partition: i32) -> Panel {
    let lag: u64 = attribution.iter().map(|s| s.records).sum();
    let mut panel = Panel::new(format!("tenants inside partition {hot_partition}")).figure(
        format!("lag of partition {hot_partition}"),
        thousands(lag),
        true,
    );
    if let Some(top) = attribution.first() {
        panel = panel.figure(format!("of it {}", top.tenant), percent(top.share), true);
    }
    for (i, s) in attribution.iter().enumerate() {
        panel = panel.bar(s.tenant.clone(), s.records, percent(s.share), i == 0);
    }
    panel
}

pub fn more_partitions(n: &mut Narrator, hot: u32, more: &[MorePartitions]) {
    n.phase(Phase {
        title: "More partitions?",
        about:
            "The reflex: the consumers cannot keep up, so add partitions (and consumers). Kafka's \
                partitioner is computed here for the same traffic on more partitions.",
        predict: &format!(
            "where does {} go with twice, four and eight times the partitions?",
            tenant_key(hot)
        ),
    });
    n.answer();
    let mut table = Table::new(&[
        ("partitions", Align::Right),
        ("partition of the tenant", Align::Right),
        ("its share of records", Align::Right),
        ("busiest / mean", Align::Right),
    ]);
    for m in more {
        table.row([
            m.partitions.to_string(),
            m.hot_partition.to_string(),
            percent(m.hot_partition_share),
            format!("{:.2}x", m.max_over_avg),
        ]);
    }
    n.table(&table);
    let shares = more.iter().map(|m| m.hot_partition_share);
    let (lo, hi) = (
        shares.clone().fold(f64::INFINITY, f64::min),
        shares.fold(0.0, f64::max),
    );
    let skews: Vec<f64> = more.iter().map(|m| m.max_over_avg).collect();
    let grows = skews.windows(2).all(|w| w[1] > w[0]);
    if let (Some(first), Some(last)) = (more.first(), more.last()) {
        n.say(&format!(
            "One key has one partition, whatever the count: at every count {} stays on one partition \
             and one consumer, with {} to {} of all records, and busiest / mean goes from {:.2}x to \
             {:.2}x{}. Changing the count also moves other keys mid-stream and breaks their order (lab \
             `partitions` shows that).",
            tenant_key(hot),
            percent(lo),
            percent(hi),
            first.max_over_avg,
            last.max_over_avg,
            if grows { " as the mean shrinks" } else { "" }
        ));
    }
}

pub fn salted_opening(n: &mut Narrator, plan: &Timed) {
    n.phase(Phase {
        title: "Salt the hot tenant",
        about: &format!(
            "Source 003's fix: write the hot tenant under one of {} sub-keys picked at random per record \
             ({}#0 to {}#{}), leave every other tenant alone, and run the same traffic again on a fresh \
             topic and group. Per record at random is the worst case for order: source 001 salts by \
             hash(order_id) % S, so that each order's records share a sub-key and stay in order, and \
             only the order across the tenant's orders is given up.",
            plan.salt,
            tenant_key(plan.hot_tenant),
            tenant_key(plan.hot_tenant),
            plan.salt - 1
        ),
        predict: "how even is the load now, and what does the tenant's own data pay for it?",
    });
}

pub fn salted_evidence(
    n: &mut Narrator,
    plan: &Timed,
    before: &RunOutcome,
    after: &RunOutcome,
    read_partitions: usize,
) {
    n.answer();
    n.lag(&after.lag_rows);
    let mut table = Table::new(&[
        ("partition", Align::Right),
        ("records, keyed by tenant", Align::Right),
        ("records, salted", Align::Right),
        ("", Align::Left),
    ]);
    let top = after.arrivals.iter().copied().max().unwrap_or(0);
    for (p, (b, a)) in before.arrivals.iter().zip(&after.arrivals).enumerate() {
        table.row([
            p.to_string(),
            thousands(*b),
            thousands(*a),
            bar(*a, top, 30),
        ]);
    }
    n.table(&table);
    let hot = plan.hot_tenant;
    let skew = |arrivals: &[u64]| super::super::model::max_over_avg(arrivals);
    n.say(&format!(
        "The busiest partition now gets {:.2}x the mean (keyed by tenant: {:.2}x), and the largest lag \
         is {}.",
        skew(&after.arrivals),
        skew(&before.arrivals),
        thousands(max_and_average(&after.lag_rows).0)
    ));
    n.say(&format!(
        "The price. Order, in the lab's model of the consumers' store (each tick it applies the \
         partitions one after another, standing in for members that race; not a measured race): {} of \
         {}'s {} records were applied after a later one of its own (before salting: {}); its records \
         now go through {} partitions. Reads: \"all of {}\" is {} reads (one per sub-key, on {} \
         partitions) and a merge.",
        thousands(after.order.out_of_order(hot)),
        tenant_key(hot),
        thousands(after.order.applied(hot)),
        thousands(before.order.out_of_order(hot)),
        read_partitions,
        tenant_key(hot),
        plan.salt,
        read_partitions
    ));
}

pub fn summary(f: &Figures) -> Summary {
    let others = f.others_max_lag();
    Summary {
        happened: vec![
            format!(
                "Keyed by tenant, partition {} got {} of the records ({:.2}x the mean) and lagged by {}; \
                 the others lagged by at most {} and the group's average lag was {}.",
                f.hot_partition,
                percent(f.hot_partition_share),
                f.max_over_avg_before,
                thousands(f.max_lag),
                thousands(others),
                thousands(f.avg_lag.round() as u64)
            ),
            format!(
                "The sketch named {} with {} of the traffic. Salted into {} sub-keys, the busiest partition got \
                 {:.2}x the mean and the largest lag was {}, at the price of {} records applied out of order \
                 (in the lab's model of the store) and a {}-way read.",
                f.hot_tenant,
                percent(f.hot_share),
                f.salt_buckets,
                f.max_over_avg_after,
                thousands(f.max_lag_after),
                thousands(f.out_of_order_after),
                f.read_fanout
            ),
        ],
        why: vec![
            format!(
                "In a consumer group a partition is consumed by one member at a time: the group's capacity \
                 ({:.1}x the traffic) cannot help the partition that needs it. One key always has one \
                 partition. (Share groups, KIP-932, let several consumers read one partition, giving up \
                 order within it.)",
                f.group_capacity_over_traffic
            ),
            "The average divides one partition's lag by the partition count: the more partitions, the better \
             it hides a hot one."
                .into(),
        ],
        what_to_do: vec![
            "Alert on the maximum lag per partition (and its growth), never on the group's average; keep the \
             partition key in structured logs so 'slow' can be tied to 'which tenant'."
                .into(),
            "Find hot keys from the traffic with a heavy-hitter sketch (Space-Saving, Count-Min) and keep the \
             list current."
                .into(),
            "Salt only the listed hot keys, knowing the price: order per key is gone across sub-keys, reads fan \
             out S ways and merge. Salt by hash(order_id) % S (source 001) to keep each order in order. \
             Cheap for counters, costly for 'latest N'."
                .into(),
            "Or: a cache with request coalescing in front of hot reads; a dedicated partition or topic for a \
             super tenant; virtual buckets as in source 001, moved online with a versioned routing table."
                .into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_leaves_partitions_without_a_commit_out_of_the_average() {
        let samples = [Sample {
            seconds: 1.0,
            lags: vec![Some(10), None, Some(20)],
        }];
        let (_, body) = timeline(&samples).lines();
        let cells: Vec<&str> = body[0].split_whitespace().collect();
        assert_eq!(cells[..5], ["1.0", "s", "20", "10", "15"], "{}", body[0]);
    }
}
