//! Order events: what the producer writes to the topic and what the consumers hand the store.
//!
//! An order goes through seven versions, one event each, in this order; the aggregate store
//! accepts version `v` only on top of version `v - 1` (optimistic concurrency, as an event-sourced
//! aggregate does). The record key is `order-<id>`, so Kafka's partitioner keeps one order in one
//! partition, which is the only place Kafka keeps order.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The event of each version, version 1 first. Names fit 16 columns, so the store's log lines
/// line up as in source 003 (`order.cancelled  order_id=...`, `order.created    order_id=...`).
pub const KINDS: [&str; 7] = [
    "order.created",
    "order.item_added",
    "order.confirmed",
    "order.paid",
    "order.packed",
    "order.refunded",
    "order.cancelled",
];

/// The last version of an order: `order.cancelled`.
pub const LAST_VERSION: u32 = KINDS.len() as u32;

/// The header that carries the routing version a record was produced under (sources 001 and 004:
/// a version on every routed write lets the reader tell a stale router from missing data).
pub const ROUTING_HEADER: &str = "routing-version";

/// One event of one order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OrderEvent {
    pub order_id: u32,
    /// 1 to [`LAST_VERSION`].
    pub version: u32,
}

impl OrderEvent {
    /// `None` unless `version` is 1 to [`LAST_VERSION`].
    pub fn new(order_id: u32, version: u32) -> Option<Self> {
        (1..=LAST_VERSION)
            .contains(&version)
            .then_some(OrderEvent { order_id, version })
    }

    /// `order.created`, ..., `order.cancelled`.
    pub fn kind(&self) -> &'static str {
        // `new` and `decode` keep the version in range; a zero would be a bug, shown as such.
        KINDS
            .get(self.version.wrapping_sub(1) as usize)
            .copied()
            .unwrap_or("order.unknown")
    }

    /// The record key, which the partitioner hashes.
    pub fn key(&self) -> String {
        order_key(self.order_id)
    }

    /// The record value: a small JSON document, as a real order service would write.
    pub fn encode(&self) -> Vec<u8> {
        let wire = Wire {
            kind: self.kind().to_string(),
            order_id: self.order_id,
            version: self.version,
        };
        // Plain data with string keys: serialising cannot fail.
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// Reads a record back. Anything that is not one of our events (another producer's record on
    /// a shared cluster, a truncated value) is an error, never a panic.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self, String> {
        let value = value.ok_or("a record without a value")?;
        let wire: Wire =
            serde_json::from_slice(value).map_err(|e| format!("not an order event: {e}"))?;
        let event = OrderEvent::new(wire.order_id, wire.version)
            .ok_or_else(|| format!("version {} is not 1 to {LAST_VERSION}", wire.version))?;
        if wire.kind != event.kind() {
            return Err(format!(
                "{} does not match version {}",
                wire.kind, wire.version
            ));
        }
        let expected = event.key();
        if key != Some(expected.as_bytes()) {
            return Err(format!("the record key is not {expected}"));
        }
        Ok(event)
    }
}

impl fmt::Display for OrderEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} order_id={} version={}",
            self.kind(),
            self.order_id,
            self.version
        )
    }
}

/// The record key of an order.
pub fn order_key(order_id: u32) -> String {
    format!("order-{order_id}")
}

#[derive(Serialize, Deserialize)]
struct Wire {
    #[serde(rename = "type")]
    kind: String,
    order_id: u32,
    version: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_name_their_events() {
        let created = OrderEvent::new(8842, 1).unwrap();
        let cancelled = OrderEvent::new(8842, 7).unwrap();
        assert_eq!(created.kind(), "order.created");
        assert_eq!(cancelled.kind(), "order.cancelled");
        assert_eq!(cancelled.key(), "order-8842");
        assert!(OrderEvent::new(1, 0).is_none() && OrderEvent::new(1, 8).is_none());
        assert!(KINDS.iter().all(|k| k.len() <= 16));
    }

    #[test]
    fn events_round_trip_and_foreign_records_are_errors() {
        let e = OrderEvent::new(8842, 7).unwrap();
        let value = e.encode();
        assert_eq!(
            String::from_utf8(value.clone()).unwrap(),
            r#"{"type":"order.cancelled","order_id":8842,"version":7}"#
        );
        assert_eq!(OrderEvent::decode(Some(b"order-8842"), Some(&value)), Ok(e));
        for (key, value) in [
            (Some(&b"order-8842"[..]), None),
            (Some(&b"order-8842"[..]), Some(&b"{"[..])),
            (Some(&b"order-1"[..]), Some(&value[..])),
            (None, Some(&value[..])),
            (
                Some(&b"order-8842"[..]),
                Some(&br#"{"type":"order.created","order_id":8842,"version":7}"#[..]),
            ),
            (
                Some(&b"order-8842"[..]),
                Some(&br#"{"type":"order.created","order_id":8842,"version":0}"#[..]),
            ),
        ] {
            assert!(OrderEvent::decode(key, value).is_err(), "{key:?} {value:?}");
        }
    }
}
