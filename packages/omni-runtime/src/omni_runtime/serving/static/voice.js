// Live mode and voice upload of omni serve's page.
// Live: a WebSocket to v1/audio/speech/stream; what is typed is sent as input_text.delta, raw 16-bit PCM comes back
// as audio.delta messages and is scheduled gap-free with WebAudio. Stop sends response.cancel (barge-in).
// Upload: multipart POST to v1/audio/voices; the new voice joins the voice picker.
"use strict";
(function () {
  const input = document.getElementById("live-input");
  const status = document.getElementById("live-status");
  const keyInput = document.getElementById("synth-key");
  const RATE = 24000;
  let ws = null, audio = null, sent = "", nextTime = 0, sources = [], response = null;
  let segments = 0, audioSeconds = 0, firstMs = null, startedAt = 0;

  function show(state, text) {
    status.dataset.state = state;
    status.dataset.segments = String(segments);
    status.dataset.audioSeconds = audioSeconds.toFixed(3);
    if (firstMs !== null) status.dataset.firstAudioMs = String(Math.round(firstMs));
    status.textContent = text;
  }

  function socketUrl() {
    const url = new URL("v1/audio/speech/stream", document.baseURI);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    return url.href;
  }

  function open() {
    if (ws && ws.readyState <= 1) return Promise.resolve(ws);
    const protocols = ["omni.v1"];
    if (keyInput.value) protocols.push("omni.api-key." + keyInput.value);
    ws = new WebSocket(socketUrl(), protocols);
    ws.onmessage = (event) => handle(JSON.parse(event.data));
    ws.onclose = () => show("closed", "socket closed");
    audio = audio || new AudioContext({ sampleRate: RATE });
    return new Promise((resolve, reject) => {
      ws.onopen = () => {
        const session = { response_format: "pcm", sample_rate: RATE, model: document.getElementById("synth-model").value };
        const voice = document.getElementById("synth-voice").value.trim();
        if (voice) session.voice = voice;
        ws.send(JSON.stringify({ type: "session.update", session }));
        resolve(ws);
      };
      ws.onerror = reject;
    });
  }

  function play(b64) {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const pcm = new Int16Array(bytes.buffer, 0, bytes.byteLength >> 1);
    if (!pcm.length) return;
    const buffer = audio.createBuffer(1, pcm.length, RATE);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < pcm.length; i++) channel[i] = pcm[i] / 32768;
    const source = audio.createBufferSource();
    source.buffer = buffer;
    source.connect(audio.destination);
    nextTime = Math.max(nextTime, audio.currentTime + 0.05);
    source.start(nextTime);
    nextTime += buffer.duration;
    audioSeconds += buffer.duration;
    sources.push(source);
    source.onended = () => { sources = sources.filter((s) => s !== source); };
  }

  function handle(message) {
    switch (message.type) {
      case "response.created":
        response = message.response_id; segments = 0; audioSeconds = 0; firstMs = null;
        show("speaking", "speaking…");
        break;
      case "audio.delta":
        if (message.response_id !== response) break;
        if (firstMs === null) firstMs = performance.now() - startedAt;
        play(message.audio);
        show("speaking", `speaking… first audio ${Math.round(firstMs)} ms after the first keystroke`);
        break;
      case "segment.done":
        if (message.response_id === response) segments += 1;
        break;
      case "response.done":
        if (message.response_id !== response) break;
        show(message.status === "cancelled" ? "cancelled" : "done",
          `${message.status}: ${segments} segments, ${audioSeconds.toFixed(2)} s of audio` + (firstMs === null ? "" : `, first audio after ${Math.round(firstMs)} ms`));
        response = null;
        break;
      case "error":
        show("error", "error: " + message.error.message);
        break;
    }
  }

  async function typed() {
    const text = input.value;
    if (!text.startsWith(sent)) { sent = text; return; } // an edit of what was already sent: only new text is spoken
    const delta = text.slice(sent.length);
    if (!delta) return;
    await open();
    if (!response && !sent) startedAt = performance.now();
    if (audio.state === "suspended") audio.resume();
    ws.send(JSON.stringify({ type: "input_text.delta", delta }));
    sent = text;
  }

  async function done() {
    await typed();
    if (ws && ws.readyState === 1 && sent) ws.send(JSON.stringify({ type: "input_text.done" }));
    sent = ""; input.value = "";
  }

  function stop() {
    if (ws && ws.readyState === 1) ws.send(JSON.stringify({ type: "response.cancel" }));
    sources.forEach((s) => { try { s.stop(); } catch (_) { /* already ended */ } });
    sources = []; nextTime = 0; sent = ""; input.value = "";
  }

  input.addEventListener("input", () => typed().catch((err) => show("error", "failed: " + err)));
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); done().catch((err) => show("error", "failed: " + err)); }
  });
  document.getElementById("live-done").addEventListener("click", () => done().catch((err) => show("error", "failed: " + err)));
  document.getElementById("live-stop").addEventListener("click", stop);

  const upload = document.getElementById("voice-upload");
  const uploadStatus = document.getElementById("voice-status");
  upload.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = new FormData();
    body.append("file", document.getElementById("voice-file").files[0]);
    body.append("name", document.getElementById("voice-name").value);
    body.append("ref_text", document.getElementById("voice-ref-text").value);
    body.append("model", document.getElementById("synth-model").value);
    uploadStatus.dataset.state = "running";
    uploadStatus.textContent = "uploading…";
    const reply = await fetch("v1/audio/voices", { method: "POST", headers: window.omniAuthHeaders(), body });
    const card = await reply.json().catch(() => ({ error: { message: reply.statusText } }));
    if (!reply.ok) {
      uploadStatus.dataset.state = "error";
      uploadStatus.textContent = `error ${reply.status}: ${card.error.message}`;
      return;
    }
    const option = document.createElement("option");
    option.value = card.name;
    document.getElementById("synth-voices").appendChild(option);
    uploadStatus.dataset.state = "done";
    uploadStatus.dataset.voiceId = card.id;
    uploadStatus.textContent = `uploaded ${card.name} (${card.id}, ${card.duration_seconds} s, sha256 ${card.sha256.slice(0, 12)})`;
  });
})();
