//! Redis Cluster's redirections, as a model (no Redis runs): three nodes owning the slot ranges
//! `redis-cli --cluster create` gives them, one slot migrating key by key from one node to
//! another (MIGRATING / IMPORTING), and clients that follow the answers in different ways.
//! Slots are the real ones (CRC16/XMODEM of the key or its hash tag, mod 16384, from
//! [`crate::kit::schemes`]); a hop is one request to one node, the model's unit of latency.
//!
//! What a node answers, as the Redis Cluster specification says: the owner of a slot serves it,
//! another node answers `MOVED slot owner`; a migrating owner serves keys it still has and
//! answers `ASK slot target` for the others; the importing target serves a request only after
//! `ASKING`, and otherwise answers `MOVED` to the owner.

use std::collections::BTreeSet;

use rand::seq::SliceRandom;
use rand::Rng;

use crate::kit::schemes::redis_slot;

/// The nodes, as a room reads them.
pub const NODES: [&str; 3] = ["A", "B", "C"];

/// Redirections a client follows for one request before it gives up, as Jedis's `maxAttempts`
/// (5) does: "Too many Cluster redirections".
pub const MAX_HOPS: u32 = 5;

/// The node owning `slot` on a fresh three-node cluster: 0-5460, 5461-10922, 10923-16383.
pub fn initial_owner(slot: u16) -> usize {
    match slot {
        0..=5460 => 0,
        5461..=10922 => 1,
        _ => 2,
    }
}

/// Whether every key maps to one slot: MGET and other multi-key commands need it, else
/// `CROSSSLOT Keys in request don't hash to the same slot`.
pub fn same_slot(keys: &[&str]) -> bool {
    let mut slots = keys.iter().map(|k| redis_slot(k.as_bytes()));
    let first = slots.next();
    slots.all(|s| Some(s) == first)
}

/// A node's answer to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Served,
    Moved(usize),
    Ask(usize),
}

/// One slot moving from `from` to `to`, its keys migrated one at a time.
struct Migration {
    slot: u16,
    from: usize,
    to: usize,
    /// Keys already on `to`.
    moved: BTreeSet<String>,
    /// Once done, `to` owns the slot.
    done: bool,
}

impl Migration {
    fn owner(&self) -> usize {
        if self.done {
            self.to
        } else {
            self.from
        }
    }

    /// What `node` answers for `key` (of the migrating slot), `asking` after an ASKING.
    fn answer(&self, node: usize, key: &str, asking: bool) -> Answer {
        debug_assert_eq!(redis_slot(key.as_bytes()), self.slot);
        let owner = self.owner();
        if self.done {
            return if node == owner {
                Answer::Served
            } else {
                Answer::Moved(owner)
            };
        }
        match (node == self.from, node == self.to) {
            (true, _) if self.moved.contains(key) => Answer::Ask(self.to),
            (true, _) => Answer::Served,
            (_, true) if asking => Answer::Served,
            _ => Answer::Moved(owner),
        }
    }
}

/// How a client treats the answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// ASK: one ASKING request to the target, its map untouched; MOVED: its map updated.
    Correct,
    /// ASK handled like MOVED: its map now says the target, without ASKING.
    AskAsMoved,
    /// MOVED followed for this request, its map never updated.
    IgnoresMoved,
}

/// What a client did over a run of requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub requests: u64,
    pub hops: u64,
    /// MOVED and ASK answers.
    pub redirects: u64,
    /// Times its map changed its mind about the slot's node.
    pub map_changes: u64,
    /// Requests given up after [`MAX_HOPS`].
    pub failed: u64,
}

impl Tally {
    /// Redirect answers per request: the ratio source 003 says to graph.
    pub fn redirect_ratio(&self) -> f64 {
        self.redirects as f64 / self.requests.max(1) as f64
    }
}

/// One request for `key` by a client whose map says `map` for the slot.
fn request(m: &Migration, client: Client, map: &mut usize, key: &str, t: &mut Tally) {
    t.requests += 1;
    let (mut node, mut asking) = (*map, false);
    for _ in 0..MAX_HOPS {
        t.hops += 1;
        // Where to go next, whether the map learns it, whether the next request says ASKING.
        let (next, learns, ask) = match m.answer(node, key, asking) {
            Answer::Served => return,
            Answer::Moved(n) => (n, client != Client::IgnoresMoved, false),
            Answer::Ask(n) => (
                n,
                client == Client::AskAsMoved,
                client != Client::AskAsMoved,
            ),
        };
        t.redirects += 1;
        if learns && *map != next {
            *map = next;
            t.map_changes += 1;
        }
        (node, asking) = (next, ask);
    }
    t.failed += 1;
}

/// The keys of user 42, all in one slot through their hash tag.
pub fn user_keys(count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("user:{{42}}:item-{i}"))
        .collect()
}

/// What the model measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisRun {
    pub slot: u16,
    pub from: usize,
    pub to: usize,
    /// During the migration: the correct client, then the one treating ASK as MOVED.
    pub during: [Tally; 2],
    /// After it, on a map from before: the correct client, then the one ignoring MOVED.
    pub after: [Tally; 2],
}

impl RedisRun {
    /// Hops of the client ignoring MOVED over the correct client's, for the same requests.
    pub fn latency_multiple(&self) -> f64 {
        self.after[1].hops as f64 / self.after[0].hops.max(1) as f64
    }
}

/// User 42's slot migrates from its owner to the next node, `keys` keys in a seeded order,
/// with `per_key` requests for seeded keys after each key moves; then `after` requests once it
/// is done, by clients whose map still names the old owner.
pub fn run(rng: &mut impl Rng, keys: usize, per_key: usize, after: usize) -> RedisRun {
    let names = user_keys(keys);
    let slot = redis_slot(names[0].as_bytes());
    let from = initial_owner(slot);
    let to = (from + 1) % NODES.len();
    let mut m = Migration {
        slot,
        from,
        to,
        moved: BTreeSet::new(),
        done: false,
    };
    let mut order = names.clone();
    order.shuffle(rng);
    let clients = [Client::Correct, Client::AskAsMoved];
    let (mut during, mut maps) = ([Tally::default(), Tally::default()], [from; 2]);
    for key in order {
        m.moved.insert(key);
        for _ in 0..per_key {
            let asked = &names[rng.gen_range(0..names.len())];
            for (i, &client) in clients.iter().enumerate() {
                request(&m, client, &mut maps[i], asked, &mut during[i]);
            }
        }
    }
    m.done = true;
    let clients = [Client::Correct, Client::IgnoresMoved];
    let (mut later, mut maps) = ([Tally::default(), Tally::default()], [from; 2]);
    for _ in 0..after {
        let asked = &names[rng.gen_range(0..names.len())];
        for (i, &client) in clients.iter().enumerate() {
            request(&m, client, &mut maps[i], asked, &mut later[i]);
        }
    }
    RedisRun {
        slot,
        from,
        to,
        during,
        after: later,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// User 42's keys the tests ask for.
    const CART: &str = "user:{42}:cart";
    const ORDERS: &str = "user:{42}:orders";

    #[test]
    fn the_sources_keys_have_redis_clusters_real_slots() {
        assert_eq!(
            redis_slot(b"user:42:cart"),
            12984,
            "not the source's illustrative 8342"
        );
        assert_eq!(redis_slot(b"user:{42}:cart"), 8000);
        assert_eq!(redis_slot(b"user:{42}:orders"), 8000);
        assert!(same_slot(&["user:{42}:cart", "user:{42}:orders"]));
        assert!(!same_slot(&["user:42:cart", "user:43:cart"]), "CROSSSLOT");
        assert_eq!(initial_owner(8000), 1, "node B");
        assert_eq!(initial_owner(12984), 2, "node C");
    }

    fn migration(moved: &[&str], done: bool) -> Migration {
        Migration {
            slot: 8000,
            from: 1,
            to: 2,
            moved: moved.iter().map(|k| k.to_string()).collect(),
            done,
        }
    }

    #[test]
    fn a_migrated_key_costs_the_correct_client_one_ask_and_the_naive_one_its_map() {
        let m = migration(&[CART], false);
        let (mut good, mut map) = (Tally::default(), 1);
        request(&m, Client::Correct, &mut map, CART, &mut good);
        assert_eq!(
            (good.hops, good.redirects, good.map_changes, map),
            (2, 1, 0, 1)
        );
        let (mut naive, mut map) = (Tally::default(), 1);
        request(&m, Client::AskAsMoved, &mut map, CART, &mut naive);
        // B: ASK C; C without ASKING: MOVED B; B: ASK C; ... until it gives up.
        assert_eq!(naive.hops, u64::from(MAX_HOPS));
        assert_eq!(naive.failed, 1);
        assert_eq!(naive.map_changes, u64::from(MAX_HOPS));
        // A key not yet migrated: the naive map now says C, which sends it back to B.
        assert_eq!(map, 2);
        request(&m, Client::AskAsMoved, &mut map, ORDERS, &mut naive);
        assert_eq!((naive.map_changes, map), (u64::from(MAX_HOPS) + 1, 1));
    }

    #[test]
    fn after_the_migration_ignoring_moved_costs_a_hop_on_every_request() {
        let m = migration(&[], true);
        let (mut good, mut ignoring) = (Tally::default(), Tally::default());
        let (mut good_map, mut stale_map) = (1, 1);
        for _ in 0..10 {
            request(&m, Client::Correct, &mut good_map, CART, &mut good);
            request(
                &m,
                Client::IgnoresMoved,
                &mut stale_map,
                CART,
                &mut ignoring,
            );
        }
        assert_eq!((good.hops, good.redirects), (11, 1));
        assert_eq!((ignoring.hops, ignoring.redirects), (20, 10));
        assert_eq!(ignoring.redirect_ratio(), 1.0);
        assert_eq!(ignoring.failed + good.failed, 0);
    }

    #[test]
    fn the_same_seed_gives_the_same_run_and_the_naive_client_flaps() {
        let once = run(&mut ChaCha8Rng::seed_from_u64(7), 32, 4, 100);
        let again = run(&mut ChaCha8Rng::seed_from_u64(7), 32, 4, 100);
        assert_eq!(once, again);
        assert_eq!((once.slot, once.from, once.to), (8000, 1, 2));
        assert_eq!(once.during[0].map_changes, 0);
        assert_eq!(once.during[0].failed, 0);
        assert!(once.during[1].map_changes > 0);
        assert_eq!(once.after[1].hops, 200);
        assert_eq!(once.after[0].hops, 101);
    }
}
