// anneal's web view: stacks, a stack's component graph updated live (Server-Sent Events) with
// its rollback setting and state and the command that cancels an action in progress, a node's
// details (a deployment group's failure budget, failed members and batches), a plan of
// `stack update --existing` on demand, servers. The view changes nothing: commands are shown
// for the operator to run. Plain JavaScript, no dependencies: served by the shim, works
// offline. Text from the server goes into the page as text (textContent), never as markup; the
// one exception is the graph's SVG, which the shim builds with every name escaped.
"use strict";

// Set once per page load: a test tells a live update from a reload by it.
window.annealLoadedAt = window.annealLoadedAt || Date.now();

const sections = ["login", "stacks", "stack", "servers"];
let watch = null;
let selected = null;
let currentStack = null;

function $(id) { return document.getElementById(id); }

function show(section) {
  for (const name of sections) $(name).hidden = name !== section;
  $("error").hidden = true;
}

function fail(message) {
  $("error").textContent = message;
  $("error").hidden = false;
}

class Unauthorised extends Error {}

async function api(path) {
  const response = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (response.status === 401 || response.status === 403) throw new Unauthorised();
  if (!response.ok) {
    let message = response.statusText;
    try { message = (await response.json()).error.message; } catch (_) { /* keep the status text */ }
    throw new Error(message);
  }
  return response.json();
}

function stopWatching() {
  if (watch) { watch.close(); watch = null; }
  $("live").hidden = true;
}

// The view's own URLs: /ui/ (stacks), /ui/stacks/NAME, /ui/servers. Links within the page move
// with history.pushState, so only the first load fetches the page.
function go(path) {
  history.pushState(null, "", path);
  route();
}

function stackPath(name) { return "/ui/stacks/" + encodeURIComponent(name); }

async function route() {
  stopWatching();
  const path = location.pathname;
  try {
    if (path.startsWith("/ui/stacks/")) await showStack(decodeURIComponent(path.slice("/ui/stacks/".length)));
    else if (path === "/ui/servers") await showServers();
    else await showStacks();
    $("logout").hidden = false;
  } catch (error) {
    if (error instanceof Unauthorised) { show("login"); $("logout").hidden = true; }
    else fail(error.message);
  }
}

function cell(row, text) {
  const td = row.insertCell();
  td.textContent = text;
  return td;
}

function phaseOf(status) {
  if (status.endsWith("_COMPLETE")) return "complete";
  if (status.endsWith("_FAILED")) return "failed";
  if (status.endsWith("_IN_PROGRESS")) return "in_progress";
  return "waiting";
}

async function showStacks() {
  const stacks = await api("/ui/api/stacks");
  const body = document.querySelector("#stacks tbody");
  body.replaceChildren();
  for (const stack of stacks) {
    const row = body.insertRow();
    const link = document.createElement("a");
    link.href = stackPath(stack.name);
    link.textContent = stack.name;
    row.insertCell().append(link);
    const status = cell(row, stack.status);
    status.className = "badge phase-" + phaseOf(stack.status);
    cell(row, stack.status_reason);
    cell(row, stack.disable_rollback ? "disabled" : stack.rollback_due ? "enabled (rollback due)" : "enabled");
    cell(row, stack.updated_at);
  }
  document.querySelector("#stacks .empty").hidden = stacks.length > 0;
  show("stacks");
}

function drawGraph(view) {
  currentStack = view.graph.stack;
  $("stack-name").textContent = view.graph.stack;
  const badge = $("stack-status");
  badge.textContent = view.graph.status;
  badge.className = "badge phase-" + phaseOf(view.graph.status);
  drawFacts(view.graph);
  // Built by the shim with every name and text XML-escaped (see shim/src/graph/svg.rs).
  $("graph").innerHTML = view.svg;
  for (const node of $("graph").querySelectorAll("g.node")) {
    const name = node.getAttribute("data-name");
    if (name === selected) node.classList.add("selected");
    node.addEventListener("click", () => showNode(name));
  }
}

// A name as one shell word, so a command shown for copying runs as shown.
function shellWord(text) {
  return /^[A-Za-z0-9._\/:@%+=,-]+$/.test(text) ? text : "'" + text.replace(/'/g, "'\\''") + "'";
}

// What the stack's rollback is doing, if anything: {phase, text} or null.
function rollbackState(graph) {
  if (graph.rollback_due) {
    return { phase: "failed", text: "Rollback due: the failed " + graph.status.split("_")[0]
      + " is being rolled back to what the stack ran before (the rollback starts at once)." };
  }
  switch (graph.status) {
    case "ROLLBACK_IN_PROGRESS":
      return { phase: "in_progress", text: "Rolling back: the stack returns to what it ran before the failed change." };
    case "ROLLBACK_COMPLETE":
      return { phase: "complete", text: "Rolled back: the stack runs what it ran before the failed change." };
    case "ROLLBACK_FAILED":
      return { phase: "failed", text: "The rollback failed (the reason is above); a failed rollback is not rolled back again." };
    default:
      return null;
  }
}

// The stack's header below its name: reason, rollback setting and state, and while a create or
// update runs, the commands that cancel it (shown, never run: the view is read-only).
function drawFacts(graph) {
  $("stack-reason").textContent = graph.status_reason || "";
  $("stack-rollback").textContent = "rollback on failure: " + (graph.disable_rollback ? "disabled" : "enabled");
  const rollback = rollbackState(graph);
  const state = $("stack-rollback-state");
  state.hidden = !rollback;
  if (rollback) {
    state.textContent = rollback.text;
    state.className = "banner phase-" + rollback.phase;
  }
  const action = graph.status.split("_")[0];
  const cancellable = graph.status === "CREATE_IN_PROGRESS" || graph.status === "UPDATE_IN_PROGRESS";
  $("stack-cancel").hidden = !cancellable;
  if (!cancellable) return;
  const command = "anneal-shim stack cancel " + shellWord(graph.stack);
  $("cancel-what").textContent = "The " + action + " is in progress. To stop it (nothing new is published; "
    + "deployments already running finish):";
  $("cancel-command").textContent = command;
  $("cancel-no-rollback").textContent = command + " --no-rollback";
  $("cancel-failed").textContent = action + "_FAILED";
}

const PLAN_LABEL = "Preview a re-run (stack update --existing)";

// The plan of `stack update NAME --existing` (the failed and marked-unhealthy deployments run
// again), computed by the shim in a transaction it rolls back: nothing changes.
async function showPlan() {
  const name = currentStack;
  const button = $("plan-button");
  button.disabled = true;
  button.textContent = "Computing the preview…";
  try {
    const plan = await api("/ui/api/stacks/" + encodeURIComponent(name) + "/plan");
    if (name === currentStack) drawPlan(plan);
  } catch (error) {
    if (error instanceof Unauthorised) {
      stopWatching();
      show("login");
      $("logout").hidden = true;
    } else {
      fail("Preview of " + name + ": " + error.message);
    }
  } finally {
    button.disabled = false;
    button.textContent = PLAN_LABEL;
  }
}

function drawPlan(plan) {
  const runs = plan.runs;
  const end = "the update would end " + plan.outcome + (plan.outcome_reason ? " (" + plan.outcome_reason + ")" : "");
  $("plan-summary").textContent = "Preview at " + new Date().toLocaleTimeString() + ": " + (runs.length
    ? runs.length + " deployment run(s); " + end + "."
    : "nothing would run (no deployment failed or is marked unhealthy); " + end + ".");
  const kinds = ["added", "deleted", "replaced", "updated", "unchanged"];
  $("plan-changes").textContent = "Resources: "
    + kinds.map((kind) => kind + " " + (plan.resource_changes[kind] || []).length).join(" · ");
  const body = $("plan-runs").tBodies[0];
  body.replaceChildren();
  for (const run of runs) {
    const row = body.insertRow();
    cell(row, run.resource);
    cell(row, run.server);
    cell(row, run.action);
    cell(row, run.batch ? run.group + " batch " + run.batch : "—");
    cell(row, String(run.step));
  }
  $("plan-runs").hidden = runs.length === 0;
  $("plan-command").textContent = "anneal-shim stack update " + shellWord(plan.stack) + " --existing";
  $("plan").hidden = false;
}

async function showStack(name) {
  const view = await api("/ui/api/stacks/" + encodeURIComponent(name));
  selected = null;
  $("panel").hidden = true;
  $("plan").hidden = true;
  drawGraph(view);
  show("stack");
  watch = new EventSource("/ui/api/stacks/" + encodeURIComponent(name) + "/watch");
  watch.addEventListener("open", () => { $("live").hidden = false; });
  watch.addEventListener("error", () => {
    $("live").hidden = true;
    // A refused stream (too many views open, the session ended) is not retried by the browser.
    if (watch && watch.readyState === EventSource.CLOSED) {
      stopWatching();
      fail("Live updates stopped (too many views open, or the session ended): reload to try again.");
    }
  });
  watch.addEventListener("graph", (event) => {
    drawGraph(JSON.parse(event.data));
    if (selected) showNode(selected, true);
  });
  watch.addEventListener("gone", () => { stopWatching(); fail("The stack " + name + " is gone."); });
}

async function showNode(name, quietly) {
  selected = name;
  for (const node of $("graph").querySelectorAll("g.node")) {
    node.classList.toggle("selected", node.getAttribute("data-name") === name);
  }
  let detail;
  try {
    detail = await api("/ui/api/stacks/" + encodeURIComponent(currentStack) + "/nodes/" + encodeURIComponent(name));
  } catch (error) {
    if (!quietly) fail(error.message);
    return;
  }
  $("panel-name").textContent = detail.name;
  const facts = $("panel-facts");
  facts.replaceChildren();
  const fact = (label, value) => {
    if (value === undefined || value === null || value === "") return;
    const dt = document.createElement("dt");
    dt.textContent = label;
    const dd = document.createElement("dd");
    dd.textContent = value;
    facts.append(dt, dd);
  };
  fact("type", detail.resource_type);
  fact("status", detail.status);
  fact(detail.phase === "in_progress" ? "waiting for" : "reason", detail.status_reason);
  fact("server", detail.server);
  fact("since", detail.updated_at);
  if (detail.group) groupFacts(fact, detail.group);
  const inputs = detail.inputs || [];
  $("panel-inputs").textContent = inputs.length
    ? inputs.map((input) => input.name + " = " + JSON.stringify(input.value)).join("\n")
    : "(none published)";
  $("panel-properties").textContent = JSON.stringify(detail.properties, null, 2);
  $("panel-attributes").textContent = JSON.stringify(detail.attributes, null, 2);
  const events = $("panel-events");
  events.replaceChildren();
  for (const event of detail.events) {
    const item = document.createElement("li");
    item.textContent = event.time + " " + event.status + (event.reason ? ": " + event.reason : "");
    events.append(item);
  }
  $("panel").hidden = false;
}

// A deployment group's budget, failed members, batch and pause, as `fact(label, value)`s.
function groupFacts(fact, group) {
  if (group.members) fact("members", String(group.members));
  const budget = [];
  if (group.max_failures !== undefined) budget.push("max_failures " + group.max_failures);
  if (group.max_failure_percentage !== undefined) budget.push("max_failure_percentage " + group.max_failure_percentage);
  fact("failure budget", budget.length ? budget.join(", ") : "none (one failed member fails the group)");
  const failed = group.failed_members || [];
  if (failed.length) {
    const verdict = group.within_budget === true ? ", within the budget"
      : group.within_budget === false ? ", over the budget" : "";
    fact("failed", failed.length + " of " + group.members + verdict);
    fact("failed members", failed.join(", "));
  }
  if (group.batch) fact("batch", group.batch + " of " + group.batches);
  if (group.pause_until) {
    const seconds = Math.round((Date.parse(group.pause_until) - Date.now()) / 1000);
    fact("next batch after", group.pause_until + (seconds > 0 ? " (in " + seconds + " s)" : ""));
  }
}

async function showServers() {
  const servers = await api("/ui/api/servers");
  const body = document.querySelector("#servers tbody");
  body.replaceChildren();
  for (const server of servers) {
    const row = body.insertRow();
    cell(row, server.name);
    cell(row, server.last_seen || "never");
    cell(row, "version " + server.metadata_version);
    const list = row.insertCell();
    for (const deployment of server.deployments) {
      const line = document.createElement("div");
      const link = document.createElement("a");
      link.href = stackPath(deployment.stack);
      link.textContent = deployment.stack + " / " + deployment.name;
      const status = document.createElement("span");
      status.className = "badge phase-" + deployment.phase;
      status.textContent = deployment.status;
      line.append(link, " ", status);
      list.append(line);
    }
  }
  show("servers");
}

async function logIn(event) {
  event.preventDefault();
  const response = await fetch("/ui/login", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ token: $("token").value.trim() }),
  });
  $("token").value = "";
  if (response.ok) {
    $("login-error").textContent = "";
    route();
  } else {
    let message = "Login failed (" + response.status + ").";
    try { message = (await response.json()).error.message; } catch (_) { /* keep the status */ }
    // 403 is also a refused cross-site request; the page's own never is.
    $("login-error").textContent = message.includes("not the admin token") ? "That is not the admin token." : message;
  }
}

async function logOut() {
  stopWatching();
  history.replaceState(null, "", "/ui/");
  await fetch("/ui/logout", { method: "POST", credentials: "same-origin" });
  show("login");
  $("logout").hidden = true;
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", logIn);
  $("logout").addEventListener("click", logOut);
  $("plan-button").addEventListener("click", showPlan);
  $("panel-close").addEventListener("click", () => {
    selected = null;
    $("panel").hidden = true;
    for (const node of $("graph").querySelectorAll("g.node.selected")) node.classList.remove("selected");
  });
  // Links to the view's own pages stay in the page.
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a");
    if (!link || link.origin !== location.origin || !link.pathname.startsWith("/ui/")) return;
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    event.preventDefault();
    go(link.pathname);
  });
  window.addEventListener("popstate", route);
  route();
});
