//! Lab `routing` as a trainer tells it: a producer with a fresh map, `orders-7`'s leader moved
//! under a producer whose map goes stale, a client that never re-reads its map next to the
//! cluster's per-node redirect counter, then Redis Cluster's hash tags, ASK and MOVED in a
//! model; then the summary. Each phase asks its question before it shows what the run measured.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::evidence::{
    leaders_table, never_panel, node_evidence, stale_answers_panel, summary, tallies, warnings,
};
use super::figures::{self, AfterMove, Figures, Measured};
use super::kafka::{self, Sent, CLIENT_ID};
use super::metrics;
use super::plan::{self, RoutingArgs, MOVED_PARTITION, PARTITIONS};
use super::redis::{self, RedisRun, NODES};
use super::Routing;
use crate::kit::schemes::redis_slot;
use crate::lab::deadline::Work;
use crate::lab::report::Table;
use crate::lab::report::{count, percent, Align, LabReport, Narrator, Phase, SkippedPhase};
use crate::lab::target::{self, Cluster};
use crate::lab::{Lab, LabContext, LabError, Target};

const EXPECTED: &str = "a client's map of leaders goes stale when a leader moves: a producer that \
    re-reads metadata on NOT_LEADER_OR_FOLLOWER delivers everything, a client that never re-reads \
    it keeps failing on the old leader, seen only in the redirect ratio; in Redis Cluster, ASK \
    treated as MOVED flaps and MOVED ignored costs an extra hop";

const MOVE_TITLE: &str = "orders-7's leader moves under a producer";
const NEVER_TITLE: &str = "A client that never re-reads its map";

pub(super) fn run(args: &RoutingArgs, ctx: &mut LabContext) -> Result<LabReport, LabError> {
    let started = Instant::now();
    if let (Some(addr), Target::Embedded) = (&args.metrics, &ctx.target) {
        return Err(LabError::InvalidInput(format!(
            "--metrics {addr} reads the metrics of a cluster given with --bootstrap; the embedded \
             cluster's are read without it"
        )));
    }
    let runtime = target::runtime()?;
    let nodes = args.nodes as usize;
    let cluster = runtime.block_on(Cluster::open_nodes(
        &ctx.target,
        &ctx.stop,
        Routing::NAME,
        nodes,
    ))?;
    let outcome = runtime.block_on(cluster.until_stopped(kafka_phases(&cluster, args, ctx)));
    runtime.block_on(cluster.close());
    let (nodes, fresh, after, mut rng) = outcome?;
    let n = &mut ctx.narrator;
    let redis = redis_phases(n, &mut rng);
    let figures = Figures::new(nodes, &fresh, after.as_ref(), &redis);
    let checks = figures::verdict(&figures, after.as_ref());
    n.summary(&summary(&figures, after.as_ref()));
    let measured = Measured {
        seconds: crate::lab::report::round(started.elapsed().as_secs_f64(), 3),
        never_refreshing_node_metrics: after.as_ref().and_then(|a| a.node_metrics.clone()),
    };
    let skipped = match after {
        Some(_) => Vec::new(),
        None => [MOVE_TITLE, NEVER_TITLE]
            .map(|phase| SkippedPhase {
                phase: phase.to_string(),
                reason: ONE_NODE.to_string(),
            })
            .to_vec(),
    };
    let report = LabReport::new(
        Routing::NAME,
        EXPECTED.to_string(),
        checks.shown(),
        &figures,
    )?
    .with_measured(&measured)?
    .skipping(skipped);
    n.verdict(&report, &checks);
    Ok(report)
}

const ONE_NODE: &str = "this cluster has one node: no leader can move";

type KafkaRun = (usize, Sent, Option<AfterMove>, ChaCha8Rng);

async fn kafka_phases(
    cluster: &Cluster,
    args: &RoutingArgs,
    ctx: &mut LabContext,
) -> Result<KafkaRun, LabError> {
    let n = &mut ctx.narrator;
    n.intro(Routing::NAME, EXPECTED);
    n.say(&format!("Running against {}.", cluster.describe()));
    let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
    let records = args.records as usize;
    let mut keys = || -> Vec<String> {
        let draw = |r: &mut ChaCha8Rng| format!("order-{}", r.gen_range(1000..100_000));
        (0..records).map(|_| draw(&mut rng)).collect()
    };
    let (before, after_keys, never_keys) = (keys(), keys(), keys());
    let topic = cluster.name("orders");
    let node_ids: Vec<i32> = cluster.client().cluster().brokers.keys().copied().collect();

    n.phase(Phase {
        title: "A producer with a fresh map",
        about: &format!(
            "Topic {topic} has {PARTITIONS} partitions on {}. Producer clientId={CLIENT_ID} \
             (idempotent) reads the map of leaders and sends {records} keyed records: each batch \
             goes to the node its map names as the partition's leader.",
            count(node_ids.len() as u64, "node", "nodes")
        ),
        predict: "how many NOT_LEADER_OR_FOLLOWER answers does it meet?",
    });
    let deadline = n.deadline(Work {
        round_trips: 6,
        records: records as u64,
        ..Work::default()
    });
    let setup = async {
        cluster.create_topic("orders", PARTITIONS).await?;
        Ok((
            kafka::own_client(cluster).await?,
            kafka::own_client(cluster).await?,
        ))
    };
    let (client, never_client) = deadline.wait("creating the topic", setup).await?;
    let producer = kafka::producer(&client)?;
    let step = kafka::send(&producer, &client, &topic, &before, "before", false);
    let fresh = deadline.wait("sending with a fresh map", step).await?;
    // The never-refreshing client learns the same map now, and never again.
    let step = kafka::leaders(&never_client, &topic);
    let old_map = deadline.wait("reading the map", step).await?;
    n.answer();
    leaders_table(n, &node_ids, &old_map, &fresh);
    n.say(&format!(
        "{} NOT_LEADER_OR_FOLLOWER answers, {} to learn the map: every request went \
         straight to a leader.",
        fresh.invalid_metadata.len(),
        count(
            fresh.metadata_requests,
            "metadata request",
            "metadata requests"
        )
    ));

    let from = old_map[MOVED_PARTITION as usize];
    let Some(to) = node_ids
        .iter()
        .copied()
        .find(|&id| id > from)
        .or(node_ids.first().copied())
        .filter(|&to| to != from)
    else {
        let about = move_about(&topic, from, None);
        n.skip(move_phase(&about), ONE_NODE);
        let about = never_about(records);
        n.skip(never_phase(&about), ONE_NODE);
        deadline
            .wait("closing the producer", close(producer))
            .await?;
        return Ok((node_ids.len(), fresh, None, rng));
    };
    let about = move_about(&topic, from, Some(to));
    n.phase(move_phase(&about));
    let deadline = n.deadline(Work {
        round_trips: records as u64 + 10,
        records: 2 * records as u64,
        ..Work::default()
    });
    deadline
        .wait(
            "moving the leader",
            kafka::move_leader(cluster, &topic, MOVED_PARTITION, to),
        )
        .await?;
    let step = kafka::send(&producer, &client, &topic, &after_keys, "after", true);
    let stale = deadline.wait("sending with a stale map", step).await?;
    deadline
        .wait("closing the producer", close(producer))
        .await?;
    let stored = deadline
        .wait(
            "reading the topic back",
            kafka::stored(cluster, &topic, &["before", "after"]),
        )
        .await?;
    n.answer();
    n.panel(stale_answers_panel("the producer's stale map", &stale));
    n.log(warnings(&stale.invalid_metadata));
    let sent = fresh.records + stale.records;
    let first = match stale.by_partition.get(&MOVED_PARTITION) {
        Some(_) => format!(
            "Its next record for {topic}-{MOVED_PARTITION} went to node {from}, by its \
             map, and was answered NOT_LEADER_OR_FOLLOWER ({} in all). It re-read metadata \
             ({}), found node {to} and retried there.",
            count(
                stale.invalid_metadata.len() as u64,
                "such answer",
                "such answers"
            ),
            count(stale.metadata_requests, "request", "requests"),
        ),
        None => format!(
            "None of its keys fell in {topic}-{MOVED_PARTITION} this time (more --records \
             would), so its stale map was never used there."
        ),
    };
    n.say(&format!(
        "{first} Of its {sent} records, {} are stored, {} of them more than once: {} lost.",
        stored.1,
        stored.0 - stored.1,
        sent.saturating_sub(stored.1)
    ));

    let about = never_about(records);
    n.phase(never_phase(&about));
    let deadline = n.deadline(Work {
        round_trips: records as u64 + 4,
        ..Work::default()
    });
    let metrics_addr = match cluster.embedded() {
        Some(broker) => broker.metrics_addr().map(|a| a.to_string()),
        None => args.metrics.clone(),
    };
    let step = kafka::never_refreshing(&never_client, &topic, &old_map, &never_keys);
    let step = deadline.wait("sending by an old map", step);
    let (never, node_metrics) = metrics::around(metrics_addr.as_deref(), &deadline, step).await?;
    n.answer();
    n.panel(never_panel(&never));
    n.say(&format!(
        "{} of its {} requests were refused with NOT_LEADER_OR_FOLLOWER: redirect ratio {}. \
         Those records are not stored, and nothing in the client fails loudly: each request got \
         an answer.",
        never.not_leader,
        never.requests,
        percent(figures::never_ratio(&never))
    ));
    node_evidence(n, node_metrics.as_ref(), from);
    let after = AfterMove {
        topic,
        from,
        to,
        stale,
        stored,
        sent,
        never,
        node_metrics,
    };
    Ok((node_ids.len(), fresh, Some(after), rng))
}

/// Closes `producer` once what it holds is delivered, as a step a deadline can bound.
async fn close(producer: client::Producer) -> Result<(), LabError> {
    producer.close().await;
    Ok(())
}

/// The move from node `from`, to node `to` when the cluster has another node.
fn move_about(topic: &str, from: i32, to: Option<i32>) -> String {
    let to = to.map_or("another node".to_string(), |to| format!("node {to}"));
    format!(
        "An operator moves the leader of {topic}-{MOVED_PARTITION} from node {from} to {to} \
         with AlterPartitionReassignments (kafka-reassign-partitions.sh). Nobody tells the \
         producer: its map still says node {from}. It now sends the same number of records, \
         one request at a time."
    )
}

fn move_phase(about: &str) -> Phase<'_> {
    Phase {
        title: MOVE_TITLE,
        about,
        predict: "where does its next record for orders-7 go, and is anything lost?",
    }
}

fn never_about(records: usize) -> String {
    format!(
        "A second client learned the same map before the move and never re-reads it (no \
         metadata request, whatever the answer). It sends {records} records, one Produce \
         request each, to the leader its map names."
    )
}

fn never_phase(about: &str) -> Phase<'_> {
    Phase {
        title: NEVER_TITLE,
        about,
        predict: "what share of its requests fail, and which counter shows it?",
    }
}

fn redis_phases(n: &mut Narrator, rng: &mut ChaCha8Rng) -> RedisRun {
    n.phase(Phase {
        title: "Redis Cluster: slots and hash tags (a model, no Redis)",
        about: "Redis Cluster maps a key to one of 16384 slots: CRC16 (XMODEM) of the key, or of \
                the part inside its first non-empty {...}, mod 16384. Three nodes A, B, C own \
                0-5460, 5461-10922 and 10923-16383. MGET needs all its keys in one slot.",
        predict:
            "do user:42:cart and user:43:cart share a slot? user:{42}:cart and user:{42}:orders?",
    });
    n.answer();
    let mut table = Table::new(&[
        ("key", Align::Left),
        ("slot", Align::Right),
        ("node", Align::Left),
    ]);
    for key in [
        "user:42:cart",
        "user:43:cart",
        "user:{42}:cart",
        "user:{42}:orders",
    ] {
        let slot = redis_slot(key.as_bytes());
        table.row([
            key.to_string(),
            slot.to_string(),
            NODES[redis::initial_owner(slot)].to_string(),
        ]);
    }
    n.table(&table);
    let apart = redis::same_slot(&["user:42:cart", "user:43:cart"]);
    n.say(&format!(
        "MGET user:42:cart user:43:cart: {}. MGET user:{{42}}:cart user:{{42}}:orders: {}. The \
         source's slot 8342 for user:42:cart was illustrative; the real one is {}.",
        if apart {
            "served"
        } else {
            "CROSSSLOT Keys in request don't hash to the same slot"
        },
        if redis::same_slot(&["user:{42}:cart", "user:{42}:orders"]) {
            "served, one slot"
        } else {
            "CROSSSLOT"
        },
        redis_slot(b"user:42:cart")
    ));

    let run = redis::run(
        rng,
        plan::REDIS_KEYS,
        plan::REDIS_REQUESTS_PER_KEY,
        plan::REDIS_REQUESTS_AFTER,
    );
    let (from, to) = (NODES[run.from], NODES[run.to]);
    let about =
        format!(
        "Slot {} (user 42's {} keys) migrates from {from} to {to}, key by key; after each key, \
         {} requests for seeded keys of user 42. {from} answers ASK {to} for a key already moved; \
         {to} serves it only after ASKING, else answers MOVED {from}. One client follows ASK once \
         and keeps its map; another treats ASK as MOVED. Both give up after {} hops (Jedis).",
        run.slot, plan::REDIS_KEYS, plan::REDIS_REQUESTS_PER_KEY, redis::MAX_HOPS
    );
    n.phase(Phase {
        title: "Redis Cluster: ASK treated as MOVED during a slot migration",
        about: &about,
        predict: "how often does each client's map change its mind about the slot's node?",
    });
    n.answer();
    tallies(
        n,
        [
            ("follows ASK once", &run.during[0]),
            ("ASK treated as MOVED", &run.during[1]),
        ],
    );
    n.say(&format!(
        "The client treating ASK as MOVED changed its map {} times and gave up on {} of {} \
         requests: it flaps between {from} and {to} for as long as the migration lasts.",
        run.during[1].map_changes, run.during[1].failed, run.during[1].requests
    ));

    let about = format!(
        "The migration is done: {to} owns slot {}. Two clients still hold a map naming {from}; one \
         updates it on MOVED, the other follows MOVED for that request only. Each sends {} \
         requests for user 42's keys. A hop is one request to one node.",
        run.slot,
        plan::REDIS_REQUESTS_AFTER
    );
    n.phase(Phase {
        title: "Redis Cluster: MOVED ignored",
        about: &about,
        predict: "how much more latency, in hops, for the client that never updates its map?",
    });
    n.answer();
    tallies(
        n,
        [
            ("updates its map", &run.after[0]),
            ("ignores MOVED", &run.after[1]),
        ],
    );
    n.say(&format!(
        "{:.2}x the hops of the updating client, with no failed request: its error metric stays \
         at zero, while its redirect ratio is {}.",
        run.latency_multiple(),
        percent(run.after[1].redirect_ratio())
    ));
    run
}
