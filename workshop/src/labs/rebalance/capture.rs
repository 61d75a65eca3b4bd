//! The client's own log lines, taken into the journal: the poll-timeout warning its heartbeat
//! task writes, the LeaveGroup it sends, and its "rebalance complete" report with the
//! generation. These happen inside our client's group member, not in lab code, so the lab reads
//! them where the client writes them: through `tracing`.
//!
//! [`Capture`] is a `tracing` subscriber that sits in front of whatever subscriber was in place
//! (the binary's `RUST_LOG` output, or none in tests): it takes the `client::group` events at
//! INFO and above, and passes everything else on unchanged, spans included. The lab's runtime is
//! single-threaded, so installing it as the thread's default covers every task, the broker's
//! included.
//!
//! Which member wrote an event: events written inside a member's `poll` run in that member's
//! task, which carries a [`MemberTag`] (a tokio task-local). The heartbeat task is spawned by
//! the client, without it; its events carry the group, and the poll-timeout warning is the
//! stalled member's (the only one not polling), while a LeaveGroup names its member id.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Level, Metadata, Subscriber};

use super::journal::{self, Journal};

tokio::task_local! {
    /// The member whose task is running.
    pub static MEMBER: Arc<MemberTag>;
}

/// A member, as its task-local tag: its name, its scenario's journal, and the generation the
/// client last reported for it.
#[derive(Debug)]
pub struct MemberTag {
    pub name: &'static str,
    pub journal: Arc<Journal>,
    generation: AtomicI32,
}

impl MemberTag {
    pub fn new(name: &'static str, journal: Arc<Journal>) -> Arc<MemberTag> {
        Arc::new(MemberTag {
            name,
            journal,
            generation: AtomicI32::new(-1),
        })
    }

    /// The generation of the member's last completed rebalance (-1 before the first): what it
    /// owns its partitions in.
    pub fn generation(&self) -> i32 {
        self.generation.load(Ordering::Relaxed)
    }

    pub fn set_generation(&self, generation: i32) {
        self.generation.store(generation, Ordering::Relaxed);
    }
}

/// The journals of the scenarios: those running now, found by group, and every one started.
#[derive(Debug, Clone, Default)]
pub struct Journals {
    /// The runs under way, whose groups' log lines are taken.
    live: Arc<Mutex<Vec<Arc<Journal>>>>,
    /// Every run that started, finished or not, for the timeline.
    every: Arc<Mutex<Vec<Arc<Journal>>>>,
}

impl Journals {
    pub fn register(&self, journal: &Arc<Journal>) {
        self.live.lock().push(journal.clone());
        self.every.lock().push(journal.clone());
    }

    pub fn unregister(&self, journal: &Arc<Journal>) {
        self.live.lock().retain(|j| !Arc::ptr_eq(j, journal));
    }

    /// Every journal registered so far, in order.
    pub fn every(&self) -> Vec<Arc<Journal>> {
        self.every.lock().clone()
    }

    fn of_group(&self, group: &str) -> Option<Arc<Journal>> {
        self.live.lock().iter().find(|j| j.group == group).cloned()
    }
}

/// The subscriber; see the module documentation.
pub struct Capture {
    next: Dispatch,
    journals: Journals,
}

impl Capture {
    /// In front of the current default subscriber.
    pub fn new(journals: Journals) -> Capture {
        keep_interest_per_event();
        Capture {
            next: tracing::dispatcher::get_default(Dispatch::clone),
            journals,
        }
    }

    fn take(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let tag = MEMBER.try_with(Arc::clone).ok();
        let journal = match (&tag, &fields.group) {
            (Some(tag), _) => Some(tag.journal.clone()),
            (None, Some(group)) => self.journals.of_group(group),
            (None, None) => None,
        };
        let Some(journal) = journal else { return };
        let tagged = tag.as_ref().map(|t| t.name.to_string());
        let message = fields.message.unwrap_or_default();
        if message.starts_with("consumer poll timeout has expired") {
            let member = tagged.or_else(|| journal.stalled_member());
            journal.record_captured(member.as_deref(), journal::Event::PollTimeout { message });
        } else if message == "rebalance complete" {
            if let (Some(tag), Some(generation)) = (&tag, fields.generation) {
                tag.set_generation(i32::try_from(generation).unwrap_or(-1));
                journal.record_captured(
                    Some(tag.name),
                    journal::Event::Generation {
                        generation,
                        assigned: fields.assigned.unwrap_or(0),
                        added: fields.added.unwrap_or(0),
                        revoked: fields.revoked.unwrap_or(0),
                    },
                );
            }
        } else if message == "left the group" {
            let member_id = fields.member_id.unwrap_or_default();
            let member = tagged.or_else(|| journal.member_with_id(&member_id));
            journal.record_captured(
                member.as_deref(),
                journal::Event::Left {
                    member_id,
                    reason: fields.reason.unwrap_or_default(),
                },
            );
        }
    }
}

/// Makes the group member's lines reach the capture whichever thread writes one first.
///
/// tracing caches each callsite's interest for the process. While a single dispatcher is
/// registered, it computes that interest from the default of the thread that reaches the
/// callsite first (tokio-rs/tracing#3611): another lab's member leaving on a thread without a
/// capture (labs run side by side in tests) would make the line a no-op everywhere. With a
/// second dispatcher alive for good, the interest of every callsite the capture wants becomes
/// "sometimes" and each event asks its own thread's default.
fn keep_interest_per_event() {
    static SECOND: std::sync::OnceLock<Dispatch> = std::sync::OnceLock::new();
    SECOND.get_or_init(|| Dispatch::new(tracing::subscriber::NoSubscriber::default()));
}

/// The events this subscriber takes: the group member's, at INFO and above.
fn wanted(meta: &Metadata<'_>) -> bool {
    meta.is_event() && meta.target().starts_with("client::group") && *meta.level() <= Level::INFO
}

impl Subscriber for Capture {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if wanted(meta) {
            Interest::always()
        } else {
            self.next.register_callsite(meta)
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        wanted(meta) || self.next.enabled(meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        // INFO for the events taken here; the next subscriber may want more.
        None
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.next.new_span(span)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        self.next.record(span, values)
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        self.next.record_follows_from(span, follows)
    }

    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        if wanted(meta) {
            self.take(event);
        }
        // The warnings and errors of the group member are what the lab provokes (poll timeout,
        // failed commits) and narrates: printed as well, they would cut through the narration.
        let provoked = wanted(meta) && *meta.level() <= Level::WARN;
        if !provoked && self.next.enabled(meta) {
            self.next.event(event);
        }
    }

    fn enter(&self, span: &Id) {
        self.next.enter(span)
    }

    fn exit(&self, span: &Id) {
        self.next.exit(span)
    }

    fn clone_span(&self, id: &Id) -> Id {
        self.next.clone_span(id)
    }

    fn try_close(&self, id: Id) -> bool {
        self.next.try_close(id)
    }

    // `current_span` keeps its default (unknown): neither the client nor the broker opens spans,
    // and `tracing` does not re-export the type needed to pass the question on.
}

/// The fields of the client's events the lab reads.
#[derive(Debug, Default)]
struct Fields {
    message: Option<String>,
    group: Option<String>,
    member_id: Option<String>,
    reason: Option<String>,
    generation: Option<i64>,
    assigned: Option<i64>,
    added: Option<i64>,
    revoked: Option<i64>,
}

impl Visit for Fields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        match field.name() {
            "generation" => self.generation = Some(value),
            "assigned" => self.assigned = Some(value),
            "added" => self.added = Some(value),
            "revoked" => self.revoked = Some(value),
            _ => {}
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.record_i64(field, i64::try_from(value).unwrap_or(i64::MAX));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%x` fields and the message arrive here; their Debug output is their text.
        self.text(field, format!("{value:?}"));
    }
}

impl Fields {
    fn text(&mut self, field: &Field, value: String) {
        match field.name() {
            "message" => self.message = Some(value),
            "group" => self.group = Some(value),
            "member_id" => self.member_id = Some(value),
            "reason" => self.reason = Some(value),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labs::rebalance::journal::{Clock, Event as JEvent};
    use std::sync::atomic::AtomicUsize;

    /// Counts what reaches it, as the binary's log output would print it.
    struct Counting(Arc<AtomicUsize>);

    impl Subscriber for Counting {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// The client's line, from one callsite wherever it runs.
    fn left_the_group(member_id: &str) {
        tracing::info!(target: "client::group::member", group = %"billing", member_id,
            reason = "the consumer is being closed", "left the group");
    }

    /// tracing caches a callsite's interest once, for the process. With a single dispatcher
    /// registered, it asks the default of whichever thread reaches the callsite first: another
    /// lab's member leaving on a thread without a capture (a test running beside this one) made
    /// the line a no-op for the capture too, and the LeaveGroup vanished from the log.
    #[test]
    fn a_line_first_written_on_a_thread_without_a_capture_still_reaches_it() {
        let journal = Journal::new("baseline", "billing", "payments", Clock::start());
        journal.record(
            Some("billing-3"),
            JEvent::Joined {
                generation: 1,
                member_id: "billing-3-x".into(),
                protocol: None,
                partitions: vec![],
            },
        );
        let journals = Journals::default();
        journals.register(&journal);
        let dispatch = Dispatch::new(Capture::new(journals));
        tracing::dispatcher::with_default(&dispatch, || {
            std::thread::spawn(|| left_the_group("elsewhere"))
                .join()
                .expect("the other thread");
            left_the_group("billing-3-x");
        });
        let left = journal
            .entries()
            .into_iter()
            .filter(|e| matches!(e.event, JEvent::Left { .. }))
            .count();
        assert_eq!(left, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_clients_lines_reach_the_journal_of_their_group_and_member() {
        let journal = Journal::new("baseline", "billing", "payments", Clock::start());
        let other = Journal::new(
            "static",
            "billing-static",
            "payments-static",
            Clock::start(),
        );
        let journals = Journals::default();
        journals.register(&journal);
        journals.register(&other);
        let printed = Arc::new(AtomicUsize::new(0));
        let next = Dispatch::new(Counting(printed.clone()));
        let capture = tracing::dispatcher::with_default(&next, || Capture::new(journals.clone()));
        let dispatch = Dispatch::new(capture);
        let _guard = tracing::dispatcher::set_default(&dispatch);

        journal.record(Some("billing-3"), JEvent::StallStarted { duration_ms: 1 });
        tracing::warn!(target: "client::group::heartbeat", group = %"billing",
            "consumer poll timeout has expired. This means ...");
        let tag = MemberTag::new("billing-1", journal.clone());
        MEMBER
            .scope(tag.clone(), async {
                tracing::info!(target: "client::group::consumer", generation = 5, assigned = 4usize,
                    added = 1usize, revoked = 0usize, "rebalance complete");
            })
            .await;
        assert_eq!(tag.generation(), 5);
        // Not the group member's: passed on. A provoked warning is not; an INFO line is.
        tracing::warn!(target: "broker::group", "something else");
        tracing::info!(target: "client::group::member", group = %"billing-static",
            member_id = "billing-5-x", reason = "the consumer is being closed", "left the group");
        assert_eq!(printed.load(Ordering::Relaxed), 3);

        let events: Vec<(Option<String>, JEvent)> = journal
            .entries()
            .into_iter()
            .map(|e| (e.member, e.event))
            .collect();
        assert_eq!(
            events[1..],
            [
                (
                    Some("billing-3".to_string()),
                    JEvent::PollTimeout {
                        message: "consumer poll timeout has expired. This means ...".into()
                    }
                ),
                (
                    Some("billing-1".to_string()),
                    JEvent::Generation {
                        generation: 5,
                        assigned: 4,
                        added: 1,
                        revoked: 0
                    }
                ),
            ]
        );
        let left = other.entries();
        assert!(
            matches!(&left[..], [e] if matches!(&e.event, JEvent::Left { member_id, .. } if member_id == "billing-5-x")),
            "{left:?}"
        );
    }
}
