//! A real consumer group driven by a lab: one task per member, each polling on its own as any
//! Kafka consumer does (joining, rebalancing, fetching what it owns), and showing the lab what
//! it owns and what it fetched. The lab decides only when records are used and what is
//! committed: it reads the members' [`View`]s, waits for one to change ([`Members::wait`]), and
//! sends a member a commit or a new subscription, which the member runs between two polls, with
//! its own generation (so a member that lost a partition cannot commit it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use client::{GroupConsumer, Record, TopicPartition};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

/// What a member shows the lab.
#[derive(Debug)]
pub struct View<T> {
    pub client_id: String,
    pub member_id: String,
    /// The generation of its last poll; -1 until it has joined.
    pub generation: i32,
    pub owned: BTreeSet<TopicPartition>,
    /// Where its next fetch starts, per owned partition whose position is known: a partition
    /// started by `auto.offset.reset` shows here what the member skipped.
    pub positions: BTreeMap<TopicPartition, i64>,
    /// Fetched records of the partitions it owns, by partition and offset, decoded; the lab
    /// takes them out. A partition the member lost drops its records: its new owner fetches
    /// them again from the committed offset.
    pub fetched: BTreeMap<TopicPartition, BTreeMap<i64, T>>,
    /// Why the member stopped, if it did.
    pub failed: Option<String>,
}

enum Command {
    Commit(
        BTreeMap<TopicPartition, i64>,
        Option<oneshot::Sender<Result<(), String>>>,
    ),
    Subscribe(String, oneshot::Sender<Result<(), String>>),
    /// Stops polling (so neither rejoining nor fetching) until the receiver fires or is dropped.
    Hold(oneshot::Sender<()>, oneshot::Receiver<()>),
    Leave,
}

/// The members of one group, as the lab drives them.
pub struct Members<T> {
    views: Arc<Mutex<Vec<View<T>>>>,
    changed: Arc<Notify>,
    commands: Vec<mpsc::UnboundedSender<Command>>,
    tasks: Vec<JoinHandle<()>>,
}

impl<T: Send + 'static> Members<T> {
    pub fn new() -> Self {
        Members {
            views: Arc::default(),
            changed: Arc::new(Notify::new()),
            commands: Vec::new(),
            tasks: Vec::new(),
        }
    }

    /// Starts `consumer` (already subscribed) as the next member, on the current runtime;
    /// `decode` turns each record it fetches into what the lab takes.
    pub fn add(
        &mut self,
        client_id: String,
        consumer: GroupConsumer,
        decode: fn(&TopicPartition, &Record) -> T,
    ) {
        let index = {
            let mut views = lock(&self.views);
            views.push(View {
                client_id,
                member_id: String::new(),
                generation: -1,
                owned: BTreeSet::new(),
                positions: BTreeMap::new(),
                fetched: BTreeMap::new(),
                failed: None,
            });
            views.len() - 1
        };
        let (tx, rx) = mpsc::unbounded_channel();
        self.commands.push(tx);
        let (views, changed) = (Arc::clone(&self.views), Arc::clone(&self.changed));
        self.tasks.push(tokio::spawn(member_loop(
            index, consumer, decode, rx, views, changed,
        )));
    }

    /// How many members were started.
    pub fn count(&self) -> usize {
        self.commands.len()
    }

    /// The members' views, to read or take fetched records from.
    pub fn views(&self) -> MutexGuard<'_, Vec<View<T>>> {
        lock(&self.views)
    }

    /// Why a member stopped, if one did.
    pub fn failed(&self) -> Option<String> {
        self.views().iter().find_map(|v| v.failed.clone())
    }

    /// Waits until `ready` returns something, re-checking whenever a member reports. Fails with
    /// why, when a member stopped. Unbounded: the caller's phase deadline bounds it.
    pub async fn wait<R>(
        &self,
        mut ready: impl FnMut(&mut Vec<View<T>>) -> Option<R>,
    ) -> Result<R, String> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a report in between still wakes us.
            changed.as_mut().enable();
            {
                let mut views = self.views();
                if let Some(failed) = views.iter().find_map(|v| v.failed.clone()) {
                    return Err(failed);
                }
                if let Some(found) = ready(&mut views) {
                    return Ok(found);
                }
            }
            changed.await;
        }
    }

    /// Member `i` commits `offsets` before its next poll (so before it can take part in a
    /// rebalance). The answer comes on the receiver; a member that stopped has none.
    pub fn commit(
        &self,
        i: usize,
        offsets: BTreeMap<TopicPartition, i64>,
    ) -> Option<oneshot::Receiver<Result<(), String>>> {
        let (tx, rx) = oneshot::channel();
        self.commands[i]
            .send(Command::Commit(offsets, Some(tx)))
            .ok()
            .map(|()| rx)
    }

    /// Member `i` commits `offsets` before its next poll; a failure is only logged.
    pub fn commit_unanswered(&self, i: usize, offsets: BTreeMap<TopicPartition, i64>) {
        let _ = self.commands[i].send(Command::Commit(offsets, None));
    }

    /// Member `i` moves to `topic` (a rebalance); `None` when it has stopped.
    pub fn subscribe(
        &self,
        i: usize,
        topic: &str,
    ) -> Option<oneshot::Receiver<Result<(), String>>> {
        let (tx, rx) = oneshot::channel();
        self.commands[i]
            .send(Command::Subscribe(topic.to_string(), tx))
            .ok()
            .map(|()| rx)
    }

    /// Member `i` stops polling once it has run the commands sent before, until the returned
    /// sender fires or is dropped: it neither notices a change of the topic nor fetches
    /// meanwhile. `None` when it has stopped.
    pub async fn hold(&self, i: usize) -> Option<oneshot::Sender<()>> {
        let (held, is_held) = oneshot::channel();
        let (release, released) = oneshot::channel();
        self.commands[i].send(Command::Hold(held, released)).ok()?;
        is_held.await.ok().map(|()| release)
    }

    /// Every member leaves the group (LeaveGroup), and its task ends.
    pub async fn leave(self) {
        for tx in &self.commands {
            let _ = tx.send(Command::Leave);
        }
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

impl<T: Send + 'static> Default for Members<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// A member: poll, report what it owns and fetched, run the lab's commands between polls.
async fn member_loop<T>(
    index: usize,
    mut consumer: GroupConsumer,
    decode: fn(&TopicPartition, &Record) -> T,
    mut commands: mpsc::UnboundedReceiver<Command>,
    views: Arc<Mutex<Vec<View<T>>>>,
    changed: Arc<Notify>,
) {
    loop {
        while let Ok(command) = commands.try_recv() {
            match command {
                Command::Commit(offsets, reply) => {
                    let result = consumer.commit_offsets_sync(offsets).await;
                    match reply {
                        Some(reply) => {
                            let _ = reply.send(result.map_err(|e| e.to_string()));
                        }
                        None => {
                            if let Err(e) = result {
                                tracing::warn!(%e, "a member could not commit");
                            }
                        }
                    }
                }
                Command::Subscribe(topic, reply) => {
                    let result = consumer.subscribe([topic]);
                    let _ = reply.send(result.map_err(|e| e.to_string()));
                }
                Command::Hold(held, released) => {
                    let _ = held.send(());
                    let _ = released.await;
                }
                Command::Leave => {
                    if let Err(e) = consumer.close().await {
                        tracing::warn!(%e, "a member leaving its group");
                    }
                    return;
                }
            }
        }
        let polled = consumer.poll().await;
        {
            let mut views = lock(&views);
            let view = &mut views[index];
            match polled {
                Ok(polled) => {
                    let generation = consumer.generation();
                    view.generation = generation.id;
                    view.member_id = generation.member_id;
                    view.owned = consumer.assignment().into_iter().collect();
                    view.positions = consumer.positions();
                    let owned = &view.owned;
                    view.fetched.retain(|tp, _| owned.contains(tp));
                    for part in polled {
                        let tp = part.topic_partition();
                        let into = view.fetched.entry(tp.clone()).or_default();
                        for record in &part.records {
                            into.insert(record.offset, decode(&tp, record));
                        }
                    }
                }
                Err(e) => view.failed = Some(e.to_string()),
            }
        }
        changed.notify_waiters();
        if lock(&views)[index].failed.is_some() {
            return;
        }
    }
}

/// The views stay usable even if a task panicked while holding them: they are plain data.
fn lock<T>(views: &Mutex<Vec<View<T>>>) -> MutexGuard<'_, Vec<View<T>>> {
    views
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
