//! Source 001's routing model (`hot_shard_demo.py`), reproduced exactly: which shard each order of
//! each tenant lands on when shards are chosen by tenant only, and when the one super tenant is
//! split into virtual buckets.
//!
//! The definitions are source 001's, to the byte:
//! - `stable_hash(s)`: the first 8 bytes, big-endian, of SHA-256 of the UTF-8 string `s`;
//! - tenants 1 to 100 except the hot one place 1,000 orders each (ids 0..1000), the hot tenant
//!   (42) places 100,000 (ids 0..100000): as much as the 99 others together;
//! - tenant-only: `shard = stable_hash(str(tenant)) % shards`;
//! - split: the hot tenant's orders go to `bucket = stable_hash(str(order_id)) % buckets`, and
//!   `shard = stable_hash(f"{tenant}:{bucket}") % shards`; other tenants stay tenant-only.
//!
//! Source 001 prints loads `[17000, 14000, 9000, 11000, 12000, 109000, 16000, 11000]` (max/avg
//! 4.38x) and, with 64 buckets, `[34479, 21788, 35739, 20281, 16619, 21355, 28447, 20292]`
//! (1.44x). The lab computes them; the tests check that it gets source 001's numbers.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Source 001's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub shards: u64,
    pub tenants: u32,
    pub hot_tenant: u32,
    pub orders_per_tenant: u64,
    pub hot_orders: u64,
    pub buckets: u64,
}

/// `hot_shard_demo.py` as printed: 8 shards, tenants 1..=100, tenant 42 hot, 64 buckets.
pub const SEED_001: Params = Params {
    shards: 8,
    tenants: 100,
    hot_tenant: 42,
    orders_per_tenant: 1_000,
    hot_orders: 100_000,
    buckets: 64,
};

/// Source 001's `stable_hash`: SHA-256 of the UTF-8 string, first 8 bytes as a big-endian integer.
pub fn stable_hash(value: &str) -> u64 {
    let digest = Sha256::digest(value.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// Orders per shard under one routing, and how uneven that is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Loads {
    pub loads: Vec<u64>,
    /// The busiest shard over the mean, rounded as source 001 prints it (`{:.2f}`).
    pub max_over_avg: f64,
}

impl Loads {
    fn new(loads: Vec<u64>) -> Self {
        let max_over_avg = crate::lab::report::round(max_over_avg(&loads), 2);
        Loads {
            loads,
            max_over_avg,
        }
    }
}

/// The busiest shard's (or partition's) index: the first one, on a tie.
pub fn busiest(loads: &[u64]) -> usize {
    let max = loads.iter().copied().max().unwrap_or(0);
    loads.iter().position(|&l| l == max).unwrap_or(0)
}

/// Max over mean of per-shard (or per-partition) counts; 0 when there is nothing to compare.
pub fn max_over_avg(loads: &[u64]) -> f64 {
    let total: u64 = loads.iter().sum();
    if loads.is_empty() || total == 0 {
        return 0.0;
    }
    let avg = total as f64 / loads.len() as f64;
    loads.iter().copied().max().unwrap_or(0) as f64 / avg
}

/// Which shard a tenant's orders go to under tenant-only routing.
pub fn tenant_shard(tenant: u32, shards: u64) -> u64 {
    stable_hash(&tenant.to_string()) % shards
}

/// The hot tenant's virtual bucket of an order.
pub fn order_bucket(order_id: u64, buckets: u64) -> u64 {
    stable_hash(&order_id.to_string()) % buckets
}

/// The shard of one of the hot tenant's buckets, keyed `"{tenant}:{bucket}"`.
pub fn bucket_shard(tenant: u32, bucket: u64, shards: u64) -> u64 {
    stable_hash(&format!("{tenant}:{bucket}")) % shards
}

/// Source 001's `simulate(tenant_only)`.
pub fn tenant_only(p: &Params) -> Loads {
    let mut loads = vec![0u64; p.shards as usize];
    for tenant in 1..=p.tenants {
        loads[tenant_shard(tenant, p.shards) as usize] += orders_of(p, tenant);
    }
    Loads::new(loads)
}

/// Source 001's `simulate(split_hot_tenant)`: the hot tenant's orders spread over buckets.
pub fn split_hot_tenant(p: &Params) -> Loads {
    let mut loads = vec![0u64; p.shards as usize];
    for tenant in (1..=p.tenants).filter(|&t| t != p.hot_tenant) {
        loads[tenant_shard(tenant, p.shards) as usize] += orders_of(p, tenant);
    }
    // Each bucket's shard is computed once; each order still hashes its own id, as in source 001.
    let bucket_shards: Vec<u64> = (0..p.buckets)
        .map(|b| bucket_shard(p.hot_tenant, b, p.shards))
        .collect();
    if p.tenants >= p.hot_tenant {
        for order in 0..p.hot_orders {
            let shard = bucket_shards[order_bucket(order, p.buckets) as usize];
            loads[shard as usize] += 1;
        }
    }
    Loads::new(loads)
}

/// How many distinct shards a query for the hot tenant alone must ask after the split: the
/// read fan-out the split costs (at most `min(buckets, shards)`).
pub fn split_read_shards(p: &Params) -> usize {
    let mut shards: Vec<u64> = (0..p.buckets)
        .map(|b| bucket_shard(p.hot_tenant, b, p.shards))
        .collect();
    shards.sort_unstable();
    shards.dedup();
    shards.len()
}

fn orders_of(p: &Params, tenant: u32) -> u64 {
    if tenant == p.hot_tenant {
        p.hot_orders
    } else {
        p.orders_per_tenant
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_hash_is_the_first_eight_bytes_of_sha256() {
        // SHA-256("42") = 73475cb40a568e8da8a045ced110137e159f890ac4da883b6b17dc651b3a8049.
        assert_eq!(stable_hash("42"), 0x73475cb40a568e8d);
        // SHA-256("") = e3b0c44298fc1c149afbf4c8996fb924...
        assert_eq!(stable_hash(""), 0xe3b0c44298fc1c14);
    }

    #[test]
    fn tenant_only_routing_gives_the_seeds_loads() {
        let loads = tenant_only(&SEED_001);
        assert_eq!(
            loads.loads,
            vec![17000, 14000, 9000, 11000, 12000, 109000, 16000, 11000]
        );
        assert_eq!(loads.max_over_avg, 4.38);
        assert_eq!(busiest(&loads.loads), 5);
        assert_eq!((busiest(&[1, 5, 5]), busiest(&[])), (1, 0));
        assert_eq!(tenant_shard(42, 8), 5);
    }

    #[test]
    fn more_shards_leave_the_hot_tenant_whole() {
        let sixteen = tenant_only(&Params {
            shards: 16,
            ..SEED_001
        });
        let hot = tenant_shard(42, 16) as usize;
        assert!(sixteen.loads[hot] >= SEED_001.hot_orders);
        assert!(sixteen.max_over_avg > tenant_only(&SEED_001).max_over_avg);
    }

    #[test]
    fn max_over_avg_of_nothing_is_zero() {
        assert_eq!(max_over_avg(&[]), 0.0);
        assert_eq!(max_over_avg(&[0, 0]), 0.0);
        assert_eq!(max_over_avg(&[1, 3]), 1.5);
    }
}
