//! One client connection: read a frame, handle it, write the answer, in order.
//!
//! Requests on one connection are answered strictly in the order they arrived, as Kafka does and
//! clients (which pipeline) rely on; a parked fetch therefore delays later requests on its own
//! connection only. Produces waiting for the disk do not stop the reading of the next produces
//! ([`Answers`]), so that they share a sync.
//!
//! While a request is handled the socket is still read (up to [`READ_AHEAD`] of pipelined
//! requests), so a peer that hangs up ends its parked request and frees its connection slot at
//! once, and so does a shutdown. Writing one answer may take at most `write_timeout`: a peer
//! that reads slower is disconnected, which also gives back what its answer held.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use protocol::frame::{read_frame, FrameReadError};
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::answers::{Answers, MAX_QUEUED};
use crate::handler::{self, Reply};
use crate::state::BrokerState;

/// Kafka's `connections.max.idle.ms`: a connection that completes no request for this long is
/// closed, so abandoned and trickling sockets do not pile up.
const MAX_IDLE: Duration = Duration::from_secs(600);

/// Bytes of later requests read while one is handled. Past this the socket is left unread until
/// the request is answered; a peer that pipelines this much and then hangs up is noticed only then.
const READ_AHEAD: usize = 64 * 1024;

/// Serves one connection accepted by node `node`'s listener.
pub async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    node: i32,
    state: Arc<BrokerState>,
    shutdown: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let mut buffer = BytesMut::with_capacity(4096);
    let cap = state.config.max_request_bytes;
    let mut answers = Answers::new(shutdown.clone());
    loop {
        let frame = tokio::select! {
            // Requests already received first: a produce read before the waiting answers'
            // sync starts is covered by that sync.
            biased;
            frame = tokio::time::timeout(MAX_IDLE, read_frame(&mut reader, &mut buffer, cap)),
                if answers.len() < MAX_QUEUED => frame,
            () = answers.oldest_known(), if !answers.is_empty() => {
                if answers.write_known(&mut writer, &state, peer).await.is_err() {
                    return;
                }
                continue;
            }
            _ = shutdown.cancelled() => return,
        };
        let frame = match frame {
            Ok(Ok(Some(frame))) => frame.freeze(),
            Ok(Ok(None)) => return,
            Ok(Err(FrameReadError::Frame(e))) => {
                info!(%peer, "closing connection: {e}");
                return;
            }
            Ok(Err(FrameReadError::Io(e))) => {
                debug!(%peer, "connection error: {e}");
                return;
            }
            Err(_idle) => {
                debug!(%peer, "closing idle connection");
                return;
            }
        };
        let api = protocol::versions::HeaderPrefix::peek(&frame)
            .and_then(|h| kafka_protocol::messages::ApiKey::try_from(h.api_key).ok());
        // Only a produce may be handled while earlier answers wait for the disk.
        if api != Some(kafka_protocol::messages::ApiKey::Produce)
            && answers.write_all(&mut writer, &state, peer).await.is_err()
        {
            return;
        }
        let reply = tokio::select! {
            // Handled first: a request sent just before a hang-up (a produce with acks=0) counts.
            biased;
            reply = handler::handle(&state, node, peer, frame) => reply,
            () = hang_up(&mut reader, &mut buffer) => {
                debug!(%peer, "peer closed the connection during a request");
                return;
            }
            _ = shutdown.cancelled() => return,
        };
        let closing = matches!(reply, Reply::Close(_));
        answers.push(reply, api);
        if closing {
            // Nothing more is read; the answers before the close still go out.
            let _ = answers.write_all(&mut writer, &state, peer).await;
            return;
        }
        if answers
            .write_known(&mut writer, &state, peer)
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Completes when the peer hangs up (or the socket fails), reading what it pipelines meanwhile
/// into `buffer`, up to [`READ_AHEAD`]; past that it waits for ever.
async fn hang_up(reader: &mut OwnedReadHalf, buffer: &mut BytesMut) {
    while buffer.len() < READ_AHEAD {
        match reader.read_buf(buffer).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
    std::future::pending().await
}
