//! The HTTP API on axum: routes, the shared state handed to handlers, the front every
//! request passes ([`App`]: head size limit, body read timeout, login guard, metrics) and
//! the fallbacks that keep every answer in the JSON wrapper.

mod access;
mod admin;
#[cfg(test)]
mod app_testkit;
mod body_budget;
mod cluster_overview;
mod codehost;
mod error;
pub mod events;
mod host;
mod job_exec;
mod job_http;
mod job_log;
mod log_stream;
mod login;
mod origin;
mod public;
mod query;
mod read_timeout;
mod response;
#[cfg(test)]
mod roles_tests;
#[cfg(test)]
mod run_now_tests;
mod runs;
pub mod server;
#[cfg(test)]
mod session_tests;
mod signed;
#[cfg(test)]
mod signed_tests;
mod ui;
mod upcoming;
#[cfg(test)]
mod upcoming_tests;
pub mod view;
mod webhook;
mod webhook_replay;
mod write_timeout;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::future::RouteFuture;
use axum::routing::{Route, get, post};
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;

pub use body_budget::BodyBudget;
pub use error::ApiError;
pub use response::{ok, wrapper};

use crate::engine::Engine;
use proto::redact::Secret;
use read_timeout::ReadTimeout;

/// Largest request body on the webhook routes.
pub const WEBHOOK_BODY_LIMIT: usize = 25 * 1024 * 1024;
/// Time a client may keep the server waiting for the next part of a request body (see
/// `read_timeout`).
pub const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// Largest request body elsewhere.
pub const API_BODY_LIMIT: usize = 1024 * 1024;

/// Runs blocking work (file writes that sync, the user database) on the blocking pool,
/// not on the async workers that answer every other request.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| ApiError::internal("blocking task failed", err))
}

/// Where the daemon answers one reload asked for by `POST /svc/api/reload` (see
/// `admin.rs`): `Ok`, or the problems of the configuration that was refused (as
/// `--check` lists them, without secrets).
pub type ReloadReply = tokio::sync::oneshot::Sender<Result<(), Vec<String>>>;
/// The channel `POST /svc/api/reload` asks the daemon's main loop for a reload on.
pub type ReloadRequests = tokio::sync::mpsc::Sender<ReloadReply>;

/// What handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub engine: Engine,
    /// The main secret, for signed API calls and jobs without their own.
    pub secret: Arc<Secret>,
    /// The main secret as the key of a `standard` job without its own secret, decoded
    /// once ([`crate::security::standard_secret::standard_key`]); `None` when it starts with `whsec_` and is
    /// not base64 after it (refused at load when configured; see [`AppState::new`]).
    pub standard_key: Option<Arc<crate::config::WebhookKey>>,
    /// Deliveries and nonces already accepted.
    pub replay: crate::access::replay::Replay,
    /// Users and sessions of the optional login (disabled without users).
    pub login: Arc<crate::access::login::Login>,
    /// Room for webhook bodies in flight (`max_body_in_flight`).
    pub body_budget: BodyBudget,
    /// The Environment answer, built once per change of the engine.
    pub environment: Arc<view::EnvironmentCache>,
    /// Room for open event streams (`/svc/api/events`).
    pub event_streams: events::EventStreams,
    /// `trusted_proxies` (read at start): whose `X-Forwarded-For` names the client.
    pub proxies: Arc<crate::security::proxies::TrustedProxies>,
    /// Where every action is recorded.
    pub audit: crate::access::audit::AuditLog,
    /// The daemon's reload, which `POST /svc/api/reload` asks for (the one that SIGHUP
    /// runs).
    pub reload: ReloadRequests,
}

impl AppState {
    /// The state of the HTTP front, with `secret`, the main secret in use (configured, or
    /// kept in the state directory), decoded once for `standard` jobs.
    pub fn new(
        engine: Engine,
        secret: Secret,
        replay: crate::access::replay::Replay,
        login: Arc<crate::access::login::Login>,
        body_budget: BodyBudget,
        audit: crate::access::audit::AuditLog,
        reload: ReloadRequests,
    ) -> AppState {
        let standard_key =
            crate::security::standard_secret::standard_key(secret.expose().as_bytes())
                .map(|bytes| Arc::new(crate::config::WebhookKey::new(bytes)));
        if standard_key.is_none() {
            // Only a secret kept in the state directory gets here (a configured one is
            // checked at load): say it once, not with every refused delivery.
            tracing::warn!(
                "the main secret starts with whsec_ and is not base64 after it: standard \
                 webhook jobs without a secret of their own refuse every delivery"
            );
        }
        let proxies = Arc::new(crate::security::proxies::TrustedProxies::new(
            engine.main().trusted_proxies.clone(),
        ));
        AppState {
            engine,
            secret: Arc::new(secret),
            standard_key,
            replay,
            login,
            body_budget,
            environment: Arc::default(),
            event_streams: events::EventStreams::default(),
            proxies,
            audit,
            reload,
        }
    }

    /// The same state with room for `limit` event streams at once (see
    /// [`events::stream_limit`]).
    pub fn with_event_streams(self, limit: usize) -> AppState {
        AppState {
            event_streams: events::EventStreams::new(limit),
            ..self
        }
    }
}

/// The 200 answer carrying a job's view, after an action on it succeeded (`null` when
/// a reload removed the job meanwhile).
pub(super) fn job_answer(engine: &Engine, kind: crate::engine::Kind, id: &str) -> Response {
    ok(view::job_json(engine, kind, id).unwrap_or(serde_json::Value::Null))
}

/// The routes that need no session while login is enabled, as the route table marks them
/// when it registers them ([`OpenRoutes::get`], [`OpenRoutes::post`]): the login page and
/// the assets, the login calls, and the POST routes whose signature is their
/// authentication. Every other request under `/svc` needs a session; nothing outside it
/// (the public directory) does.
#[derive(Debug, Clone, Default)]
struct OpenRoutes {
    /// Open to GET and HEAD.
    get: Vec<RoutePattern>,
    /// Open to POST.
    post: Vec<RoutePattern>,
    /// The webhook routes (open to POST too): no browser session authorises them, so the
    /// `Origin` check leaves them to their signatures.
    webhooks: Vec<RoutePattern>,
}

/// The paths a route pattern matches, as far as the login check needs them.
#[derive(Debug, Clone, Copy)]
enum RoutePattern {
    /// Exactly this path.
    Exact(&'static str),
    /// Every path that starts with this (a pattern ending in a `{*wildcard}`).
    Prefix(&'static str),
}

impl RoutePattern {
    fn of(pattern: &'static str) -> RoutePattern {
        match pattern.find("{*") {
            Some(at) => RoutePattern::Prefix(&pattern[..at]),
            None => RoutePattern::Exact(pattern),
        }
    }

    fn matches(self, path: &str) -> bool {
        match self {
            RoutePattern::Exact(exact) => path == exact,
            RoutePattern::Prefix(prefix) => path.starts_with(prefix),
        }
    }
}

impl OpenRoutes {
    /// Marks the GET (and HEAD) route `pattern` open; gives `pattern` back for `route`.
    fn get(&mut self, pattern: &'static str) -> &'static str {
        self.get.push(RoutePattern::of(pattern));
        pattern
    }

    /// Marks the POST route `pattern` open; gives `pattern` back for `route`.
    fn post(&mut self, pattern: &'static str) -> &'static str {
        self.post.push(RoutePattern::of(pattern));
        pattern
    }

    /// Marks the webhook route `pattern` open to POST and outside the `Origin` check;
    /// gives `pattern` back for `route`.
    fn webhook(&mut self, pattern: &'static str) -> &'static str {
        self.webhooks.push(RoutePattern::of(pattern));
        self.post(pattern)
    }

    /// True when the `Origin` check applies to a request to `path` ([`origin`]): below
    /// `/svc`, and not a webhook delivery.
    fn origin_checked(&self, path: &str) -> bool {
        (path == "/svc" || path.starts_with("/svc/"))
            && !self.webhooks.iter().any(|pattern| pattern.matches(path))
    }

    /// True when a request needs a session while login is enabled.
    fn needs_login(&self, method: &Method, path: &str) -> bool {
        if path != "/svc" && !path.starts_with("/svc/") {
            return false;
        }
        let open = if *method == Method::GET || *method == Method::HEAD {
            &self.get
        } else if *method == Method::POST {
            &self.post
        } else {
            return true;
        };
        !open.iter().any(|pattern| pattern.matches(path))
    }
}

/// The whole application: the routes behind the front checks of [`App`].
pub fn router(state: AppState) -> App {
    let (routes, open) = routes();
    App {
        routes: routes.with_state(state.clone()),
        login: state.login,
        public_read: state.engine.main().public_read,
        open: Arc::new(open),
        hosts: host::AllowedHosts::from_main(state.engine.main()).map(Arc::new),
        proxies: state.proxies,
        body_timeout: state.engine.main().http_body_timeout,
    }
}

/// The one route table, and the routes in it that need no session.
fn routes() -> (Router<AppState>, OpenRoutes) {
    let mut open = OpenRoutes::default();
    let compressed = Router::new()
        .route("/svc/api/job_exec/log", get(job_exec::log))
        .route("/svc/api/job/log", get(job_exec::log))
        .route("/svc/api/job_http/log", get(job_http::log))
        .route("/svc/api/job_http/logs", get(job_http::recent_logs))
        .route("/svc/api/job_exec/runs", get(runs::job_runs))
        .route("/svc/api/job_http/runs", get(runs::job_http_runs))
        .layer(
            CompressionLayer::new()
                .gzip(true)
                .no_br()
                .no_deflate()
                .no_zstd(),
        );
    // Each `layer` or `route_layer` call wraps every route once more in a boxed service
    // that a request clones on its way through, so the body limits and the route tag of
    // these two groups go in as one layer, outermost first. A `route_layer` is enough:
    // `method_not_allowed_fallback` below replaces the routes' fallbacks, layers and all,
    // so their 405 answers never had these limits.
    //
    // The signed POST routes and the webhooks need no session: their signature is their
    // authentication.
    let signed = Router::new()
        .route(open.post("/svc/api/job_exec/pause"), post(job_exec::pause))
        .route(
            open.post("/svc/api/job_exec/resume"),
            post(job_exec::resume),
        )
        .route(open.post("/svc/api/job/pause"), post(job_exec::pause))
        .route(open.post("/svc/api/job/resume"), post(job_exec::resume))
        .route(
            open.post("/svc/api/job_exec/cancel"),
            post(job_exec::cancel),
        )
        .route(
            open.post("/svc/api/job_exec/trigger"),
            post(job_exec::trigger),
        )
        .route(
            open.post("/svc/api/job_http/trigger"),
            post(job_http::trigger),
        )
        .route("/svc/api/job_http", get(job_http::view))
        .route(open.post("/svc/api/job_http/pause"), post(job_http::pause))
        .route(
            open.post("/svc/api/job_http/resume"),
            post(job_http::resume),
        )
        .route(
            open.post("/svc/api/job_http/cancel"),
            post(job_http::cancel),
        )
        .route_layer((
            RequestBodyLimitLayer::new(API_BODY_LIMIT),
            DefaultBodyLimit::max(API_BODY_LIMIT),
            TagRouteLayer,
        ));
    let webhooks = Router::new()
        .route(
            open.webhook("/svc/api/job/run/{*path}"),
            post(webhook::trigger),
        )
        .route(
            open.webhook("/svc/api/job_exec/run/{*path}"),
            post(webhook::trigger),
        )
        .route(open.webhook("/svc/job/{*path}"), post(webhook::trigger))
        .route_layer((
            RequestBodyLimitLayer::new(WEBHOOK_BODY_LIMIT),
            DefaultBodyLimit::max(WEBHOOK_BODY_LIMIT),
            TagRouteLayer,
        ));
    let routes = Router::new()
        // The Environment brings its own gzip, built once per change.
        .route("/svc/api/environment", get(job_exec::environment))
        .merge(compressed)
        .route("/svc/api/metrics", get(metrics))
        .route("/svc/api/job_exec/log/stream", get(log_stream::stream))
        .route("/svc/api/events", get(events::stream))
        .route(open.post("/svc/api/login"), post(login::login))
        // Upstream's path for the same call.
        .route(open.post("/svc/api/auth/login"), post(login::login))
        .route(open.post("/svc/api/logout"), post(login::logout))
        .route("/svc/api/session", get(login::session))
        .route("/svc/api/audit", get(admin::audit))
        .route("/svc/api/cluster", get(cluster_overview::overview))
        .route("/svc/api/upcoming", get(upcoming::upcoming_slots))
        .route(open.post("/svc/api/reload"), post(admin::reload))
        .merge(ui::router(&mut open))
        .route("/svc/{*rest}", get(not_found))
        // Before the two groups, which are tagged already.
        .route_layer(TagRouteLayer)
        .merge(signed)
        .merge(webhooks)
        .fallback(public::serve)
        .method_not_allowed_fallback(method_not_allowed);
    (routes, open)
}

/// The application as the server runs it. Every request, matched or not, passes the front
/// checks in this order:
///
/// 1. the size of its head: over [`server::MAX_HEADER_BYTES`] it is answered 431;
/// 2. its `Host`, on a loopback listener or with `allowed_hosts` ([`host`]): 421 when
///    it names another site;
/// 3. its `Origin`, for a browser's request that changes something ([`origin`]): 403
///    when it names another site;
/// 4. its body gets [`BODY_READ_TIMEOUT`] between frames and `http_body_timeout` in all;
/// 5. the login check, for a request whose route needs a session (`OpenRoutes`,
///    [`crate::access::login::guard`]);
/// 6. routing; then an error answer that is not JSON is put into the wrapper
///    (`wrap_plain_errors`);
///
/// and every answer is counted in `svc_http_requests_total` by route template (`other`
/// when no route matched, for answers of the front itself and for replaced answers).
///
/// One hand-written service rather than a stack of `from_fn` middlewares: axum applies a
/// `Router::layer` to each route separately, and a request cloned the whole chain of boxed
/// services below every layer it passed, which made refusing a forged webhook cost about
/// twice the CPU of the floor server.
#[derive(Debug, Clone)]
pub struct App {
    routes: Router,
    login: Arc<crate::access::login::Login>,
    /// `public_read` (read at start): reads need no session.
    public_read: bool,
    /// The routes that need no session.
    open: Arc<OpenRoutes>,
    /// The `Host` check; `None` when there is none (see [`host`]).
    hosts: Option<Arc<host::AllowedHosts>>,
    /// `trusted_proxies`: whose `X-Forwarded-Proto` says how the client reached the
    /// service, for the `Origin` check.
    proxies: Arc<crate::security::proxies::TrustedProxies>,
    /// `http_body_timeout`: the whole-body deadline.
    body_timeout: std::time::Duration,
}

impl<B> tower::Service<axum::http::Request<B>> for App
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + Unpin + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = AppFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> AppFuture {
        let head = request.method() == Method::HEAD;
        if head_size(&request) > server::MAX_HEADER_BYTES {
            let refusal = ApiError::new(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "request headers too large",
            );
            return AppFuture::answered(head, refusal.into_response());
        }
        if let Some(hosts) = &self.hosts
            && !hosts.allows(
                request.headers().get(axum::http::header::HOST),
                request.uri(),
            )
        {
            let refusal = ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "this Host is not served here: list it in allowed_hosts",
            );
            return AppFuture::answered(head, refusal.into_response());
        }
        if let Some(refusal) = self.foreign_origin(&request) {
            return AppFuture::answered(head, refusal);
        }
        let (idle, whole) = (BODY_READ_TIMEOUT.min(self.body_timeout), self.body_timeout);
        let mut request =
            request.map(|body| axum::body::Body::new(ReadTimeout::new(body, idle, whole)));
        // The route test first: it is cheap and spares the webhooks the users' lock.
        if self
            .open
            .needs_login(request.method(), request.uri().path())
            && let Some(refusal) = login::check(&self.login, self.public_read, &mut request)
        {
            return AppFuture::answered(head, refusal);
        }
        AppFuture {
            head,
            step: Step::Routed(self.routes.call(request)),
        }
    }
}

impl App {
    /// The 403 answer of a browser's request that changes something and comes from
    /// another site ([`origin`]); `None` when it goes on.
    fn foreign_origin<B>(&self, request: &axum::http::Request<B>) -> Option<Response> {
        let headers = request.headers();
        if !origin::applies(request.method(), headers)
            || !self.open.origin_checked(request.uri().path())
        {
            return None;
        }
        // As the client reached the service: https only on a trusted proxy's word.
        let https = access::peer_of(request.extensions())
            .is_some_and(|peer| self.proxies.trusts(peer))
            && access::forwarded_https(headers);
        if origin::same_origin(headers, request.uri(), https) {
            return None;
        }
        tracing::debug!(path = request.uri().path(), "cross-origin request refused");
        Some(ApiError::new(StatusCode::FORBIDDEN, origin::FOREIGN_ORIGIN).into_response())
    }
}

/// Future of [`App`]: the routed answer, or the front's own, then wrapped and counted.
pub struct AppFuture {
    /// A HEAD request: an answer made here goes out without its body.
    head: bool,
    step: Step,
}

enum Step {
    /// Answered by the front; taken when polled.
    Answered(Option<Response>),
    Routed(RouteFuture<Infallible>),
}

impl std::fmt::Debug for AppFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppFuture")
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

impl AppFuture {
    fn answered(head: bool, response: Response) -> AppFuture {
        AppFuture {
            head,
            step: Step::Answered(Some(response)),
        }
    }
}

impl Future for AppFuture {
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let (response, made_here) = match &mut this.step {
            Step::Answered(response) => {
                let response = response.take().expect("AppFuture polled after completion");
                (wrap_plain_errors(response).0, true)
            }
            Step::Routed(future) => {
                let Poll::Ready(Ok(response)) = Pin::new(future).poll(cx) else {
                    return Poll::Pending;
                };
                wrap_plain_errors(response)
            }
        };
        // Read after wrapping: a replaced answer has lost its label and counts as `other`.
        let route = response
            .extensions()
            .get::<RouteLabel>()
            .map_or("other", |label| label.0.as_str());
        crate::metrics::http_request(route, response.status().as_u16());
        let response = if made_here {
            finish(this.head, response)
        } else {
            response
        };
        Poll::Ready(Ok(response))
    }
}

/// What axum's router does to the answers it makes (they leave the router finished this
/// way), for the answers made or replaced in front of it: a `content-length` when the
/// body's size is known, no body for HEAD.
fn finish(head: bool, mut response: Response) -> Response {
    use axum::body::HttpBody as _;
    use axum::http::header::CONTENT_LENGTH;
    if !response.headers().contains_key(CONTENT_LENGTH) {
        if let Some(size) = response.body().size_hint().exact() {
            response.headers_mut().insert(CONTENT_LENGTH, size.into());
        }
    }
    if head {
        *response.body_mut() = axum::body::Body::empty();
    }
    response
}

/// Size of a request head as the limit counts it: every header line's name and value plus
/// four bytes (`: ` and CRLF), and the request target as the URI prints.
fn head_size<B>(request: &axum::http::Request<B>) -> usize {
    request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum::<usize>()
        + uri_len(request.uri())
}

/// `uri.to_string().len()` without building the string (it ran on every request).
fn uri_len(uri: &Uri) -> usize {
    uri.scheme_str()
        .map_or(0, |scheme| scheme.len() + "://".len())
        + uri
            .authority()
            .map_or(0, |authority| authority.as_str().len())
        + uri.path().len()
        + uri.query().map_or(0, |query| "?".len() + query.len())
}

/// Route template of a matched request, carried out to [`App`] in the response.
#[derive(Debug, Clone)]
struct RouteLabel(MatchedPath);

/// Tags the answers of matched routes (only: a `route_layer`) with their [`RouteLabel`].
/// A plain layer rather than `from_fn`, which boxes a future and clones the service below
/// it on every call.
#[derive(Debug, Clone, Copy)]
struct TagRouteLayer;

impl tower::Layer<Route> for TagRouteLayer {
    type Service = TagRoute;

    fn layer(&self, inner: Route) -> TagRoute {
        TagRoute(inner)
    }
}

/// See [`TagRouteLayer`].
#[derive(Debug, Clone)]
struct TagRoute(Route);

impl<B> tower::Service<axum::http::Request<B>> for TagRoute
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = TagFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> TagFuture {
        TagFuture {
            label: request.extensions().get::<MatchedPath>().cloned(),
            inner: self.0.call(request),
        }
    }
}

/// Future of [`TagRoute`].
struct TagFuture {
    label: Option<MatchedPath>,
    inner: RouteFuture<Infallible>,
}

impl Future for TagFuture {
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Poll::Ready(Ok(mut response)) = Pin::new(&mut this.inner).poll(cx) else {
            return Poll::Pending;
        };
        if let Some(label) = this.label.take() {
            response.extensions_mut().insert(RouteLabel(label));
        }
        Poll::Ready(Ok(response))
    }
}

async fn metrics() -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::render(),
    )
        .into_response()
}

/// Puts every error answer that is not already JSON (axum's extractor rejections, the
/// body limit's 413, ...) into the wrapper. The original text is dropped: it may echo
/// the request. Also says whether the answer was replaced.
fn wrap_plain_errors(response: Response) -> (Response, bool) {
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !status.is_client_error() && !status.is_server_error() || is_json {
        return (response, false);
    }
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "request body too large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported content type",
        _ => status.canonical_reason().unwrap_or("request failed"),
    };
    (ApiError::new(status, message).into_response(), true)
}

async fn not_found() -> Response {
    ApiError::not_found("no such resource").into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").into_response()
}

#[cfg(test)]
mod routes_tests;
