//! What happened in one run of the group, in the order it happened: every member's joins,
//! assignments, revocations, batches and commits, the client's own reports (poll timeout,
//! LeaveGroup, rebalance complete), each with its time since the lab started. The lab's
//! figures are computed from it ([`super::accounting`]), its log lines are what the narration
//! shows, and `--timeline` writes it out as JSON lines.
//!
//! It also carries what members show the scenario while it runs ([`View`]), and wakes whoever
//! waits on it whenever anything changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

/// Time since the lab started, on whatever clock the runtime has (paused or real).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// Must be called inside the lab's runtime, so a paused clock is the one read.
    pub fn start() -> Clock {
        Clock {
            start: Instant::now(),
        }
    }

    pub fn ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
}

/// `ms` as a log timestamp, `HH:MM:SS,mmm` (source 003's format), counted from the start.
pub fn hms(ms: u64) -> String {
    let (h, m, s) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60);
    format!("{h:02}:{m:02}:{s:02},{:03}", ms % 1000)
}

/// Offsets `first..=last` of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Range {
    pub partition: i32,
    pub first: i64,
    pub last: i64,
}

impl Range {
    pub fn len(&self) -> u64 {
        (self.last - self.first + 1).max(0) as u64
    }
}

/// Something a member did or saw. Partitions are numbers of the scenario's topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The member is in a new generation (seen after its poll returned).
    Joined {
        generation: i32,
        member_id: String,
        protocol: Option<String>,
        partitions: Vec<i32>,
    },
    /// The client's own report that a rebalance completed for the member.
    Generation {
        generation: i64,
        assigned: i64,
        added: i64,
        revoked: i64,
    },
    Assigned {
        generation: i32,
        partitions: Vec<i32>,
    },
    /// Given up in a rebalance, by a member that still belongs to the group.
    Revoked {
        generation: i32,
        partitions: Vec<i32>,
    },
    /// Gone without a chance to revoke: the member had been removed from the group.
    Lost {
        generation: i32,
        partitions: Vec<i32>,
    },
    /// A newly assigned partition starts at the group's committed offset.
    SettingOffset {
        partition: i32,
        offset: i64,
    },
    /// A newly assigned partition nobody committed: it starts per auto.offset.reset.
    NoCommittedOffset {
        partition: i32,
    },
    /// Records one poll handed out, all processed.
    Batch {
        generation: i32,
        ranges: Vec<Range>,
    },
    Commit {
        generation: i32,
        offsets: BTreeMap<i32, i64>,
    },
    CommitFailed {
        generation: i32,
        offsets: BTreeMap<i32, i64>,
        error: String,
    },
    /// The transactional run: the member aborted the batch's transaction after its offsets or
    /// its commit were refused.
    TransactionAborted {
        generation: i32,
    },
    /// The failed commit sent again as the member it used to be: the coordinator's answer.
    LateCommitAnswered {
        generation: i32,
        member_id: String,
        answer: String,
    },
    /// The client's heartbeat task found the poll interval exceeded.
    PollTimeout {
        message: String,
    },
    /// The client sent LeaveGroup.
    Left {
        member_id: String,
        reason: String,
    },
    /// The lab's incident: the member stops between a batch and its commit.
    StallStarted {
        duration_ms: u64,
    },
    StallEnded,
    /// The lab's incident: the member's process restarts.
    Restarting {
        downtime_ms: u64,
    },
    Restarted,
    /// Every member is in the group and the payments are in the topic.
    ProcessingStarted {
        payments: usize,
    },
    /// Everything applied and committed, the group stable again.
    Settled,
    /// A member stopped on an error the lab did not cause.
    Failed {
        error: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub at_ms: u64,
    pub member: Option<String>,
    pub event: Event,
}

/// One log line as a member wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub at_ms: u64,
    pub level: &'static str,
    pub member: String,
    pub text: String,
}

impl LogLine {
    /// The line as the lab event stream carries it.
    pub fn event(&self) -> crate::lab::report::LogLine {
        use crate::lab::report::Level;
        crate::lab::report::LogLine {
            at: Some(hms(self.at_ms)),
            level: match self.level {
                "WARN" => Level::Warn,
                "ERROR" => Level::Error,
                _ => Level::Info,
            },
            source: Some(self.member.clone()),
            text: self.text.clone(),
        }
    }

    /// In source 003's layout: `02:14:07,551 WARN  [Consumer clientId=billing-3, groupId=billing] ...`.
    pub fn render(&self, group: &str) -> String {
        format!(
            "{} {:5} [Consumer clientId={}, groupId={group}] {}",
            hms(self.at_ms),
            self.level,
            self.member,
            self.text
        )
    }
}

fn partition_list(topic: &str, partitions: &[i32]) -> String {
    let names: Vec<String> = partitions.iter().map(|p| format!("{topic}-{p}")).collect();
    names.join(", ")
}

impl Entry {
    /// The line the member logs for this event, worded as Kafka's Java consumer words it; `None`
    /// for events that are not log lines (batches, commits, the lab's own markers).
    pub fn log_line(&self, topic: &str) -> Option<LogLine> {
        let (level, text) = match &self.event {
            Event::Joined {
                generation,
                member_id,
                protocol,
                ..
            } => (
                "INFO",
                format!(
                    "Successfully joined group with generation Generation{{generationId={generation}, \
                     memberId='{member_id}', protocol='{}'}}",
                    protocol.as_deref().unwrap_or("-")
                ),
            ),
            Event::Assigned { partitions, .. }
            | Event::Revoked { partitions, .. }
            | Event::Lost { partitions, .. } => {
                let what = match self.event {
                    Event::Assigned { .. } => "Adding newly assigned partitions:",
                    Event::Revoked { .. } => "Revoke previously assigned partitions",
                    _ => "Lost previously assigned partitions",
                };
                ("INFO", format!("{what} {}", partition_list(topic, partitions)))
            }
            Event::SettingOffset { partition, offset } => (
                "INFO",
                format!(
                    "Setting offset for partition {topic}-{partition} to the committed offset {offset}"
                ),
            ),
            Event::NoCommittedOffset { partition } => (
                "INFO",
                format!("Found no committed offset for partition {topic}-{partition}"),
            ),
            Event::CommitFailed { error, .. } => ("ERROR", format!("CommitFailedException: {error}")),
            // Kafka's TransactionManager, as a transaction ends in abort.
            Event::TransactionAborted { .. } => ("INFO", "Aborting incomplete transaction".to_string()),
            Event::LateCommitAnswered {
                generation,
                member_id,
                answer,
            } => (
                "ERROR",
                // Not the consumer's line (it sent nothing): the lab's own request.
                format!(
                    "(sent by the lab) OffsetCommit as generation {generation}, member \
                     {member_id}: the coordinator answered {answer}"
                ),
            ),
            Event::PollTimeout { message } => ("WARN", message.clone()),
            Event::Left { member_id, reason } => {
                // The reason's first sentence, as Java's line gives it.
                let reason = reason.split_once(". ").map_or(reason.as_str(), |(first, _)| first);
                (
                    "INFO",
                    format!(
                        "Member {member_id} sending LeaveGroup request to coordinator due to {reason}"
                    ),
                )
            }
            _ => return None,
        };
        Some(LogLine {
            at_ms: self.at_ms,
            level,
            member: self.member.clone()?,
            text,
        })
    }
}

/// What a member shows the scenario that runs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// -1 when not in a generation.
    pub generation: i32,
    pub partitions: BTreeSet<i32>,
    /// Waiting at the lab's gate instead of polling.
    pub parked: bool,
    /// In its incident (stalled, or restarting).
    pub away: bool,
}

#[derive(Debug, Default)]
struct State {
    entries: Vec<Entry>,
    views: BTreeMap<String, View>,
}

/// One scenario's journal, shared by its members, the log capture and the scenario itself.
#[derive(Debug)]
pub struct Journal {
    /// The scenario's name in the timeline.
    pub scenario: &'static str,
    pub group: String,
    pub topic: String,
    clock: Clock,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
}

impl Journal {
    pub fn new(scenario: &'static str, group: &str, topic: &str, clock: Clock) -> Arc<Journal> {
        Arc::new(Journal {
            scenario,
            group: group.to_string(),
            topic: topic.to_string(),
            clock,
            state: Mutex::default(),
            changed: watch::Sender::new(0),
        })
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Records what `member` did now, and logs its line through `tracing` as the member would
    /// (`RUST_LOG=workshop::rebalance=info` shows them as they happen). At INFO whatever the
    /// line's own level: the lab provokes these errors on purpose and narrates them, so at the
    /// binary's default level (warnings) they must not cut through the narration.
    pub fn record(&self, member: Option<&str>, event: Event) {
        let entry = self.push(member, event);
        if let Some(line) = entry.log_line(&self.topic) {
            tracing::info!(target: "workshop::rebalance", "{}", line.render(&self.group));
        }
    }

    /// Records an event the client logged itself (see [`super::capture`]): not logged again.
    pub fn record_captured(&self, member: Option<&str>, event: Event) {
        self.push(member, event);
    }

    fn push(&self, member: Option<&str>, event: Event) -> Entry {
        let entry = Entry {
            at_ms: self.clock.ms(),
            member: member.map(str::to_string),
            event,
        };
        self.state.lock().entries.push(entry.clone());
        self.changed.send_modify(|n| *n += 1);
        entry
    }

    /// Changes what `member` shows.
    pub fn update_view(&self, member: &str, change: impl FnOnce(&mut View)) {
        {
            let mut state = self.state.lock();
            change(
                state
                    .views
                    .entry(member.to_string())
                    .or_insert_with(|| View {
                        generation: -1,
                        ..View::default()
                    }),
            );
        }
        self.changed.send_modify(|n| *n += 1);
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.state.lock().entries.clone()
    }

    pub fn views(&self) -> BTreeMap<String, View> {
        self.state.lock().views.clone()
    }

    /// A receiver that sees every change from now on.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The member in a stall right now, if one is.
    pub fn stalled_member(&self) -> Option<String> {
        let state = self.state.lock();
        let mut stalled = None;
        for e in &state.entries {
            match e.event {
                Event::StallStarted { .. } => stalled = e.member.clone(),
                Event::StallEnded => stalled = None,
                _ => {}
            }
        }
        stalled
    }

    /// The lab's name of the member the coordinator calls `member_id`.
    pub fn member_with_id(&self, member_id: &str) -> Option<String> {
        let state = self.state.lock();
        state.entries.iter().rev().find_map(|e| match &e.event {
            Event::Joined { member_id: id, .. } if id == member_id => e.member.clone(),
            _ => None,
        })
    }

    /// The first error a member stopped on.
    pub fn failure(&self) -> Option<String> {
        let state = self.state.lock();
        state.entries.iter().find_map(|e| match &e.event {
            Event::Failed { error } => Some(format!(
                "{}: {error}",
                e.member.as_deref().unwrap_or("a member")
            )),
            _ => None,
        })
    }

    /// The journal as `--timeline` writes it: one JSON object per event, with its time.
    pub fn timeline(&self) -> Vec<(u64, String)> {
        #[derive(Serialize)]
        struct Line<'a> {
            t_ms: u64,
            scenario: &'a str,
            group: &'a str,
            topic: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            member: Option<&'a str>,
            #[serde(flatten)]
            event: &'a Event,
        }
        let state = self.state.lock();
        state
            .entries
            .iter()
            .map(|e| {
                let line = Line {
                    t_ms: e.at_ms,
                    scenario: self.scenario,
                    group: &self.group,
                    topic: &self.topic,
                    member: e.member.as_deref(),
                    event: &e.event,
                };
                // Strings, numbers and maps with integer keys: always serialisable.
                let json = serde_json::to_string(&line).expect("a timeline line serialises");
                (e.at_ms, json)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_the_seeds() {
        assert_eq!(hms(0), "00:00:00,000");
        assert_eq!(hms(7_551), "00:00:07,551");
        assert_eq!(hms(2 * 3_600_000 + 14 * 60_000 + 7_551), "02:14:07,551");
    }

    #[tokio::test(start_paused = true)]
    async fn entries_render_as_the_java_consumer_logs_and_as_json_lines() {
        let journal = Journal::new("baseline", "billing", "payments", Clock::start());
        tokio::time::sleep(std::time::Duration::from_millis(9_118)).await;
        journal.record(
            Some("billing-1"),
            Event::Revoked {
                generation: 4,
                partitions: vec![4, 11],
            },
        );
        journal.record(
            Some("billing-7"),
            Event::SettingOffset {
                partition: 4,
                offset: 774_119_002,
            },
        );
        journal.record(Some("billing-3"), Event::StallEnded);
        let entries = journal.entries();
        let lines: Vec<String> = entries
            .iter()
            .filter_map(|e| e.log_line("payments"))
            .map(|l| l.render("billing"))
            .collect();
        assert_eq!(
            lines,
            [
                "00:00:09,118 INFO  [Consumer clientId=billing-1, groupId=billing] Revoke previously \
                 assigned partitions payments-4, payments-11",
                "00:00:09,118 INFO  [Consumer clientId=billing-7, groupId=billing] Setting offset for \
                 partition payments-4 to the committed offset 774119002",
            ]
        );
        let json: serde_json::Value = serde_json::from_str(&journal.timeline()[0].1).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"t_ms": 9118, "scenario": "baseline", "group": "billing",
                "topic": "payments", "member": "billing-1", "event": "revoked",
                "generation": 4, "partitions": [4, 11]})
        );
        assert_eq!(journal.timeline().len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn the_journal_knows_who_is_stalled_and_who_has_which_id() {
        let journal = Journal::new("baseline", "billing", "payments", Clock::start());
        let mut changes = journal.watch();
        journal.record(
            Some("billing-3"),
            Event::Joined {
                generation: 4,
                member_id: "billing-3-abc".into(),
                protocol: Some("range".into()),
                partitions: vec![3, 4, 5],
            },
        );
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        assert_eq!(journal.stalled_member(), None);
        journal.record(
            Some("billing-3"),
            Event::StallStarted {
                duration_ms: 40_000,
            },
        );
        assert_eq!(journal.stalled_member().as_deref(), Some("billing-3"));
        journal.record(Some("billing-3"), Event::StallEnded);
        assert_eq!(journal.stalled_member(), None);
        assert_eq!(
            journal.member_with_id("billing-3-abc").as_deref(),
            Some("billing-3")
        );
        journal.update_view("billing-3", |v| v.parked = true);
        assert!(changes.has_changed().unwrap());
        assert_eq!(journal.views()["billing-3"].generation, -1);
        assert_eq!(journal.failure(), None);
        journal.record(Some("billing-5"), Event::Failed { error: "x".into() });
        assert_eq!(journal.failure().as_deref(), Some("billing-5: x"));
    }
}
