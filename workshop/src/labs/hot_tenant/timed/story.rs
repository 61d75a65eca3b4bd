//! The timed run's narration: each phase's opening and evidence, and the summary. Every number
//! shown is passed in from what the lab measured.

use super::super::plan::Timed;
use super::super::sketch::SpaceSaving;
use super::super::traffic::tenant_key;
use super::flow::{RunOutcome, Sample, DETECTOR_COUNTERS};
use super::{Figures, LagShare, MorePartitions, TopEntry};
use crate::report::{
    bar, max_and_average, percent, thousands, Align, Narrator, Phase, Summary, Table,
};
use crate::target::Cluster;

pub fn keyed_opening(n: &mut Narrator, plan: &Timed, cluster: &Cluster) {
    let about = format!(
        "Running against {}. \
         A topic of {} partitions keyed by tenant id (Kafka's murmur2 partitioner). {} tenants send \
         orders; one of them sends as much as all the others together (seed 001's super tenant). The \
         producer sends {} records at {} a second. A consumer group with one member per partition \
         processes each partition at a fixed {} records a second: together {} a second, {:.1}x the \
         traffic, so the group has capacity to spare.",
        cluster.describe(),
        plan.partitions,
        plan.tenants,
        thousands(plan.records),
        thousands(plan.rate),
        thousands(plan.consumer_rate),
        thousands(plan.consumer_rate * plan.partitions as u64),
        plan.consumer_rate as f64 * plan.partitions as f64 / plan.rate as f64
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
    n.say(&format!(
        "After {:.1} s of traffic ({:.1} s on this machine), kafka-consumer-groups.sh --describe --group {}:",
        plan.seconds(),
        run.elapsed.as_secs_f64(),
        run.group
    ));
    n.lag(&run.lag_rows);
    n.say("How it got there, second by second of traffic:");
    n.table(&timeline(&run.timeline));
    let (max, avg) = max_and_average(&run.lag_rows);
    n.say(&format!(
        "One partition is {} records behind and growing; the others keep up. A dashboard of the group's \
         average shows {}: {:.0}x less than the truth, and an alert on it would stay quiet.",
        thousands(max),
        thousands(avg.round() as u64),
        if avg > 0.0 { max as f64 / avg } else { 0.0 }
    ));
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
        .flat_map(|s| s.lags.iter().copied())
        .max()
        .unwrap_or(0);
    for s in samples {
        let mut sorted = s.lags.clone();
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
    n.say(
        "One key has one partition, whatever the count: the super tenant's half of the traffic stays on \
         one partition and one consumer, and the skew grows as the mean shrinks. Changing the count also \
         moves other keys mid-stream and breaks their order (lab `partitions` shows that).",
    );
}

pub fn salted_opening(n: &mut Narrator, plan: &Timed) {
    n.phase(Phase {
        title: "Salt the hot tenant",
        about: &format!(
            "Seed 003's fix: write the hot tenant under one of {} sub-keys picked at random per record \
             ({}#0 to {}#{}), leave every other tenant alone, and run the same traffic again on a fresh \
             topic and group.",
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
    n.say(&format!(
        "The price. Order: {} of {}'s {} records were applied after a later one of its own (before \
         salting: {}); its orders now race each other through {} partitions. Reads: \"all of {}\" is \
         {} reads (one per sub-key, on {} partitions) and a merge.",
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
    Summary {
        happened: vec![
            format!(
                "Keyed by tenant, partition {} got {} of the records ({:.2}x the mean) and lagged by {}; the \
                 others stayed near zero and the group's average lag was {}.",
                f.hot_partition,
                percent(f.hot_partition_share),
                f.max_over_avg_before,
                thousands(f.max_lag),
                thousands(f.avg_lag.round() as u64)
            ),
            format!(
                "The sketch named {} with {} of the traffic. Salted into {} sub-keys, the busiest partition got \
                 {:.2}x the mean and the largest lag was {}, at the price of {} records applied out of order \
                 and a {}-way read.",
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
            "A partition is consumed by one member at a time: the group's spare capacity (it had more than \
             the traffic needed) cannot help the partition that needs it. One key always has one partition."
                .into(),
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
             out S ways and merge. Cheap for counters, costly for 'latest N'."
                .into(),
            "Or: a cache with request coalescing in front of hot reads; a dedicated partition or topic for a \
             super tenant; virtual buckets as in seed 001, moved online with a versioned routing table."
                .into(),
        ],
    }
}
