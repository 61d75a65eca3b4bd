//! The lab's runs on a real broker: the commands topics, each run's changelogs and routing
//! topic ([`logs`]), and the service's consumer group ([`service`]).

pub mod logs;
pub mod service;

use std::collections::BTreeMap;
use std::future::Future;

use client::ClientConfig;
use tokio::runtime::Runtime;

use super::engine::keys::{CommandId, ShardId};
use super::plan::Plan;
use super::scenario::{self, Run, Scenario, COMMAND_PARTITIONS};
use super::traffic::Traffic;
use crate::kit::offsets::GroupOffsets;
use crate::lab::deadline::{Deadline, Work};
use crate::lab::report::{Narrator, Progress};
use crate::lab::target::Cluster;
use crate::lab::LabError;
use logs::{KafkaLogs, Topics};
use service::{Placed, Service};

/// The routing topic is an audit log (source 001: routing "centrally managed, auditable"): it
/// keeps every record, which compaction would not (it keeps the latest per key). Kafka's
/// default cleanup policy, `delete`, with no time limit; the run's topics go at its end.
const AUDIT_LOG: [(&str, &str); 2] = [("cleanup.policy", "delete"), ("retention.ms", "-1")];

/// Requests of a run besides its logs' and its commands': creating its five topics, connecting
/// each service instance, the group's lag at the end.
const RUN_ROUND_TRIPS: u64 = 5 + 2 * COMMAND_PARTITIONS as u64 + 2;
/// Requests per call to the logs: an end offset may first send what was appended, a read may
/// take more than one fetch.
const ROUND_TRIPS_PER_CALL: u64 = 2;

/// The deadline of the phase a run belongs to, and how far its traffic got: every wait of the
/// run on the cluster is bounded by it, and a run too slow says where it was.
#[derive(Clone, Copy)]
pub struct Limit<'p> {
    pub deadline: &'p Deadline,
    /// Lab milliseconds of traffic, one per millisecond the feed has reached.
    pub progress: &'p Progress,
}

impl Limit<'_> {
    /// Runs `work` on `rt` (the engine is synchronous) until the deadline; past it, the phase's
    /// line says the run was `what`, and at which lab millisecond.
    pub fn block_on<T>(
        &self,
        rt: &Runtime,
        what: &str,
        work: impl Future<Output = Result<T, LabError>>,
    ) -> Result<T, LabError> {
        let doing = || format!("{what} ({})", self.progress.status());
        rt.block_on(self.deadline.within(doing, work))
    }
}

/// A traffic's commands, written once to their topic.
pub struct Commands<'t> {
    pub topic: String,
    pub traffic: &'t Traffic,
    pub faults: Vec<CommandId>,
    placed: Placed,
}

/// The topic of the profile service's commands.
pub const USERS_TOPIC: &str = "profile-commands";

/// The profile service's commands and tenant 42's (with the commands whose second write fails),
/// each written once to its own topic for every run, within one deadline.
pub fn produce_commands<'t>(
    rt: &Runtime,
    cluster: &Cluster,
    n: &Narrator,
    profiles: &'t Traffic,
    orders: &'t Traffic,
    faults: Vec<CommandId>,
) -> Result<(Commands<'t>, Commands<'t>), LabError> {
    let deadline = n.deadline(Commands::work(profiles) + Commands::work(orders));
    let users = Commands::produce(rt, cluster, USERS_TOPIC, profiles, Vec::new(), &deadline)?;
    let tenant = Commands::produce(rt, cluster, "tenant-42-commands", orders, faults, &deadline)?;
    Ok((users, tenant))
}

impl<'t> Commands<'t> {
    /// Creates topic `base` (one partition per service instance) and writes the traffic to it,
    /// within `deadline`.
    fn produce(
        rt: &Runtime,
        cluster: &Cluster,
        base: &str,
        traffic: &'t Traffic,
        faults: Vec<CommandId>,
        deadline: &Deadline,
    ) -> Result<Self, LabError> {
        let writing = async {
            let topic = cluster.create_topic(base, COMMAND_PARTITIONS).await?;
            let placed = service::produce(cluster.client(), &topic, &traffic.commands).await?;
            Ok((topic, placed))
        };
        let (topic, placed) =
            rt.block_on(deadline.wait(&format!("writing the commands to {base}"), writing))?;
        Ok(Commands {
            topic,
            traffic,
            faults,
            placed,
        })
    }

    /// What writing the commands takes: creating the topic, and the records in bulk.
    fn work(traffic: &Traffic) -> Work {
        Work {
            round_trips: 2,
            records: traffic.commands.len() as u64,
            ..Work::default()
        }
    }
}

/// What running `scenario` on Kafka takes, for its phase's deadline: the run rehearsed in
/// memory tells every call it makes to its logs; besides, its topics, the group forming, and
/// every command fetched.
pub fn work(plan: &Plan, scenario: Scenario, commands: &Commands<'_>) -> Result<Work, LabError> {
    let (_, tally) = scenario::rehearse(scenario, plan, commands.traffic, &commands.faults)?;
    Ok(Work {
        round_trips: RUN_ROUND_TRIPS + ROUND_TRIPS_PER_CALL * tally.calls,
        records: tally.records + commands.traffic.commands.len() as u64,
        rebalances: 1,
        ..Work::default()
    })
}

/// Runs `scenario` on its own changelogs, routing topic and consumer group, within `limit`.
pub fn run(
    rt: &Runtime,
    cluster: &Cluster,
    plan: &Plan,
    scenario: Scenario,
    commands: &Commands<'_>,
    limit: Limit<'_>,
) -> Result<Run, LabError> {
    let name = scenario.name();
    let creating = async {
        let mut changelogs = BTreeMap::new();
        for id in ShardId::ALL {
            let base = format!("migrate.{name}.changelog-{id}");
            changelogs.insert(id, cluster.create_topic(&base, 1).await?);
        }
        // The routers need only the latest record per key; the audit reads the whole trail.
        let base = format!("migrate.{name}.routing");
        let routing = cluster.create_topic_with(&base, 1, &AUDIT_LOG).await?;
        Ok(Topics {
            changelogs,
            routing,
        })
    };
    let topics = limit.block_on(rt, "creating the run's topics", creating)?;
    let logs = KafkaLogs::new(rt, cluster.client().clone(), topics, limit)?;
    let mut world = scenario.world(logs, plan, &commands.faults)?;
    let mut config = ClientConfig::new(cluster.addr());
    config.client_id = format!("profile-service-{name}");
    let group = cluster.group(&format!("profile-service.{name}"));
    let mut service = Service::start(rt, &config, &group, commands, limit)?;
    let outcome = scenario::run(&mut world, scenario, plan, commands.traffic, &mut service);
    service.leave();
    let mut run = outcome?;
    let lag = lag(cluster, &group, &commands.topic);
    run.commands_lag = Some(limit.block_on(rt, "reading the group's lag", lag)?);
    Ok(run)
}

/// The group's lag over every partition of `topic`, as kafka-consumer-groups.sh computes it;
/// a partition the group never committed counts with its whole log.
async fn lag(cluster: &Cluster, group: &str, topic: &str) -> Result<i64, LabError> {
    let rows = GroupOffsets::new(cluster.client(), group)
        .lag_rows(topic, COMMAND_PARTITIONS)
        .await?;
    Ok(rows
        .iter()
        .map(|r| r.log_end_offset.unwrap_or(0) - r.current_offset.unwrap_or(0))
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::Target;
    use crate::labs::migrate::plan::tests::default_plan;
    use crate::labs::migrate::scenario::tests::in_memory;
    use crate::labs::migrate::traffic;
    use crate::labs::migrate::Runner;

    /// Runs `scenarios` of seed 5 on `cluster`, as the lab runs a phase.
    fn on_kafka(cluster: Cluster, rt: &Runtime, scenarios: &[Scenario]) -> BTreeMap<Scenario, Run> {
        let plan = default_plan();
        let profiles = traffic::profiles(&plan, 5);
        let (orders, faults) = traffic::tenant(&plan, 5);
        let n = Narrator::new();
        let ran = (|| {
            let (users, tenant) = produce_commands(rt, &cluster, &n, &profiles, &orders, faults)?;
            let mut runner = Runner {
                rt,
                cluster: &cluster,
                plan: &plan,
                users: &users,
                tenant: &tenant,
                runs: BTreeMap::new(),
            };
            runner.phase(&n, scenarios)?;
            Ok::<_, LabError>(runner.runs)
        })();
        rt.block_on(cluster.close());
        ran.unwrap()
    }

    #[test]
    fn on_kafka_a_run_decides_what_it_decides_in_memory() {
        let rt = crate::lab::target::runtime().unwrap();
        let cluster = rt
            .block_on(Cluster::open(
                &Target::Embedded,
                &crate::lab::stop::Stop::never(),
                "test",
            ))
            .unwrap();
        let scenarios = [
            Scenario::Failure,
            Scenario::Rollback,
            Scenario::DualWriteNaive,
        ];
        for (scenario, mut on_kafka) in on_kafka(cluster, &rt, &scenarios) {
            // The command sources differ (the topic's offsets against none), and only the
            // group has a lag; all else agrees.
            for ack in on_kafka.audit.lost.iter_mut() {
                ack.source = None;
            }
            let lag = on_kafka.commands_lag.take();
            assert_eq!(lag, Some(0), "every command handled and committed");
            assert_eq!(on_kafka, in_memory(scenario, 5), "{}", scenario.name());
        }
    }

    /// The broker's log cleaner may pass at any moment of a run (every 15 s by default, so a
    /// run slowed by a loaded machine often sees one): here it passes every 10 ms. The routers
    /// need only the latest record per key, but the audit reads the routing topic's whole trail,
    /// which the topic keeps (it is not compacted)
    /// at the end (the interrupted record, the tenant's dual_write route, the count of records),
    /// and finds every record the run wrote, as the same run in memory does.
    #[test]
    fn the_log_cleaner_leaves_the_audit_its_whole_routing_trail() {
        let rt = crate::lab::target::runtime().unwrap();
        let config = broker::BrokerConfig {
            log_cleaner_backoff: std::time::Duration::from_millis(10),
            ..broker::BrokerConfig::default()
        };
        let cluster = rt.block_on(Cluster::configured(config));
        let scenarios = [
            Scenario::Protocol,
            Scenario::Failure,
            Scenario::DualWriteKeyed,
        ];
        for (scenario, on_kafka) in on_kafka(cluster, &rt, &scenarios) {
            let in_memory = in_memory(scenario, 5);
            assert_eq!(
                on_kafka.routing_log,
                in_memory.routing_log,
                "{}",
                scenario.name()
            );
        }
    }
}
