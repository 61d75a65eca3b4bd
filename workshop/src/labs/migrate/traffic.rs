//! What the service's clients do, drawn from the seed: every run of a seed (and every scenario
//! of a run) sees exactly the same commands and reads at the same lab times.
//!
//! Profiles: each user signs up in the first 100 ms, then `rate` profile writes a millisecond
//! go to random users, and one read a millisecond. Ben (source 004's user at position 28, which
//! D takes) is busier: he reads his profile every 20 ms and changes his email in between.
//! Tenant 42 (source 001's super tenant): adds to the totals of its orders, `3` a millisecond.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::engine::keys::{CommandId, LabTime, RowKey};
use super::engine::store::{Command, Op, TOTAL};
use super::plan::{Plan, SIGNUP_MS};

/// Source 004's user who moves from B to D.
pub const BEN: &str = "Ben";
/// Source 001's super tenant.
pub const HOT_TENANT: u32 = 42;
/// Tenant 42's order writes per lab millisecond.
pub const TENANT_RATE: u32 = 3;
/// How long tenant 42's traffic lasts.
pub const TENANT_MS: u64 = 600;
/// Ben's rhythm: a read 3 ms into every 20, a write at 13.
const BEN_EVERY_MS: u64 = 20;

const FIELDS: [&str; 4] = ["email", "city", "plan", "avatar"];

/// The commands (in the order they arrive, ids ascending) and reads of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traffic {
    pub commands: Vec<Command>,
    pub reads: Vec<(LabTime, RowKey)>,
    pub users: Vec<RowKey>,
    pub duration: u64,
}

pub fn user_id(n: u32) -> String {
    format!("user-{n:03}")
}

/// The profile service's traffic.
pub fn profiles(plan: &Plan, seed: u64) -> Traffic {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut users: Vec<RowKey> = (1..=plan.users).map(|n| RowKey::User(user_id(n))).collect();
    users.push(RowKey::user(BEN));
    let mut commands = Vec::new();
    let mut next = 0;
    let mut command = |key: RowKey, field: &str, value: String, at: u64| {
        next += 1;
        Command {
            id: CommandId(next),
            key,
            op: Op::Set {
                field: field.to_string(),
                value,
            },
            at: LabTime(at),
        }
    };
    let mut signups = users.clone();
    signups.shuffle(&mut rng);
    let count = signups.len() as u64;
    for (i, key) in signups.into_iter().enumerate() {
        let name = format!("name of {key}");
        commands.push(command(key, "name", name, i as u64 * SIGNUP_MS / count));
    }
    let mut reads = Vec::new();
    for t in SIGNUP_MS..plan.duration_ms {
        for _ in 0..plan.rate {
            let key = users[rng.gen_range(0..users.len())].clone();
            let field = FIELDS[rng.gen_range(0..FIELDS.len())];
            let value = format!("{field}-{}", rng.gen_range(0..1_000_000));
            commands.push(command(key, field, value, t));
        }
        if t % BEN_EVERY_MS == 13 {
            let email = format!("ben.{}@example.com", t / BEN_EVERY_MS);
            commands.push(command(RowKey::user(BEN), "email", email, t));
        }
        reads.push((LabTime(t), users[rng.gen_range(0..users.len())].clone()));
        if t % BEN_EVERY_MS == 3 {
            reads.push((LabTime(t), RowKey::user(BEN)));
        }
    }
    Traffic {
        commands,
        reads,
        users,
        duration: plan.duration_ms,
    }
}

/// Tenant 42's traffic, and the commands whose second write fails during a dual write.
pub fn tenant(plan: &Plan, seed: u64) -> (Traffic, Vec<CommandId>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x42);
    let mut commands = Vec::new();
    let mut faults = Vec::new();
    for t in 0..TENANT_MS {
        for _ in 0..TENANT_RATE {
            let id = CommandId(commands.len() as u64 + 1);
            commands.push(Command {
                id,
                key: RowKey::Order {
                    tenant: HOT_TENANT,
                    order: rng.gen_range(0..plan.orders),
                },
                op: Op::Add {
                    field: TOTAL.to_string(),
                    amount: rng.gen_range(1..=100),
                },
                at: LabTime(t),
            });
            if rng.gen_range(0..100) < plan.failure_percent {
                faults.push(id);
            }
        }
    }
    let users = (0..plan.orders)
        .map(|order| RowKey::Order {
            tenant: HOT_TENANT,
            order,
        })
        .collect();
    let traffic = Traffic {
        commands,
        reads: Vec::new(),
        users,
        duration: TENANT_MS,
    };
    (traffic, faults)
}
