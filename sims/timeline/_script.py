"""The page's inline style and script: zoom and pan with nothing fetched from anywhere.

Zooming is horizontal only. The ``stretch`` layer (bars, spans, bands) is scaled as one group; each
``pin`` (a glyph or a label) is only moved, so letters and markers keep their shape, and a label
that does not fit in its room at the current zoom is hidden. The axis is redrawn from the scale's
pieces, which the page carries as JSON: the script mirrors :func:`._timeline_scale.ticks`.
"""

from __future__ import annotations

import json
from typing import Any

STYLE = """
body{margin:0;background:#fff;color:#222;font:14px/1.4 sans-serif}
header{padding:10px 14px 4px;max-width:1380px}
h1{font-size:20px;margin:0 0 2px}
h2{font-size:15px;margin:12px 0 4px}
.summary{color:#444;margin:2px 0 8px}
.verdict{font-weight:bold;padding:6px 10px;border-radius:4px;display:inline-block;margin:4px 0}
.verdict.ok{background:#e3f4e8;color:#1d6b35}
.verdict.bad{background:#fbe3e3;color:#a11}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}
.facts dt{color:#666}
.facts dd{margin:0}
code,pre{font:12px/1.4 monospace}
pre{margin:0;white-space:pre-wrap}
ol.findings{margin:4px 0;padding-left:0;list-style:none}
ul.states{margin:0;padding-left:0;list-style:none}
ul.states code{overflow-wrap:anywhere}
ol.findings li{margin:3px 0;padding:3px 6px;border-left:4px solid #c98a00;background:#fdf7e6}
ol.findings li.violation{border-color:#d62728;background:#fdecec}
ol.findings li:target{outline:2px solid #333}
.badge{display:inline-block;min-width:18px;border-radius:9px;color:#fff;text-align:center;
font-weight:bold;font-size:12px;margin-right:4px;background:#c98a00}
li.violation .badge{background:#d62728}
.controls{position:sticky;top:0;z-index:1;background:#f4f4f4;border-top:1px solid #ddd;
border-bottom:1px solid #ddd;padding:4px 14px;font-size:13px}
.controls button{font-size:13px;min-width:28px;margin-right:2px}
.controls .hint{color:#666;margin-left:12px}
#zoom-level{margin-left:8px;font-weight:bold}
svg{display:block;user-select:none}
svg.dragging{cursor:grabbing}
#zs *{vector-effect:non-scaling-stroke}
.double-run:hover{fill-opacity:.3}
.flash{animation:flash 1.2s ease-out 2}
@keyframes flash{50%{opacity:.2}}
"""

SCRIPT = r"""
(() => {
  "use strict";
  const svg = document.getElementById("timeline");
  const data = JSON.parse(document.getElementById("timeline-data").textContent);
  const L = data.left, R = data.right, W = R - L, NS = "http://www.w3.org/2000/svg";
  const stretch = document.getElementById("zs");
  const axis = document.getElementById("axis");
  const level = document.getElementById("zoom-level");
  const pins = Array.from(document.querySelectorAll("#zp > .p")).map((el) => ({
    el,
    x: +el.dataset.x,
    room: el.dataset.w === undefined ? null : +el.dataset.w,
    need: +(el.dataset.n || 0),
  }));
  // The view: base x `a` is at the plot's left edge and everything is `k` times wider.
  let k = 1, a = L, pending = false;
  const clamp = (v, lo, hi) => Math.min(Math.max(v, lo), hi);
  const sx = (x) => L + (x - a) * k;

  function xOf(t) {
    let piece = data.pieces[0];
    for (const p of data.pieces) {
      if (p[0] <= t) piece = p;
      else break;
    }
    const [t0, t1, x0, x1] = piece;
    if (t1 <= t0) return (x0 + x1) / 2;
    return x0 + clamp((t - t0) / (t1 - t0), 0, 1) * (x1 - x0);
  }

  function niceStep(u) {
    if (u <= 0) return 1;
    const p = 10 ** Math.floor(Math.log10(u));
    for (const f of [1, 2, 5, 10]) if (f * p >= u) return f * p;
    return 10 * p;
  }

  function ticks(spacing) {
    const out = [], lo = a, hi = a + W / k;
    for (const [t0, t1, x0, x1, cut] of data.pieces) {
      if (cut || x1 < lo - 1 || x0 > hi + 1) continue;
      out.push([t0, true]);
      const span = t1 - t0, width = x1 - x0;
      if (span <= 0 || width <= 0) continue;
      const step = niceStep((span * spacing) / (width * k));
      const from = t0 + clamp((lo - x0) / width, 0, 1) * span;
      const to = t0 + clamp((hi - x0) / width, 0, 1) * span;
      for (let n = Math.floor(Math.max(t0, from - step) / step + 1); n * step < t1; n++) {
        const t = n * step;
        if (t > to + step) break;
        if (t > t0) out.push([t, false]);
      }
    }
    return out;
  }

  function group(text) {
    return text.replace(/^(-?\d+)/, (d) => d.replace(/\B(?=(\d{3})+(?!\d))/g, "\u2009"));
  }
  function fmtMs(t) {
    for (const digits of [0, 1, 2, 3]) {
      const f = 10 ** digits;
      if (Math.abs(t * f - Math.round(t * f)) < 1e-6) return group(t.toFixed(digits));
    }
    return group(t.toFixed(3));
  }
  function fmtStore(t) {
    const [origin, rate] = data.clock;
    return new Date(Math.floor(origin + rate * t)).toISOString().slice(11, 23);
  }

  function add(parent, tag, attrs, text) {
    const el = document.createElementNS(NS, tag);
    for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, value);
    if (text !== undefined) el.textContent = text;
    parent.appendChild(el);
  }

  function drawAxis() {
    axis.replaceChildren();
    let last = -Infinity;
    for (const [t, first] of ticks(90)) {
      const x = sx(xOf(t));
      if (x < L - 0.5 || x > R + 0.5) continue;
      add(axis, "line", { x1: x, y1: data.top - 6, x2: x, y2: data.bottom, stroke: "#e4e4e4" });
      if (x - last >= 56 || (first && x - last >= 30)) {
        const at = { x, y: data.top - 14, "text-anchor": "middle", "font-size": 10 };
        add(axis, "text", at, fmtMs(t));
        last = x;
      }
    }
    if (!data.clock) return;
    let lastRight = -Infinity;
    for (const [t] of ticks(90)) {
      const x = sx(xOf(t));
      const end = x > R - 40;
      const [left, right] = end ? [x - 70, x] : [x - 35, x + 35];
      if (x < L - 0.5 || x > R + 0.5 || left < lastRight + 8) continue;
      const anchor = end ? "end" : "middle";
      const at = { x, y: data.bottom + 16, "text-anchor": anchor, "font-size": 10 };
      add(axis, "text", at, fmtStore(t));
      add(axis, "line", { x1: x, y1: data.bottom, x2: x, y2: data.bottom + 5, stroke: "#999999" });
      lastRight = right;
    }
  }

  function apply() {
    pending = false;
    stretch.setAttribute("transform", `matrix(${k} 0 0 1 ${L - a * k} 0)`);
    for (const pin of pins) {
      pin.el.setAttribute("transform", `translate(${sx(pin.x) - pin.x} 0)`);
      if (pin.room !== null) {
        pin.el.setAttribute("display", pin.room * k >= pin.need ? "inline" : "none");
      }
    }
    drawAxis();
    const shown = k < 10 ? k.toFixed(1) : Math.round(k);
    level.textContent = k > 1.001 ? `zoom ×${shown}` : "whole trace";
  }
  function schedule() {
    if (!pending) {
      pending = true;
      requestAnimationFrame(apply);
    }
  }
  function view(newK, baseX, screenX) {
    k = clamp(newK, 1, data.maxZoom);
    a = clamp(baseX - (screenX - L) / k, L, R - W / k);
  }
  function zoomAt(factor, screenX) {
    view(k * factor, a + (screenX - L) / k, screenX);
    schedule();
  }
  function pan(dx) {
    a = clamp(a + dx / k, L, R - W / k);
    schedule();
  }
  function svgX(event) {
    const point = svg.createSVGPoint();
    point.x = event.clientX;
    point.y = event.clientY;
    return point.matrixTransform(svg.getScreenCTM().inverse()).x;
  }

  svg.addEventListener("wheel", (event) => {
    const x = svgX(event);
    if (x < L || x > R) return;
    event.preventDefault();
    const sideways = event.shiftKey || Math.abs(event.deltaX) > Math.abs(event.deltaY);
    if (sideways) pan(event.deltaX || event.deltaY);
    else zoomAt(Math.exp(-event.deltaY * 0.0015), x);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (event) => {
    const x = svgX(event);
    if (event.button === 0 && x >= L && x <= R) drag = { x, a };
  });
  window.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const moved = svgX(event) - drag.x;
    if (Math.abs(moved) > 2) svg.classList.add("dragging");
    a = clamp(drag.a - moved / k, L, R - W / k);
    schedule();
  });
  window.addEventListener("pointerup", () => {
    drag = null;
    svg.classList.remove("dragging");
  });
  svg.addEventListener("dblclick", (event) => zoomAt(event.shiftKey ? 0.5 : 2, svgX(event)));
  document.getElementById("zoom-in").onclick = () => zoomAt(1.5, (L + R) / 2);
  document.getElementById("zoom-out").onclick = () => zoomAt(1 / 1.5, (L + R) / 2);
  document.getElementById("zoom-fit").onclick = () => { k = 1; a = L; schedule(); };
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const keys = {
      "+": () => zoomAt(1.5, (L + R) / 2), "=": () => zoomAt(1.5, (L + R) / 2),
      "-": () => zoomAt(1 / 1.5, (L + R) / 2), "0": () => { k = 1; a = L; schedule(); },
      ArrowLeft: () => pan(-W * 0.2), ArrowRight: () => pan(W * 0.2),
    };
    if (keys[event.key]) {
      keys[event.key]();
      event.preventDefault();
    }
  });

  // Show a moment: zoom in (at least `atLeast` times) with time `t` in the middle.
  function show(t, atLeast) {
    view(Math.max(k, atLeast), xOf(t), (L + R) / 2);
    apply();
  }
  for (const button of document.querySelectorAll("button[data-show]")) {
    button.onclick = () => {
      show(+button.dataset.t, 8);
      svg.scrollIntoView({ block: "nearest" });
      for (const el of document.querySelectorAll(`[data-finding="${button.dataset.show}"]`)) {
        el.classList.remove("flash");
        void el.getBoundingClientRect();
        el.classList.add("flash");
      }
    };
  }
  window.timeline = {
    xOf,
    show,
    view: () => ({ k, a }),
    zoom(newK, t) { view(newK, xOf(t), (L + R) / 2); apply(); },
    fit() { k = 1; a = L; apply(); },
  };
})();
"""


def page_data(**values: Any) -> str:
    """The JSON the script reads, safe inside a ``<script>`` element."""
    text = json.dumps(values, separators=(",", ":"), sort_keys=True, allow_nan=False)
    return text.replace("</", "<\\/")
