//! `--model`: source 001's routing model, computed and told: tenant-only routing, the same with
//! twice the shards, and the super tenant alone split into virtual buckets. Pure computation.

use serde::Serialize;

use super::model::{self, Loads, Params, SEED_001};
use super::verdict;
use crate::lab::report::{thousands, Align, Checks, Narrator, Phase, Summary, Table};

/// Everything `--model` computes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub shards: u64,
    pub tenants: u32,
    pub hot_tenant: u32,
    pub orders_per_tenant: u64,
    pub hot_orders: u64,
    pub buckets: u64,
    pub tenant_only: Loads,
    /// Tenant-only routing on twice the shards: the hot tenant is still on one of them.
    pub more_shards: MoreShards,
    pub split_hot_tenant: Loads,
    /// Distinct shards a query for the hot tenant alone must ask after the split.
    pub split_read_shards: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MoreShards {
    pub shards: u64,
    #[serde(flatten)]
    pub loads: Loads,
}

pub const EXPECTED: &str = "Routing by tenant alone puts the super tenant's orders on one shard \
    (busiest shard above 3x the mean; source 001 prints 4.38x), doubling the shards leaves it \
    whole, and splitting only that tenant into virtual buckets brings the busiest shard near the \
    mean (source 001 prints 1.44x).";

/// Computes the model, tells it, and returns the figures and the verdict.
pub fn run(n: &mut Narrator) -> (Figures, Checks) {
    let p = SEED_001;
    n.phase(Phase {
        title: "Tenant-only routing (source 001)",
        about: &format!(
            "Orders are routed by shard = stable_hash(str(tenant_id)) % {}, where stable_hash is the first \
             8 bytes of SHA-256. {} tenants place {} orders each; tenant {} places {}, as much as all the \
             others together.",
            p.shards,
            p.tenants - 1,
            thousands(p.orders_per_tenant),
            p.hot_tenant,
            thousands(p.hot_orders)
        ),
        predict: "how much busier than the average is the busiest shard?",
    });
    let tenant_only = model::tenant_only(&p);
    n.answer();
    n.table(&loads_table(
        &tenant_only,
        Some(model::tenant_shard(p.hot_tenant, p.shards)),
    ));
    n.say(&format!(
        "Shard {} holds tenant {}: {:.2}x the mean. A shard has {:.1} tenants on average; what differs \
         is what one of them sends.",
        model::busiest(&tenant_only.loads),
        p.hot_tenant,
        tenant_only.max_over_avg,
        f64::from(p.tenants) / p.shards as f64
    ));

    let doubled = Params {
        shards: p.shards * 2,
        ..p
    };
    n.phase(Phase {
        title: "Twice the shards",
        about: &format!(
            "The capacity answer: {} shards instead of {}. The other tenants are reshuffled.",
            doubled.shards, p.shards
        ),
        predict: "does the busiest shard get any lighter?",
    });
    let more = model::tenant_only(&doubled);
    n.answer();
    n.table(&loads_table(
        &more,
        Some(model::tenant_shard(p.hot_tenant, doubled.shards)),
    ));
    let hot_shard = model::tenant_shard(p.hot_tenant, doubled.shards) as usize;
    let whole = more.loads[hot_shard] >= p.hot_orders;
    n.say(&if whole && more.max_over_avg >= tenant_only.max_over_avg {
        format!(
            "Tenant {} still lands on one shard with all {} orders: {:.2}x the mean now (against {:.2}x), \
             because the mean fell. One key has one owner under any hash; more shards only spread the \
             other keys.",
            p.hot_tenant,
            thousands(p.hot_orders),
            more.max_over_avg,
            tenant_only.max_over_avg
        )
    } else {
        format!(
            "The busiest shard is {:.2}x the mean now (against {:.2}x).",
            more.max_over_avg, tenant_only.max_over_avg
        )
    });

    n.phase(Phase {
        title: "Split only the super tenant into virtual buckets",
        about: &format!(
            "Source 001's fix: tenant {}'s orders go to bucket = stable_hash(str(order_id)) % {}, and \
             shard = stable_hash(\"{}:<bucket>\") % {}. Every other tenant keeps its single shard.",
            p.hot_tenant, p.buckets, p.hot_tenant, p.shards
        ),
        predict: "how close to the mean does the busiest shard come? What does it cost?",
    });
    let split = model::split_hot_tenant(&p);
    let read_shards = model::split_read_shards(&p);
    n.answer();
    n.table(&loads_table(&split, None));
    n.say(&format!(
        "The busiest shard is {:.2}x the mean. The price: a query for tenant {} alone now asks {} buckets \
         on {} shards and merges the answers, and its transactions span shards.",
        split.max_over_avg, p.hot_tenant, p.buckets, read_shards
    ));

    let mut v = Checks::new();
    verdict::skew_high(
        &mut v,
        "tenant-only skewed",
        "tenant-only routing",
        tenant_only.max_over_avg,
    );
    v.check(
        "more shards leave it whole",
        more.loads[model::tenant_shard(p.hot_tenant, doubled.shards) as usize] >= p.hot_orders
            && more.max_over_avg >= tenant_only.max_over_avg,
        format!(
            "{} shards: tenant {} still whole on one shard, {:.2}x the mean",
            doubled.shards, p.hot_tenant, more.max_over_avg
        ),
    );
    verdict::near_one(
        &mut v,
        "the split spreads it",
        "hot tenant split into buckets",
        split.max_over_avg,
    );

    n.summary(&Summary {
        happened: vec![format!(
            "Tenant-only routing: {:.2}x; twice the shards: {:.2}x; the super tenant split into {} buckets: {:.2}x.",
            tenant_only.max_over_avg, more.max_over_avg, p.buckets, split.max_over_avg
        )],
        why: vec![
            "The routing key is too coarse: one tenant's traffic cannot be divided by any hash of \
             its id, so it is a capacity problem of one shard, not of the cluster."
                .into(),
            "Averages hide it: the mean shard is fine while one is at four times its share.".into(),
        ],
        what_to_do: vec![
            "Measure per shard and per routing key (who sends what), not only per cluster.".into(),
            "Give only the hot tenants virtual buckets, listed in routing metadata with a version \
             (source 001's route_version and migration_state), and move them online: copy, catch \
             up, verify, switch reads, then stop old writes."
                .into(),
            "Or give the super tenant a dedicated shard; put cross-tenant reports on a derived \
             store instead of resharding everything."
                .into(),
        ],
    });
    let figures = Figures {
        shards: p.shards,
        tenants: p.tenants,
        hot_tenant: p.hot_tenant,
        orders_per_tenant: p.orders_per_tenant,
        hot_orders: p.hot_orders,
        buckets: p.buckets,
        tenant_only,
        more_shards: MoreShards {
            shards: doubled.shards,
            loads: more,
        },
        split_hot_tenant: split,
        split_read_shards: read_shards,
    };
    (figures, v)
}

/// Loads per shard, with a bar and the hot tenant's shard marked.
fn loads_table(loads: &Loads, hot_shard: Option<u64>) -> Table {
    let max = loads.loads.iter().copied().max().unwrap_or(0);
    let mut table = Table::new(&[
        ("shard", Align::Right),
        ("orders", Align::Right),
        ("", Align::Left),
        ("", Align::Left),
    ]);
    for (shard, &load) in loads.loads.iter().enumerate() {
        let mark = if hot_shard == Some(shard as u64) {
            "hot tenant"
        } else {
            ""
        };
        table.row([
            shard.to_string(),
            thousands(load),
            crate::lab::report::bar(load, max, 30),
            mark.to_string(),
        ]);
    }
    table.row([
        "max/avg".to_string(),
        format!("{:.2}x", loads.max_over_avg),
        String::new(),
        String::new(),
    ]);
    table
}
