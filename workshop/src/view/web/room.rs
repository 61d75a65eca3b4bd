//! `workshop <lab> --web`: the room view of a lab run.
//!
//! The page shows the narration as the lab tells it (a [`Subscriber`] that journals every
//! event), the broker as the poller reads it ([`super::poll`]), and a Reveal / Next phase
//! control that releases the narrator's gate, the same one Enter releases under `--step`.
//!
//! A release names the wait it is for (the journal index of the `waiting` event and its
//! pause), so a double click, or a click on a page that has not caught up, cannot release the
//! wait after it: such a request gets 409 and the page shows why.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use serde::Deserialize;
use serde_json::json;

use super::hub::Hub;
use super::poll;
use super::server::{self, Server};
use crate::lab::report::{Event, Gate, LabReport, Narrator, Pause, Subscriber};
use crate::lab::LabError;

const PAGE: &str = include_str!("assets/room.html");
const SCRIPT: &str = include_str!("assets/room.js");

/// The lab's wait the page may release, and the gate to release it with.
#[derive(Debug, Default)]
struct Control {
    gate: Option<Gate>,
    /// The journal index of the `waiting` event the lab is blocked at, and its pause.
    waiting: Option<(usize, Pause)>,
}

type Shared = Arc<Mutex<Control>>;

fn lock(control: &Shared) -> MutexGuard<'_, Control> {
    control.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The view the narrator calls: it journals each event and returns (the hub never waits).
struct View {
    hub: Arc<Hub>,
    control: Shared,
}

impl Subscriber for View {
    fn event(&mut self, event: &Event) {
        // Held while journaling, so a release cannot see the `waiting` event before the
        // control knows of it.
        let mut control = lock(&self.control);
        let seq = self.hub.record(event);
        match event {
            Event::Waiting { pause } => control.waiting = Some((seq, *pause)),
            // What comes after a wait: it has passed (Enter may have released it).
            Event::Answer { .. }
            | Event::Phase { .. }
            | Event::Summary { .. }
            | Event::Check { .. }
            | Event::Verdict { .. } => control.waiting = None,
            _ => {}
        }
    }

    fn live(&self) -> bool {
        true
    }
}

/// The room view of one lab run, serving from [`Room::attach`] until [`Room::finish`].
pub struct Room {
    server: Server,
    hub: Arc<Hub>,
    control: Shared,
}

/// What a page sends to release the lab: `{"release": "answer" | "next", "at": N}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Release {
    release: Step,
    /// The journal index of the `waiting` event being answered.
    at: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Step {
    Answer,
    Next,
}

impl Step {
    fn pause(self) -> Pause {
        match self {
            Step::Answer => Pause::Answer,
            Step::Next => Pause::Next,
        }
    }
}

impl Room {
    /// Serves the room view of the lab `narrator` tells, at `addr`: subscribes to its events,
    /// reads the brokers its clusters report ([`Narrator::watch`]) and releases its gate, if it
    /// has one, from the page. Prints the page's address on stderr, one line.
    pub fn attach(addr: SocketAddr, narrator: &mut Narrator) -> Result<Room, LabError> {
        let hub = Hub::new();
        let control: Shared = Arc::new(Mutex::new(Control {
            gate: narrator.gate().cloned(),
            waiting: None,
        }));
        let releases = control.clone();
        let app = server::common(PAGE, SCRIPT, hub.clone()).route(
            "/api/gate",
            post(move |body: Bytes| async move { release(&releases, &body) }),
        );
        let server = Server::start(addr, app)?;
        server
            .handle()
            .spawn(poll::run(narrator.watch(), hub.clone(), poll::EVERY));
        narrator.subscribe(Box::new(View {
            hub: hub.clone(),
            control: control.clone(),
        }));
        eprintln!("room view: {}", server.url());
        Ok(Room {
            server,
            hub,
            control,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The run is over: the page shows how it ended, and stays up until the gate is released
    /// once more (Enter in the terminal) or opened (end of input).
    pub fn finish(self, outcome: Result<&LabReport, &LabError>) {
        let end = match outcome {
            Ok(report) => json!({"event": "end", "exit_code": report.exit_code(), "error": null}),
            Err(e) => json!({"event": "end", "exit_code": 2, "error": e.to_string()}),
        };
        self.hub.record(&end);
        let gate = lock(&self.control).gate.clone();
        if let Some(gate) = gate {
            eprintln!(
                "room view: the run is over; the page stays up at {} until you press Enter",
                self.url()
            );
            gate.wait();
        }
    }
}

fn release(control: &Shared, body: &Bytes) -> Response {
    let asked: Release = match server::parse(body) {
        Ok(asked) => asked,
        Err(bad) => return server::bad_request(&bad),
    };
    let mut control = lock(control);
    let Some(gate) = control.gate.clone() else {
        return server::message(
            StatusCode::CONFLICT,
            "this run does not wait for anyone (it runs with --check): there is nothing to release",
        );
    };
    let wanted = (asked.at, asked.release.pause());
    match control.waiting {
        Some(waiting) if waiting == wanted => {
            control.waiting = None;
            gate.release();
            server::json(StatusCode::OK, &json!({ "released": asked.at }))
        }
        Some((at, pause)) => server::message(
            StatusCode::CONFLICT,
            &format!(
                "the lab waits for {} at entry {at}, not for {} at entry {}; reload the page",
                name(pause),
                name(wanted.1),
                asked.at
            ),
        ),
        None => server::message(
            StatusCode::CONFLICT,
            "the lab is not waiting (it is working, or already went on)",
        ),
    }
}

fn name(pause: Pause) -> &'static str {
    match pause {
        Pause::Answer => "the answer",
        Pause::Next => "the next phase",
    }
}
