//! The order traffic of a run: which events the business produces, in which order. Drawn from
//! the seed, so every run of one seed (and every scenario within a run: the failure and both
//! fixes) sends exactly the same events in exactly the same order.
//!
//! Orders are `order-<id>` for consecutive ids around source 003's order 8842. A fixed number of
//! orders is open at a time; each step, one open order (drawn from the seed) takes its next
//! event, and a closed order makes room for the next one. So the events of one order are spread
//! over a stretch of the stream, interleaved with other orders, as in a real shop.
//!
//! The partition count changes halfway. Order 8842 is source 003's example: its first six events
//! fall in the stretch just before the change, and its cancellation is the first event after
//! it, so it is the cancellation that the producer's refreshed metadata sends elsewhere.

use std::ops::RangeInclusive;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::events::{order_key, OrderEvent, LAST_VERSION};

/// The order of source 003, section 3.4.
pub const FEATURED_ORDER: u32 = 8842;

/// The events of a run, in production order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traffic {
    pub order_ids: RangeInclusive<u32>,
    pub events: Vec<OrderEvent>,
    /// `events[change_at]` is the featured order's cancellation, the first event produced after
    /// the partition count changes; everything before it is produced before the change.
    pub change_at: usize,
}

impl Traffic {
    /// `orders` orders (at least 1), `open` of them in progress at a time (at least 1).
    pub fn generate(orders: u32, open: u32, seed: u64) -> Traffic {
        let orders = orders.max(1);
        let first = FEATURED_ORDER.saturating_sub(orders / 2).max(1);
        let order_ids = first..=first + (orders - 1);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);

        let mut waiting: Vec<u32> = order_ids
            .clone()
            .filter(|&id| id != FEATURED_ORDER)
            .collect();
        waiting.shuffle(&mut rng);
        let others = interleave(waiting, open.max(1) as usize, &mut rng);

        // Order 8842 is a quick one: its first six events come in a burst just before the change
        // (within the events of two steps of every open order), so they are still waiting in
        // its partition's backlog when the change happens. Its cancellation comes next.
        let change = others.len() / 2;
        let span = (2 * open.max(1) as usize).min(change);
        let mut slots: Vec<usize> = (1..LAST_VERSION)
            .map(|_| rng.gen_range(change - span..=change))
            .collect();
        slots.sort_unstable();

        let featured = |v| OrderEvent {
            order_id: FEATURED_ORDER,
            version: v,
        };
        let mut events = Vec::with_capacity(others.len() + LAST_VERSION as usize);
        let mut version = 1;
        for (i, event) in others[..change].iter().enumerate() {
            while slots.get(version as usize - 1) == Some(&i) {
                events.push(featured(version));
                version += 1;
            }
            events.push(*event);
        }
        while version < LAST_VERSION {
            events.push(featured(version));
            version += 1;
        }
        let change_at = events.len();
        events.push(featured(LAST_VERSION));
        events.extend_from_slice(&others[change..]);
        Traffic {
            order_ids,
            events,
            change_at,
        }
    }

    /// The record keys of every order of the run.
    pub fn keys(&self) -> impl Iterator<Item = String> + '_ {
        self.order_ids.clone().map(order_key)
    }

    pub fn orders(&self) -> usize {
        self.order_ids.clone().count()
    }
}

/// Every event of every order in `waiting`, `open` orders in progress at a time.
fn interleave(mut waiting: Vec<u32>, open: usize, rng: &mut impl Rng) -> Vec<OrderEvent> {
    let mut events = Vec::with_capacity(waiting.len() * LAST_VERSION as usize);
    let mut in_progress: Vec<OrderEvent> = Vec::with_capacity(open);
    waiting.reverse(); // pop() takes them in the shuffled order
    loop {
        while in_progress.len() < open {
            match waiting.pop() {
                Some(order_id) => in_progress.push(OrderEvent {
                    order_id,
                    version: 1,
                }),
                None => break,
            }
        }
        if in_progress.is_empty() {
            return events;
        }
        let i = rng.gen_range(0..in_progress.len());
        let event = in_progress[i];
        events.push(event);
        if event.version == LAST_VERSION {
            in_progress.swap_remove(i);
        } else {
            in_progress[i].version += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn check_per_order_order(t: &Traffic) {
        let mut next: HashMap<u32, u32> = HashMap::new();
        for e in &t.events {
            let v = next.entry(e.order_id).or_insert(1);
            assert_eq!(e.version, *v, "{e} out of order");
            *v += 1;
        }
        assert_eq!(next.len(), t.orders());
        assert!(next.values().all(|&v| v == LAST_VERSION + 1));
        assert_eq!(t.events.len(), t.orders() * LAST_VERSION as usize);
    }

    #[test]
    fn every_order_is_produced_in_version_order_and_8842_straddles_the_change() {
        for seed in 0..20 {
            let t = Traffic::generate(240, 24, seed);
            check_per_order_order(&t);
            assert!(t.order_ids.contains(&FEATURED_ORDER));
            assert_eq!(t.events[t.change_at], OrderEvent::new(8842, 7).unwrap());
            let before = &t.events[..t.change_at];
            let created = before
                .iter()
                .position(|e| *e == OrderEvent::new(8842, 1).unwrap());
            // Its life starts within the last stretch before the change.
            assert!(t.change_at - created.unwrap() <= 2 * 24 + 6, "seed {seed}");
            assert!((t.change_at as f64 / t.events.len() as f64 - 0.5).abs() < 0.01);
        }
    }

    #[test]
    fn the_seed_fixes_the_traffic() {
        assert_eq!(Traffic::generate(100, 10, 7), Traffic::generate(100, 10, 7));
        assert_ne!(
            Traffic::generate(100, 10, 7).events,
            Traffic::generate(100, 10, 8).events
        );
    }

    #[test]
    fn ids_are_consecutive_around_8842_and_tiny_runs_work() {
        let t = Traffic::generate(240, 24, 1);
        assert_eq!(t.order_ids, 8722..=8961);
        assert_eq!(t.keys().next().as_deref(), Some("order-8722"));
        for orders in [1, 2, 3] {
            let t = Traffic::generate(orders, 1, 0);
            check_per_order_order(&t);
            assert_eq!(t.events[t.change_at], OrderEvent::new(8842, 7).unwrap());
        }
        let t = Traffic::generate(20_000, 50, 0);
        assert_eq!(t.order_ids, 1..=20_000);
    }
}
