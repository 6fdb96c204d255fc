//! The runner socket's side of the handshake: accepting connections, reading each
//! runner's hello and handing the connection to the execution that owns its token.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use proto::{ControllerCodec, ControllerMessage, PROTOCOL_VERSION, RunnerMessage};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;
use tokio::time::{sleep, timeout};
use tokio_util::codec::Framed;

use super::{Accepted, CONNECT_TIMEOUT, HubInner};

/// Accepts runner connections for as long as the hub lives; each one's hello is read on
/// a task of its own.
pub(super) async fn accept_loop(listener: UnixListener, hub: Weak<HubInner>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                tracing::warn!(error = %err, "accepting a runner connection failed");
                sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(hub) = hub.upgrade() else { return };
        tokio::spawn(handshake(stream, hub));
    }
}

/// Reads the runner's hello and hands the connection to the execution that owns the token.
async fn handshake(stream: UnixStream, hub: Arc<HubInner>) {
    let peer_pid = stream
        .peer_cred()
        .ok()
        .and_then(|creds| creds.pid())
        .and_then(|pid| u32::try_from(pid).ok());
    let mut framed = Framed::new(stream, ControllerCodec::new());
    let hello = match timeout(CONNECT_TIMEOUT, framed.next()).await {
        Ok(Some(Ok(RunnerMessage::Hello { version, token }))) => (version, token),
        Ok(Some(Ok(_))) => {
            tracing::warn!("a runner connection did not start with hello; closed");
            return;
        }
        Ok(Some(Err(err))) => {
            tracing::warn!(error = %err, "a runner connection sent an invalid first frame; closed");
            return;
        }
        Ok(None) | Err(_) => return,
    };
    let (version, token) = hello;
    let waiting = hub.pending.lock().ok().and_then(|mut p| p.remove(&token));
    match waiting {
        Some(pending) => {
            // Welcomed at once when all is in order (the runner's pid is known before
            // its token is written), so that it prepares while its work is made ready;
            // anything else is left to the execution, which makes the same checks and
            // rejects it with the reason. A failed send shows there as a failed Execute.
            if version == PROTOCOL_VERSION && peer_pid.is_some() && peer_pid == pending.pid {
                welcome(&hub, &mut framed, Vec::new(), None).await;
            }
            let _ = pending.accepted.send(Accepted {
                framed,
                version,
                peer_pid,
                ahead: None,
            });
        }
        None => {
            tracing::warn!(
                ?peer_pid,
                "a runner connection presented an unknown token; rejected"
            );
            let _ = framed
                .send(ControllerMessage::Reject {
                    reason: "unknown token".into(),
                })
                .await;
        }
    }
}

/// Welcomes a runner whose hello was in order: with the protected paths, so that it
/// builds the service's part of its sandbox while it waits, unless a ruleset kept for a
/// busy job is in use (it will most likely be sent a whole one); with the tasks files
/// of its run's cgroup and its run's private directories when they are known.
async fn welcome(
    hub: &HubInner,
    framed: &mut Framed<UnixStream, ControllerCodec>,
    cgroup_tasks: Vec<String>,
    private_dirs: Option<Vec<proto::PrivateDir>>,
) {
    let protected_paths = (!hub.sandboxes.any_in_use()).then(|| hub.protected_paths.clone());
    let _ = framed
        .send(ControllerMessage::Welcome {
            version: PROTOCOL_VERSION,
            protected_paths,
            cgroup_tasks,
            private_dirs,
        })
        .await;
}

/// The cgroup of the run a forked runner (always one of commands) will do, made now so
/// that its thread that starts commands joins it while it waits; `None` where threads
/// cannot join alone (v2, no cgroups) or it could not be made (the run then makes its
/// own, and says why if that fails too).
async fn cgroup_ahead(hub: &HubInner) -> Option<crate::runner::cgroups::RunCgroup> {
    let cgroups = hub.cgroups.get()?.clone();
    match tokio::task::spawn_blocking(move || cgroups.create_ahead()).await {
        Ok(Some(Ok(cgroup))) => Some(cgroup),
        Ok(Some(Err(why))) => {
            tracing::debug!(%why, "no cgroup made ahead for a runner");
            None
        }
        Ok(None) | Err(_) => None,
    }
}

/// Reads the hello of a forked runner on the connection it was born with (no token:
/// nobody else has this connection) and hands the connection to its execution.
pub(super) async fn handshake_forked(
    stream: UnixStream,
    hub: Arc<HubInner>,
    pid: u32,
    private_dirs: Option<Vec<proto::PrivateDir>>,
    accepted: oneshot::Sender<Accepted>,
) {
    let mut framed = Framed::new(stream, ControllerCodec::new());
    let version = match timeout(CONNECT_TIMEOUT, framed.next()).await {
        Ok(Some(Ok(RunnerMessage::Hello { version, .. }))) => version,
        Ok(Some(Ok(_))) => {
            tracing::warn!(pid, "a forked runner did not start with hello; closed");
            return;
        }
        Ok(Some(Err(err))) => {
            tracing::warn!(pid, error = %err, "a forked runner sent an invalid first frame; closed");
            return;
        }
        Ok(None) | Err(_) => return,
    };
    let mut ahead = None;
    if version == PROTOCOL_VERSION {
        ahead = cgroup_ahead(&hub).await;
        let tasks = ahead
            .as_mut()
            .map(|cgroup| cgroup.tasks_files(pid))
            .unwrap_or_default();
        // The namespaces are joined by the thread that joined the cgroup: none without it.
        let private_dirs = private_dirs.filter(|_| !tasks.is_empty());
        welcome(&hub, &mut framed, tasks, private_dirs).await;
    }
    let _ = accepted.send(Accepted {
        framed,
        version,
        peer_pid: Some(pid),
        ahead,
    });
}
