//! The shim's HTTP layer over `model::Service`: routing (the table in `routes`), authentication
//! (admin bearer token, per-server bearer tokens, capability tokens in signal URLs), request
//! parsing, conditional and long-poll metadata responses, and the mapping of every failure to a
//! JSON error body. It makes no decisions of its own and holds no state beyond the request in
//! flight: what a request means is the engine's business. It never logs a token: paths that
//! carry one are logged with the token replaced by `***`.

mod auth;
mod body;
mod budget;
mod caps;
mod conditional;
mod connection;
mod error;
mod extract;
mod held;
mod limits;
mod metadata;
mod metrics;
mod peer;
mod routes;
mod servers;
mod signals;
mod stacks;
#[cfg(test)]
mod tests;
pub mod tls;
mod ui;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::Next;
use axum::response::Response;
use tokio_util::sync::CancellationToken;

use crate::model::Service;

pub use crate::dates::{format_http_date, parse_http_date};
pub use body::{BODY_IDLE_TIMEOUT, PUBLIC_BODY_LIMIT};
pub use budget::{BodyBudgetLimits, MAX_BODIES_PER_TOKEN};
pub use connection::REQUEST_HEAD_TIMEOUT;
pub use error::ApiError;
pub use held::MAX_LONG_POLLS_PER_SERVER;
pub use limits::{ConnectionLimits, MIN_OPEN_FILES, PeerKey, Refusal};
pub use routes::{Credential, Endpoint, Method, ROUTES, Route};
pub use signals::signal_details;

/// How the HTTP layer is set up.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// SHA-256 (hex, `token::hash_token`) of the admin token.
    pub admin_token_hash: String,
    /// SHA-256 of the token that opens `GET /metrics` only (`serve --metrics-token-file`).
    pub metrics_token_hash: Option<String>,
    /// The longest a metadata long-poll is held; longer `?wait=` values are clamped to it.
    pub long_poll_max: Duration,
    /// The largest request body accepted; larger ones get 413.
    pub body_limit: usize,
    /// A request body must have arrived whole this long after its request's head, else 408.
    pub body_deadline: Duration,
    /// Caps on concurrent connections (applied by [`serve`]).
    pub limits: ConnectionLimits,
    /// Bytes of request bodies buffered at once (applied by [`serve`]).
    pub body_budget: BodyBudgetLimits,
    /// The web view's session cookie is marked `Secure` (set when serving TLS).
    pub secure_cookies: bool,
    /// Browsers reach the shim over https (it serves TLS, or its `--public-url` is https behind
    /// a proxy): the web view's POSTs then accept only an `https` `Origin`.
    pub served_over_https: bool,
}

impl ApiConfig {
    /// The default long-poll ceiling (agents are told it in `X-Anneal-Long-Poll`).
    pub const DEFAULT_LONG_POLL_MAX: Duration = Duration::from_secs(60);
    /// Heat's `max_json_body_size`.
    pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
    /// Time for a whole body: the 1 MiB limit at 35 KB/s, far beyond what an agent's signal
    /// needs, and short enough that a trickling client frees its connection soon.
    pub const DEFAULT_BODY_DEADLINE: Duration = Duration::from_secs(30);

    /// The defaults above for the given admin token hash.
    pub fn new(admin_token_hash: String) -> ApiConfig {
        ApiConfig {
            admin_token_hash,
            metrics_token_hash: None,
            long_poll_max: Self::DEFAULT_LONG_POLL_MAX,
            body_limit: Self::DEFAULT_BODY_LIMIT,
            body_deadline: Self::DEFAULT_BODY_DEADLINE,
            limits: ConnectionLimits::default(),
            body_budget: BodyBudgetLimits::default(),
            secure_cookies: false,
            served_over_https: false,
        }
    }
}

/// What every handler gets. `shutdown` ends held long-polls so a graceful shutdown is prompt.
struct AppState<S> {
    service: Arc<S>,
    config: Arc<ApiConfig>,
    shutdown: CancellationToken,
    /// The web view's login throttle and live streams.
    view: Arc<ui::ViewState>,
}

// Derived Clone would demand `S: Clone`; only the Arc is cloned.
impl<S> Clone for AppState<S> {
    fn clone(&self) -> Self {
        AppState {
            service: Arc::clone(&self.service),
            config: Arc::clone(&self.config),
            shutdown: self.shutdown.clone(),
            view: Arc::clone(&self.view),
        }
    }
}

/// The whole API. Long-polls held by this router end only by change or timeout; use
/// [`router_with_shutdown`] (as [`serve`] does) to also end them on shutdown.
pub fn router<S: Service>(service: Arc<S>, config: ApiConfig) -> Router {
    router_with_shutdown(service, config, CancellationToken::new())
}

/// The whole API; held long-polls answer 304 as soon as `shutdown` is cancelled.
pub fn router_with_shutdown<S: Service>(service: Arc<S>, config: ApiConfig, shutdown: CancellationToken) -> Router {
    let body_limit = config.body_limit;
    let body_deadline = config.body_deadline;
    let state = AppState { service, config: Arc::new(config), shutdown, view: Arc::default() };
    let served = ROUTES.iter().fold(Router::new(), |router, route| {
        // GET and DELETE handlers never read a body: no guard, whose state every held long-poll
        // would otherwise carry (a few hundred bytes each, times 10,000 agents).
        if !route.method.takes_a_body() {
            return router.route(route.path, routes::method_router(route));
        }
        // A route without a credential reads its body before anything is checked: a small one.
        let max_bytes = if route.credential == Credential::Public { PUBLIC_BODY_LIMIT } else { body_limit };
        let rules = body::BodyRules { idle: BODY_IDLE_TIMEOUT, whole: body_deadline, max_bytes };
        let guarded = routes::method_router(route)
            .layer(axum::middleware::from_fn(move |request: Request, next: Next| body::guard(request, next, rules)));
        router.route(route.path, guarded)
    });
    served
        // Must come after the routes: it is installed on the routes that exist.
        .method_not_allowed_fallback(error::method_not_allowed)
        .fallback(error::no_route)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn(log_request))
        .with_state(state)
}

/// Serves the API on `listener`, within `config.limits`, until `shutdown` is cancelled, then
/// stops accepting, ends the held long-polls and waits for the requests in flight.
pub async fn serve<S: Service>(
    listener: tokio::net::TcpListener,
    service: Arc<S>,
    config: ApiConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    serve_with_tls(listener, service, config, None, shutdown).await
}

/// [`serve`], with TLS on every connection when `tls` is given (see `tls`).
pub async fn serve_with_tls<S: Service>(
    listener: tokio::net::TcpListener,
    service: Arc<S>,
    config: ApiConfig,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let gate = limits::Gate::new(config.limits, config.body_budget);
    let app = router_with_shutdown(service, config, shutdown.clone());
    connection::serve_connections(listener, app, gate, tls, shutdown).await
}

/// One debug line per request, with tokens masked.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = redact_path(request.uri().path()).into_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::debug!(%method, %path, status = response.status().as_u16(), elapsed_ms, "request");
    response
}

/// The path with every token replaced by `***`: the segment after `/v1/metadata/`,
/// `/v1/signals/` and `/v1/waitconditions/`, and, in case a client mistyped a route, any
/// segment long enough to be a token.
pub fn redact_path(path: &str) -> Cow<'_, str> {
    const TOKEN_ROUTES: [&str; 3] = ["metadata", "signals", "waitconditions"];
    const LONGEST_PLAIN_SEGMENT: usize = 31;
    let segments: Vec<&str> = path.split('/').collect();
    let is_secret = |index: usize, segment: &str| {
        let after_token_route = index == 3 && segments[1] == "v1" && TOKEN_ROUTES.contains(&segments[2]);
        (after_token_route && !segment.is_empty()) || segment.len() > LONGEST_PLAIN_SEGMENT
    };
    if !segments.iter().enumerate().any(|(index, segment)| is_secret(index, segment)) {
        return Cow::Borrowed(path);
    }
    let masked: Vec<&str> = segments
        .iter()
        .enumerate()
        .map(|(index, segment)| if is_secret(index, segment) { "***" } else { segment })
        .collect();
    Cow::Owned(masked.join("/"))
}
