//! What a lab's brokers hold, for views that read the broker themselves.
//!
//! The room view (`--web`) draws each partition's log end, committed offset and lag several
//! times a second, read through Kafka APIs rather than told by the lab. For that it must know
//! where the lab's broker is and which topics and groups are the lab's: the [`Cluster`] a lab
//! opens fills a [`Watch`] as it starts, creates topics and names groups, so every lab is
//! watched without a line of its own (names as created, suffixed under `--bootstrap`).
//!
//! Which watch: the one of the lab's thread. [`crate::run_with`] runs the lab inside
//! [`Watch::scope`] with its narrator's watch ([`crate::lab::report::Narrator::watch`]); a cluster
//! opened on that thread reports to it from wherever it is used later. A cluster opened outside
//! any scope reports to nobody.
//!
//! [`Cluster`]: crate::lab::target::Cluster

use std::cell::RefCell;
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
}

/// The brokers of one lab run, shared by every clone.
#[derive(Debug, Clone, Default)]
pub struct Watch(Arc<Mutex<Vec<Watched>>>);

thread_local! {
    static CURRENT: RefCell<Option<Watch>> = const { RefCell::new(None) };
}

impl Watch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every broker opened so far, oldest first.
    pub fn clusters(&self) -> Vec<Watched> {
        self.lock().clone()
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
        let mut clusters = self.lock();
        clusters.push(Watched {
            bootstrap: bootstrap.to_string(),
            topics: Vec::new(),
            groups: Vec::new(),
            open: true,
        });
        WatchedCluster {
            watch: self.clone(),
            index: clusters.len() - 1,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Watched>> {
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
        self.update(|c| {
            if !c.topics.iter().any(|t| t == name) {
                c.topics.push(name.to_string());
            }
        });
    }

    pub(crate) fn group(&self, name: &str) {
        self.update(|c| {
            if !c.groups.iter().any(|g| g == name) {
                c.groups.push(name.to_string());
            }
        });
    }

    pub(crate) fn closed(&self) {
        self.update(|c| c.open = false);
    }

    fn update(&self, change: impl FnOnce(&mut Watched)) {
        if let Some(cluster) = self.watch.lock().get_mut(self.index) {
            change(cluster);
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
