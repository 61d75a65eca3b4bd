//! `workshop playground --web [ADDR]`: source 000's exercise ([`exercise`]) and a free mode
//! ([`free`]) in a browser, on the embedded broker or any Kafka cluster (`--bootstrap`).
//!
//! The broker work runs on a lab runtime of its own; the page's requests queue for it one at a
//! time (a step is a batch produced, consumed and committed), and each answer carries the new
//! state, which also goes to every open page. The broker panel is the room view's poller on the
//! playground's topics and groups.

pub mod exercise;
pub mod free;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use serde::Deserialize;
use tokio::sync::{Mutex, RwLock};

use crate::lab::stop::Stop;
use crate::lab::target::{runtime, Cluster};
use crate::lab::watch::Watch;
use crate::lab::{LabError, Target};
use crate::view::web::hub::Hub;
use crate::view::web::poll;
use crate::view::web::server::{self, bad_request, Server};
use exercise::{Action, Exercise};
use free::{Free, Traffic};

const PAGE: &str = include_str!("assets/playground.html");
const SCRIPT: &str = include_str!("assets/playground.js");

/// How often the free mode's figures go to the pages.
const FREE_EVERY: Duration = Duration::from_millis(250);

/// `workshop playground` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct PlaygroundArgs {
    /// Serve the page at ADDR (loopback unless asked; port 0 picks a free one)
    #[arg(long, value_name = "ADDR", num_args = 0..=1,
          default_value = crate::lab::args::DEFAULT_ADDR, default_missing_value = crate::lab::args::DEFAULT_ADDR,
          value_parser = crate::lab::args::parse_addr)]
    pub web: SocketAddr,
    /// Run against this Kafka-protocol broker instead of an embedded one
    #[arg(long, value_name = "HOST:PORT", value_parser = crate::lab::args::parse_bootstrap)]
    pub bootstrap: Option<String>,
    /// With --bootstrap: let the page's buttons create topics, produce and commit on that
    /// cluster (without it the page only shows it)
    #[arg(long, requires = "bootstrap")]
    pub let_page_write_to_cluster: bool,
}

impl PlaygroundArgs {
    /// Why the page may not write, if it may not: a cluster the trainer named (`--bootstrap`)
    /// is written to only with the trainer's own flag on the command line, never because a web
    /// page asked.
    fn read_only(&self) -> Option<String> {
        let cluster = self.bootstrap.as_ref()?;
        (!self.let_page_write_to_cluster).then(|| {
            format!(
                "the playground only reads {cluster}: start it with --let-page-write-to-cluster \
                 to let this page create topics and produce there"
            )
        })
    }
}

/// What the playground's requests share.
struct Playground {
    /// Taken at the end, to be closed (deleting what the playground created on a cluster).
    cluster: RwLock<Option<Cluster>>,
    hub: Arc<Hub>,
    exercise: Mutex<Exercise>,
    free: Mutex<Option<Free>>,
    lab: tokio::runtime::Handle,
    /// Why the page's buttons are refused (a `--bootstrap` cluster without the trainer's
    /// flag), or `None`.
    read_only: Option<String>,
}

/// Serves the playground until `stop` (the binary's Ctrl-C or SIGTERM), then cleans up what it
/// created.
pub fn run(args: &PlaygroundArgs, stop: &Stop) -> Result<(), LabError> {
    // Watching makes the first signal a request to stop rather than an exit, so the topics a
    // playground made on a cluster are deleted.
    let _watching = stop.watch();
    let running = Running::start(args)?;
    eprintln!("playground: {}", running.url());
    running.lab.block_on(stop.requested());
    running.stop();
    Ok(())
}

/// A playground being served.
pub struct Running {
    lab: tokio::runtime::Runtime,
    playground: Arc<Playground>,
    server: Server,
    ticker: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Opens the broker (embedded, or `--bootstrap`) and serves at `--web`.
    pub fn start(args: &PlaygroundArgs) -> Result<Running, LabError> {
        let lab = runtime()?;
        let target = match &args.bootstrap {
            Some(addr) => Target::Bootstrap(addr.clone()),
            None => Target::Embedded,
        };
        let watch = Watch::new();
        let cluster =
            watch.scope(|| lab.block_on(Cluster::open(&target, &Stop::never(), "playground")))?;
        let hub = Hub::new();
        let playground = Arc::new(Playground {
            cluster: RwLock::new(Some(cluster)),
            hub: hub.clone(),
            exercise: Mutex::new(Exercise::default()),
            free: Mutex::new(None),
            lab: lab.handle().clone(),
            read_only: args.read_only(),
        });
        if let Some(why) = &playground.read_only {
            eprintln!("playground: {why}");
        }
        playground.publish_exercise(&Exercise::default());
        hub.set("free", &free::View::default());
        let (on_exercise, on_free) = (playground.clone(), playground.clone());
        let app = server::common(PAGE, SCRIPT, hub.clone())
            .route(
                "/api/exercise",
                post(move |body: Bytes| async move { on_exercise.exercise(body).await }),
            )
            .route(
                "/api/free",
                post(move |body: Bytes| async move { on_free.free(body).await }),
            );
        let server = Server::start(args.web, app)?;
        server
            .handle()
            .spawn(poll::run(watch, hub.clone(), poll::EVERY));
        let ticker = playground.clone();
        let ticker = lab.spawn(async move {
            let mut ticks = tokio::time::interval(FREE_EVERY);
            loop {
                ticks.tick().await;
                if let Some(free) = ticker.free.lock().await.as_ref() {
                    ticker.hub.set("free", &free.view());
                }
            }
        });
        Ok(Running {
            lab,
            playground,
            server,
            ticker,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Stops serving, stops the free mode and closes the broker.
    pub fn stop(self) {
        let Running {
            lab,
            playground,
            server,
            ticker,
        } = self;
        drop(server);
        ticker.abort();
        lab.block_on(async move {
            if let Some(free) = playground.free.lock().await.take() {
                free.stop().await;
            }
            playground.exercise.lock().await.close().await;
            if let Some(cluster) = playground.cluster.write().await.take() {
                cluster.close().await;
            }
        });
    }
}

/// A button of the exercise: `{"action": "uniform" | "hot" | "batch" | "drain" | "reset",
/// "key": N}` (the key only with "hot").
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExerciseRequest {
    action: ExerciseAction,
    key: Option<u32>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ExerciseAction {
    Uniform,
    Hot,
    Batch,
    Drain,
    Reset,
}

/// A control of the free mode.
#[derive(Debug, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
enum FreeRequest {
    Start {
        partitions: i32,
        members: usize,
        capacity: u32,
        rate: u32,
        hot_key: Option<u32>,
    },
    Traffic {
        rate: u32,
        hot_key: Option<u32>,
    },
    AddMember,
    RemoveMember,
    Stall {
        member: usize,
        seconds: f64,
    },
    Partitions {
        count: i32,
    },
    Stop,
}

impl Playground {
    async fn exercise(self: Arc<Self>, body: Bytes) -> Response {
        if let Some(refused) = self.refuse_writes() {
            return refused;
        }
        let asked: ExerciseRequest = match server::parse(&body) {
            Ok(asked) => asked,
            Err(bad) => return bad_request(&bad),
        };
        let action = match (asked.action, asked.key) {
            (ExerciseAction::Hot, Some(key)) => Action::Hot(key),
            (ExerciseAction::Hot, None) => return bad_request("\"hot\" needs a \"key\" (0 to 11)"),
            (_, Some(_)) => return bad_request("only \"hot\" takes a \"key\""),
            (ExerciseAction::Uniform, None) => Action::Uniform,
            (ExerciseAction::Batch, None) => Action::Batch,
            (ExerciseAction::Drain, None) => Action::Drain,
            (ExerciseAction::Reset, None) => Action::Reset,
        };
        let me = self.clone();
        self.on_lab(async move {
            let cluster = me.cluster.read().await;
            let mut exercise = me.exercise.lock().await;
            let done = exercise.act(open(&cluster)?, action).await;
            me.publish_exercise(&exercise);
            done.map(|()| exercise.view())
        })
        .await
    }

    async fn free(self: Arc<Self>, body: Bytes) -> Response {
        if let Some(refused) = self.refuse_writes() {
            return refused;
        }
        let asked: FreeRequest = match server::parse(&body) {
            Ok(asked) => asked,
            Err(bad) => return bad_request(&bad),
        };
        if let Err(e) = check(&asked) {
            return bad_request(&e);
        }
        let me = self.clone();
        self.on_lab(async move {
            let cluster = me.cluster.read().await;
            let mut free = me.free.lock().await;
            let done = act(open(&cluster)?, &mut free, asked).await;
            let view = free.as_ref().map_or_else(free::View::default, Free::view);
            me.hub.set("free", &view);
            done.map(|()| view)
        })
        .await
    }

    /// Runs a request's broker work on the lab runtime, one request at a time per mode; the
    /// answer is the new view or what went wrong.
    async fn on_lab<T: serde::Serialize + Send + 'static>(
        &self,
        work: impl std::future::Future<Output = Result<T, LabError>> + Send + 'static,
    ) -> Response {
        answer(self.lab.spawn(work).await)
    }

    /// 403 with why, when the page may not write to the cluster.
    fn refuse_writes(&self) -> Option<Response> {
        let why = self.read_only.as_ref()?;
        Some(server::message(StatusCode::FORBIDDEN, why))
    }

    fn publish_exercise(&self, exercise: &Exercise) {
        self.hub.set("exercise", &exercise.view());
    }
}

/// What the free mode's flags allow, checked before anything runs.
fn check(asked: &FreeRequest) -> Result<(), String> {
    let hot = |key: Option<u32>| match key {
        Some(k) if k >= free::KEYS => Err(format!(
            "there is no key {k}: keys are 0 to {}",
            free::KEYS - 1
        )),
        _ => Ok(()),
    };
    let rate = |rate: u32| match rate {
        r if r > free::MAX_RATE => Err(format!(
            "a rate of {r} a second is more than the playground's {}",
            free::MAX_RATE
        )),
        _ => Ok(()),
    };
    match *asked {
        FreeRequest::Start {
            partitions,
            members,
            capacity,
            rate: r,
            hot_key,
        } => {
            if !(1..=free::MAX_PARTITIONS).contains(&partitions) {
                return Err(format!(
                    "partitions: 1 to {}, not {partitions}",
                    free::MAX_PARTITIONS
                ));
            }
            if members > free::MAX_MEMBERS {
                return Err(format!(
                    "members: 0 to {}, not {members}",
                    free::MAX_MEMBERS
                ));
            }
            if !(1..=free::MAX_CAPACITY).contains(&capacity) {
                return Err(format!(
                    "capacity: 1 to {} records a second, not {capacity}",
                    free::MAX_CAPACITY
                ));
            }
            rate(r)?;
            hot(hot_key)
        }
        FreeRequest::Traffic { rate: r, hot_key } => {
            rate(r)?;
            hot(hot_key)
        }
        FreeRequest::Stall { seconds, .. } if !(seconds > 0.0 && seconds <= 60.0) => {
            Err(format!("a stall of {seconds} s: give 0 to 60 seconds"))
        }
        _ => Ok(()),
    }
}

async fn act(
    cluster: &Cluster,
    free: &mut Option<Free>,
    asked: FreeRequest,
) -> Result<(), LabError> {
    let not_running = || LabError::InvalidInput("the free mode is not running: start it".into());
    match asked {
        FreeRequest::Start {
            partitions,
            members,
            capacity,
            rate,
            hot_key,
        } => {
            if let Some(old) = free.take() {
                old.stop().await;
            }
            // Each start is a fresh topic, as each run of the exercise is.
            let base = format!("playground-free-{}", unique());
            let traffic = Traffic { rate, hot_key };
            *free =
                Some(Free::start(cluster, &base, partitions, members, capacity, traffic).await?);
        }
        FreeRequest::Traffic { rate, hot_key } => free
            .as_ref()
            .ok_or_else(not_running)?
            .set_traffic(Traffic { rate, hot_key }),
        FreeRequest::AddMember => free.as_mut().ok_or_else(not_running)?.add_member().await?,
        FreeRequest::RemoveMember => {
            free.as_mut()
                .ok_or_else(not_running)?
                .remove_member()
                .await?
        }
        FreeRequest::Stall { member, seconds } => free
            .as_ref()
            .ok_or_else(not_running)?
            .stall(member, Duration::from_secs_f64(seconds))?,
        FreeRequest::Partitions { count } => {
            free.as_mut()
                .ok_or_else(not_running)?
                .grow(cluster, count)
                .await?
        }
        FreeRequest::Stop => {
            if let Some(old) = free.take() {
                old.stop().await;
            }
        }
    }
    Ok(())
}

/// The cluster, unless the playground is closing.
fn open(cluster: &Option<Cluster>) -> Result<&Cluster, LabError> {
    cluster
        .as_ref()
        .ok_or_else(|| LabError::InvalidInput("the playground is closing".into()))
}

/// Free-mode runs so far, for topic names.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static RUNS: AtomicU64 = AtomicU64::new(0);
    RUNS.fetch_add(1, Ordering::Relaxed) + 1
}

/// The new state, or what went wrong: 400 for a request the playground refuses, 502 when the
/// broker failed, 500 for a bug.
fn answer<T: serde::Serialize>(
    done: Result<Result<T, LabError>, tokio::task::JoinError>,
) -> Response {
    match done {
        Ok(Ok(view)) => server::json(StatusCode::OK, &view),
        Ok(Err(LabError::InvalidInput(e))) => bad_request(&e),
        Ok(Err(e @ LabError::Broker(_))) => {
            server::message(StatusCode::BAD_GATEWAY, &e.to_string())
        }
        Ok(Err(e)) => server::message(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(e) => server::message(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("internal error: {e}; this is a bug in the workshop, please report it"),
        ),
    }
}
