//! The lab's runs on a real broker: the commands topics, each run's changelogs and routing
//! topic ([`logs`]), and the service's consumer group ([`service`]).

pub mod logs;
pub mod service;

use std::collections::BTreeMap;

use client::ClientConfig;
use tokio::runtime::Runtime;

use super::engine::keys::{CommandId, LabTime, ShardId};
use super::engine::world::World;
use super::plan::Plan;
use super::scenario::{self, Run, Scenario, COMMAND_PARTITIONS};
use super::traffic::Traffic;
use crate::lab::LabError;
use crate::target::Cluster;
use logs::{KafkaLogs, Topics};
use service::{Placed, Service};

/// The Kafka topic config that makes the routing topic keep the latest record per key.
pub const COMPACT: (&str, &str) = ("cleanup.policy", "compact");

/// A traffic's commands, written once to their topic.
pub struct Commands<'t> {
    pub topic: String,
    pub traffic: &'t Traffic,
    pub faults: Vec<CommandId>,
    placed: Placed,
}

impl<'t> Commands<'t> {
    /// Creates topic `base` (one partition per service instance) and writes the traffic to it.
    pub fn produce(
        rt: &Runtime,
        cluster: &Cluster,
        base: &str,
        traffic: &'t Traffic,
        faults: Vec<CommandId>,
    ) -> Result<Self, LabError> {
        let topic = rt.block_on(cluster.create_topic(base, COMMAND_PARTITIONS))?;
        let placed = rt.block_on(service::produce(
            cluster.client(),
            &topic,
            &traffic.commands,
        ))?;
        Ok(Commands {
            topic,
            traffic,
            faults,
            placed,
        })
    }
}

/// Runs `scenario` on its own changelogs, routing topic and consumer group.
pub fn run(
    rt: &Runtime,
    cluster: &Cluster,
    plan: &Plan,
    scenario: Scenario,
    commands: &Commands<'_>,
) -> Result<Run, LabError> {
    let name = scenario.name();
    let mut changelogs = BTreeMap::new();
    for id in ShardId::ALL {
        let topic =
            rt.block_on(cluster.create_topic(&format!("migrate.{name}.changelog-{id}"), 1))?;
        changelogs.insert(id, topic);
    }
    let routing =
        rt.block_on(cluster.create_topic_with(&format!("migrate.{name}.routing"), 1, &[COMPACT]))?;
    let logs = KafkaLogs::new(
        rt,
        cluster.client().clone(),
        Topics {
            changelogs,
            routing,
        },
    )?;
    let mut world = World::new(
        logs,
        scenario.settings(plan),
        scenario.fences(),
        &scenario.initial_routing(),
        COMMAND_PARTITIONS as usize,
    )?;
    world.inject_faults(commands.faults.iter().copied());
    let mut config = ClientConfig::new(cluster.addr());
    config.client_id = format!("profile-service-{name}");
    let arrival: BTreeMap<CommandId, LabTime> = commands
        .traffic
        .commands
        .iter()
        .map(|c| (c.id, c.at))
        .collect();
    let group = cluster.group(&format!("profile-service.{name}"));
    let mut service = Service::start(
        rt,
        &config,
        &group,
        &commands.topic,
        COMMAND_PARTITIONS as usize,
        commands.placed.clone(),
        arrival,
    )?;
    let outcome = scenario::run(&mut world, scenario, plan, commands.traffic, &mut service);
    service.leave();
    let mut run = outcome?;
    run.commands_lag = Some(rt.block_on(lag(cluster, &group, &commands.topic))?);
    Ok(run)
}

/// The group's lag over every partition of `topic`, as kafka-consumer-groups.sh computes it;
/// a partition the group never committed counts with its whole log.
async fn lag(cluster: &Cluster, group: &str, topic: &str) -> Result<i64, LabError> {
    let what = format!("describing group {group}");
    let lag = cluster
        .admin()
        .group_lag(group)
        .await
        .map_err(|e| crate::target::broker_error(&what, &e))?;
    let ends = cluster
        .admin()
        .list_offsets(topic, client::OffsetSpec::Latest)
        .await
        .map_err(|e| crate::target::broker_error(&what, &e))?;
    Ok(ends
        .iter()
        .map(|end| {
            let row = lag
                .partitions
                .iter()
                .find(|p| p.topic == topic && p.partition == end.partition);
            end.offset - row.and_then(|r| r.current_offset).unwrap_or(0)
        })
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::Target;
    use crate::labs::migrate::scenario::tests::{default_plan, in_memory};
    use crate::labs::migrate::traffic;

    /// What a run decided, as text: equal texts, equal runs.
    fn decided(run: &Run) -> String {
        let migrations: Vec<String> = run
            .migrations
            .iter()
            .map(|m| format!("{:?} {:?} {:?}", m.phase, m.stats, m.records))
            .collect();
        let lines: Vec<String> = run.lines.iter().map(ToString::to_string).collect();
        format!(
            "lost {:?}\ndup {:?}\nmissed {:?}\nacked {} reads {} held {} refused {:?}\n{migrations:?}\n\
             {lines:#?}\nchangelogs {:?}\nrouting {:?}\nsince {}",
            run.audit.lost,
            run.audit.duplicated,
            run.audit.missed_reads,
            run.acknowledged,
            run.reads.len(),
            run.held,
            run.refusals,
            run.changelogs,
            run.routing_log,
            run.writes_since_handover
        )
    }

    #[test]
    fn on_kafka_a_run_decides_what_it_decides_in_memory() {
        let plan = default_plan();
        let profiles = traffic::profiles(&plan, 5);
        let (tenant, faults) = traffic::tenant(&plan, 5);
        let rt = crate::target::runtime().unwrap();
        let cluster = rt
            .block_on(Cluster::open(
                &Target::Embedded,
                &crate::stop::Stop::never(),
                "test",
            ))
            .unwrap();
        let on_kafka = (|| {
            let users = Commands::produce(&rt, &cluster, "profile-commands", &profiles, vec![])?;
            let orders =
                Commands::produce(&rt, &cluster, "tenant-commands", &tenant, faults.clone())?;
            let mut runs = Vec::new();
            for scenario in [
                Scenario::Failure,
                Scenario::Rollback,
                Scenario::DualWriteNaive,
            ] {
                let commands = if scenario.is_tenant() {
                    &orders
                } else {
                    &users
                };
                runs.push((scenario, run(&rt, &cluster, &plan, scenario, commands)?));
            }
            Ok::<_, LabError>(runs)
        })();
        rt.block_on(cluster.close());
        for (scenario, on_kafka) in on_kafka.unwrap() {
            let in_memory = in_memory(scenario, 5);
            // The command sources differ (the topic's offsets against none); all else agrees.
            let strip = |mut run: Run| {
                for ack in run.audit.lost.iter_mut() {
                    ack.source = None;
                }
                assert_eq!(
                    run.commands_lag,
                    Some(0),
                    "every command handled and committed"
                );
                run.commands_lag = None;
                run
            };
            assert_eq!(
                decided(&strip(on_kafka)),
                decided(&in_memory),
                "{}",
                scenario.name()
            );
        }
    }
}
