// The façade's page: talks to this server through its public API only (GET /v1/models,
// POST /v1/responses streamed, GET /metrics), with the key typed here. No build step, no
// dependencies. Model output is shown as text (textContent), never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const STORED_KEY = "mlx-responses.api-key";
const STORED_MODEL = "mlx-responses.model";
const STATUS_EVERY_MS = 5000;

const state = {
  history: [], // the conversation as Responses input items, replayed each turn (store: false)
  image: null, // {name, url}: the image to send with the next message
  controller: null, // the running request's AbortController
  models: [],
};

// --- talking to the server --------------------------------------------------------------------

class ServerError extends Error {
  constructor(message, status = 0) {
    super(message);
    this.status = status; // the HTTP status of a refusal (0: none)
  }
}

function headers(json) {
  const h = {};
  const key = $("api-key").value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  if (json) h["Content-Type"] = "application/json";
  return h;
}

// What a refusal means, for a person: the status in words, then the server's own message.
function explain(status, body, text) {
  const error = body && typeof body === "object" ? body.error || body : null;
  let detail = (error && error.message) || text || "";
  if (error && error.param && !detail.includes(error.param)) detail += ` (${error.param})`;
  const said = detail ? ` The server said: ${detail}` : "";
  if (status === 401 || status === 403) {
    return `The server refused the API key (HTTP ${status}). Type the key the server was ` +
      `started with (--api-key) in the API key box above.${said}`;
  }
  if (status === 404) return `Not found (HTTP 404).${said}`;
  if (status === 413) return `The request is too large for this server (HTTP 413).${said}`;
  if (status === 429) return `The server is busy (HTTP 429): try again in a moment.${said}`;
  if (status === 503) return `The server cannot take this request now (HTTP 503).${said}`;
  if (status >= 500) return `The server failed while answering (HTTP ${status}).${said}`;
  return `The server refused the request (HTTP ${status}).${said}`;
}

async function refusal(response) {
  const text = await response.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch (_) {
    body = null;
  }
  return new ServerError(explain(response.status, body, text), response.status);
}

async function call(path, init = {}) {
  let response;
  try {
    response = await fetch(path, { ...init, headers: headers(Boolean(init.body)) });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ServerError(`Could not reach the server at ${location.origin}: is it running?`);
  }
  if (!response.ok) throw await refusal(response);
  return response;
}

// --- models and status ----------------------------------------------------------------------

async function loadModels() {
  const response = await call("/v1/models");
  const models = (await response.json()).data || [];
  state.models = models;
  const select = $("model");
  const wanted = select.value || localStorage.getItem(STORED_MODEL);
  select.replaceChildren();
  const ordered = [...models].sort((a, b) => Number(b.loaded) - Number(a.loaded));
  for (const model of ordered) {
    const option = document.createElement("option");
    option.value = model.id;
    option.textContent = `${model.id}${model.loaded ? " (loaded)" : " (loads on first use)"}`;
    select.append(option);
  }
  if (wanted && models.some((m) => m.id === wanted)) select.value = wanted;
  $("model-note").textContent = models.length ? "" : "This server serves no model.";
  return models;
}

// Prometheus text as {name: [{labels, value}]}.
function parseMetrics(text) {
  const series = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = line.match(/^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/);
    if (!match) continue;
    const labels = {};
    for (const pair of (match[3] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]] = pair[2];
    }
    (series[match[1]] ||= []).push({ labels, value: Number(match[4]) });
  }
  return series;
}

const sum = (rows, keep = () => true) =>
  (rows || []).filter((r) => keep(r.labels)).reduce((total, r) => total + r.value, 0);

function bytes(n) {
  if (!Number.isFinite(n)) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i += 1;
  }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function showStatus(rows, note) {
  const list = $("status-list");
  list.replaceChildren();
  for (const [term, value] of rows) {
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = value;
    list.append(dt, dd);
  }
  $("status-note").textContent = note;
}

async function refreshStatus() {
  const rows = [];
  const loaded = state.models.filter((m) => m.loaded);
  rows.push(["Models loaded", loaded.length ? loaded.map((m) => m.id).join(", ") : "none"]);
  rows.push(["Weights in memory", bytes(sum(loaded.map((m) => ({ labels: {}, value: m.memory_bytes }))))]);
  let note = "";
  try {
    const metrics = parseMetrics(await (await call("/metrics")).text());
    const p = "mlx_responses_";
    if (metrics[`${p}memory_bytes`]) {
      const held = sum(metrics[`${p}memory_bytes`]);
      const limit = sum(metrics[`${p}memory_limit_bytes`]);
      rows.push(["Memory held", limit ? `${bytes(held)} of ${bytes(limit)}` : bytes(held)]);
      const prompt = sum(metrics[`${p}prompt_tokens_total`]);
      const cached = sum(metrics[`${p}prompt_tokens_cached_total`]);
      const share = prompt ? ` (${Math.round((100 * cached) / prompt)}%)` : "";
      rows.push(["Prompt tokens from the cache", `${cached} of ${prompt}${share}`]);
      rows.push(["Prompt cache", bytes(sum(metrics[`${p}prompt_cache_bytes`]))]);
      rows.push(["Requests running", String(sum(metrics[`${p}num_requests_running`]))]);
      rows.push(["Requests waiting", String(sum(metrics[`${p}num_requests_waiting`]))]);
    } else {
      note = "This façade's /metrics does not include the core's (the core runs in another " +
        "process): memory, cache and queue figures are on the core's metrics port.";
    }
  } catch (error) {
    note = error.status ? `No metrics: /metrics answered HTTP ${error.status}.` : error.message;
  }
  showStatus(rows, note);
}

async function refresh() {
  try {
    await loadModels();
    hideError();
  } catch (error) {
    showError(error.message);
  }
  await refreshStatus();
}

// --- the conversation -----------------------------------------------------------------------

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = false;
}

function hideError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

function entry(kind, title) {
  const li = document.createElement("li");
  li.className = kind;
  if (title) {
    const heading = document.createElement("p");
    heading.className = "who";
    heading.textContent = title;
    li.append(heading);
  }
  $("log").append(li);
  li.scrollIntoView({ block: "end" });
  return li;
}

function userEntry(text, image) {
  const li = entry("user", "You");
  if (text) {
    const p = document.createElement("p");
    p.className = "text";
    p.textContent = text;
    li.append(p);
  }
  if (image) {
    const img = document.createElement("img");
    img.src = image.url;
    img.alt = `Image sent: ${image.name}`;
    li.append(img);
  }
}

// One output item on screen, filled by its deltas.
function itemView(item) {
  if (item.type === "reasoning") {
    const li = entry("reasoning");
    const details = document.createElement("details");
    details.open = true;
    const summary = document.createElement("summary");
    summary.textContent = "Reasoning";
    const text = document.createElement("pre");
    text.className = "text";
    details.append(summary, text);
    li.append(details);
    return { li, text };
  }
  if (item.type === "function_call") {
    const li = entry("tool-call", `Tool call: ${item.name}`);
    const text = document.createElement("pre");
    text.className = "text arguments";
    li.append(text);
    return { li, text };
  }
  if (item.type === "message") {
    const li = entry("assistant", "Assistant");
    const text = document.createElement("p");
    text.className = "text";
    li.append(text);
    return { li, text };
  }
  const li = entry("other", item.type);
  const text = document.createElement("pre");
  text.className = "text";
  li.append(text);
  return { li, text };
}

function toolResultForm(view, item) {
  const form = document.createElement("form");
  form.className = "tool-result";
  const id = `result-${item.call_id}`;
  const label = document.createElement("label");
  label.htmlFor = id;
  label.textContent = `Result of ${item.name}`;
  const input = document.createElement("input");
  input.id = id;
  const button = document.createElement("button");
  button.type = "submit";
  button.textContent = "Send result";
  form.append(label, input, button);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    form.remove();
    const output = { type: "function_call_output", call_id: item.call_id, output: input.value };
    const li = entry("tool-output", `Result of ${item.name}`);
    const p = document.createElement("pre");
    p.className = "text";
    p.textContent = input.value;
    li.append(p);
    send([output]);
  });
  view.li.append(form);
}

function options() {
  const body = {};
  const max = $("max-tokens").value.trim();
  if (max) body.max_output_tokens = Number(max);
  const instructions = $("instructions").value.trim();
  if (instructions) body.instructions = instructions;
  const tools = $("tools").value.trim();
  if (tools) {
    try {
      body.tools = JSON.parse(tools);
    } catch (error) {
      throw new ServerError(`The tools box is not valid JSON: ${error.message}`);
    }
  }
  if ($("thinking").checked) body.chat_template_kwargs = { enable_thinking: true };
  return body;
}

// Server-sent events of a streamed response, one parsed `data` object at a time.
async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = frame
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (data && data !== "[DONE]") yield JSON.parse(data);
    }
  }
}

function busy(on) {
  $("send").disabled = on;
  $("stop").disabled = !on;
}

async function send(newItems) {
  const model = $("model").value;
  if (!model) {
    showError("Pick a model first (none is listed: press Refresh, or check the API key).");
    return;
  }
  hideError();
  let body;
  try {
    body = { ...options(), model, input: [...state.history, ...newItems], stream: true, store: false };
  } catch (error) {
    showError(error.message);
    return;
  }
  const controller = new AbortController();
  state.controller = controller;
  busy(true);
  const views = {};
  let finished = null;
  try {
    const response = await call("/v1/responses", {
      method: "POST",
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    for await (const event of events(response)) {
      const view = views[event.item_id];
      switch (event.type) {
        case "response.output_item.added":
          views[event.item.id] = itemView(event.item);
          break;
        case "response.output_text.delta":
        case "response.reasoning_text.delta":
        case "response.reasoning_summary_text.delta":
        case "response.function_call_arguments.delta":
          if (view) view.text.textContent += event.delta;
          break;
        case "response.output_item.done":
          if (event.item.type === "function_call" && views[event.item.id]) {
            views[event.item.id].text.textContent = event.item.arguments;
          }
          break;
        case "response.completed":
        case "response.incomplete":
          finished = event.response;
          break;
        case "response.failed":
          finished = event.response;
          throw new ServerError(
            `The model failed: ${(event.response.error || {}).message || "no reason given"}`,
          );
        case "error":
          throw new ServerError(
            `The server stopped the reply: ${(event.error || event).message || "no reason given"}`,
          );
        default:
          break;
      }
    }
    if (!finished) throw new ServerError("The reply ended before the response was complete.");
    state.history.push(...newItems, ...finished.output);
    for (const item of finished.output) {
      if (item.type === "function_call" && views[item.id]) toolResultForm(views[item.id], item);
    }
    const usage = finished.usage || {};
    const cached = (usage.input_tokens_details || {}).cached_tokens || 0;
    const note = entry("usage");
    note.textContent =
      `${usage.input_tokens} prompt tokens (${cached} from the cache), ` +
      `${usage.output_tokens} generated` +
      (finished.status === "incomplete" ? ": stopped at the output limit" : "");
  } catch (error) {
    if (error.name === "AbortError") {
      entry("usage").textContent = "Stopped.";
    } else {
      showError(error.message);
    }
  } finally {
    state.controller = null;
    busy(false);
    refresh();
  }
}

// --- the composer ---------------------------------------------------------------------------

function attach(file) {
  if (!file) return;
  if (!file.type.startsWith("image/")) {
    showError(`${file.name} is not an image.`);
    return;
  }
  const reader = new FileReader();
  reader.onload = () => {
    state.image = { name: file.name, url: reader.result };
    $("attached").textContent = `Attached: ${file.name}`;
    $("clear-image").hidden = false;
  };
  reader.readAsDataURL(file);
}

function clearImage() {
  state.image = null;
  $("image").value = "";
  $("attached").textContent = "";
  $("clear-image").hidden = true;
}

function submit() {
  if (state.controller) return;
  const text = $("prompt").value.trim();
  const image = state.image;
  if (!text && !image) return;
  const content = [];
  if (text) content.push({ type: "input_text", text });
  if (image) content.push({ type: "input_image", image_url: image.url });
  userEntry(text, image);
  $("prompt").value = "";
  clearImage();
  send([{ type: "message", role: "user", content }]);
}

function start() {
  $("api-key").value = localStorage.getItem(STORED_KEY) || "";
  $("api-key").addEventListener("change", () => {
    localStorage.setItem(STORED_KEY, $("api-key").value.trim());
    refresh();
  });
  $("model").addEventListener("change", () => localStorage.setItem(STORED_MODEL, $("model").value));
  $("refresh").addEventListener("click", refresh);
  $("connection").addEventListener("submit", (event) => {
    event.preventDefault();
    refresh();
  });
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && state.controller) state.controller.abort();
  });
  $("stop").addEventListener("click", () => state.controller && state.controller.abort());
  $("new-chat").addEventListener("click", () => {
    state.history = [];
    $("log").replaceChildren();
    hideError();
    $("prompt").focus();
  });
  $("image").addEventListener("change", () => attach($("image").files[0]));
  $("clear-image").addEventListener("click", clearImage);
  const composer = $("composer");
  composer.addEventListener("dragover", (event) => {
    event.preventDefault();
    composer.classList.add("dropping");
  });
  composer.addEventListener("dragleave", () => composer.classList.remove("dropping"));
  composer.addEventListener("drop", (event) => {
    event.preventDefault();
    composer.classList.remove("dropping");
    attach(event.dataTransfer.files[0]);
  });
  refresh();
  setInterval(refreshStatus, STATUS_EVERY_MS);
  $("prompt").focus();
}

start();
