//! The route table: every method and path the API serves, the credential each takes, and the
//! handler behind it. The router is built from `ROUTES`, so the table cannot drift from what is
//! served, and tests iterate it (the access matrix sends every route every kind of credential).
//! See docs/http-api.md.

use axum::routing::{MethodFilter, MethodRouter, on};

use super::{AppState, metadata, metrics, servers, signals, stacks, ui};
use crate::model::Service;

/// An HTTP method a route answers. A `GET` route answers `HEAD` too (axum does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }

    /// Whether the route's handler reads a request body (only those get a body guard).
    pub fn takes_a_body(self) -> bool {
        match self {
            Method::Post | Method::Put => true,
            Method::Get | Method::Delete => false,
        }
    }

    fn filter(self) -> MethodFilter {
        match self {
            Method::Get => MethodFilter::GET,
            Method::Post => MethodFilter::POST,
            Method::Put => MethodFilter::PUT,
            Method::Delete => MethodFilter::DELETE,
        }
    }
}

/// What proves a caller may use a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// `Authorization: Bearer <admin token>`: 401 without a bearer header, 403 for another token.
    Admin,
    /// `Authorization: Bearer <token>` of the server named in the path; 403 for every other
    /// token (the admin's included) and for servers that do not exist.
    ServerBearer,
    /// A server's token as the last path segment (os-collect-config's URL); 404 for anything else.
    ServerTokenInPath,
    /// A deployment's signal token as the last path segment; 404 for anything else.
    SignalTokenInPath,
    /// A wait condition handle's token as the last path segment; 404 for anything else.
    HandleTokenInPath,
    /// `Authorization: Bearer <metrics token or admin token>`: 401 without a bearer header, 403
    /// for another token.
    Metrics,
    /// The web view's session cookie, or the admin bearer token (as `Admin`: 401 without
    /// either, 403 for another bearer token).
    AdminSession,
    /// None: the web view's page, its assets, and its login and logout.
    Public,
}

/// The handler a route runs (one per method and path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    AddServer,
    ListServers,
    RemoveServer,
    RotateServerToken,
    ServerMetadata,
    MetadataByToken,
    CreateStack,
    ListStacks,
    ShowStack,
    UpdateStack,
    DeleteStack,
    CancelStack,
    StackFailures,
    PreviewCreate,
    PreviewUpdate,
    MarkUnhealthy,
    StackEvents,
    StackGraph,
    StackTemplate,
    StackEnvironment,
    DeploymentSignal,
    WaitConditionHeat,
    WaitConditionAws,
    Metrics,
    UiPage,
    UiAsset,
    UiLogin,
    UiLogout,
    UiStacks,
    UiStack,
    UiNode,
    UiWatch,
    UiPlan,
    UiServers,
}

/// One served method and path (axum's `{name}` syntax for a path parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    pub credential: Credential,
    pub endpoint: Endpoint,
}

const fn route(method: Method, path: &'static str, credential: Credential, endpoint: Endpoint) -> Route {
    Route { method, path, credential, endpoint }
}

/// Every route of the API.
pub const ROUTES: &[Route] = &[
    route(Method::Post, "/v1/servers", Credential::Admin, Endpoint::AddServer),
    route(Method::Get, "/v1/servers", Credential::Admin, Endpoint::ListServers),
    route(Method::Delete, "/v1/servers/{name}", Credential::Admin, Endpoint::RemoveServer),
    route(Method::Post, "/v1/servers/{name}/token", Credential::Admin, Endpoint::RotateServerToken),
    route(Method::Get, "/v1/servers/{name}/metadata", Credential::ServerBearer, Endpoint::ServerMetadata),
    route(Method::Get, "/v1/metadata/{token}", Credential::ServerTokenInPath, Endpoint::MetadataByToken),
    route(Method::Post, "/v1/stacks", Credential::Admin, Endpoint::CreateStack),
    route(Method::Get, "/v1/stacks", Credential::Admin, Endpoint::ListStacks),
    route(Method::Get, "/v1/stacks/{name}", Credential::Admin, Endpoint::ShowStack),
    route(Method::Put, "/v1/stacks/{name}", Credential::Admin, Endpoint::UpdateStack),
    route(Method::Delete, "/v1/stacks/{name}", Credential::Admin, Endpoint::DeleteStack),
    route(Method::Post, "/v1/stacks/{name}/cancel", Credential::Admin, Endpoint::CancelStack),
    route(Method::Get, "/v1/stacks/{name}/failures", Credential::Admin, Endpoint::StackFailures),
    route(Method::Post, "/v1/stacks/{name}/preview", Credential::Admin, Endpoint::PreviewCreate),
    route(Method::Put, "/v1/stacks/{name}/preview", Credential::Admin, Endpoint::PreviewUpdate),
    route(
        Method::Post,
        "/v1/stacks/{name}/resources/{resource}/mark-unhealthy",
        Credential::Admin,
        Endpoint::MarkUnhealthy,
    ),
    route(Method::Get, "/v1/stacks/{name}/events", Credential::Admin, Endpoint::StackEvents),
    route(Method::Get, "/v1/stacks/{name}/graph", Credential::Admin, Endpoint::StackGraph),
    route(Method::Get, "/v1/stacks/{name}/template", Credential::Admin, Endpoint::StackTemplate),
    route(Method::Get, "/v1/stacks/{name}/environment", Credential::Admin, Endpoint::StackEnvironment),
    route(Method::Get, "/metrics", Credential::Metrics, Endpoint::Metrics),
    route(Method::Get, "/ui/", Credential::Public, Endpoint::UiPage),
    route(Method::Get, "/ui/stacks/{name}", Credential::Public, Endpoint::UiPage),
    route(Method::Get, "/ui/servers", Credential::Public, Endpoint::UiPage),
    route(Method::Get, "/ui/assets/{file}", Credential::Public, Endpoint::UiAsset),
    route(Method::Post, "/ui/login", Credential::Public, Endpoint::UiLogin),
    route(Method::Post, "/ui/logout", Credential::Public, Endpoint::UiLogout),
    route(Method::Get, "/ui/api/stacks", Credential::AdminSession, Endpoint::UiStacks),
    route(Method::Get, "/ui/api/stacks/{name}", Credential::AdminSession, Endpoint::UiStack),
    route(Method::Get, "/ui/api/stacks/{name}/nodes/{node}", Credential::AdminSession, Endpoint::UiNode),
    route(Method::Get, "/ui/api/stacks/{name}/watch", Credential::AdminSession, Endpoint::UiWatch),
    route(Method::Get, "/ui/api/stacks/{name}/plan", Credential::AdminSession, Endpoint::UiPlan),
    route(Method::Get, "/ui/api/servers", Credential::AdminSession, Endpoint::UiServers),
    route(Method::Post, "/v1/signals/{token}", Credential::SignalTokenInPath, Endpoint::DeploymentSignal),
    route(Method::Put, "/v1/signals/{token}", Credential::SignalTokenInPath, Endpoint::DeploymentSignal),
    route(Method::Post, "/v1/waitconditions/{token}", Credential::HandleTokenInPath, Endpoint::WaitConditionHeat),
    route(Method::Put, "/v1/waitconditions/{token}", Credential::HandleTokenInPath, Endpoint::WaitConditionAws),
];

/// The method router serving `route` (the router merges routes that share a path).
pub(super) fn method_router<S: Service>(route: &Route) -> MethodRouter<AppState<S>> {
    let filter = route.method.filter();
    match route.endpoint {
        Endpoint::AddServer => on(filter, servers::add::<S>),
        Endpoint::ListServers => on(filter, servers::list::<S>),
        Endpoint::RemoveServer => on(filter, servers::remove::<S>),
        Endpoint::RotateServerToken => on(filter, servers::rotate_token::<S>),
        Endpoint::ServerMetadata => on(filter, metadata::server_metadata::<S>),
        Endpoint::MetadataByToken => on(filter, metadata::request_metadata::<S>),
        Endpoint::CreateStack => on(filter, stacks::create::<S>),
        Endpoint::ListStacks => on(filter, stacks::list::<S>),
        Endpoint::ShowStack => on(filter, stacks::show::<S>),
        Endpoint::UpdateStack => on(filter, stacks::update::<S>),
        Endpoint::DeleteStack => on(filter, stacks::delete::<S>),
        Endpoint::CancelStack => on(filter, stacks::cancel::<S>),
        Endpoint::StackFailures => on(filter, stacks::failures::<S>),
        Endpoint::PreviewCreate => on(filter, stacks::preview_create::<S>),
        Endpoint::PreviewUpdate => on(filter, stacks::preview_update::<S>),
        Endpoint::MarkUnhealthy => on(filter, stacks::mark_unhealthy::<S>),
        Endpoint::StackEvents => on(filter, stacks::events::<S>),
        Endpoint::StackGraph => on(filter, stacks::graph::<S>),
        Endpoint::StackTemplate => on(filter, stacks::template::<S>),
        Endpoint::StackEnvironment => on(filter, stacks::environment::<S>),
        Endpoint::Metrics => on(filter, metrics::scrape::<S>),
        Endpoint::UiPage => on(filter, ui::index),
        Endpoint::UiAsset => on(filter, ui::asset),
        Endpoint::UiLogin => on(filter, ui::login::<S>),
        Endpoint::UiLogout => on(filter, ui::logout::<S>),
        Endpoint::UiStacks => on(filter, ui::stacks::<S>),
        Endpoint::UiStack => on(filter, ui::stack::<S>),
        Endpoint::UiNode => on(filter, ui::node::<S>),
        Endpoint::UiWatch => on(filter, ui::watch::<S>),
        Endpoint::UiPlan => on(filter, ui::plan::<S>),
        Endpoint::UiServers => on(filter, ui::servers::<S>),
        Endpoint::DeploymentSignal => on(filter, signals::deployment::<S>),
        Endpoint::WaitConditionHeat => on(filter, signals::wait_condition_heat::<S>),
        Endpoint::WaitConditionAws => on(filter, signals::wait_condition_aws::<S>),
    }
}
