//! What a lab's brokers hold, for views that read the broker themselves.
//!
//! The room view (`--web`) draws each partition's log end, committed offset and lag several
//! times a second, read through Kafka APIs rather than told by the lab. For that it must know
//! where the lab's broker is and which topics and groups are the lab's: the [`Cluster`] a lab
//! opens fills a [`Watch`] as it starts, creates topics and names groups, so every lab is
//! watched without a line of its own (names as created, suffixed under `--bootstrap`).
//!
//! Each topic and group is also stamped with the phase the narrator was telling when the lab
//! first named it ([`Watch::enter`]), so a view can show, at each phase, what that phase made
//! rather than everything the run made so far.
//!
//! Which watch: the one of the lab's thread. [`crate::run_with`] runs the lab inside
//! [`Watch::scope`] with its narrator's watch ([`crate::lab::report::Narrator::watch`]); a cluster
//! opened on that thread reports to it from wherever it is used later. A cluster opened outside
//! any scope reports to nobody.
//!
//! [`Cluster`]: crate::lab::target::Cluster

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One broker a lab opened, and what the lab made on it, in the order it made them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// Where the broker listens (the embedded broker's bound address, or `--bootstrap`).
    pub bootstrap: String,
    pub topics: Vec<String>,
    pub groups: Vec<String>,
    /// False once the lab closed it (an embedded broker is gone then).
    pub open: bool,
    /// The phase (from 1; 0 before the first) being told when each topic and group was first
    /// named, by name.
    pub introduced: BTreeMap<String, usize>,
}

#[derive(Debug, Default)]
struct Clusters {
    clusters: Vec<Watched>,
    /// The phase the narrator is telling (0 before the first).
    phase: usize,
}

/// The brokers of one lab run, shared by every clone.
#[derive(Debug, Clone, Default)]
pub struct Watch(Arc<Mutex<Clusters>>);

thread_local! {
    static CURRENT: RefCell<Option<Watch>> = const { RefCell::new(None) };
}

impl Watch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every broker opened so far, oldest first.
    pub fn clusters(&self) -> Vec<Watched> {
        self.lock().clusters.clone()
    }

    /// The narrator opened phase `number`: what is named from now on belongs to it.
    pub fn enter(&self, number: usize) {
        self.lock().phase = number;
    }

    /// Runs `work` with this watch as the thread's: clusters opened on this thread meanwhile
    /// report to it. The previous scope (if any) is restored after, even on a panic.
    pub fn scope<T>(&self, work: impl FnOnce() -> T) -> T {
        struct Restore(Option<Watch>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                CURRENT.with(|current| *current.borrow_mut() = previous);
            }
        }
        let previous = CURRENT.with(|current| current.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        work()
    }

    /// The watch of this thread's scope, if any.
    pub(crate) fn current() -> Option<Watch> {
        CURRENT.with(|current| current.borrow().clone())
    }

    /// A broker at `bootstrap` was opened; what it makes is reported through the handle.
    pub(crate) fn opened(&self, bootstrap: &str) -> WatchedCluster {
        let mut all = self.lock();
        all.clusters.push(Watched {
            bootstrap: bootstrap.to_string(),
            topics: Vec::new(),
            groups: Vec::new(),
            open: true,
            introduced: BTreeMap::new(),
        });
        WatchedCluster {
            watch: self.clone(),
            index: all.clusters.len() - 1,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Clusters> {
        // Only names: a panic elsewhere leaves them whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One opened broker's entry in a [`Watch`].
#[derive(Debug, Clone)]
pub(crate) struct WatchedCluster {
    watch: Watch,
    index: usize,
}

impl WatchedCluster {
    pub(crate) fn topic(&self, name: &str) {
        self.update(|c, phase| {
            if !c.topics.iter().any(|t| t == name) {
                c.topics.push(name.to_string());
                c.introduced.entry(name.to_string()).or_insert(phase);
            }
        });
    }

    pub(crate) fn group(&self, name: &str) {
        self.update(|c, phase| {
            if !c.groups.iter().any(|g| g == name) {
                c.groups.push(name.to_string());
                c.introduced.entry(name.to_string()).or_insert(phase);
            }
        });
    }

    pub(crate) fn closed(&self) {
        self.update(|c, _| c.open = false);
    }

    /// Changes this cluster's entry, given the phase being told.
    fn update(&self, change: impl FnOnce(&mut Watched, usize)) {
        let mut all = self.watch.lock();
        let phase = all.phase;
        if let Some(cluster) = all.clusters.get_mut(self.index) {
            change(cluster, phase);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_is_the_threads_and_ends_with_the_work() {
        let watch = Watch::new();
        assert!(Watch::current().is_none());
        let inner = watch.scope(|| {
            let cluster = Watch::current().expect("in scope").opened("127.0.0.1:1");
            cluster.topic("orders");
            watch.enter(2);
            cluster.topic("orders");
            cluster.group("order-service");
            // Another thread is not in the scope.
            assert!(std::thread::spawn(|| Watch::current().is_none())
                .join()
                .unwrap());
            cluster
        });
        assert!(Watch::current().is_none());
        // The handle keeps reporting after the scope, from any thread.
        std::thread::spawn(move || inner.closed()).join().unwrap();
        assert_eq!(
            watch.clusters(),
            [Watched {
                bootstrap: "127.0.0.1:1".into(),
                topics: vec!["orders".into()],
                groups: vec!["order-service".into()],
                open: false,
                // Named before the first phase, and in phase 2.
                introduced: BTreeMap::from([("orders".into(), 0), ("order-service".into(), 2)]),
            }]
        );
    }

    #[test]
    fn scopes_nest() {
        let (outer, inner) = (Watch::new(), Watch::new());
        outer.scope(|| {
            inner.scope(|| Watch::current().unwrap().opened("inner"));
            Watch::current().unwrap().opened("outer");
        });
        assert_eq!(inner.clusters()[0].bootstrap, "inner");
        assert_eq!(outer.clusters().len(), 1);
        assert_eq!(outer.clusters()[0].bootstrap, "outer");
    }
}
