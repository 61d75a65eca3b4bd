//! The accept loop both listeners share, the Kafka protocol's and the metrics endpoint's: a
//! connection limit, a task per connection, and a clean stop.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

/// Accepts until `shutdown`, serving each connection with `serve` in a task of `tasks`, at most
/// `max_connections` at once.
pub async fn accept_loop<F, Fut>(
    listener: TcpListener,
    max_connections: usize,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    serve: F,
) where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let permits = Arc::new(Semaphore::new(max_connections));
    loop {
        // Wait for a free slot before accepting, so excess clients queue in the kernel's backlog
        // instead of holding buffers here. The semaphore is never closed.
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
            _ = shutdown.cancelled() => return,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.cancelled() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let serving = serve(stream, peer);
                tasks.spawn(async move {
                    serving.await;
                    drop(permit);
                });
            }
            // Running out of file descriptors and the like pass; back off instead of spinning.
            Err(e) => {
                warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
