//! The web view (`/ui/`): a page and its two assets, embedded in the binary (no CDN, works
//! offline), the login that turns the admin token into a server-side session (`login`, with its
//! per-address throttle in `throttle` and the cross-site checks in `origin`; the cookie and the
//! `AdminSession` extractor in `session`), and the read-only data routes the page calls:
//! stacks, a stack's graph with its SVG drawing, a node's details, servers with the deployments
//! they hold, a Server-Sent Events stream that sends a stack's graph again whenever it changes
//! (`live`), and a stack's plan of `stack update --existing` on demand (`plan`). Every page
//! response forbids framing and anything not from the shim itself (Content-Security-Policy).
//! `ViewState` is what the view keeps in memory: the throttle, the live streams and the turn
//! of the one plan it computes at a time.

mod live;
mod login;
mod origin;
mod plan;
mod session;
mod throttle;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr};

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;

pub(super) use login::{login, logout};
pub(super) use plan::plan;
pub(crate) use session::AdminSession;

use super::limits::Slot;
use super::peer::Peer;
use super::{ApiError, AppState, PeerKey};
use crate::graph::{StackGraph, to_svg};
use crate::model::{Service, ServiceError, StackSummary};

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

/// What the web view keeps in memory, per process: the login throttle, the live streams and
/// the plans' turn.
#[derive(Default)]
pub(super) struct ViewState {
    throttle: throttle::LoginThrottle,
    live: live::Live,
    plans: plan::PlanTurn,
}

/// The client address a request counts against (the connection's, as the connection caps
/// count it; a request served without a connection, in process, counts as 0.0.0.0).
fn peer_of(parts: &Parts) -> PeerKey {
    parts.extensions.get::<Slot>().map_or(PeerKey::of(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), Slot::peer)
}

/// The request's client address, as an extractor.
pub(super) struct ClientPeer(PeerKey);

impl<S: Send + Sync> FromRequestParts<S> for ClientPeer {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<ClientPeer, Infallible> {
        Ok(ClientPeer(peer_of(parts)))
    }
}

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

/// `GET /ui/api/stacks`.
pub(super) async fn stacks<S: Service>(
    _: AdminSession,
    State(state): State<AppState<S>>,
) -> Result<Json<Vec<StackSummary>>, ApiError> {
    Ok(Json(state.service.list_stacks().await?))
}

/// A stack's graph and its drawing.
#[derive(Serialize)]
struct GraphView<'graph> {
    graph: &'graph StackGraph,
    svg: String,
}

impl GraphView<'_> {
    fn of(graph: &StackGraph) -> GraphView<'_> {
        GraphView { graph, svg: to_svg(graph) }
    }
}

/// `GET /ui/api/stacks/{name}`: `{graph, svg}`.
pub(super) async fn stack<S: Service>(
    _: AdminSession,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(name) = path?;
    let graph = state.service.stack_graph(&name).await?;
    Ok(Json(GraphView::of(&graph)).into_response())
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

/// `GET /ui/api/stacks/{name}/watch`: the stack's live stream (see `live`).
pub(super) async fn watch<S: Service>(
    caller: AdminSession,
    ClientPeer(peer): ClientPeer,
    client: Option<Extension<Peer>>,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(name) = path?;
    live::watch(&state, caller.session, (peer, client.map(|Extension(client)| client)), &name).await
}
