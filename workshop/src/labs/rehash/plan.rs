//! The lab's flags, checked and turned into the change to measure.

use clap::value_parser;

use crate::kit::schemes::{node_name, Membership, NodeId, MAX_SLOTS};
use crate::lab::LabError;

const MAX_KEYS: i64 = 10_000_000;
const MAX_NODES: i64 = 1024;
const MAX_VNODES: i64 = 1024;
const MAX_VNODE_SETTINGS: usize = 8;
/// Rendezvous hashes every key once per node, before and after: keys × nodes bounds the run time
/// (about a second per 10^8 in a release build).
const MAX_WORK: u64 = 200_000_000;

/// `workshop rehash`: how many keys move when nodes change.
#[derive(Debug, Clone, clap::Args)]
pub struct RehashArgs {
    /// Keys to route, drawn from --seed
    #[arg(long, value_name = "N", default_value_t = 200_000,
          value_parser = value_parser!(u32).range(1..=MAX_KEYS))]
    pub keys: u32,
    /// Nodes before the change
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = value_parser!(u32).range(1..=MAX_NODES))]
    pub from: u32,
    /// Nodes after the change; fewer than --from removes nodes
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = value_parser!(u32).range(1..=MAX_NODES))]
    pub to: u32,
    /// Nodes that go when --to is below --from, by id (0 to from-1, comma-separated);
    /// default: the newest ones
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    pub remove: Vec<u32>,
    /// Tokens per node on the ring, one ring per value (comma-separated)
    #[arg(long, value_name = "V", value_delimiter = ',', default_values_t = [1, 16, 256],
          value_parser = value_parser!(u32).range(1..=MAX_VNODES))]
    pub vnodes: Vec<u32>,
    /// Partitions of the Kafka topic used as fixed slots (Kafka's murmur2 partitioner); the
    /// default, 60, divides evenly over 1 to 6, 10, 12, 15, 20 and 30 brokers
    #[arg(long, value_name = "P", default_value_t = 60,
          value_parser = value_parser!(u32).range(1..=i64::from(MAX_SLOTS)))]
    pub partitions: u32,
}

/// The change the lab measures, checked.
#[derive(Debug, Clone)]
pub struct Plan {
    pub keys: usize,
    pub from: Membership,
    pub to: Membership,
    pub added: Vec<NodeId>,
    pub removed: Vec<NodeId>,
    /// Ring token counts, without repeats, in the order given.
    pub vnodes: Vec<u32>,
    pub partitions: u32,
    /// The node that gets twice the capacity in the weighted comparison: the first node present
    /// both before and after, so that its share can be compared across the change.
    pub heavy: NodeId,
}

impl Plan {
    pub fn new(args: &RehashArgs) -> Result<Plan, LabError> {
        let invalid = |message: String| LabError::InvalidInput(message);
        if args.from == args.to {
            return Err(invalid(format!(
                "--from and --to are both {}: nothing changes, so no key can move; give a different --to (for example --to {})",
                args.from,
                args.from + 1
            )));
        }
        let work = u64::from(args.keys) * u64::from(args.from.max(args.to));
        if work > MAX_WORK {
            return Err(invalid(format!(
                "{} keys over {} nodes is too much work (rendezvous hashes every key once per node); keep --keys × nodes under {MAX_WORK}",
                args.keys,
                args.from.max(args.to)
            )));
        }
        let mut vnodes = args.vnodes.clone();
        dedup_keeping_order(&mut vnodes);
        if vnodes.len() > MAX_VNODE_SETTINGS {
            return Err(invalid(format!(
                "--vnodes has {} values; give at most {MAX_VNODE_SETTINGS}",
                vnodes.len()
            )));
        }
        let from = Membership::uniform(args.from).map_err(|e| invalid(e.to_string()))?;
        let (to, added, removed) = if args.to > args.from {
            if !args.remove.is_empty() {
                return Err(invalid(format!(
                    "--remove only applies when --to is below --from, and {} to {} adds nodes; leave --remove out",
                    args.from, args.to
                )));
            }
            let to = from.grown(args.to - args.from);
            let added = to.ids().filter(|id| !from.contains(*id)).collect();
            (to, added, Vec::new())
        } else {
            let removed = removed_nodes(args)?;
            let to = from.without(&removed).map_err(|e| invalid(e.to_string()))?;
            (to, Vec::new(), removed)
        };
        let heavy = from
            .ids()
            .find(|id| to.contains(*id))
            .ok_or_else(|| invalid("no node survives the change".into()))?;
        Ok(Plan {
            keys: args.keys as usize,
            from,
            to,
            added,
            removed,
            vnodes,
            partitions: args.partitions,
            heavy,
        })
    }
}

/// The nodes a shrink removes: `--remove` if given (checked), else the newest ones.
fn removed_nodes(args: &RehashArgs) -> Result<Vec<NodeId>, LabError> {
    let count = (args.from - args.to) as usize;
    if args.remove.is_empty() {
        return Ok((args.to..args.from).collect());
    }
    let mut ids = args.remove.clone();
    dedup_keeping_order(&mut ids);
    if let Some(id) = ids.iter().find(|&&id| id >= args.from) {
        return Err(LabError::InvalidInput(format!(
            "--remove {id}: there is no {} among {} nodes (ids 0 to {})",
            node_name(*id),
            args.from,
            args.from - 1
        )));
    }
    if ids.len() != count {
        return Err(LabError::InvalidInput(format!(
            "--remove names {}, but going from {} to {} removes {count}; name {count} or leave --remove out to remove the newest",
            crate::lab::report::count(ids.len() as u64, "node", "nodes"),
            args.from,
            args.to
        )));
    }
    Ok(ids)
}

fn dedup_keeping_order(values: &mut Vec<u32>) {
    let mut seen = std::collections::HashSet::new();
    values.retain(|v| seen.insert(*v));
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};

    fn parse(flags: &[&str]) -> Result<Plan, String> {
        let command = RehashArgs::augment_args(clap::Command::new("rehash"));
        let matches = command
            .try_get_matches_from(std::iter::once("rehash").chain(flags.iter().copied()))
            .map_err(|e| e.to_string())?;
        let args = RehashArgs::from_arg_matches(&matches).map_err(|e| e.to_string())?;
        Plan::new(&args).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_add_a_fifth_node_to_four() {
        let plan = parse(&[]).unwrap();
        assert_eq!(plan.keys, 200_000);
        assert_eq!(plan.from.len(), 4);
        assert_eq!(
            (plan.added.clone(), plan.removed.clone()),
            (vec![4], vec![])
        );
        assert_eq!(plan.vnodes, vec![1, 16, 256]);
        assert_eq!((plan.partitions, plan.heavy), (60, 0));
    }

    #[test]
    fn removals_take_the_newest_unless_told() {
        let plan = parse(&["--from", "8", "--to", "7"]).unwrap();
        assert_eq!(plan.removed, vec![7]);
        let plan = parse(&["--from", "5", "--to", "4", "--remove", "0"]).unwrap();
        assert_eq!(plan.removed, vec![0]);
        assert_eq!(
            plan.heavy, 1,
            "node-0 is gone, so node-1 carries the weight"
        );
    }

    #[test]
    fn bad_input_is_an_error_line_not_a_panic() {
        for flags in [
            &["--from", "4", "--to", "4"][..],
            &["--keys", "0"],
            &["--keys", "-3"],
            &["--from", "0"],
            &["--to", "100000"],
            &["--vnodes", "0"],
            &["--partitions", "0"],
            &["--remove", "1"],
            &["--from", "5", "--to", "4", "--remove", "9"],
            &["--from", "5", "--to", "3", "--remove", "1"],
            &["--keys", "10000000", "--from", "1000", "--to", "1001"],
        ] {
            let err = parse(flags).expect_err(&format!("{flags:?} was accepted"));
            assert!(!err.trim().is_empty());
        }
        let err = parse(&["--from", "5", "--to", "3", "--remove", "1"]).unwrap_err();
        assert!(
            err.starts_with("--remove names 1 node, but going from 5 to 3 removes 2;"),
            "{err}"
        );
    }
}
