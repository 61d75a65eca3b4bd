//! The views of a lab's event stream: the terminal ([`terminal`]: text for people within a
//! width) and the room view in a browser ([`web`]). A view is handed the events (a
//! [`crate::lab::report::Subscriber`]) and the lab's [`crate::lab::watch::Watch`]; it knows no
//! lab by name. The JSON document for machines is the [`crate::lab::report::LabReport`] itself.

pub mod terminal;
pub mod web;
