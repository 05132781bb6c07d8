// alaya play: frames in (16-byte header + JPEG), validated JSON events out.
"use strict";
const canvas = document.getElementById("screen");
const ctx = canvas.getContext("2d");
const overlay = document.getElementById("overlay");
const errorBox = document.getElementById("error");
const state = { frames: 0, stats: {}, latencyMs: 0, connected: false, closed: null, lastError: "",
                mode: null, lastDo: null };
window.alaya = state;                         // read by the browser test

const params = new URLSearchParams(location.search);
const wsUrl = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws` +
  (params.get("token") ? `?token=${encodeURIComponent(params.get("token"))}` : "");
const ws = new WebSocket(wsUrl);
ws.binaryType = "arraybuffer";
const send = (event) => { if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(event)); };

// Close codes a browser reports without a reason from the server.
const CLOSED = { 1006: "the connection failed or was cut (is the server running?)", 1001: "the server went away" };
ws.onopen = () => { state.connected = true; };
ws.onclose = (e) => {
  // the server refuses after accepting, with a reason (and a JSON error with the whole story before it)
  state.closed = e.reason || `${e.code}: ${CLOSED[e.code] || "closed"}`;
  overlay.textContent = `disconnected: ${state.closed}`;
  if (!errorBox.textContent) errorBox.textContent = `disconnected: ${state.closed}`;
};
ws.onmessage = async (msg) => {
  if (typeof msg.data === "string") {
    const m = JSON.parse(msg.data);
    if (m.type === "stats") state.stats = m;
    if (m.type === "error") { state.lastError = m.message; errorBox.textContent = m.message; }
    if (m.type === "do") {
      state.lastDo = m;
      document.getElementById("doResult").textContent = `→ ${m.action}`;
      errorBox.textContent = "";
    }
    return;
  }
  const view = new DataView(msg.data);
  const engineStart = view.getFloat64(8, true);
  const bitmap = await createImageBitmap(new Blob([msg.data.slice(16)], { type: "image/jpeg" }));
  if (canvas.width !== bitmap.width || canvas.height !== bitmap.height) {
    canvas.width = bitmap.width; canvas.height = bitmap.height;
    canvas.classList.toggle("wide", bitmap.width > bitmap.height);
    document.getElementById("view").classList.toggle("wide", bitmap.width > bitmap.height);
  }
  ctx.drawImage(bitmap, 0, 0);
  state.frames += 1;
  state.latencyMs = Date.now() - engineStart * 1000;
  const s = state.stats;
  const engine = state.mode === "world" ? "" : `engine ${(s.engine_ms || 0).toFixed(1)} ms  `;
  overlay.textContent = `fps ${(s.fps || 0).toFixed(1)}  latency ${state.latencyMs.toFixed(0)} ms\n` +
    `${engine}model ${(s.model_ms || 0).toFixed(1)} ms\n` +
    `frame ${state.frames}  prompt: ${s.prompt || ""}`;
};

// Input, per mode (from /schema): "engine" (physics + student) or "world" (the world model).
// Held keys -> one "move" event whenever the held set changes; one-shot keys -> "action".
const held = new Set();
const key = (k) => (held.has(k) ? 1 : 0);
const MODES = {
  engine: {
    heldKeys: ["w", "a", "s", "d", "c", " "],
    axes: () => ({ type: "move", forward: key("w") - key("s"), strafe: key("d") - key("a"), up: key(" ") - key("c") }),
    actionKeys: { f: "push", t: "throw", g: "spawn" },
    turns: { arrowleft: [-0.08, 0], arrowright: [0.08, 0], arrowup: [0, 0.06], arrowdown: [0, -0.06] },
    drag: (dx, dy) => ({ type: "look", dyaw: dx * 0.005, dpitch: -dy * 0.005 }),
  },
  world: {                                    // turn + is left, pitch + is up (alaya.data.actions)
    heldKeys: ["w", "a", "s", "d", "arrowleft", "arrowright", "arrowup", "arrowdown"],
    axes: () => ({ type: "move", forward: key("w") - key("s"), strafe: key("d") - key("a"),
                   turn: key("arrowleft") - key("arrowright"), pitch: key("arrowup") - key("arrowdown") }),
    actionKeys: { " ": "jump", f: "attack", t: "spell", g: "summon" },
    turns: {},
    drag: (dx, dy) => ({ type: "look", turn: -dx * 0.02, pitch: -dy * 0.02 }),
  },
};
let mode = MODES.engine;
const typing = () => document.activeElement && document.activeElement.tagName === "INPUT";
document.addEventListener("keydown", (e) => {
  if (typing()) return;
  const k = e.key.toLowerCase();
  if (mode.heldKeys.includes(k)) {
    if (!held.has(k)) { held.add(k); send(mode.axes()); }
    e.preventDefault();
  } else if (mode.actionKeys[k]) {
    if (!e.repeat) send({ type: "action", name: mode.actionKeys[k] });
    e.preventDefault();
  } else if (mode.turns[k]) {
    send({ type: "look", dyaw: mode.turns[k][0], dpitch: mode.turns[k][1] });
    e.preventDefault();
  }
});
document.addEventListener("keyup", (e) => {
  if (held.delete(e.key.toLowerCase())) send(mode.axes());
});
let drag = null;
canvas.addEventListener("mousedown", (e) => { drag = [e.clientX, e.clientY]; canvas.focus(); });
window.addEventListener("mouseup", () => { drag = null; });
window.addEventListener("mousemove", (e) => {
  if (!drag) return;
  const dx = e.clientX - drag[0], dy = e.clientY - drag[1];
  drag = [e.clientX, e.clientY];
  if (!dx && !dy) return;
  const event = mode.drag(dx, dy);
  for (const f of Object.keys(event)) if (f !== "type") event[f] = Math.max(-1, Math.min(1, event[f]));
  send(event);
});
document.getElementById("reset").onclick = () => send({ type: "reset" });
const submitText = (formId, inputId, type) => {
  document.getElementById(formId).onsubmit = (e) => {
    e.preventDefault();
    const text = document.getElementById(inputId).value.trim();
    if (text) send({ type, text });
    document.getElementById(inputId).blur();
  };
};
submitText("promptForm", "prompt", "prompt");
submitText("doForm", "do", "do");

fetch("/schema").then((r) => r.json()).then((schema) => {
  state.mode = schema.mode;
  mode = MODES[schema.mode] || MODES.engine;
  document.body.classList.toggle("world", schema.mode === "world");
  document.getElementById("mode").textContent = schema.mode === "world"
    ? "· world model (no engine)" : "· engine + generative renderer";
  const keyOf = Object.fromEntries(Object.entries(mode.actionKeys).map(([k, name]) => [name, k]));
  const actions = document.getElementById("actions");
  for (const name of schema.actions) {
    const b = document.createElement("button");
    b.id = name;
    const k = keyOf[name];
    b.textContent = k ? `${name} (${k === " " ? "Space" : k.toUpperCase()})` : name;
    b.onclick = () => send({ type: "action", name });
    actions.append(b, " ");
  }
  const styles = document.getElementById("styles");
  for (const name of schema.styles) {
    const b = document.createElement("button");
    b.textContent = name.replace("_", " ");
    b.dataset.style = name;
    b.onclick = () => {
      send({ type: "style", name });
      for (const other of styles.children) other.classList.toggle("on", other === b);
    };
    styles.appendChild(b);
  }
  const select = document.getElementById("channel");
  for (const c of schema.channels) {
    const o = document.createElement("option");
    o.value = c; o.textContent = c;
    select.appendChild(o);
  }
  select.onchange = () => send({ type: "view", channel: select.value });
});
