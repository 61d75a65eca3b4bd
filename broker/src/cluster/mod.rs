//! `broker --nodes N`: N brokers in one process. Each node has its own id and listener; they
//! share one copy of every partition, so what a node may answer is a matter of routing, not of
//! data: a node answers for the partitions it leads and the groups and transactional ids it
//! coordinates, and tells clients to go elsewhere for the rest, as a Kafka cluster does.
//!
//! [`listeners`] binds one listener per node; [`placement`] derives where things are from their
//! names; [`moves`] remembers the leaders a reassignment moved; [`traffic`] counts requests and
//! redirects per node. The handlers apply all this to each request (`handler::route`) and serve
//! Kafka's reassignment APIs (`handler::reassign`).

pub mod listeners;
pub mod moves;
pub mod placement;
pub mod traffic;

use std::io;

use crate::topics::Topic;
use moves::Moves;
use traffic::Traffic;

/// One node as clients are told to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: i32,
    pub host: String,
    pub port: i32,
}

/// A partition's leader and leader epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader {
    pub node: i32,
    pub epoch: i32,
}

#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<Node>,
    moves: Moves,
    pub traffic: Traffic,
}

impl Cluster {
    /// `nodes` in node id order, at least one.
    pub fn new(nodes: Vec<Node>, moves: Moves) -> Cluster {
        assert!(!nodes.is_empty(), "a cluster has at least one node");
        Cluster {
            nodes,
            moves,
            traffic: Traffic::default(),
        }
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// One node: it leads and coordinates everything, and nothing is ever routed elsewhere.
    pub fn is_single_node(&self) -> bool {
        self.nodes.len() == 1
    }

    pub fn node(&self, id: i32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The partition's leader: where a reassignment moved it, else its default place. A move
    /// to a node this run does not have (a restart with fewer `--nodes`) counts as no move.
    pub fn leader(&self, topic: &Topic, partition: i32) -> Leader {
        let placed = || {
            self.nodes[placement::default_leader_index(self.nodes.len(), &topic.name, partition)].id
        };
        match self.moves.get(topic.id, partition) {
            Some(moved) if self.node(moved.leader).is_some() => Leader {
                node: moved.leader,
                epoch: moved.epoch,
            },
            Some(moved) => Leader {
                node: placed(),
                epoch: moved.epoch,
            },
            None => Leader {
                node: placed(),
                epoch: 0,
            },
        }
    }

    /// The node that coordinates this group id or transactional id.
    pub fn coordinator(&self, key: &str) -> &Node {
        &self.nodes[placement::coordinator_index(self.nodes.len(), key)]
    }

    /// Makes `to` the partition's leader. One copy of the data serves every node, so the move is
    /// complete once recorded: nothing is copied and nothing written before it is lost.
    pub fn move_leader(&self, topic: &Topic, partition: i32, to: i32) -> io::Result<()> {
        let current = self.leader(topic, partition);
        if current.node == to {
            return Ok(());
        }
        self.moves.record(topic.id, partition, to, current.epoch)
    }
}
