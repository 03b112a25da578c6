// Draws the compiled topology (JSON in #topology-view) as SVG: one box per OS process,
// its replicas stacked inside, each holding its stages; edges labelled with their transport.
// In live mode (omni serve) it polls v1/topology and marks every instance's state and queue depth.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const view = JSON.parse(document.getElementById("topology-view").textContent);
  const mode = document.body.dataset.mode;
  const COL_W = 250, GAP_X = 170, STAGE_H = 34, INST_HEAD = 44, INST_PAD = 10, PROC_HEAD = 30, MARGIN = 30;

  function el(name, attrs, parent, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  // Longest-path rank of each stage from the entry, over every edge kind.
  function stageRanks() {
    const rank = {};
    view.stages.forEach((s) => (rank[s.name] = 0));
    for (let i = 0; i < view.stages.length; i++) {
      let changed = false;
      for (const e of view.edges) {
        if (e.src !== e.dst && rank[e.dst] < rank[e.src] + 1) { rank[e.dst] = rank[e.src] + 1; changed = true; }
      }
      if (!changed) break;
    }
    return rank;
  }

  function layout() {
    const rank = stageRanks();
    const procs = view.processes.slice().sort((a, b) =>
      Math.min(...a.stages.map((s) => rank[s])) - Math.min(...b.stages.map((s) => rank[s])) || a.name.localeCompare(b.name));
    const instByName = Object.fromEntries(view.instances.map((i) => [i.name, i]));
    const boxes = [], nodes = {}, instBoxes = {};
    let height = 0;
    procs.forEach((p, col) => {
      const x = MARGIN + col * (COL_W + GAP_X);
      let y = MARGIN + PROC_HEAD;
      const instances = p.instances.map((n) => instByName[n]).filter(Boolean);
      instances.forEach((inst) => {
        const h = INST_HEAD + p.stages.length * STAGE_H + INST_PAD;
        instBoxes[inst.name] = { x: x + 10, y, w: COL_W - 20, h, inst, proc: p };
        p.stages.forEach((stage, k) => {
          const node = { x: x + 22, y: y + INST_HEAD + k * STAGE_H, w: COL_W - 44, h: STAGE_H - 8, stage, instance: inst.name };
          (nodes[stage] = nodes[stage] || []).push(node);
        });
        y += h + 10;
      });
      boxes.push({ x, y: MARGIN, w: COL_W, h: y - MARGIN, proc: p });
      height = Math.max(height, y);
    });
    return { boxes, nodes, instBoxes, width: MARGIN * 2 + procs.length * (COL_W + GAP_X) - GAP_X + 170, height: height + MARGIN };
  }

  function stageNote(stage) {
    const s = view.stages.find((x) => x.name === stage) || {};
    const marks = [];
    if (stage === view.entry_stage) marks.push("entry");
    if (s.terminal) marks.push("terminal");
    return marks.length ? " (" + marks.join(", ") + ")" : "";
  }

  function draw() {
    const L = layout();
    const host = document.getElementById("graph");
    host.textContent = "";
    const svg = el("svg", { id: "topology-svg", width: L.width, height: L.height, viewBox: `0 0 ${L.width} ${L.height}`, role: "img" }, host);
    const defs = el("defs", {}, svg);
    const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }, marker);

    for (const b of L.boxes) {
      const g = el("g", { class: "process", "data-process": b.proc.name }, svg);
      el("rect", { x: b.x, y: b.y, width: b.w, height: b.h, rx: 10 }, g);
      let title = "process " + b.proc.name;
      if (b.proc.num_replicas > 1) title += ` · ${b.proc.num_replicas} replicas`;
      if (b.proc.tp_size > 1) title += ` · TP rank ${b.proc.tp_rank}/${b.proc.tp_size}`;
      el("text", { x: b.x + 12, y: b.y + 20, class: "process-title" }, g, title);
    }
    for (const ib of Object.values(L.instBoxes)) {
      const g = el("g", { class: "instance state-compiled", id: "instance-" + ib.inst.name, "data-instance": ib.inst.name, "data-state": mode === "live" ? "unknown" : "compiled" }, svg);
      el("rect", { x: ib.x, y: ib.y, width: ib.w, height: ib.h, rx: 8 }, g);
      let label = ib.inst.name;
      if (view.device === "cpu") label += " · CPU";
      else if (ib.inst.gpus.length) label += " · GPU " + ib.inst.gpus.join(",");
      el("text", { x: ib.x + 10, y: ib.y + 17, class: "instance-title" }, g, label);
      el("text", { x: ib.x + 10, y: ib.y + 33, class: "instance-state" }, g, mode === "live" ? "state: …" : "compiled (not running)");
    }
    for (const [stage, list] of Object.entries(L.nodes)) {
      for (const n of list) {
        const g = el("g", { class: "stage", "data-stage": stage, "data-instance": n.instance }, svg);
        el("rect", { x: n.x, y: n.y, width: n.w, height: n.h, rx: 5 }, g);
        el("text", { x: n.x + 8, y: n.y + n.h / 2 + 4 }, g, stage + stageNote(stage));
      }
    }
    drawEdges(svg, L);
    const table = document.getElementById("edge-table");
    if (table) {
      for (const e of view.edges) {
        const row = table.insertRow();
        row.dataset.src = e.src; row.dataset.dst = e.dst;
        for (const text of [`${e.src} → ${e.dst}`, e.kinds.join(", "), e.cross_process ? "yes" : "no", e.transport]) row.insertCell().textContent = text;
      }
    }
  }

  function drawEdges(svg, L) {
    for (const e of view.edges) {
      const srcs = L.nodes[e.src] || [], dsts = L.nodes[e.dst] || [];
      if (!srcs.length || !dsts.length) continue;
      const kind = e.process_local ? "local" : e.cross_process ? "cross" : "same";
      const src = srcs[0];
      dsts.forEach((dst, k) => {
        const g = el("g", { class: "edge " + kind, "data-src": e.src, "data-dst": e.dst, "data-transport": e.transport,
                            "data-src-instance": src.instance, "data-dst-instance": dst.instance }, svg);
        let d, lx, ly;
        if (src.instance === dst.instance || Math.abs(src.x - dst.x) < 1) {
          // in-process edges leave a node low and enter the next one high; cross-process edges use the
          // middle of a node's side, so an in-process edge and the cross edge after it never meet at one point
          const x = src.x + src.w, y1 = src.y + src.h * 0.75, y2 = dst.y + dst.h * 0.25;
          d = `M ${x} ${y1} C ${x + 30} ${y1}, ${x + 30} ${y2}, ${x} ${y2}`;
          lx = x + 32; ly = (y1 + y2) / 2;
        } else {
          const forward = dst.x > src.x;
          const x1 = forward ? src.x + src.w : src.x, x2 = forward ? dst.x : dst.x + dst.w;
          const y1 = src.y + src.h / 2, y2 = dst.y + dst.h / 2, mid = (x1 + x2) / 2;
          d = `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`;
          lx = mid; ly = (y1 + y2) / 2 - 6;
        }
        el("path", { d, "marker-end": "url(#arrow)" }, g);
        const words = e.kinds.join("+") + (kind === "cross" ? " · ZeroMQ+shm" : kind === "local" ? " · process-local" : "");
        el("title", {}, g, `${e.src} → ${e.dst}: ${e.kinds.join(", ")} — ${e.transport}`);
        if (k === 0) el("text", { x: lx, y: ly, class: "edge-label", "text-anchor": kind === "cross" ? "middle" : "start" }, g, words);
      });
    }
    separateLabels(svg);
  }

  // Move each edge label down until its box overlaps no label placed before it (labels never overlap).
  function separateLabels(svg) {
    const placed = [];
    const hits = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
    for (const label of svg.querySelectorAll("text.edge-label")) {
      for (let tries = 0; tries < 50; tries++) {
        const box = label.getBBox();
        const other = placed.find((p) => hits(box, p));
        if (!other) { placed.push(box); break; }
        label.setAttribute("y", Number(label.getAttribute("y")) + (other.y + other.height - box.y) + 2);
      }
    }
  }

  function showLive(state) {
    const instances = state.instances || {};
    for (const [name, info] of Object.entries(instances)) {
      const g = document.getElementById("instance-" + name);
      if (!g) continue;
      g.dataset.state = info.state;
      g.setAttribute("class", "instance state-" + info.state);
      const pid = info.pid ? ` · pid ${info.pid}` : "";
      const tp = info.tp ? ` · TP ${info.tp.group} rank ${info.tp.rank}/${info.tp.size} (group ${info.tp.group_state})` : "";
      g.querySelector(".instance-state").textContent = `${info.state} · queue ${info.queue_depth}${pid}${tp}`;
    }
    // a cluster run may put two processes on different nodes: that hop is TCP, not IPC + shared memory
    for (const g of document.querySelectorAll("g.edge.cross")) {
      const live = (state.transports || {})[`${g.dataset.srcInstance}->${g.dataset.dstInstance}`];
      if (!live) continue;
      g.dataset.liveTransport = live;
      const label = g.querySelector(".edge-label");
      if (label && live === "tcp") label.textContent = label.textContent.replace("ZeroMQ+shm", "ZeroMQ over TCP (other node)");
    }
    const line = document.getElementById("status-line");
    line.textContent = `server: ${state.status} · ${Object.keys(instances).length} process instance(s) · updated ${new Date().toLocaleTimeString()}`;
    line.dataset.status = state.status;
  }

  async function poll() {
    try {
      const response = await fetch("v1/topology", { headers: window.omniAuthHeaders ? window.omniAuthHeaders() : {} });
      if (response.ok) showLive((await response.json()).live);
      else document.getElementById("status-line").textContent = `server answered ${response.status} for v1/topology`;
    } catch (err) {
      document.getElementById("status-line").textContent = "server unreachable: " + err;
    }
    setTimeout(poll, 1000);
  }

  draw();
  window.omniTopology = { view, instances: view.instances.map((i) => i.name) };
  if (mode === "live") poll();
})();
