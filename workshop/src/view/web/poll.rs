//! The broker as the room sees it: every watched topic's log end offsets, every watched group's
//! committed offsets, members and assignments, read through Kafka APIs (ListOffsets,
//! DescribeGroups, OffsetFetch: our client's admin) several times a second while the lab runs,
//! whatever the lab itself is doing.
//!
//! What to read comes from the lab's [`Watch`]: the brokers its clusters opened, the topics they
//! created and the groups they named. A broker the lab closed is no longer asked; its last
//! figures stay on the page.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{Admin, Client, ClientConfig, OffsetSpec};
use serde::Serialize;

use super::hub::Hub;
use crate::lab::watch::{Watch, Watched};

/// How often the room view reads the broker: four times a second.
pub const EVERY: Duration = Duration::from_millis(250);

/// One partition's figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicView {
    pub name: String,
    /// The phase the lab created it in (0 before the first; see [`Watched::introduced`]).
    pub phase: usize,
    /// Log end offset per partition, in partition order.
    pub log_ends: Vec<i64>,
    /// The groups that committed on this topic or own a partition of it.
    pub consumers: Vec<Consumption>,
}

/// One group's progress on one topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Consumption {
    pub group: String,
    /// Committed offset per partition (`None`: nothing committed, lag "-").
    pub committed: Vec<Option<i64>>,
    /// The client id of the member owning each partition, if one does.
    pub owners: Vec<Option<String>>,
    /// The member id of that member (members of one group may share a client id).
    pub owner_ids: Vec<Option<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupView {
    pub name: String,
    /// The phase the lab named it in (0 before the first).
    pub phase: usize,
    /// Empty, PreparingRebalance, CompletingRebalance, Stable or Dead.
    pub state: String,
    pub assignor: String,
    pub members: Vec<MemberView>,
    /// Times the poller saw the group's assignment change (a rebalance that moved partitions).
    pub assignments_seen: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemberView {
    pub client_id: String,
    pub member_id: String,
    pub host: String,
    /// `topic-partition` names, sorted.
    pub partitions: Vec<String>,
}

/// What one poll read.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BrokerView {
    /// Polls so far.
    pub polls: u64,
    /// How long the last poll took, in milliseconds.
    pub poll_ms: f64,
    pub every_ms: u64,
    /// Whether a watched broker is still open (the figures are live).
    pub live: bool,
    /// Oldest first, as the lab created them.
    pub topics: Vec<TopicView>,
    pub groups: Vec<GroupView>,
    /// What the last poll could not read, one line each.
    pub errors: Vec<String>,
}

/// Reads the watched brokers every `every` and sets the hub's `broker` value; runs until the
/// runtime stops.
pub async fn run(watch: Watch, hub: Arc<Hub>, every: Duration) {
    let mut poller = Poller::default();
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Some(view) = poller.poll(&watch.clusters(), every).await {
            hub.set("broker", &view);
        }
    }
}

/// The poller's memory: connections, the last figures of each topic and group, and the
/// assignments seen (to count changes).
#[derive(Default)]
pub struct Poller {
    admins: HashMap<String, Admin>,
    topics: HashMap<String, TopicView>,
    groups: HashMap<String, GroupView>,
    assignments: HashMap<String, Vec<(String, Vec<String>)>>,
    polls: u64,
    /// What the last published view held, so an unchanged closed broker is not republished.
    last_open: bool,
}

impl Poller {
    /// Reads every open broker of `clusters`; `None` when nothing is open and nothing changed
    /// since the last view.
    pub async fn poll(&mut self, clusters: &[Watched], every: Duration) -> Option<BrokerView> {
        let live = clusters.iter().any(|c| c.open);
        if !live && !self.last_open && self.polls > 0 {
            return None;
        }
        let started = Instant::now();
        let mut errors = Vec::new();
        for cluster in clusters.iter().filter(|c| c.open) {
            if let Err(e) = self.read(cluster).await {
                errors.push(e);
            }
        }
        self.polls += 1;
        self.last_open = live;
        let topics = clusters
            .iter()
            .flat_map(|c| &c.topics)
            .filter_map(|t| self.topics.get(t).cloned())
            .collect();
        let groups = clusters
            .iter()
            .flat_map(|c| &c.groups)
            .filter_map(|g| self.groups.get(g).cloned())
            .collect();
        Some(BrokerView {
            polls: self.polls,
            poll_ms: crate::lab::report::round(started.elapsed().as_secs_f64() * 1000.0, 2),
            every_ms: every.as_millis() as u64,
            live,
            topics,
            groups,
            errors,
        })
    }

    async fn read(&mut self, cluster: &Watched) -> Result<(), String> {
        let admin = self.admin(&cluster.bootstrap).await?;
        let mut errors = Vec::new();
        let mut committed: HashMap<(String, String), Vec<(i32, i64)>> = HashMap::new();
        // By (topic, group): each owned partition, and its owner's client id and member id.
        type Owned = Vec<(i32, String, String)>;
        let mut owners: HashMap<(String, String), Owned> = HashMap::new();
        for group in &cluster.groups {
            match admin.group_lag(group).await {
                Ok(lag) => {
                    for p in &lag.partitions {
                        let at = (p.topic.clone(), group.clone());
                        if let Some(c) = p.current_offset {
                            committed
                                .entry(at.clone())
                                .or_default()
                                .push((p.partition, c));
                        }
                        if let Some(owner) = &p.owner {
                            owners.entry(at).or_default().push((
                                p.partition,
                                owner.client_id.clone(),
                                owner.member_id.clone(),
                            ));
                        }
                    }
                    let phase = cluster.introduced.get(group).copied().unwrap_or(0);
                    let view = self.group_view(group, phase, &lag.description);
                    self.groups.insert(group.clone(), view);
                }
                Err(e) => errors.push(format!("group {group}: {e}")),
            }
        }
        for topic in &cluster.topics {
            let log_ends = match admin.list_offsets(topic, OffsetSpec::Latest).await {
                Ok(listed) => {
                    let count = listed.iter().map(|l| l.partition.max(-1) + 1).max();
                    let mut ends = vec![0; count.unwrap_or(0) as usize];
                    for l in listed {
                        if let Some(slot) = usize::try_from(l.partition)
                            .ok()
                            .and_then(|p| ends.get_mut(p))
                        {
                            *slot = l.offset;
                        }
                    }
                    ends
                }
                Err(e) => {
                    errors.push(format!("topic {topic}: {e}"));
                    continue;
                }
            };
            let consumers = cluster
                .groups
                .iter()
                .filter_map(|group| {
                    let at = (topic.clone(), group.clone());
                    let (done, owned) = (committed.get(&at), owners.get(&at));
                    if done.is_none() && owned.is_none() {
                        return None;
                    }
                    let mut c = Consumption {
                        group: group.clone(),
                        committed: vec![None; log_ends.len()],
                        owners: vec![None; log_ends.len()],
                        owner_ids: vec![None; log_ends.len()],
                    };
                    for &(p, offset) in done.into_iter().flatten() {
                        if let Some(slot) = c.committed.get_mut(p as usize) {
                            *slot = Some(offset);
                        }
                    }
                    for (p, client, member) in owned.into_iter().flatten() {
                        if let Some(slot) = c.owners.get_mut(*p as usize) {
                            *slot = Some(client.clone());
                        }
                        if let Some(slot) = c.owner_ids.get_mut(*p as usize) {
                            *slot = Some(member.clone());
                        }
                    }
                    Some(c)
                })
                .collect();
            let name = topic.clone();
            self.topics.insert(
                topic.clone(),
                TopicView {
                    name,
                    phase: cluster.introduced.get(topic).copied().unwrap_or(0),
                    log_ends,
                    consumers,
                },
            );
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(errors.join("; ")),
        }
    }

    fn group_view(
        &mut self,
        name: &str,
        phase: usize,
        d: &client::admin::GroupDescription,
    ) -> GroupView {
        let members: Vec<MemberView> = d
            .members
            .iter()
            .map(|m| {
                let mut partitions: Vec<String> =
                    m.assignment.iter().map(ToString::to_string).collect();
                partitions.sort();
                MemberView {
                    client_id: m.client_id.clone(),
                    member_id: m.member_id.clone(),
                    host: m.client_host.clone(),
                    partitions,
                }
            })
            .collect();
        let mut seen = self.groups.get(name).map_or(0, |g| g.assignments_seen);
        // Only a stable group's assignment means anything; a rebalance shows none.
        if d.state == "Stable" {
            let mut now: Vec<(String, Vec<String>)> = members
                .iter()
                .map(|m| (m.client_id.clone(), m.partitions.clone()))
                .collect();
            now.sort();
            let before = self.assignments.insert(name.to_string(), now.clone());
            if before.is_some_and(|b| b != now) {
                seen += 1;
            }
        }
        GroupView {
            name: name.to_string(),
            phase,
            state: d.state.clone(),
            assignor: d.assignment_strategy.clone(),
            members,
            assignments_seen: seen,
        }
    }

    async fn admin(&mut self, bootstrap: &str) -> Result<Admin, String> {
        if let Some(admin) = self.admins.get(bootstrap) {
            return Ok(admin.clone());
        }
        let mut config = ClientConfig::new(bootstrap);
        config.client_id = "workshop-room-view".to_string();
        let client = Client::connect(config)
            .await
            .map_err(|e| format!("cannot reach {bootstrap}: {e}"))?;
        let admin = Admin::new(client);
        self.admins.insert(bootstrap.to_string(), admin.clone());
        Ok(admin)
    }
}
