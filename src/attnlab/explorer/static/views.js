/* attnlab notebook views (the Python package attnlab.views): one view per notebook output,
 * drawn on <canvas> from the data its cell wrote, with attention.js (window.attnlabAttention,
 * loaded first) for the decoding, the colours and the attention map. No network, no requirejs,
 * no stylesheet: every view is its own element with inline styles, and each script adds its part
 * to attnlabAttention.views once however many views a page holds. The page's scripts, in order:
 * attention.js; views.js (this: the shared tools, the "map" view, the buttons, render and boot);
 * head_view.js, neuron_view.js, caption_memory.js (the other kinds); then each view's boot.
 *
 *   attnlabAttention.views.render(root, payload)
 *
 * payload.kind picks the drawing, attnlabAttention.views.kinds[kind] (the payloads are written
 * by attnlab/views/*.py):
 *   "map"      one attention matrix a head, every layer and head (and their mean) to pick, with
 *              or without the thumbnails of every head: attention.js's mount (heatmap, alignment,
 *              model view; Vig 2019, "A Multiscale Visualization of Attention in the Transformer
 *              Model");
 *   "lines"    bertviz's head view (head_view.js);
 *   "neuron"   bertviz's neuron view (neuron_view.js);
 *   "caption", "memory"  a captioner's attention word by word, an NTM's weightings over time
 *              (caption_memory.js).
 * After each drawing root.dataset.drawn says what is on screen and root.dataset.drawnAt when
 * (performance.now()); root.attnlabView = {canvas(), svg(), png() -> Promise of a Blob}, the
 * picture the PNG and SVG buttons save.
 */
(function () {
  "use strict";
  var A = window.attnlabAttention;
  if (!A || (A.views && A.views.version >= 1)) return;
  var node = A.node, shown = A.shown;
  var HEADS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];

  function esc(text) {  // text for SVG or HTML markup
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  function colourOf(head) { return HEADS[head % HEADS.length]; }

  function sized(canvas, width, height) {  // the map's sharp canvas (attention.js), on white
    var ctx = A.sized(canvas, width, height);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, width, height);
    return ctx;
  }

  function floats(text) {  // base64 of little-endian float32 -> Float32Array
    var bytes = A.fromBase64(text), view = new DataView(bytes.buffer), out = new Float32Array(bytes.length / 4);
    for (var i = 0; i < out.length; i++) out[i] = view.getFloat32(4 * i, true);
    return out;
  }

  function svgOpen(width, height) {
    return '<svg xmlns="http://www.w3.org/2000/svg" width="' + width + '" height="' + height + '" viewBox="0 0 ' +
      width + " " + height + '" font-family="sans-serif"><rect width="' + width + '" height="' + height +
      '" fill="#ffffff"/>';
  }
  function svgText(x, y, text, extra) {
    return '<text x="' + x + '" y="' + y + '"' + (extra || "") + ">" + esc(text) + "</text>";
  }

  function diverging(value) {  // value in [-1, 1]: orange (negative), white, blue (positive)
    var v = Math.max(-1, Math.min(1, value)), to = v >= 0 ? [31, 119, 180] : [230, 120, 20], a = Math.abs(v);
    return [0, 1, 2].map(function (c) { return Math.round(255 + (to[c] - 255) * a); });
  }
  function rgb(c) { return "rgb(" + c[0] + "," + c[1] + "," + c[2] + ")"; }

  function tooltip(root) {
    var tip = node("div", "position:fixed;z-index:20;background:#111827;color:#f9fafb;padding:3px 8px;" +
      "border-radius:4px;font-size:0.8rem;pointer-events:none;white-space:pre");
    tip.className = "attnlab-view-tip";
    tip.hidden = true;
    root.appendChild(tip);
    return window.attnlabTip(tip);
  }

  /* The heads of an attention payload (tokens, keys, layers, heads, causal, records), each
   * decoded once and kept: load(layer, head) -> Promise of a decoded record. */
  function heads(payload) {
    var source = A.embedded(payload), n = payload.tokens.length, nk = (payload.keys || payload.tokens).length;
    var causal = !!payload.causal && n === nk, kept = new Map();
    return function (layer, head) {
      var key = layer * payload.heads + head;
      if (!kept.has(key)) {
        kept.set(key, source.record(layer, head).then(function (bytes) { return A.decode(bytes, n, causal, nk); }));
      }
      return kept.get(key);
    };
  }

  /* An uint8 grid (rows × cols, row-major) as a canvas of that many pixels: colour(level). */
  function bitmap(levels, rows, cols, colour) {
    var c = document.createElement("canvas");
    c.width = cols;
    c.height = rows;
    var ctx = c.getContext("2d"), image = ctx.createImageData(cols, rows);
    for (var p = 0; p < rows * cols; p++) {
      var rgba = colour(levels[p]);
      image.data.set(rgba, 4 * p);
    }
    ctx.putImageData(image, 0, 0);
    return c;
  }

  function mapSvg(p) {  // attention.js's picture() as SVG: one rect a run of equal colour in a row
    if (!p) return null;
    var n = p.rows.length, nk = p.columns.length, cell = p.cell, m = p.margin;
    var parts = [svgOpen(m + nk * cell, m + n * cell)];
    for (var i = 0; i < n; i++) {
      for (var j = 0; j < nk;) {
        var level = p.cells[i * nk + j], run = 1;
        while (j + run < nk && p.cells[i * nk + j + run] === level) run++;
        var fill = rgb(p.rgb(level));
        if (fill !== "rgb(255,255,255)") {
          parts.push('<rect x="' + (m + j * cell) + '" y="' + (m + i * cell) + '" width="' + run * cell +
            '" height="' + cell + '" fill="' + fill + '" shape-rendering="crispEdges"/>');
        }
        j += run;
      }
    }
    if (p.labelled) {
      parts.push('<g font-family="monospace" font-size="' + Math.min(12, cell - 1) + '" fill="#111827">');
      p.rows.forEach(function (token, r) {
        parts.push(svgText(m - 4, m + r * cell + cell / 2, shown(token).slice(0, 12),
          ' text-anchor="end" dominant-baseline="middle"'));
      });
      p.columns.forEach(function (token, c) {
        parts.push('<text transform="translate(' + (m + c * cell + cell / 2) + "," + (m - 4) +
          ') rotate(-90)" dominant-baseline="middle">' + esc(shown(token).slice(0, 12)) + "</text>");
      });
      parts.push("</g>");
    }
    parts.push("</svg>");
    return parts.join("");
  }

  // "map": the attention map of attention.js, with the picked layer and head in root.dataset.drawn.
  function mapView(body, payload, mark) {
    var map = A.mount(body, A.embedded(payload), {
      layer: payload.layer, head: payload.head, scale: payload.scale, palette: payload.palette,
      grid: payload.grid, thumb: payload.thumb,
      onSelect: function (layer, head) { mark(layer + "," + head); }
    });
    return {ready: map.ready, canvas: function () { return map.map; },
      svg: function () { return mapSvg(map.picture()); }};
  }

  var kinds = {map: mapView};

  function save(blob, name) {
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = name;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(link.href); }, 10000);
  }

  function buttons(root, view, name) {
    var bar = node("div", "display:flex;gap:6px;justify-content:flex-end;margin:2px 0");
    bar.className = "attnlab-view-downloads";
    [["PNG", function () { view.png().then(function (blob) { save(blob, name + ".png"); }); }],
      ["SVG", function () {
        var text = view.svg();
        if (text) save(new Blob([text], {type: "image/svg+xml"}), name + ".svg");
      }]].forEach(function (pair) {
      var button = node("button", "font:inherit;font-size:0.8rem;padding:1px 8px;cursor:pointer", pair[0]);
      button.type = "button";
      button.title = "save the picture on screen as " + pair[0];
      button.className = "attnlab-view-" + pair[0].toLowerCase();
      button.addEventListener("click", pair[1]);
      bar.appendChild(button);
    });
    return bar;
  }

  function render(root, payload) {
    var body = root.querySelector(".attnlab-view-body") || root, tip = tooltip(root);
    body.textContent = "";
    function mark(what) {
      root.dataset.drawn = what;
      root.dataset.drawnAt = performance.now().toFixed(1);
    }
    var make = kinds[payload.kind];
    if (!make) throw new Error("attnlab view: no drawing of kind " + payload.kind);
    var view = make(body, payload, mark, tip);
    var api = {
      canvas: view.canvas,
      svg: view.svg,
      png: view.png || function () {
        return new Promise(function (resolve) { view.canvas().toBlob(resolve, "image/png"); });
      },
      ready: view.ready
    };
    root.attnlabView = api;
    root.insertBefore(buttons(root, api, payload.name || "attention"), body);
    view.ready.catch(function (err) {
      root.dataset.error = err.message;
      body.appendChild(node("p", "color:#b91c1c", "this view could not be drawn: " + err.message));
    });
    return api;
  }

  /* The mount of one view's cell: the element of that id around the running script (an output
   * shown twice, as JupyterLab's "new view for output", holds the id twice), else the page's
   * (a script a front end moved, as Notebook 6's jQuery does); tried again while the output is
   * not yet in the page. Its JSON, drawn. */
  function boot(id, script) {
    var tries = 0;
    (function find() {
      var root = null, parent = script && script.parentNode;
      if (parent) root = parent.id === id ? parent : parent.querySelector("#" + id);
      if (!root) root = document.getElementById(id);
      if (!root || !root.isConnected) {
        if (tries++ < 200) setTimeout(find, 50);
        return;
      }
      if (root.attnlabView) return;
      var data = root.querySelector("script.attnlab-view-data");
      render(root, JSON.parse(data.textContent));
    })();
  }

  A.views = {render: render, boot: boot, kinds: kinds, version: 1, tools: {
    node: node, shown: shown, esc: esc, colourOf: colourOf, sized: sized, floats: floats, svgOpen: svgOpen,
    svgText: svgText, diverging: diverging, rgb: rgb, heads: heads, bitmap: bitmap}};
})();
