//! Space-Saving (Metwally, Agrawal and El Abbadi, 2005): the top-k heavy hitters of a stream in
//! a fixed number of counters, as `redis-cli --hotkeys` and CDN hot-key detectors do (source 003,
//! section 7). No key is ever stored beyond the `capacity` monitored ones, so it runs on a
//! consumer's hot path over any number of distinct tenants.
//!
//! The algorithm: a monitored key's counter goes up by one. An unmonitored key, when every
//! counter is taken, takes over the counter with the smallest count `m`, starting at `m + 1`
//! with an error of `m` (it may have been seen up to `m` times while unmonitored).
//! So for every monitored key `count - error <= true count <= count`, and every key seen more than
//! `total / capacity` times is monitored: a tenant with half the traffic cannot be missed.
//!
//! The counters sit in an indexed min-heap, so an update costs O(log capacity) and the smallest
//! counter is found in O(1).

use std::collections::HashMap;
use std::hash::Hash;

use serde::Serialize;

#[derive(Debug, Clone)]
struct Counter<K> {
    key: K,
    count: u64,
    error: u64,
}

/// A Space-Saving summary of a stream of keys.
#[derive(Debug, Clone)]
pub struct SpaceSaving<K> {
    capacity: usize,
    total: u64,
    /// Where each monitored key sits in `heap`.
    index: HashMap<K, usize>,
    /// A min-heap on `count`.
    heap: Vec<Counter<K>>,
}

/// One heavy hitter as the sketch estimates it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeavyHitter<K> {
    pub key: K,
    /// An overestimate: the true count is between `count - error` and `count`.
    pub count: u64,
    pub error: u64,
    /// `count` over everything the sketch has seen.
    pub share: f64,
}

impl<K: Eq + Hash + Clone + Ord> SpaceSaving<K> {
    /// A sketch with `capacity` counters (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        SpaceSaving {
            capacity,
            total: 0,
            index: HashMap::with_capacity(capacity),
            heap: Vec::with_capacity(capacity),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Everything seen.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Counts one occurrence of `key`.
    pub fn add(&mut self, key: &K) {
        self.total += 1;
        if let Some(&pos) = self.index.get(key) {
            self.heap[pos].count += 1;
            self.sift_down(pos);
        } else if self.heap.len() < self.capacity {
            self.push(Counter {
                key: key.clone(),
                count: 1,
                error: 0,
            });
        } else {
            // Take over the smallest counter: the newcomer may have been seen that often.
            let min = self.heap[0].count;
            let evicted = std::mem::replace(
                &mut self.heap[0],
                Counter {
                    key: key.clone(),
                    count: min + 1,
                    error: min,
                },
            );
            self.index.remove(&evicted.key);
            self.index.insert(key.clone(), 0);
            self.sift_down(0);
        }
    }

    /// The `k` largest counters, largest first (ties by key, so the order is reproducible).
    pub fn top(&self, k: usize) -> Vec<HeavyHitter<K>> {
        let mut counters: Vec<&Counter<K>> = self.heap.iter().collect();
        counters.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        counters
            .into_iter()
            .take(k)
            .map(|c| HeavyHitter {
                key: c.key.clone(),
                count: c.count,
                error: c.error,
                share: if self.total == 0 {
                    0.0
                } else {
                    c.count as f64 / self.total as f64
                },
            })
            .collect()
    }

    fn push(&mut self, counter: Counter<K>) {
        self.index.insert(counter.key.clone(), self.heap.len());
        self.heap.push(counter);
        self.sift_up(self.heap.len() - 1);
    }

    fn sift_up(&mut self, mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.heap[parent].count <= self.heap[pos].count {
                break;
            }
            self.swap(parent, pos);
            pos = parent;
        }
    }

    fn sift_down(&mut self, mut pos: usize) {
        loop {
            let (left, right) = (2 * pos + 1, 2 * pos + 2);
            let mut smallest = pos;
            if left < self.heap.len() && self.heap[left].count < self.heap[smallest].count {
                smallest = left;
            }
            if right < self.heap.len() && self.heap[right].count < self.heap[smallest].count {
                smallest = right;
            }
            if smallest == pos {
                return;
            }
            self.swap(pos, smallest);
            pos = smallest;
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        for pos in [a, b] {
            if let Some(slot) = self.index.get_mut(&self.heap[pos].key) {
                *slot = pos;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// A stream where key 0 has half the traffic and 200 others share the rest.
    fn skewed(n: usize, seed: u64) -> Vec<u32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                if rng.gen_bool(0.5) {
                    0
                } else {
                    rng.gen_range(1..=200)
                }
            })
            .collect()
    }

    fn exact(stream: &[u32]) -> HashMap<u32, u64> {
        let mut counts = HashMap::new();
        for k in stream {
            *counts.entry(*k).or_insert(0) += 1;
        }
        counts
    }

    fn check_invariants(s: &SpaceSaving<u32>) {
        for (pos, c) in s.heap.iter().enumerate() {
            assert_eq!(s.index[&c.key], pos);
            if pos > 0 {
                assert!(s.heap[(pos - 1) / 2].count <= c.count);
            }
        }
        assert_eq!(s.index.len(), s.heap.len());
        assert!(s.heap.len() <= s.capacity);
    }

    #[test]
    fn exact_while_there_is_room() {
        let mut s = SpaceSaving::new(8);
        for k in [3, 1, 3, 2, 3, 1] {
            s.add(&k);
        }
        let top = s.top(8);
        let got: Vec<(u32, u64, u64)> = top.iter().map(|h| (h.key, h.count, h.error)).collect();
        assert_eq!(got, vec![(3, 3, 0), (1, 2, 0), (2, 1, 0)]);
        assert_eq!(s.total(), 6);
        assert_eq!(top[0].share, 0.5);
        check_invariants(&s);
    }

    #[test]
    fn an_unmonitored_key_takes_the_smallest_counter_with_its_count_as_error() {
        let mut s = SpaceSaving::new(2);
        for k in [1, 1, 1, 2, 3] {
            s.add(&k);
        }
        // 3 replaced 2 (count 1): it starts at 1 + 1 with an error of 1.
        let got: Vec<(u32, u64, u64)> =
            s.top(2).iter().map(|h| (h.key, h.count, h.error)).collect();
        assert_eq!(got, vec![(1, 3, 0), (3, 2, 1)]);
        check_invariants(&s);
    }

    #[test]
    fn the_bounds_hold_and_the_hot_key_comes_first() {
        let stream = skewed(50_000, 7);
        let truth = exact(&stream);
        let mut s = SpaceSaving::new(16);
        for k in &stream {
            s.add(k);
        }
        check_invariants(&s);
        let top = s.top(5);
        assert_eq!(top[0].key, 0);
        assert!((top[0].share - 0.5).abs() < 0.02, "{}", top[0].share);
        for h in s.top(16) {
            let t = truth[&h.key];
            assert!(h.count - h.error <= t && t <= h.count, "{h:?} true {t}");
        }
        // Any key above total / capacity is monitored.
        for (k, &t) in &truth {
            if t > s.total() / 16 {
                assert!(s.index.contains_key(k), "{k} ({t}) missed");
            }
        }
    }

    #[test]
    fn a_zero_capacity_is_one_counter() {
        let mut s = SpaceSaving::new(0);
        s.add(&1u32);
        s.add(&2u32);
        assert_eq!(s.capacity(), 1);
        assert_eq!(s.top(5).len(), 1);
        assert_eq!(s.top(5)[0].count, 2);
    }
}
