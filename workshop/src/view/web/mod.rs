//! The room view: live pages in a browser, for a room with a projector.
//!
//! - `workshop <lab> --web [ADDR]` ([`room`]): the lab's narration phase by phase (each
//!   question before its answer, a Reveal / Next phase control on the `--step` gate), the
//!   broker's per-partition log end, committed offset and lag read several times a second
//!   ([`poll`]), the group's members and assignments, the store's log as it is written, the
//!   final figures and checks.
//! - `workshop playground --web [ADDR]` ([`playground`]): source 000's exercise on the real
//!   broker, and a free mode (keyed traffic at a rate, members added, removed or stalled,
//!   partitions added).
//!
//! Module map: [`server`] the HTTP server (axum, on a runtime of its own), the embedded pages
//! and the answers to what it does not serve; [`guard`] which requests it obeys (the page's own
//! Host, Origin and JSON); [`listen`] its connections (a cap, a header timeout); [`hub`] the state a page starts from and the
//! Server-Sent Events that follow, never waiting for a slow page; [`poll`] the broker as
//! Kafka's APIs show it; [`room`] a lab's view; [`playground`] the exercise and the free mode.
//! The pages and their scripts are in `assets/`, compiled in with `include_str!`: no CDN, the
//! page works offline.

pub mod guard;
pub mod hub;
pub mod listen;
pub mod poll;
pub mod room;
pub mod server;

pub use room::Room;
