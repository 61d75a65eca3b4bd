//! The room view's and the playground's HTTP endpoints, spoken to as a browser does: plain
//! HTTP/1.1 over a socket, the event stream read line by line.
//!
//! - the room view: the page and its assets, 404 for the rest; the event stream starts with the
//!   state and then carries the lab's events in the order the narrator emitted them; the gate is
//!   released only for the wait the lab is at (400 for a bad body, 409 for another wait); a page
//!   that never reads does not hold the lab back;
//! - the playground: source 000's buttons give source 000's figures, measured on the embedded broker;
//!   the state snapshot and the stream carry them; bad requests get 400 with a message;
//! - what other pages and programs on the laptop can do: requests from another origin, for
//!   another Host (DNS rebinding) or not declared JSON are refused and change nothing; a
//!   `--bootstrap` cluster is written to only with the trainer's flag; thousands of idle
//!   connections and a client that never finishes its head do not stop the page's requests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{json, Value};
use workshop::lab::report::{Gate, Narrator, Phase};
use workshop::lab::LabError;
use workshop::playground::{PlaygroundArgs, Running};
use workshop::view::web::Room;

const TIMEOUT: Duration = Duration::from_secs(30);

struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// One request on its own connection (`Connection: close`), the whole answer read, sent as the
/// page sends it: its own Host and Origin, a JSON body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> Answer {
    let origin = format!("http://{addr}");
    let headers = [
        ("Host", addr.to_string()),
        ("Origin", origin),
        ("Content-Type", "application/json".to_string()),
    ];
    request(addr, method, path, &headers, body)
}

/// One request with exactly `headers` (and its Content-Length), the whole answer read.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> Answer {
    let mut socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(socket, "{head}Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut raw = String::new();
    socket.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_string)
        })
        .unwrap_or_default();
    Answer {
        status,
        content_type,
        body: body.to_string(),
    }
}

fn post(addr: SocketAddr, path: &str, body: &Value) -> Answer {
    http(addr, "POST", path, &body.to_string())
}

/// A page's event stream: `GET /api/events`, read event by event.
struct Events {
    reader: BufReader<TcpStream>,
}

impl Events {
    fn open(addr: SocketAddr) -> Events {
        let mut socket = TcpStream::connect(addr).unwrap();
        socket.set_read_timeout(Some(TIMEOUT)).unwrap();
        write!(socket, "GET /api/events HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut reader = BufReader::new(socket);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some(kind) = line.to_ascii_lowercase().strip_prefix("content-type: ") {
                assert_eq!(kind.trim(), "text/event-stream");
            }
        }
        Events { reader }
    }

    /// The next event: its name and its data. Chunked transfer: a size line before each chunk,
    /// skipped (an event's lines never look like a bare hex number followed by nothing else).
    fn next(&mut self) -> (String, Value) {
        let (mut name, mut data) = (String::new(), String::new());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.reader.read_line(&mut line).unwrap() > 0,
                "the stream ended"
            );
            let l = line.trim_end_matches(['\r', '\n']);
            if let Some(n) = l.strip_prefix("event: ").or(l.strip_prefix("event:")) {
                name = n.to_string();
            } else if let Some(d) = l.strip_prefix("data: ").or(l.strip_prefix("data:")) {
                data.push_str(d);
            } else if l.is_empty() && !data.is_empty() {
                return (name, serde_json::from_str(&data).unwrap());
            }
        }
    }

    /// The next event named `kind` (the broker poller's figures come in between).
    fn next_of(&mut self, kind: &str) -> Value {
        loop {
            let (name, data) = self.next();
            if name == kind {
                return data;
            }
        }
    }
}

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn the_room_view_serves_its_page_and_nothing_else() {
    let mut n = Narrator::new();
    let room = Room::attach(any_port(), &mut n).unwrap();
    let page = http(room.addr(), "GET", "/", "");
    assert_eq!(page.status, 200);
    assert_eq!(page.content_type, "text/html; charset=utf-8");
    assert!(page.body.contains("<title>workshop · room view</title>"));
    for asset in [
        "/assets/style.css",
        "/assets/common.js",
        "/assets/broker.js",
        "/assets/page.js",
    ] {
        assert_eq!(http(room.addr(), "GET", asset, "").status, 200, "{asset}");
    }
    let missing = http(room.addr(), "GET", "/secrets/../etc/passwd", "");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.content_type, "application/json");
    assert_eq!(
        missing.json(),
        json!({"error": "no such page: /secrets/../etc/passwd"})
    );
    assert_eq!(http(room.addr(), "GET", "/api/gate", "").status, 405);
    // Without a gate (a run with --check), the page cannot release anything.
    let release = post(
        room.addr(),
        "/api/gate",
        &json!({"release": "answer", "at": 0}),
    );
    assert_eq!(release.status, 409);
    assert!(release.json()["error"]
        .as_str()
        .unwrap()
        .contains("does not wait for anyone"));
}

#[test]
fn the_stream_carries_the_lab_in_order_and_the_page_releases_only_the_wait_the_lab_is_at() {
    let gate = Gate::new();
    let mut n = Narrator::new();
    n.pace(gate.clone());
    let room = Room::attach(any_port(), &mut n).unwrap();
    let addr = room.addr();
    let mut page = Events::open(addr);
    let (first, state) = page.next();
    assert_eq!(first, "state");
    assert_eq!(state["journal"], json!([]));

    let lab = std::thread::spawn(move || {
        n.intro("demo", "something shown");
        n.phase(Phase {
            title: "One",
            about: "the first phase",
            predict: "what comes next?",
        });
        n.answer();
        n.say("the evidence");
        n.phase(Phase {
            title: "Two",
            about: "",
            predict: "and now?",
        });
    });
    let kinds: Vec<String> = (0..4)
        .map(|_| page.next_of("lab")["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["intro", "phase", "question", "waiting"]);

    // The lab waits for the answer at entry 3: nothing else releases it.
    let bad = http(addr, "POST", "/api/gate", "{not json");
    assert_eq!(bad.status, 400);
    assert!(bad.json()["error"]
        .as_str()
        .unwrap()
        .starts_with("bad request: "));
    let unknown = post(addr, "/api/gate", &json!({"release": "skip", "at": 3}));
    assert_eq!(unknown.status, 400);
    let wrong = post(addr, "/api/gate", &json!({"release": "next", "at": 3}));
    assert_eq!(wrong.status, 409);
    assert_eq!(
        wrong.json()["error"],
        "the lab waits for the answer at entry 3, not for the next phase at entry 3; reload the page"
    );
    let ok = post(addr, "/api/gate", &json!({"release": "answer", "at": 3}));
    assert_eq!((ok.status, ok.json()), (200, json!({"released": 3})));
    // A double click: the wait has passed; the next one is not released by it.
    let again = post(addr, "/api/gate", &json!({"release": "answer", "at": 3}));
    assert_eq!(again.status, 409);

    let after: Vec<Value> = (0..3).map(|_| page.next_of("lab")).collect();
    assert_eq!(after[0], json!({"event": "answer", "phase": 1}));
    assert_eq!(after[1], json!({"event": "text", "text": "the evidence"}));
    assert_eq!(after[2], json!({"event": "waiting", "pause": "next"}));
    let next = post(addr, "/api/gate", &json!({"release": "next", "at": 6}));
    assert_eq!(next.status, 200);
    lab.join().unwrap();

    // The snapshot and a late page's state hold the whole journal, in order.
    let journal: Vec<String> = http(addr, "GET", "/api/state", "").json()["journal"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        journal,
        [
            "intro", "phase", "question", "waiting", "answer", "text", "waiting", "phase",
            "question"
        ]
    );
    let mut late = Events::open(addr);
    let (_, state) = late.next();
    assert_eq!(state["journal"].as_array().unwrap().len(), 9);
    assert_eq!(state["journal"][7]["title"], "Two");

    // The run is over: the page stays up until the gate is released once more (Enter).
    let finished = std::thread::spawn(move || {
        room.finish(Err(&LabError::InvalidInput("stopped by the test".into())));
    });
    // The first page, still open, got the rest in order, and how the run ended.
    assert_eq!(page.next_of("lab")["title"], "Two");
    assert_eq!(page.next_of("lab")["event"], "question");
    assert_eq!(
        page.next_of("lab"),
        json!({"event": "end", "exit_code": 2, "error": "stopped by the test"})
    );
    assert!(!finished.is_finished());
    gate.release();
    finished.join().unwrap();
}

#[test]
fn a_page_that_never_reads_does_not_hold_the_lab_back() {
    let mut n = Narrator::new();
    let room = Room::attach(any_port(), &mut n).unwrap();
    // Connected, then never read: its socket buffers fill and its stream falls behind.
    let stuck = Events::open(room.addr());
    let line = "x".repeat(2_000);
    for _ in 0..5_000 {
        n.say(&line);
    }
    // The lab got through 10 MB of narration; the server answers, with all of it.
    let state = http(room.addr(), "GET", "/api/state", "").json();
    assert_eq!(state["journal"].as_array().unwrap().len(), 5_000);
    drop(stuck);
    room.finish(Err(&LabError::InvalidInput("done".into())));
}

/// Presses a button of the exercise; returns per partition [arrived, received, completed, queued].
fn press(addr: SocketAddr, button: Value) -> Vec<[u64; 4]> {
    let answer = post(addr, "/api/exercise", &button);
    assert_eq!(answer.status, 200, "{button}: {}", answer.body);
    rows(&answer.json())
}

fn rows(view: &Value) -> Vec<[u64; 4]> {
    view["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| ["arrived", "received", "completed", "queued"].map(|c| r[c].as_u64().unwrap()))
        .collect()
}

fn column(rows: &[[u64; 4]], i: usize) -> Vec<u64> {
    rows.iter().map(|r| r[i]).collect()
}

#[test]
fn the_playground_plays_seed_000_on_the_broker() {
    let running = Running::start(&PlaygroundArgs {
        web: any_port(),
        bootstrap: None,
        let_page_write_to_cluster: false,
    })
    .unwrap();
    let addr = running.addr();
    let page = http(addr, "GET", "/", "");
    assert!(page.body.contains("<title>workshop · playground</title>"));
    let mut events = Events::open(addr);
    let (_, state) = events.next();
    assert_eq!(state["latest"]["exercise"]["steps"], 0);
    assert_eq!(
        state["latest"]["exercise"]["message"],
        "No requests yet. Predict the distribution and send a batch."
    );

    let batch = json!({"action": "batch"});
    let drain = json!({"action": "drain"});
    let uniform = press(addr, batch.clone());
    assert_eq!(uniform, [[4, 4, 4, 0]; 3]);
    // The same figures reach every open page.
    assert_eq!(rows(&events.next_of("exercise")), uniform);

    let fresh = press(addr, json!({"action": "hot", "key": 0}));
    assert_eq!(fresh, [[0; 4]; 3], "a new setting starts a new run");
    let hot = press(addr, batch.clone());
    assert_eq!(hot, [[10, 10, 4, 6], [1, 1, 1, 0], [1, 1, 1, 0]]);
    let second = press(addr, batch.clone());
    assert_eq!(column(&second, 3), [12, 0, 0]);
    let drained: Vec<u64> = (0..3).map(|_| press(addr, drain.clone())[0][3]).collect();
    assert_eq!(drained, [8, 4, 0]);
    let view = post(addr, "/api/exercise", &drain).json();
    assert_eq!(
        view["message"],
        "No new requests: 0 of a capacity of 12 done this step; every queue is empty."
    );
    assert_eq!(view["rows"][0]["completed"], 20);
    assert_eq!(view["rows"][0]["share_percent"], 83);

    press(addr, json!({"action": "hot", "key": 1}));
    let moved = press(addr, batch.clone());
    assert_eq!(column(&moved, 0), [1, 10, 1]);
    assert_eq!(column(&moved, 3), [0, 6, 0]);
    press(addr, json!({"action": "hot", "key": 3}));
    let back = press(addr, batch.clone());
    assert_eq!(column(&back, 0), [10, 1, 1]);
    assert_eq!(column(&back, 3), [6, 0, 0]);
    // Reset: a new run, the same setting.
    press(addr, json!({"action": "reset"}));
    assert_eq!(column(&press(addr, batch), 3), [6, 0, 0]);
    let state = http(addr, "GET", "/api/state", "").json();
    assert_eq!(state["latest"]["exercise"]["run"], 5);
    assert_eq!(state["latest"]["exercise"]["hot_key"], 3);

    for (body, error) in [
        ("{", "bad request: "),
        (r#"{"action": "fly"}"#, "bad request: unknown variant `fly`"),
        (r#"{"action": "hot"}"#, "\"hot\" needs a \"key\" (0 to 11)"),
        (
            r#"{"action": "hot", "key": 12}"#,
            "there is no key 12: keys are 0 to 11",
        ),
        (
            r#"{"action": "batch", "key": 1}"#,
            "only \"hot\" takes a \"key\"",
        ),
        (
            r#"{"action": "batch", "more": 1}"#,
            "bad request: unknown field `more`",
        ),
    ] {
        let answer = http(addr, "POST", "/api/exercise", body);
        assert_eq!(answer.status, 400, "{body}");
        let text = answer.json()["error"].as_str().unwrap().to_string();
        assert!(text.starts_with(error), "{body}: {text}");
    }
    for (body, error) in [
        (
            json!({"action": "add_member"}),
            "the free mode is not running: start it",
        ),
        (
            json!({"action": "start", "partitions": 0, "members": 1, "capacity": 10, "rate": 10,
                   "hot_key": null}),
            "partitions: 1 to 64, not 0",
        ),
        (
            json!({"action": "traffic", "rate": 5000, "hot_key": null}),
            "a rate of 5000 a second is more than the playground's 2000",
        ),
        (
            json!({"action": "stall", "member": 0, "seconds": -1.0}),
            "a stall of -1 s: give 0 to 60 seconds",
        ),
    ] {
        let answer = post(addr, "/api/free", &body);
        assert_eq!(answer.status, 400, "{body}");
        assert_eq!(answer.json()["error"], error, "{body}");
    }
    assert_eq!(http(addr, "GET", "/api/exercises", "").status, 404);
    running.stop();
}

/// Polls the playground's state until `done` holds for the free mode's view (live traffic:
/// the figures move on a wall clock), at most [`TIMEOUT`].
fn free_until(addr: SocketAddr, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let free = http(addr, "GET", "/api/state", "").json()["latest"]["free"].clone();
        if done(&free) {
            return free;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: {free}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_free_mode_runs_a_group_the_page_changes() {
    let running = Running::start(&PlaygroundArgs {
        web: any_port(),
        bootstrap: None,
        let_page_write_to_cluster: false,
    })
    .unwrap();
    let addr = running.addr();
    let start = json!({"action": "start", "partitions": 3, "members": 2, "capacity": 100,
                       "rate": 200, "hot_key": null});
    let view = post(addr, "/api/free", &start).json();
    assert_eq!(view["running"], true);
    assert_eq!(view["partitions"], 3);
    assert_eq!(view["members"].as_array().unwrap().len(), 2);
    // Both members joined one generation and share the 3 partitions; records flow.
    let free = free_until(addr, "the members process records", |f| {
        let members = f["members"].as_array().unwrap();
        let owned: usize = members
            .iter()
            .map(|m| m["partitions"].as_array().unwrap().len())
            .sum();
        owned == 3 && f["processed"].as_u64().unwrap() > 0
    });
    assert_eq!(free["error"], Value::Null);

    // Kafka only adds partitions.
    let shrink = post(
        addr,
        "/api/free",
        &json!({"action": "partitions", "count": 2}),
    );
    assert_eq!(shrink.status, 400);
    assert_eq!(
        shrink.json()["error"],
        "2 partitions: give more than 3 and at most 64 (Kafka only adds partitions)"
    );
    let grown = post(
        addr,
        "/api/free",
        &json!({"action": "partitions", "count": 6}),
    )
    .json();
    assert_eq!(grown["partitions"], 6);
    let added = post(addr, "/api/free", &json!({"action": "add_member"})).json();
    assert_eq!(added["members"].as_array().unwrap().len(), 3);
    // The new member and the new partitions: a rebalance hands out all 6.
    free_until(addr, "the group rebalances onto 6 partitions", |f| {
        let owned: usize = f["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["partitions"].as_array().unwrap().len())
            .sum();
        owned == 6 && f["rebalances"].as_u64().unwrap() >= 1
    });
    let stall = post(
        addr,
        "/api/free",
        &json!({"action": "stall", "member": 7, "seconds": 1}),
    );
    assert_eq!(stall.status, 400);
    assert_eq!(
        stall.json()["error"],
        "there is no member 7: the group has 3"
    );
    let removed = post(addr, "/api/free", &json!({"action": "remove_member"})).json();
    assert_eq!(removed["members"].as_array().unwrap().len(), 2);
    let stopped = post(addr, "/api/free", &json!({"action": "stop"})).json();
    assert_eq!(stopped["running"], false);
    running.stop();
}

#[test]
fn the_playground_runs_on_a_cluster_and_cleans_up_after_itself() {
    // Another broker, as a cluster would be: the playground knows only its address.
    let cluster = tokio::runtime::Runtime::new().unwrap();
    let broker = cluster
        .block_on(broker::Broker::start(broker::BrokerConfig {
            listen: any_port(),
            ..broker::BrokerConfig::default()
        }))
        .unwrap();
    let running = Running::start(&PlaygroundArgs {
        web: any_port(),
        bootstrap: Some(broker.addr().to_string()),
        let_page_write_to_cluster: true,
    })
    .unwrap();
    let addr = running.addr();
    press(addr, json!({"action": "hot", "key": 0}));
    let hot = post(addr, "/api/exercise", &json!({"action": "batch"})).json();
    assert_eq!(column(&rows(&hot), 3), [6, 0, 0]);
    // A run's names carry its id on a cluster, so two playgrounds never share a topic.
    let topic = hot["topic"].as_str().unwrap().to_string();
    assert!(
        topic.starts_with("playground-1-") && topic.len() > "playground-1-".len(),
        "{topic}"
    );
    let admin = cluster.block_on(async {
        let client = client::Client::connect(client::ClientConfig::new(&broker.addr().to_string()))
            .await
            .unwrap();
        client::Admin::new(client)
    });
    assert!(cluster
        .block_on(admin.list_topics())
        .unwrap()
        .contains(&topic));
    running.stop();
    assert!(!cluster
        .block_on(admin.list_topics())
        .unwrap()
        .contains(&topic));
    cluster.block_on(broker.shutdown());
}

/// What a hostile page (or program) sends instead of the page's own request, each with the
/// status it must get: another site's Origin, `null` (a sandboxed frame, a file), another local
/// port's, one that only starts like ours, a rebound name (its Host and Origin both foreign), and
/// our own Origin with bodies a form or a simple `fetch` sends without a CORS preflight.
/// A hostile request: what it is, its headers, and the status it must get.
type Hostile = (&'static str, Vec<(&'static str, String)>, u16);

fn hostile(addr: SocketAddr) -> Vec<Hostile> {
    let own = format!("http://{addr}");
    let json = || ("Content-Type", "application/json".to_string());
    let host = || ("Host", addr.to_string());
    let port = addr.port();
    vec![
        (
            "foreign Origin",
            vec![host(), ("Origin", "http://evil.example".into()), json()],
            403,
        ),
        (
            "null Origin",
            vec![host(), ("Origin", "null".into()), json()],
            403,
        ),
        (
            "another local port's Origin",
            vec![
                host(),
                ("Origin", format!("http://127.0.0.1:{}", port ^ 1)),
                json(),
            ],
            403,
        ),
        (
            "an Origin that only starts like ours",
            vec![host(), ("Origin", format!("{own}.evil.example")), json()],
            403,
        ),
        ("no Origin", vec![host(), json()], 403),
        (
            "DNS rebinding",
            vec![
                ("Host", format!("evil.example:{port}")),
                ("Origin", format!("http://evil.example:{port}")),
                json(),
            ],
            421,
        ),
        (
            "text/plain",
            vec![
                host(),
                ("Origin", own.clone()),
                ("Content-Type", "text/plain".into()),
            ],
            415,
        ),
        (
            "a form",
            vec![
                host(),
                ("Origin", own.clone()),
                ("Content-Type", "application/x-www-form-urlencoded".into()),
            ],
            415,
        ),
        (
            "multipart",
            vec![
                host(),
                ("Origin", own.clone()),
                ("Content-Type", "multipart/form-data; boundary=x".into()),
            ],
            415,
        ),
        ("no Content-Type", vec![host(), ("Origin", own)], 415),
    ]
}

/// Sends every hostile variant of `POST path` with `body`; each must get its status.
fn refused(addr: SocketAddr, path: &str, body: &Value) {
    for (what, headers, status) in hostile(addr) {
        let answer = request(addr, "POST", path, &headers, &body.to_string());
        assert_eq!(answer.status, status, "{what} on {path}: {}", answer.body);
        assert!(
            answer.json()["error"].is_string(),
            "{what}: {}",
            answer.body
        );
    }
}

#[test]
fn another_page_cannot_release_the_lab() {
    let gate = Gate::new();
    let mut n = Narrator::new();
    n.pace(gate.clone());
    let room = Room::attach(any_port(), &mut n).unwrap();
    let addr = room.addr();
    let mut page = Events::open(addr);
    let lab = std::thread::spawn(move || {
        n.intro("demo", "something shown");
        n.phase(Phase {
            title: "One",
            about: "",
            predict: "what comes next?",
        });
        n.answer();
        n.say("the evidence");
    });
    while page.next_of("lab")["event"] != "waiting" {}
    let release = json!({"release": "answer", "at": 3});
    refused(addr, "/api/gate", &release);
    // A rebound name reads nothing either.
    let rebound = request(
        addr,
        "GET",
        "/api/state",
        &[("Host", format!("evil.example:{}", addr.port()))],
        "",
    );
    assert_eq!(rebound.status, 421);
    assert!(!rebound.body.contains("journal"), "{}", rebound.body);
    // Nothing moved: the lab still waits at entry 3, and the page's own request releases it.
    let journal = http(addr, "GET", "/api/state", "").json()["journal"].clone();
    assert_eq!(journal.as_array().unwrap().len(), 4);
    assert_eq!(journal[3], json!({"event": "waiting", "pause": "answer"}));
    let ok = post(addr, "/api/gate", &release);
    assert_eq!((ok.status, ok.json()), (200, json!({"released": 3})));
    lab.join().unwrap();
    // A body larger than any the page sends is not read.
    let huge = format!(
        "{{\"release\":\"next\",\"at\":\"{}\"}}",
        "9".repeat(1 << 20)
    );
    assert_eq!(http(addr, "POST", "/api/gate", &huge).status, 413);
    // The page stays up until the gate is released once more (Enter).
    let finished = std::thread::spawn(move || {
        room.finish(Err(&LabError::InvalidInput("done".into())));
    });
    gate.release();
    finished.join().unwrap();
}

/// The topics on the broker at `bootstrap`.
fn topics_on(runtime: &tokio::runtime::Runtime, bootstrap: SocketAddr) -> Vec<String> {
    runtime.block_on(async {
        let client = client::Client::connect(client::ClientConfig::new(&bootstrap.to_string()))
            .await
            .unwrap();
        let mut topics = client::Admin::new(client).list_topics().await.unwrap();
        topics.sort();
        topics
    })
}

#[test]
fn no_page_writes_to_a_cluster_without_the_trainers_flag() {
    let cluster = tokio::runtime::Runtime::new().unwrap();
    let broker = cluster
        .block_on(broker::Broker::start(broker::BrokerConfig {
            listen: any_port(),
            ..broker::BrokerConfig::default()
        }))
        .unwrap();
    let start = json!({"action": "start", "partitions": 3, "members": 1, "capacity": 100,
                       "rate": 10, "hot_key": null});
    let before = topics_on(&cluster, broker.addr());

    // The trainer's flag given: only the page's own requests write.
    let running = Running::start(&PlaygroundArgs {
        web: any_port(),
        bootstrap: Some(broker.addr().to_string()),
        let_page_write_to_cluster: true,
    })
    .unwrap();
    let addr = running.addr();
    refused(addr, "/api/exercise", &json!({"action": "batch"}));
    refused(addr, "/api/free", &start);
    assert_eq!(topics_on(&cluster, broker.addr()), before);
    let exercise = http(addr, "GET", "/api/state", "").json()["latest"]["exercise"].clone();
    assert_eq!(exercise["steps"], 0, "{exercise}");
    assert_eq!(
        http(addr, "GET", "/api/state", "").json()["latest"]["free"]["running"],
        false
    );
    running.stop();

    // Without it, even the page's own buttons are refused, and say which flag it takes.
    let running = Running::start(&PlaygroundArgs {
        web: any_port(),
        bootstrap: Some(broker.addr().to_string()),
        let_page_write_to_cluster: false,
    })
    .unwrap();
    let addr = running.addr();
    for (path, body) in [
        ("/api/exercise", json!({"action": "batch"})),
        ("/api/free", start),
    ] {
        let answer = post(addr, path, &body);
        assert_eq!(answer.status, 403, "{path}: {}", answer.body);
        assert!(
            answer.json()["error"]
                .as_str()
                .unwrap()
                .contains("--let-page-write-to-cluster"),
            "{}",
            answer.body
        );
    }
    assert_eq!(topics_on(&cluster, broker.addr()), before);
    running.stop();
    cluster.block_on(broker.shutdown());
}

#[test]
fn idle_connections_and_a_slow_head_do_not_stop_the_page() {
    use workshop::view::web::listen::MAX_CONNECTIONS;
    let mut n = Narrator::new();
    let room = Room::attach(any_port(), &mut n).unwrap();
    let addr = room.addr();
    // A head that never ends (slowloris), then thousands of connections that send nothing.
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: ").unwrap();
    let idle: Vec<TcpStream> = (0..3_000)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // The page's own request is answered.
    let page = http(addr, "GET", "/", "");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<title>workshop · room view</title>"));
    // The server kept at most its cap: the slow head and the oldest idle connections were closed
    // to make room (the kernel accepts in connection order), whichever came first of that and
    // the header timeout.
    let closed = |mut socket: &TcpStream| {
        socket.set_read_timeout(Some(TIMEOUT)).unwrap();
        let mut byte = [0; 1];
        match socket.read(&mut byte) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    };
    assert!(closed(&slow), "the slow head is still open");
    // The newest MAX_CONNECTIONS - 1 idle ones may still be open beside the page's.
    let evicted = idle.len() - (MAX_CONNECTIONS - 1);
    for (i, socket) in idle.iter().take(evicted).enumerate() {
        assert!(closed(socket), "idle connection {i} is still open");
    }
    drop(idle);
    room.finish(Err(&LabError::InvalidInput("done".into())));
}
