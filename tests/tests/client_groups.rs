//! The client's group member against the broker's coordinator, on the paused clock: every
//! member polls in a task of its own, as an application would, and the tests watch what each
//! one owns while virtual time runs heartbeats, session and poll timeouts.

mod client_common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use client::{
    Admin, Client, Error, GroupConfig, GroupConsumer, OffsetReset, RebalanceEvent, TopicPartition,
};
use client_common::*;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

const TOPIC: &str = "orders";

/// Kafka's defaults scaled down: 10 s sessions, heartbeats every second, 30 s between polls.
fn config(group: &str, assignor: &str) -> GroupConfig {
    let mut c = GroupConfig::new(group)
        .assignors_named(&[assignor])
        .unwrap();
    c.session_timeout = Duration::from_secs(10);
    c.heartbeat_interval = Duration::from_secs(1);
    c.max_poll_interval = Duration::from_secs(30);
    c.auto_commit = false;
    c.consumer.max_wait = Duration::from_millis(100);
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    c
}

fn member(client: &Client, config: GroupConfig) -> GroupConsumer {
    let mut m = GroupConsumer::new(client.clone(), config).unwrap();
    m.subscribe([TOPIC]).unwrap();
    m
}

/// What a running member last reported.
#[derive(Debug, Clone, Default)]
struct View {
    assignment: Vec<TopicPartition>,
    generation: i32,
    member_id: String,
    /// Offsets handed out by poll, per partition.
    consumed: BTreeMap<TopicPartition, Vec<i64>>,
}

/// A member polling in its own task until stopped.
struct Running {
    stop: watch::Sender<bool>,
    view: watch::Receiver<View>,
    task: JoinHandle<GroupConsumer>,
}

impl Running {
    fn start(mut member: GroupConsumer) -> Self {
        let (stop, stopped) = watch::channel(false);
        let (report, view) = watch::channel(View::default());
        let task = tokio::spawn(async move {
            let mut seen = View::default();
            while !*stopped.borrow() {
                for part in member.poll().await.expect("poll") {
                    let offsets = seen.consumed.entry(part.topic_partition()).or_default();
                    offsets.extend(part.records.iter().map(|r| r.offset));
                }
                let generation = member.generation();
                seen.assignment = member.assignment();
                seen.generation = generation.id;
                seen.member_id = generation.member_id;
                report.send_replace(seen.clone());
            }
            member
        });
        Self { stop, view, task }
    }

    /// Waits (on virtual time) until the member's view satisfies `ready`.
    async fn until(&mut self, what: &str, ready: impl Fn(&View) -> bool) -> View {
        let wait = async {
            loop {
                if ready(&self.view.borrow_and_update()) {
                    return self.view.borrow().clone();
                }
                self.view.changed().await.expect("the member task runs");
            }
        };
        match tokio::time::timeout(Duration::from_secs(120), wait).await {
            Ok(view) => view,
            Err(_) => panic!("{what}: still {:?}", self.view.borrow().assignment),
        }
    }

    async fn owns(&mut self, n: usize) -> View {
        self.until(&format!("owning {n} partitions"), |v| {
            v.assignment.len() == n
        })
        .await
    }

    /// Stops polling after the current poll; the member stays in the group until closed.
    async fn stop(self) -> GroupConsumer {
        self.stop.send_replace(true);
        self.task.await.expect("the member task ends cleanly")
    }
}

fn partitions(view: &View) -> BTreeSet<i32> {
    view.assignment.iter().map(|tp| tp.partition).collect()
}

async fn produce_each(addr: std::net::SocketAddr, topic: &str, counts: &[usize]) {
    let mut raw = tests::RawClient::connect(addr).await;
    for (p, &n) in counts.iter().enumerate() {
        let answer = tests::produce(&mut raw, topic, p as i32, tests::values(n), 9).await;
        assert_eq!(answer.error_code, 0);
    }
}

#[tokio::test(start_paused = true)]
async fn two_members_split_six_partitions_disjointly_and_one_leaving_gives_the_other_all() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 6).await;
    let mut a = Running::start(member(&client, config("split", "range")));
    let mut b = Running::start(member(&client, config("split", "range")));
    let (va, vb) = (a.owns(3).await, b.owns(3).await);
    let (pa, pb) = (partitions(&va), partitions(&vb));
    assert!(pa.is_disjoint(&pb), "{pa:?} and {pb:?}");
    assert_eq!(pa.union(&pb).count(), 6);
    assert_eq!(va.generation, vb.generation);

    // B leaves (LeaveGroup on close): A learns it from its heartbeat and takes everything.
    b.stop().await.close().await.unwrap();
    let va = a.owns(6).await;
    assert!(va.generation > vb.generation);
    a.stop().await.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_member_gone_without_a_word_is_expired_after_the_session_timeout() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 6).await;
    let mut a = Running::start(member(&client, config("crash", "range")));
    let mut b = Running::start(member(&client, config("crash", "range")));
    a.owns(3).await;
    b.owns(3).await;
    // A crashes: no LeaveGroup, no more heartbeats.
    drop(a.stop().await);
    let crashed = tokio::time::Instant::now();
    b.owns(6).await;
    // The session (10 s) runs from A's last heartbeat, at most one interval (1 s) before it
    // stopped; B, told by its next heartbeat, rejoins at once. Not the rebalance timeout (30 s).
    let expired = crashed.elapsed();
    assert!(
        expired >= Duration::from_secs(9) && expired < Duration::from_secs(12),
        "expired after {expired:?}, not by the session timeout"
    );
    b.stop().await.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_member_that_stops_polling_leaves_and_its_commit_fails() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 6).await;
    produce_each(broker.addr(), TOPIC, &[2; 6]).await;
    let mut a = Running::start(member(&client, config("slow", "range")));
    let mut b = Running::start(member(&client, config("slow", "range")));
    a.owns(3).await;
    b.owns(3).await;

    // A's application stops calling poll, longer than max.poll.interval (30 s).
    let mut slow = a.stop().await;
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(slow.generation().id, -1, "the member left its generation");
    b.owns(6).await;
    match slow.commit_sync().await {
        // As Java's consumer: failed without sending it, since the member left the group.
        Err(Error::CommitFailed { message }) => assert_eq!(
            message,
            "Offset commit cannot be completed since the consumer is not part of an active group \
             for auto partition assignment; it is likely that the consumer was kicked out of the \
             group."
        ),
        other => panic!("expected CommitFailed, got {other:?}"),
    }
    // Polling again rejoins; what it owned was lost, not revoked.
    let (events, mut seen) = mpsc::unbounded_channel();
    slow.set_listener(events);
    let mut a = Running::start(slow);
    a.owns(3).await;
    b.owns(3).await;
    assert!(matches!(seen.recv().await, Some(RebalanceEvent::Lost(lost)) if lost.len() == 3));
    a.stop().await.close().await.unwrap();
    b.stop().await.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_static_member_restarting_within_the_session_timeout_causes_no_rebalance() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 6).await;
    let (events, mut b_events) = mpsc::unbounded_channel();
    let mut dynamic = member(&client, config("static", "range"));
    dynamic.set_listener(events);
    let mut b = Running::start(dynamic);
    b.owns(6).await;
    let mut static_config = config("static", "range");
    static_config.group_instance_id = Some("a-1".into());
    let mut a = Running::start(member(&client, static_config.clone()));
    let before = a.owns(3).await;
    b.owns(3).await;
    while b_events.try_recv().is_ok() {}

    // A closes without LeaveGroup (static) and a new incarnation comes back 2 s later.
    a.stop().await.close().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut again = Running::start(member(&client, static_config));
    let after = again.owns(3).await;
    assert_eq!(
        after.generation, before.generation,
        "same generation: no rebalance"
    );
    assert_eq!(after.assignment, before.assignment);
    assert_ne!(
        after.member_id, before.member_id,
        "a new member id for the instance"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let vb = b.owns(3).await;
    assert_eq!(vb.generation, before.generation);
    assert!(b_events.try_recv().is_err(), "B saw no rebalance");
    again.stop().await.close().await.unwrap();
    b.stop().await.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_returning_static_leader_keeps_its_partitions_and_still_watches_partition_counts() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 6).await;
    let mut leader = config("static-leader", "range");
    leader.group_instance_id = Some("a-1".into());
    let mut a = Running::start(member(&client, leader.clone()));
    a.owns(6).await;
    let mut b = Running::start(member(&client, config("static-leader", "range")));
    b.owns(3).await;
    let before = a.owns(3).await;
    a.stop().await.close().await.unwrap();
    let mut again = Running::start(member(&client, leader));
    let after = again.owns(3).await;
    assert_eq!(
        (after.generation, partitions(&after)),
        (before.generation, partitions(&before))
    );
    // Only the leader notices a topic growing; the returning one must still be watching.
    Admin::new(client.clone())
        .create_partitions(TOPIC, 8)
        .await
        .unwrap();
    let grown = again.owns(4).await;
    assert!(grown.generation > before.generation);
    b.owns(4).await;
    again.stop().await.close().await.unwrap();
    b.stop().await.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn cooperative_sticky_moves_only_the_partitions_that_change_owner() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 6).await;
    let (events, mut a_events) = mpsc::unbounded_channel();
    let mut first = member(&client, config("coop", "cooperative-sticky"));
    first.set_listener(events);
    let mut a = Running::start(first);
    a.owns(6).await;
    let mut b = Running::start(member(&client, config("coop", "cooperative-sticky")));
    let vb = b.owns(3).await;
    let va = a.owns(3).await;
    assert!(partitions(&va).is_disjoint(&partitions(&vb)));

    let mut revoked = BTreeSet::new();
    while let Ok(event) = a_events.try_recv() {
        match event {
            RebalanceEvent::Revoked(r) => revoked.extend(r),
            RebalanceEvent::Lost(l) => panic!("lost {l:?}"),
            RebalanceEvent::Assigned(_) => {}
        }
    }
    let moved: BTreeSet<TopicPartition> = vb.assignment.iter().cloned().collect();
    assert_eq!(
        revoked, moved,
        "A revoked exactly what B got, nothing it kept"
    );
    a.stop().await.close().await.unwrap();
    b.stop().await.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn lag_is_produced_minus_committed_per_partition_and_unknown_before_a_commit() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 3).await;
    produce_each(broker.addr(), TOPIC, &[5, 7, 9]).await;
    let mut a = Running::start(member(&client, config("lagging", "range")));
    a.until("everything read", |v| {
        v.consumed.values().map(Vec::len).sum::<usize>() == 21
    })
    .await;
    let mut reader = a.stop().await;
    let admin = Admin::new(client.clone());

    let lag = admin.group_lag("lagging").await.unwrap();
    assert_eq!(lag.description.state, "Stable");
    let rows: Vec<_> = lag
        .partitions
        .iter()
        .map(|r| (r.partition, r.current_offset, r.log_end_offset, r.lag))
        .collect();
    assert_eq!(
        rows,
        vec![
            (0, None, Some(5), None),
            (1, None, Some(7), None),
            (2, None, Some(9), None)
        ]
    );
    let member_id = reader.generation().member_id;
    assert!(lag
        .partitions
        .iter()
        .all(|r| r.owner.as_ref().unwrap().member_id == member_id));

    let commits = BTreeMap::from([
        (TopicPartition::new(TOPIC, 0), 2),
        (TopicPartition::new(TOPIC, 1), 7),
        (TopicPartition::new(TOPIC, 2), 4),
    ]);
    reader.commit_offsets_sync(commits).await.unwrap();
    let lag = admin.group_lag("lagging").await.unwrap();
    let lags: Vec<Option<i64>> = lag.partitions.iter().map(|r| r.lag).collect();
    assert_eq!(lags, vec![Some(3), Some(0), Some(5)]);
    assert_eq!(lag.total(), 8);

    // Committing the positions (everything read) leaves no lag.
    reader.commit_sync().await.unwrap();
    assert_eq!(admin.group_lag("lagging").await.unwrap().total(), 0);
    reader.close().await.unwrap();
    let lag = admin.group_lag("lagging").await.unwrap();
    assert_eq!(lag.description.state, "Empty");
    assert!(lag
        .partitions
        .iter()
        .all(|r| r.owner.is_none() && r.lag == Some(0)));
    broker.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_new_member_resumes_from_the_groups_committed_offsets() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 2).await;
    produce_each(broker.addr(), TOPIC, &[4, 4]).await;
    let mut auto = config("resume", "roundrobin");
    auto.auto_commit = true;
    auto.auto_commit_interval = Duration::from_secs(1);
    auto.max_poll_records = 3;
    let mut a = Running::start(member(&client, auto.clone()));
    let read = a
        .until("all 8 read", |v| {
            v.consumed.values().map(Vec::len).sum::<usize>() == 8
        })
        .await;
    assert!(read.consumed.values().all(|o| o == &[0, 1, 2, 3]));
    // Closing commits the positions (auto-commit), then leaves.
    a.stop().await.close().await.unwrap();
    let committed = Admin::new(client.clone())
        .list_group_offsets("resume", None)
        .await
        .unwrap();
    assert_eq!(
        committed.values().copied().collect::<Vec<_>>(),
        vec![Some(4), Some(4)]
    );

    produce_each(broker.addr(), TOPIC, &[1, 1]).await;
    let mut b = Running::start(member(&client, auto));
    let view = b
        .until("the new records", |v| {
            v.consumed.values().map(Vec::len).sum::<usize>() == 2
        })
        .await;
    assert!(
        view.consumed.values().all(|o| o == &[4]),
        "{:?}",
        view.consumed
    );
    b.stop().await.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn more_partitions_make_the_group_rebalance_and_assign_them() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 2).await;
    let mut a = Running::start(member(&client, config("growing", "range")));
    let mut b = Running::start(member(&client, config("growing", "range")));
    a.owns(1).await;
    b.owns(1).await;
    Admin::new(client.clone())
        .create_partitions(TOPIC, 6)
        .await
        .unwrap();
    let (va, vb) = (a.owns(3).await, b.owns(3).await);
    let all: BTreeSet<i32> = partitions(&va).union(&partitions(&vb)).copied().collect();
    assert_eq!(all, (0..6).collect());
    a.stop().await.close().await.unwrap();
    b.stop().await.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn admin_commits_for_a_group_without_members_and_answers_per_partition() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 3).await;
    produce_each(broker.addr(), TOPIC, &[5, 7, 9]).await;
    let admin = Admin::new(client.clone());
    let tp = |p: i32| TopicPartition::new(TOPIC, p);
    let codes = |results: Vec<(TopicPartition, Result<(), client::ServerError>)>| {
        results
            .into_iter()
            .map(|(tp, r)| (tp.partition, r.err().map(|e| e.code)))
            .collect::<Vec<_>>()
    };

    // No group yet: generation -1 and no member id create it; an unknown partition fails alone.
    let offsets = BTreeMap::from([(tp(0), 2), (tp(1), 7), (tp(9), 1)]);
    let results = admin.commit_offsets("offline", &offsets).await.unwrap();
    assert_eq!(codes(results), vec![(0, None), (1, None), (9, Some(3))]);
    let committed = admin.list_group_offsets("offline", None).await.unwrap();
    assert_eq!(
        committed,
        BTreeMap::from([(tp(0), Some(2)), (tp(1), Some(7))])
    );

    // A group with a member refuses a commit from outside it, partition by partition.
    let mut a = Running::start(member(&client, config("offline", "range")));
    a.owns(3).await;
    let moved = BTreeMap::from([(tp(0), 4), (tp(2), 4)]);
    let results = admin.commit_offsets("offline", &moved).await.unwrap();
    let refused = &results[0].1.as_ref().unwrap_err();
    assert_eq!(refused.topic.as_deref(), Some(TOPIC));
    assert!(refused.to_string().contains("offline"), "{refused}");
    assert_eq!(codes(results), vec![(0, Some(25)), (2, Some(25))]);
    let member = a.stop().await;
    assert_eq!(
        admin.list_group_offsets("offline", None).await.unwrap()[&tp(0)],
        Some(2)
    );

    // Empty again once the member has left: the admin commit goes through.
    member.close().await.unwrap();
    let results = admin.commit_offsets("offline", &moved).await.unwrap();
    assert_eq!(codes(results), vec![(0, None), (2, None)]);
    let committed = admin.list_group_offsets("offline", None).await.unwrap();
    assert_eq!(committed[&tp(0)], Some(4));
    assert_eq!(committed[&tp(2)], Some(4));
    broker.shutdown().await;
}

/// Kafka's own group.initial.rebalance.delay (3 s) is longer than this member's
/// max.poll.interval (2 s): the time spent parked in JoinGroup is the coordinator's, not the
/// application's, so the member must not leave right after joining (Java's poll resets the
/// poll timer while it waits).
#[tokio::test(start_paused = true)]
async fn a_join_slower_than_the_poll_interval_does_not_count_against_it() {
    let broker = broker::Broker::start(broker::BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        group_initial_rebalance_delay: Duration::from_secs(3),
        ..broker::BrokerConfig::default()
    })
    .await
    .unwrap();
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 3).await;
    let mut quick = config("delayed", "range");
    quick.max_poll_interval = Duration::from_secs(2);
    let (events, mut seen) = mpsc::unbounded_channel();
    let mut first = member(&client, quick);
    first.set_listener(events);
    let joining = tokio::time::Instant::now();
    let mut a = Running::start(first);
    let joined = a.owns(3).await;
    assert!(joining.elapsed() >= Duration::from_secs(3), "the delay ran");
    assert_eq!(joined.generation, 1);

    // Ten more seconds of polling (five poll intervals): still generation 1, nothing lost.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let still = a.owns(3).await;
    assert_eq!(still.generation, 1, "the member left and rejoined");
    let mut events = Vec::new();
    while let Ok(event) = seen.try_recv() {
        events.push(event);
    }
    assert!(
        matches!(&events[..], [RebalanceEvent::Assigned(a)] if a.len() == 3),
        "{events:?}"
    );
    a.stop().await.close().await.unwrap();
    broker.shutdown().await;
}

/// A cluster that answers SyncGroup 3 s late, longer than the members' max.poll.interval
/// (2 s): the rebalance happens inside `poll`, so it does not count against the interval (Java's
/// `poll` resets the poll timer on every round while it waits), and the group settles. Counting
/// it, each member left the moment its late SyncGroup answer arrived, and the group rebalanced
/// for ever.
#[tokio::test(start_paused = true)]
async fn a_sync_group_slower_than_the_poll_interval_does_not_count_against_it() {
    let broker = broker().await;
    broker.faults().add(broker::faults::Fault::Delay {
        api: Some(kafka_protocol::messages::ApiKey::SyncGroup),
        delay: Duration::from_secs(3),
    });
    let client = connect(broker.addr()).await;
    create_topic(&client, TOPIC, 6).await;
    let quick = || {
        let mut c = config("slow-sync", "range");
        c.max_poll_interval = Duration::from_secs(2);
        c
    };
    let mut a = Running::start(member(&client, quick()));
    a.owns(6).await;
    let mut b = Running::start(member(&client, quick()));
    let settled = b.owns(3).await;
    assert_eq!(settled.generation, 2, "one join each");
    assert_eq!(a.owns(3).await.generation, 2);

    // Ten more seconds of polling (five poll intervals): still generation 2.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(a.owns(3).await.generation, 2, "a left and rejoined");
    assert_eq!(b.owns(3).await.generation, 2, "b left and rejoined");
    a.stop().await.close().await.unwrap();
    b.stop().await.close().await.unwrap();
    broker.shutdown().await;
}

/// A consumer never creates topics: subscribing to one that does not exist (or was just
/// deleted) on a broker that auto-creates must leave it missing, or a lab's cleanup would be
/// undone by its own members. Producers keep Kafka's producer behaviour.
#[tokio::test(start_paused = true)]
async fn a_member_subscribed_to_a_missing_topic_does_not_create_it() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    let mut config = config("no-auto-create", "range");
    config.max_poll_interval = Duration::from_secs(2);
    let mut m = member(&client, config);
    for _ in 0..5 {
        m.poll().await.unwrap();
    }
    assert!(m.assignment().is_empty());
    let topics = Admin::new(client.clone()).list_topics().await.unwrap();
    assert!(!topics.contains(&TOPIC.to_string()), "{topics:?}");
    m.close().await.unwrap();
    broker.shutdown().await;
}

/// A broker whose ListGroups predates v4 (KIP-518) names no states: each group's state comes
/// from DescribeGroups instead of being shown as unknown, and a filter by state is applied
/// here rather than refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_have_their_states_where_list_groups_cannot_tell_them() {
    let cluster = tests::WithoutApi::older(
        tests::BrokerConfig::default(),
        kafka_protocol::messages::ApiKey::ListGroups as i16,
        3,
    )
    .await;
    let client = connect(cluster.addr).await;
    create_topic(&client, TOPIC, 3).await;
    let admin = Admin::new(client.clone());
    let offsets = BTreeMap::from([(TopicPartition::new(TOPIC, 0), 1)]);
    admin.commit_offsets("offline", &offsets).await.unwrap();
    let mut a = Running::start(member(&client, config("billing", "range")));
    a.owns(3).await;

    let states = |listed: Vec<client::admin::GroupListing>| -> Vec<(String, Option<String>)> {
        listed.into_iter().map(|g| (g.group_id, g.state)).collect()
    };
    let all = admin.list_groups(&[]).await.unwrap();
    assert_eq!(
        states(all),
        [
            ("billing".to_string(), Some("Stable".to_string())),
            ("offline".to_string(), Some("Empty".to_string())),
        ]
    );
    let stable = admin.list_groups(&["Stable"]).await.unwrap();
    assert_eq!(
        states(stable),
        [("billing".to_string(), Some("Stable".to_string()))]
    );
    a.stop().await.close().await.unwrap();
}
