//! The admin's calls: `POST /svc/api/reload` (the daemon's reload, the one SIGHUP runs,
//! asked for over a channel) and `GET /svc/api/audit` (pages of the audit log, newest
//! first; in cluster mode the shared one, every node's entries).

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::json;

use super::access::{self, Authority, Client, no_store};
use super::login::{CurrentUser, LOGIN_REQUIRED};
use super::query::{number_up_to, param, params};
use super::{ApiError, AppState, ok, signed};
use crate::access::audit;
use crate::security::rights::{Right, Role};

/// Entries a page of the audit log holds unless `limit` says otherwise.
const DEFAULT_AUDIT_PAGE: usize = 100;

/// `POST /svc/api/reload`: an admin's session with its CSRF token, or a form body
/// `_svc_epoch=` signed with the main secret (one-time, like the other control
/// requests). 200 once reloaded; 422 naming the problems when the new configuration is
/// invalid (nothing changed); 503 when the service is stopping.
pub(super) async fn reload(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    access::to_completion(async move {
        let actor = access::claimed_actor(&state, &headers);
        let answer = reload_as(&state, &headers, &body).await;
        access::record(&state, &client, actor, audit::Action::Reload, None, &answer);
        answer
    })
    .await
}

async fn reload_as(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let what = "reload the configuration";
    if let Authority::Signature = access::authority(state, headers, Right::Administer, what)? {
        signed::check(
            state,
            signed::Action::Reload,
            signed::Epoch::Required,
            headers,
            body,
        )
        .await?;
    }
    let stopping = || ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the service is stopping");
    let (reply, outcome) = tokio::sync::oneshot::channel();
    state.reload.send(reply).await.map_err(|_| stopping())?;
    match outcome.await.map_err(|_| stopping())? {
        Ok(()) => Ok(ok(json!({ "reloaded": true }))),
        Err(problems) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "configuration not reloaded, running jobs unchanged: {}",
                problems.join("; ")
            ),
        )),
    }
}

/// `GET /svc/api/audit?limit=&before=`: up to `limit` entries (default 100, at most
/// 1,000) whose `seq` is below `before`, newest first, and the `before` of the next
/// page. With users configured only an admin's session may read it; without users it is
/// as open as every other GET.
pub(super) async fn audit(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    if state.login.enabled() {
        match request.extensions().get::<CurrentUser>() {
            Some(CurrentUser(session)) if session.role.may(Right::Administer) => {}
            Some(CurrentUser(session)) => {
                let message =
                    access::role_refusal(session.role, Right::Administer, "read the audit log");
                return Err(ApiError::new(StatusCode::FORBIDDEN, message));
            }
            // Let in by public_read: reading the log still needs an admin.
            None if state.engine.main().public_read => {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "reading the audit log needs a login with the role {}",
                        Role::Admin
                    ),
                ));
            }
            None => return Err(ApiError::unauthorized(LOGIN_REQUIRED)),
        }
    }
    let pairs = params(request.uri().query().unwrap_or_default().as_bytes());
    let limit = number_up_to(&pairs, "limit", DEFAULT_AUDIT_PAGE, audit::MAX_PAGE)?;
    let before = match param(&pairs, "before") {
        None | Some("") => None,
        Some(text) => match text.parse::<u64>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(ApiError::bad_request("before must be a positive number")),
        },
    };
    // The caller's own last action is in the page.
    state.audit.flush().await;
    if let Some(link) = state.engine.cluster() {
        return shared_audit(&link.store, before, limit).await;
    }
    let dir = state.audit.dir().to_path_buf();
    let page = super::blocking(move || audit::read_page(&dir, before, limit))
        .await?
        .map_err(|err| ApiError::internal("audit log: cannot read", err))?;
    let entries: Vec<serde_json::Value> = page
        .records
        .iter()
        .filter_map(|record| serde_json::to_value(record).ok())
        .collect();
    Ok(no_store(ok(
        json!({ "entries": entries, "next_before": page.next_before }),
    )))
}

/// A page of cluster mode's shared audit log (every node's entries, numbered by the
/// database), in the shape of a node's own: each entry with its `seq`, and its `node`.
async fn shared_audit(
    store: &crate::cluster::ClusterStore,
    before: Option<u64>,
    limit: usize,
) -> Result<Response, ApiError> {
    let limit = u32::try_from(limit).unwrap_or(u32::MAX);
    let page = store.audit_page(before, limit).await.map_err(|err| {
        if err.is_unavailable() {
            ApiError::from(crate::engine::EngineError::Unavailable)
        } else {
            ApiError::internal("audit log: cannot read the cluster's", err)
        }
    })?;
    let next_before = page
        .last()
        .filter(|last| page.len() == limit as usize && last.seq > 1)
        .map(|last| last.seq);
    let entries: Vec<serde_json::Value> = page
        .into_iter()
        .map(|shared| {
            let mut entry = shared.entry;
            if let Some(fields) = entry.as_object_mut() {
                fields.insert("seq".into(), json!(shared.seq));
            }
            entry
        })
        .collect();
    Ok(no_store(ok(
        json!({ "entries": entries, "next_before": next_before }),
    )))
}
