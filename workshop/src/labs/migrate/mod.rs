//! Lab `migrate` (in progress).
pub mod engine;
pub mod kafka;
pub mod plan;
pub mod scenario;
pub mod traffic;
