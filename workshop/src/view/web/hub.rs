//! What every page gets when it connects, and the stream of what changes after.
//!
//! Two kinds of state: a journal, replayed in full to a page that connects late (the lab's
//! events, in order), and latest values, of which a page only needs the last one (the broker's
//! offsets, the playground's table). Each entry is serialised once, when it is recorded; pages
//! get the same bytes.
//!
//! Whoever records never waits for a page: entries go out through a broadcast channel, and a
//! page that falls more than [`BACKLOG`] entries behind loses its stream. Its browser reconnects
//! (Server-Sent Events do so by themselves) and starts again from a fresh state, so a slow or
//! closed tab costs the lab nothing.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::response::sse;
use futures_util::stream::{self, Stream, StreamExt};
use serde::Serialize;
use tokio::sync::broadcast;

/// Entries a page may fall behind before its stream is dropped (it then reconnects).
pub const BACKLOG: usize = 1024;

/// How soon a browser reconnects after a dropped stream.
const RETRY: Duration = Duration::from_millis(500);

/// One entry on its way to the pages.
#[derive(Debug, Clone)]
struct Push {
    /// The SSE event name: `lab` for journal entries, the kind for latest values.
    kind: &'static str,
    /// A journal entry's index; `None` for a latest value.
    seq: Option<usize>,
    data: Arc<str>,
}

#[derive(Debug, Default)]
struct State {
    journal: Vec<Arc<str>>,
    latest: BTreeMap<&'static str, Arc<str>>,
}

/// The state of one view, and its stream.
#[derive(Debug)]
pub struct Hub {
    tx: broadcast::Sender<Push>,
    state: Mutex<State>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            tx: broadcast::channel(BACKLOG).0,
            state: Mutex::default(),
        }
    }
}

impl Hub {
    pub fn new() -> Arc<Hub> {
        Arc::new(Hub::default())
    }

    /// Appends `value` to the journal; returns its index.
    pub fn record(&self, value: &impl Serialize) -> usize {
        let data = encode(value);
        let mut state = self.state();
        let seq = state.journal.len();
        state.journal.push(data.clone());
        // No receiver (no page open) is fine: the journal has it.
        let _ = self.tx.send(Push {
            kind: "lab",
            seq: Some(seq),
            data,
        });
        seq
    }

    /// Replaces the latest value of `kind`.
    pub fn set(&self, kind: &'static str, value: &impl Serialize) {
        let data = encode(value);
        let mut state = self.state();
        state.latest.insert(kind, data.clone());
        let _ = self.tx.send(Push {
            kind,
            seq: None,
            data,
        });
    }

    /// Entries in the journal.
    pub fn journal_len(&self) -> usize {
        self.state().journal.len()
    }

    /// Everything a page starts from: `{"journal": [...], "latest": {"kind": value, ...}}`.
    pub fn snapshot(&self) -> String {
        snapshot(&self.state())
    }

    /// The page's stream: a `state` event with the snapshot, then each entry recorded after it,
    /// in order; it ends when the page falls [`BACKLOG`] entries behind.
    pub fn stream(&self) -> impl Stream<Item = Result<sse::Event, Infallible>> + Send + 'static {
        // Subscribed before the snapshot is taken, so nothing falls between the two; entries
        // already in the snapshot are skipped by their index.
        let rx = self.tx.subscribe();
        let (first, next_seq) = {
            let state = self.state();
            (snapshot(&state), state.journal.len())
        };
        let first = sse::Event::default()
            .event("state")
            .retry(RETRY)
            .data(first);
        let rest = stream::unfold(rx, move |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(push) if push.seq.is_some_and(|seq| seq < next_seq) => continue,
                    Ok(push) => {
                        let event = sse::Event::default().event(push.kind).data(&*push.data);
                        return Some((Ok(event), rx));
                    }
                    // Too slow: end the stream; the browser reconnects to a fresh state.
                    Err(broadcast::error::RecvError::Lagged(_)) => return None,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        });
        stream::once(async move { Ok(first) }).chain(rest)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Only serialised entries: a panic elsewhere leaves them whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn encode(value: &impl Serialize) -> Arc<str> {
    // Plain data (no maps with non-string keys): serialising cannot fail.
    serde_json::to_string(value)
        .expect("view state serialises")
        .into()
}

fn snapshot(state: &State) -> String {
    let size = state.journal.iter().map(|e| e.len() + 1).sum::<usize>()
        + state.latest.values().map(|v| v.len() + 16).sum::<usize>()
        + 32;
    let mut out = String::with_capacity(size);
    out.push_str("{\"journal\":[");
    for (i, entry) in state.journal.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(entry);
    }
    out.push_str("],\"latest\":{");
    for (i, (kind, value)) in state.latest.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&encode(kind));
        out.push(':');
        out.push_str(value);
    }
    out.push_str("}}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn the_snapshot_has_the_whole_journal_and_the_last_values() {
        let hub = Hub::new();
        assert_eq!(
            serde_json::from_str::<Value>(&hub.snapshot()).unwrap(),
            json!({"journal": [], "latest": {}})
        );
        assert_eq!(hub.record(&json!({"event": "intro"})), 0);
        assert_eq!(hub.record(&json!({"event": "phase", "number": 1})), 1);
        hub.set("broker", &json!({"polls": 1}));
        hub.set("broker", &json!({"polls": 2}));
        assert_eq!(
            serde_json::from_str::<Value>(&hub.snapshot()).unwrap(),
            json!({
                "journal": [{"event": "intro"}, {"event": "phase", "number": 1}],
                "latest": {"broker": {"polls": 2}}
            })
        );
        assert_eq!(hub.journal_len(), 2);
    }

    #[tokio::test]
    async fn a_slow_page_loses_its_stream_and_the_recorder_never_waits() {
        let hub = Hub::new();
        let mut stream = Box::pin(hub.stream());
        // Far more than the backlog, with nobody reading: recording never blocks.
        for i in 0..BACKLOG * 3 {
            hub.record(&i);
        }
        assert!(stream.next().await.is_some(), "the state comes first");
        // The page fell behind: its stream ends at once (the browser reconnects to a fresh
        // state) rather than delivering a journal with a hole in it.
        assert!(stream.next().await.is_none());
        // A page connecting now gets everything in its state.
        assert_eq!(hub.journal_len(), BACKLOG * 3);
    }
}
