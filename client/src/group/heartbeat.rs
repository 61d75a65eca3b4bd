//! The heartbeat task (Java's `HeartbeatThread`): while the member is in a generation it sends
//! a Heartbeat every `heartbeat.interval`, learns from the answer that the group is rebalancing
//! or has dropped the member, and watches the poll interval: a member whose application stopped
//! calling `poll` for `max.poll.interval` leaves the group, so its partitions go to members that
//! are making progress. Everything runs on tokio time.

use std::time::Duration;

use kafka_protocol::messages::HeartbeatRequest;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::member::Member;
use super::requests::heartbeat_request;
use super::state::{Generation, HeartbeatStep, HeartbeatVerdict};

/// How long to wait before retrying a heartbeat that could not be sent (Kafka's
/// `retry.backoff.ms`).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Java's warning, word for word but for the `.ms` suffixes.
const POLL_TIMEOUT_REASON: &str = "consumer poll timeout has expired. This means the time between \
    subsequent calls to poll() was longer than the configured max.poll.interval, which typically \
    implies that the poll loop is spending too much time processing messages. You can address \
    this either by increasing max.poll.interval or by reducing the maximum size of batches \
    returned in poll() with max.poll.records.";

/// Starts the task; it runs until aborted.
pub fn spawn(member: Member) -> JoinHandle<()> {
    tokio::spawn(run(member))
}

async fn run(member: Member) {
    let config = member.config.clone();
    loop {
        let now = Instant::now();
        let step =
            member
                .state()
                .heartbeat_step(now, config.max_poll_interval, config.session_timeout);
        match step {
            HeartbeatStep::Wait(None) => member.woken().await,
            HeartbeatStep::Wait(Some(at)) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = member.woken() => {}
                }
            }
            HeartbeatStep::Send(generation) => beat(&member, &generation, now).await,
            HeartbeatStep::LeaveForPollTimeout(generation) => {
                // Java prefixes [Consumer clientId=…, groupId=…]; the member id and generation
                // say which of several members in one process timed out.
                tracing::warn!(
                    group = %config.group_id,
                    member_id = %generation.member_id,
                    generation = generation.id,
                    "{POLL_TIMEOUT_REASON}"
                );
                // The state changes first, so a commit racing with the LeaveGroup already fails.
                member.state().left_for_poll_timeout();
                // Static members never leave: only the session timeout removes them (KIP-345).
                if config.group_instance_id.is_none() {
                    member
                        .leave(&generation.member_id, POLL_TIMEOUT_REASON)
                        .await;
                }
            }
            HeartbeatStep::SessionExpired => {
                member.coordinator.mark_unknown(
                    "no heartbeat answer within session.timeout.ms; looking for the coordinator again",
                );
                let mut state = member.state();
                state.heartbeat_answered(now);
                state.heartbeat_retry_after(now, RETRY_BACKOFF);
            }
        }
    }
}

async fn beat(member: &Member, generation: &Generation, now: Instant) {
    let config = &member.config;
    member
        .state()
        .heartbeat_sent(now, config.heartbeat_interval);
    let build = |v| -> HeartbeatRequest {
        heartbeat_request(
            &config.group_id,
            generation.id,
            &generation.member_id,
            config.group_instance_id.as_deref(),
            v,
        )
    };
    let code = match member.coordinator.call(build, None).await {
        Ok(resp) => resp.error_code,
        Err(e) => {
            tracing::debug!(
                group = %config.group_id,
                member_id = %generation.member_id,
                %e,
                "heartbeat not answered"
            );
            member
                .state()
                .heartbeat_retry_after(Instant::now(), RETRY_BACKOFF);
            return;
        }
    };
    let _ = member.coordinator.check(code);
    let verdict = member
        .state()
        .on_heartbeat(generation, code, Instant::now());
    match verdict {
        HeartbeatVerdict::Ok | HeartbeatVerdict::Rejoin => {}
        HeartbeatVerdict::FindCoordinator | HeartbeatVerdict::Retry => {
            member
                .state()
                .heartbeat_retry_after(Instant::now(), RETRY_BACKOFF);
        }
        HeartbeatVerdict::Fatal(e) => {
            tracing::error!(
                group = %config.group_id,
                member_id = %generation.member_id,
                %e,
                "heartbeat failed for good"
            );
        }
    }
}
