//! Requests each node received per API, and how many of them it redirected: answered with
//! NOT_LEADER_OR_FOLLOWER (a partition led elsewhere) or NOT_COORDINATOR (a group or
//! transactional id coordinated elsewhere). The ratio of redirects to requests is what reveals a
//! client whose partition map is stale: its requests still succeed after a retry, so no error
//! metric moves.

use std::collections::BTreeMap;
use std::sync::Mutex;

use kafka_protocol::messages::ApiKey;

/// One node's counts for one API.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub requests: u64,
    /// Requests with at least one partition answered NOT_LEADER_OR_FOLLOWER.
    pub not_leader: u64,
    /// Requests answered NOT_COORDINATOR (for at least one of their groups or ids).
    pub not_coordinator: u64,
}

/// Why a request was redirected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirect {
    NotLeader,
    NotCoordinator,
}

#[derive(Debug, Default)]
pub struct Traffic {
    counts: Mutex<BTreeMap<(i32, i16), Counts>>,
}

impl Traffic {
    pub fn request(&self, node: i32, api: ApiKey) {
        self.with(node, api, |c| c.requests += 1);
    }

    pub fn redirected(&self, node: i32, api: ApiKey, why: Redirect) {
        self.with(node, api, |c| match why {
            Redirect::NotLeader => c.not_leader += 1,
            Redirect::NotCoordinator => c.not_coordinator += 1,
        });
    }

    /// Every (node, API) that received a request, in node then API key order.
    pub fn snapshot(&self) -> Vec<(i32, ApiKey, Counts)> {
        self.lock()
            .iter()
            .filter_map(|(&(node, key), &counts)| Some((node, ApiKey::try_from(key).ok()?, counts)))
            .collect()
    }

    fn with(&self, node: i32, api: ApiKey, change: impl FnOnce(&mut Counts)) {
        change(self.lock().entry((node, api as i16)).or_default());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(i32, i16), Counts>> {
        // Counters only: a panic elsewhere cannot leave one half-written.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}
