//! The web view (`/ui/`): a page and its two assets, embedded in the binary (no CDN, works
//! offline), the login that turns the admin token into a session cookie (`session`), and the
//! read-only data routes the page calls: stacks, a stack's graph with its SVG drawing, a node's
//! details, servers with the deployments they hold, and a Server-Sent Events stream that sends
//! a stack's graph again whenever it changes. Every page response forbids framing and
//! anything not from the shim itself (Content-Security-Policy).

mod session;

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::json;

pub(crate) use session::AdminSession;

use super::extract::JsonBody;
use super::{ApiError, AppState};
use crate::graph::{StackGraph, to_svg};
use crate::model::{Service, ServiceError, StackSummary};
use crate::token::{constant_time_eq, hash_token};

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

/// How often a watched stack is looked at for changes.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

const SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

fn page(content_type: &'static str, body: &'static str) -> Response {
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(SECURITY_POLICY)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (headers, body).into_response()
}

/// `GET /ui/`: the page (it asks for the token itself when the data routes answer 401).
pub(super) async fn index() -> Response {
    page("text/html; charset=utf-8", INDEX)
}

/// `GET /ui/assets/{file}`: `app.js` or `app.css`; 404 for anything else.
pub(super) async fn asset(path: Result<Path<String>, PathRejection>) -> Result<Response, ApiError> {
    let Path(file) = path?;
    match file.as_str() {
        "app.js" => Ok(page("text/javascript; charset=utf-8", SCRIPT)),
        "app.css" => Ok(page("text/css; charset=utf-8", STYLE)),
        _ => Err(ApiError::NotFound { what: "asset".into() }),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Login {
    token: String,
}

/// `POST /ui/login` with `{"token": "<admin token>"}`: 204 and the session cookie, or 403.
pub(super) async fn login<S: Service>(
    State(state): State<AppState<S>>,
    JsonBody(login): JsonBody<Login>,
) -> Result<Response, ApiError> {
    let token = login.token.trim();
    if token.is_empty() || !constant_time_eq(hash_token(token).as_bytes(), state.config.admin_token_hash.as_bytes()) {
        return Err(ApiError::Forbidden { resource: "the web view (that is not the admin token)".into() });
    }
    let cookie = session::issue(&state.config.admin_token_hash, state.config.secure_cookies);
    Ok((StatusCode::NO_CONTENT, [(header::SET_COOKIE, cookie)]).into_response())
}

/// `POST /ui/logout`: 204, and the browser forgets the session.
pub(super) async fn logout<S: Service>(State(state): State<AppState<S>>) -> Response {
    (StatusCode::NO_CONTENT, [(header::SET_COOKIE, session::clear(state.config.secure_cookies))]).into_response()
}

/// `GET /ui/api/stacks`.
pub(super) async fn stacks<S: Service>(
    _: AdminSession,
    State(state): State<AppState<S>>,
) -> Result<Json<Vec<StackSummary>>, ApiError> {
    Ok(Json(state.service.list_stacks().await?))
}

/// A stack's graph and its drawing.
#[derive(Serialize, PartialEq)]
struct GraphView {
    graph: StackGraph,
    svg: String,
}

impl GraphView {
    fn of(graph: StackGraph) -> GraphView {
        let svg = to_svg(&graph);
        GraphView { graph, svg }
    }
}

/// `GET /ui/api/stacks/{name}`: `{graph, svg}`.
pub(super) async fn stack<S: Service>(
    _: AdminSession,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(name) = path?;
    Ok(Json(GraphView::of(state.service.stack_graph(&name).await?)).into_response())
}

/// `GET /ui/api/stacks/{name}/nodes/{node}`: the side panel's `NodeDetail`.
pub(super) async fn node<S: Service>(
    _: AdminSession,
    State(state): State<AppState<S>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path((stack, node)) = path?;
    Ok(Json(state.service.node_detail(&stack, &node).await?).into_response())
}

/// One server with the deployments it holds, for the servers view.
#[derive(Serialize)]
pub(super) struct ServerView {
    name: String,
    last_seen: Option<String>,
    metadata_version: u64,
    deployments: Vec<serde_json::Value>,
}

/// `GET /ui/api/servers`.
pub(super) async fn servers<S: Service>(
    _: AdminSession,
    State(state): State<AppState<S>>,
) -> Result<Json<Vec<ServerView>>, ApiError> {
    let mut views: Vec<ServerView> = state
        .service
        .list_servers()
        .await?
        .into_iter()
        .map(|server| ServerView {
            name: server.name,
            last_seen: server.last_seen,
            metadata_version: server.metadata_version,
            deployments: Vec::new(),
        })
        .collect();
    for stack in state.service.list_stacks().await? {
        let graph = match state.service.stack_graph(&stack.name).await {
            Ok(graph) => graph,
            // Deleted between the two reads.
            Err(ServiceError::NotFound { .. }) => continue,
            Err(error) => return Err(error.into()),
        };
        for node in graph.nodes {
            let Some(view) = node.server.as_ref().and_then(|server| views.iter_mut().find(|view| &view.name == server))
            else {
                continue;
            };
            view.deployments.push(json!({"stack": stack.name, "name": node.name, "status": node.status,
                "phase": node.phase}));
        }
    }
    Ok(Json(views))
}

/// `GET /ui/api/stacks/{name}/watch`: Server-Sent Events. `graph` (`{graph, svg}`) at once and
/// again whenever the graph changes; `gone` when the stack is deleted. Ends with the shim.
pub(super) async fn watch<S: Service>(
    _: AdminSession,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Path(name) = path?;
    let first = state.service.stack_graph(&name).await?;
    let stream = futures_util::stream::unfold(
        (state, name, Some(first), None::<StackGraph>),
        |(state, name, mut next, mut last)| async move {
            loop {
                if let Some(graph) = next.take() {
                    if last.as_ref() != Some(&graph) {
                        let view = GraphView::of(graph.clone());
                        let event = Event::default().event("graph").json_data(&view).unwrap_or_default();
                        last = Some(graph);
                        return Some((Ok(event), (state, name, None, last)));
                    }
                }
                tokio::select! {
                    () = state.shutdown.cancelled() => return None,
                    () = tokio::time::sleep(WATCH_INTERVAL) => {}
                }
                match state.service.stack_graph(&name).await {
                    Ok(graph) => next = Some(graph),
                    Err(ServiceError::NotFound { .. }) => {
                        let gone = Event::default().event("gone").data(name.clone());
                        // One `gone`, then the stream ends (`last` is taken as the marker).
                        return if last.take().is_some() { Some((Ok(gone), (state, name, None, None))) } else { None };
                    }
                    // A database hiccup: try again at the next tick.
                    Err(_) => {}
                }
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
