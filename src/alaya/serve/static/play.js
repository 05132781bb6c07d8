// alaya play: frames in (16-byte header + JPEG), validated JSON events out.
"use strict";
const canvas = document.getElementById("screen");
const ctx = canvas.getContext("2d");
const overlay = document.getElementById("overlay");
const errorBox = document.getElementById("error");
const state = { frames: 0, stats: {}, latencyMs: 0, connected: false, closed: null, lastError: "" };
window.alaya = state;                         // read by the browser test

const params = new URLSearchParams(location.search);
const wsUrl = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws` +
  (params.get("token") ? `?token=${encodeURIComponent(params.get("token"))}` : "");
const ws = new WebSocket(wsUrl);
ws.binaryType = "arraybuffer";
const send = (event) => { if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(event)); };

ws.onopen = () => { state.connected = true; };
ws.onclose = (e) => { state.closed = e.reason || String(e.code); overlay.textContent = `disconnected: ${state.closed}`; };
ws.onmessage = async (msg) => {
  if (typeof msg.data === "string") {
    const m = JSON.parse(msg.data);
    if (m.type === "stats") state.stats = m;
    if (m.type === "error") { state.lastError = m.message; errorBox.textContent = m.message; }
    return;
  }
  const view = new DataView(msg.data);
  const engineStart = view.getFloat64(8, true);
  const bitmap = await createImageBitmap(new Blob([msg.data.slice(16)], { type: "image/jpeg" }));
  if (canvas.width !== bitmap.width || canvas.height !== bitmap.height) {
    canvas.width = bitmap.width; canvas.height = bitmap.height;
    canvas.classList.toggle("wide", bitmap.width > bitmap.height);
  }
  ctx.drawImage(bitmap, 0, 0);
  state.frames += 1;
  state.latencyMs = Date.now() - engineStart * 1000;
  const s = state.stats;
  overlay.textContent = `fps ${(s.fps || 0).toFixed(1)}  latency ${state.latencyMs.toFixed(0)} ms\n` +
    `engine ${(s.engine_ms || 0).toFixed(1)} ms  model ${(s.model_ms || 0).toFixed(1)} ms\n` +
    `frame ${state.frames}  prompt: ${s.prompt || ""}`;
};

// movement: held keys -> one "move" event whenever the held set changes
const held = new Set();
const axes = () => ({
  type: "move",
  forward: (held.has("w") ? 1 : 0) - (held.has("s") ? 1 : 0),
  strafe: (held.has("d") ? 1 : 0) - (held.has("a") ? 1 : 0),
  up: (held.has(" ") ? 1 : 0) - (held.has("c") ? 1 : 0),
});
const actions = { f: "push", t: "throw", g: "spawn" };
const turns = { arrowleft: [-0.08, 0], arrowright: [0.08, 0], arrowup: [0, 0.06], arrowdown: [0, -0.06] };
const typing = () => document.activeElement && document.activeElement.tagName === "INPUT";
document.addEventListener("keydown", (e) => {
  if (typing()) return;
  const k = e.key.toLowerCase();
  if ("wasdc ".includes(k) && k.length === 1) {
    if (!held.has(k)) { held.add(k); send(axes()); }
    e.preventDefault();
  } else if (actions[k] && !e.repeat) {
    send({ type: "action", name: actions[k] });
  } else if (turns[k]) {
    send({ type: "look", dyaw: turns[k][0], dpitch: turns[k][1] });
    e.preventDefault();
  }
});
document.addEventListener("keyup", (e) => {
  const k = e.key.toLowerCase();
  if (held.delete(k)) send(axes());
});
let drag = null;
canvas.addEventListener("mousedown", (e) => { drag = [e.clientX, e.clientY]; canvas.focus(); });
window.addEventListener("mouseup", () => { drag = null; });
window.addEventListener("mousemove", (e) => {
  if (!drag) return;
  const dx = e.clientX - drag[0], dy = e.clientY - drag[1];
  drag = [e.clientX, e.clientY];
  const clamp = (v) => Math.max(-1, Math.min(1, v));
  if (dx || dy) send({ type: "look", dyaw: clamp(dx * 0.005), dpitch: clamp(-dy * 0.005) });
});
for (const name of ["push", "throw", "spawn"]) {
  document.getElementById(name).onclick = () => send({ type: "action", name });
}
document.getElementById("reset").onclick = () => send({ type: "reset" });
document.getElementById("promptForm").onsubmit = (e) => {
  e.preventDefault();
  const text = document.getElementById("prompt").value.trim();
  if (text) send({ type: "prompt", text });
  document.getElementById("prompt").blur();
};

fetch("/schema").then((r) => r.json()).then((schema) => {
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
