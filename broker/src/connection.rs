//! One client connection: read a frame, handle it, write the answer, in order.
//!
//! Requests on one connection are answered strictly in the order they arrived, as Kafka does and
//! clients (which pipeline) rely on; a parked fetch therefore delays later requests on its own
//! connection only. Produces waiting for the disk do not stop the reading of the next produces
//! ([`Answers`]), so that they share a sync.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use protocol::frame::{read_frame, FrameReadError};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::answers::{Answers, MAX_QUEUED};
use crate::handler::{self, Reply};
use crate::state::BrokerState;

/// Kafka's `connections.max.idle.ms`: a connection that completes no request for this long is
/// closed, so abandoned and trickling sockets do not pile up.
const MAX_IDLE: Duration = Duration::from_secs(600);

pub async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    state: Arc<BrokerState>,
    shutdown: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let mut buffer = BytesMut::with_capacity(4096);
    let cap = state.config.max_request_bytes;
    let mut answers = Answers::default();
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
        let reply = handler::handle(&state, peer, frame).await;
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
