// The synthesis form of omni serve's page: POSTs to v1/audio/speech with stream_format "audio",
// feeds the bytes to a MediaSource as they arrive (mp3, aac) or plays the finished file (other formats).
"use strict";
(function () {
  const form = document.getElementById("synth");
  const status = document.getElementById("synth-status");
  const audio = document.getElementById("synth-audio");
  const keyInput = document.getElementById("synth-key");
  if (keyInput.closest("label").dataset.auth !== "required") keyInput.closest("label").hidden = true;
  keyInput.value = sessionStorage.getItem("omni-api-key") || "";
  window.omniAuthHeaders = () => (keyInput.value ? { Authorization: "Bearer " + keyInput.value } : {});
  const STREAMABLE = { mp3: "audio/mpeg", aac: 'audio/aac' };
  const TYPES = { mp3: "audio/mpeg", opus: "audio/ogg", aac: "audio/aac", flac: "audio/flac", wav: "audio/wav", pcm: "audio/wav" };

  function wavFromPcm(pcm, rate) {
    const header = new DataView(new ArrayBuffer(44));
    const put = (o, s) => [...s].forEach((c, i) => header.setUint8(o + i, c.charCodeAt(0)));
    put(0, "RIFF"); header.setUint32(4, 36 + pcm.byteLength, true); put(8, "WAVE"); put(12, "fmt ");
    header.setUint32(16, 16, true); header.setUint16(20, 1, true); header.setUint16(22, 1, true);
    header.setUint32(24, rate, true); header.setUint32(28, rate * 2, true); header.setUint16(32, 2, true);
    header.setUint16(34, 16, true); put(36, "data"); header.setUint32(40, pcm.byteLength, true);
    return new Blob([header.buffer, pcm], { type: "audio/wav" });
  }

  async function speak(event) {
    event.preventDefault();
    sessionStorage.setItem("omni-api-key", keyInput.value);
    const fmt = document.getElementById("synth-format").value;
    const body = {
      model: document.getElementById("synth-model").value,
      input: document.getElementById("synth-input").value,
      response_format: fmt,
      speed: Number(document.getElementById("synth-speed").value || 1),
      stream_format: "audio",
    };
    const voice = document.getElementById("synth-voice").value.trim();
    if (voice) body.voice = voice;
    status.textContent = "synthesising…";
    status.dataset.state = "running";
    const started = performance.now();
    const response = await fetch("v1/audio/speech", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...window.omniAuthHeaders() },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      let message = response.statusText;
      try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
      status.textContent = `error ${response.status}: ${message}`;
      status.dataset.state = "error";
      return;
    }
    const rate = Number(response.headers.get("X-Audio-Sample-Rate"));
    const reader = response.body.getReader();
    const parts = [];
    let firstMs = null, bytes = 0;
    let source = null, buffer = null;
    if (STREAMABLE[fmt] && window.MediaSource && MediaSource.isTypeSupported(STREAMABLE[fmt])) {
      source = new MediaSource();
      audio.src = URL.createObjectURL(source);
      await new Promise((resolve) => source.addEventListener("sourceopen", resolve, { once: true }));
      buffer = source.addSourceBuffer(STREAMABLE[fmt]);
    }
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (firstMs === null) firstMs = performance.now() - started;
      bytes += value.byteLength;
      parts.push(value);
      if (buffer) {
        await new Promise((resolve) => { buffer.addEventListener("updateend", resolve, { once: true }); buffer.appendBuffer(value); });
        if (audio.paused) audio.play().catch(() => {});
      }
      status.textContent = `receiving… ${bytes} bytes, first audio after ${Math.round(firstMs)} ms`;
    }
    if (source) source.endOfStream();
    else {
      const blob = fmt === "pcm" ? wavFromPcm(new Blob(parts), rate) : new Blob(parts, { type: TYPES[fmt] });
      audio.src = URL.createObjectURL(blob);
      audio.play().catch(() => {});
    }
    status.textContent = `done: ${bytes} bytes of ${fmt} at ${rate} Hz, first audio after ${Math.round(firstMs)} ms`;
    status.dataset.state = "done";
    status.dataset.bytes = String(bytes);
  }

  form.addEventListener("submit", (event) => speak(event).catch((err) => { status.textContent = "failed: " + err; status.dataset.state = "error"; }));
})();
