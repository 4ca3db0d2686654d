/* attnlab notebook views (the Python package attnlab.views): one view per notebook output,
 * drawn on <canvas> from the data its cell wrote, with attention.js (window.attnlabAttention,
 * loaded first) for the decoding, the colours and the attention map. No network, no requirejs,
 * no stylesheet: every view is its own element with inline styles, and this script only adds
 * attnlabAttention.views once however many views a page holds.
 *
 *   attnlabAttention.views.render(root, payload)
 *
 * payload.kind picks the drawing (the payloads are written by attnlab/views/*.py):
 *   "map"     one attention matrix a head, every layer and head (and their mean) to pick, with or
 *             without the thumbnails of every head: attention.js's mount (heatmap, alignment,
 *             model view; Vig 2019, "A Multiscale Visualization of Attention in the Transformer
 *             Model");
 *   "lines"   bertviz's head view: a line from each query to each key, its opacity the weight, a
 *             colour a head;
 *   "neuron"  bertviz's neuron view: one query's q, each key's k, their product dimension by
 *             dimension, q·k/√d_h and the softmax over the keys;
 *   "caption" a captioner's attention over its image, word by word (Xu et al. 2015, Figure 3);
 *   "memory"  a Neural Turing Machine's weightings over time (Graves et al. 2014, Figure 6).
 * After each drawing root.dataset.drawn says what is on screen and root.dataset.drawnAt when
 * (performance.now()); root.attnlabView = {canvas(), svg(), png() -> Promise of a Blob}, the
 * picture the PNG and SVG buttons save.
 */
(function () {
  "use strict";
  var A = window.attnlabAttention;
  if (!A || (A.views && A.views.version >= 1)) return;
  var node = A.node, shown = A.shown, esc = A.escaped;
  var HEADS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];
  var BUCKETS = 20, FAINTEST = 0.01, LINES = 4000, SCROLL = "max-height:640px;overflow:auto";

  function colourOf(head) { return HEADS[head % HEADS.length]; }

  function sized(canvas, width, height) {
    var ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    var ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
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
    return {
      show: function (text, ev) {
        tip.textContent = text;
        tip.hidden = false;
        tip.style.left = (ev.clientX + 14) + "px";
        tip.style.top = (ev.clientY + 14) + "px";
      },
      hide: function () { tip.hidden = true; }
    };
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

  // "map": the attention map of attention.js, with the picked layer and head in root.dataset.drawn.
  function mapView(body, payload, mark) {
    var map = A.mount(body, A.embedded(payload), {
      layer: payload.layer, head: payload.head, scale: payload.scale, palette: payload.palette,
      grid: payload.grid, thumb: payload.thumb,
      onSelect: function (layer, head) { mark(layer + "," + head); }
    });
    return {ready: map.ready, canvas: function () { return map.map; }, svg: map.svg};
  }

  // "lines": bertviz's head view.
  function headView(body, payload, mark, tip) {
    var tokens = payload.tokens, keys = payload.keys || tokens, n = tokens.length, nk = keys.length;
    var L = payload.layers, H = payload.heads, causal = !!payload.causal && n === nk, load = heads(payload);
    var rows = Math.max(n, nk), rowH = rows <= 64 ? 18 : rows <= 160 ? 14 : 12, font = (rowH - 5) + "px sans-serif";
    var layer = payload.layer === undefined ? L - 1 : payload.layer, on = [], focus = null, records = null, wanted = 0;
    var cached = null;  // the lines of the layer, heads and focus on screen
    for (var h = 0; h < H; h++) on.push(true);
    var bar = node("div", "margin:4px 0 8px;display:flex;align-items:flex-end;flex-wrap:wrap;gap:4px");
    var layerPick = A.picker("layer", L, "");
    layerPick.select.value = String(layer);
    if (L > 1) bar.appendChild(layerPick.wrap);
    var swatches = [];
    for (h = 0; h < H; h++) {
      var swatch = node("span", "display:inline-block;width:18px;height:18px;cursor:pointer;border-radius:3px;" +
        "background:" + colourOf(h));
      swatch.title = "head " + (h + 1) + ": click to show or hide, double-click to show it alone";
      swatch.dataset.head = String(h);
      swatches.push(swatch);
      bar.appendChild(swatch);
    }
    var note = node("span", "font-size:0.85rem;color:#374151;margin-left:8px");
    bar.appendChild(note);
    var measure = document.createElement("canvas").getContext("2d");
    measure.font = font;
    var longest = 0;
    tokens.concat(keys).forEach(function (t) { longest = Math.max(longest, measure.measureText(shown(t)).width); });
    var colW = Math.min(180, Math.max(50, Math.ceil(longest) + 12)), gap = 160, top = 6;
    var width = 2 * colW + gap, height = top + rows * rowH + 6, viewH = Math.min(height, 640);
    // A long text scrolls under a canvas of the visible height (sticky), redrawn at each scroll:
    // a canvas as tall as 512 rows would cost a frame ~100 ms to paint.
    var scroll = node("div", "max-height:" + viewH + "px;overflow-y:auto;width:" + (width + 18) + "px");
    var spacer = node("div", "position:relative;height:" + height + "px");
    var canvas = node("canvas", "display:block;position:sticky;top:0");
    canvas.className = "attnlab-view-lines";
    spacer.appendChild(canvas);
    scroll.appendChild(spacer);
    body.appendChild(bar);
    body.appendChild(scroll);

    function weightOf(record, i, j) { return causal && j > i ? 0 : record.weight(i, j); }
    function visit(each) {  // each(head, i, j, w) of every weight ≥ FAINTEST of the heads shown, the focus applied
      for (var h = 0; h < H; h++) {
        if (!on[h]) continue;
        var record = records[h], levels = record.levels;
        for (var i = 0; i < n; i++) {
          if (focus && focus[0] === "q" && focus[1] !== i) continue;
          var step = record.maxima[i] / 255, from = record.start(i), seen = causal ? i + 1 : nk;
          var least = step > 0 ? Math.ceil(FAINTEST / step - 1e-9) : 256;  // the smallest level drawn
          for (var j = 0; j < seen; j++) {
            var level = levels[from + j];
            if (level < least || (focus && focus[0] === "k" && focus[1] !== j)) continue;
            each(h, i, j, level * step);
          }
        }
      }
    }
    /* [head, i, j, w] of the lines to draw: all of a hovered token's; else at most LINES, the
     * strongest (a canvas strokes some 50 thousand lines a second), which the note says. */
    function lines() {
      if (cached) return cached;
      var counts = new Uint32Array(1001), total = 0, floor = FAINTEST, out = [];
      visit(function (h, i, j, w) { counts[Math.min(1000, Math.floor(w * 1000))]++; total++; });
      if (!focus && total > LINES) {
        var kept = 0, bin = 1000;
        while (bin > 0 && kept + counts[bin] <= LINES) kept += counts[bin--];
        floor = Math.max(FAINTEST, (kept ? bin + 1 : bin) / 1000);
      }
      visit(function (h, i, j, w) { if (w >= floor) out.push([h, i, j, w]); });
      note.textContent = focus ? "" : out.length < total ? "the " + out.length + " strongest of " + total +
        " lines (weights ≥ " + floor.toFixed(3) + "); hover a token for all of its lines" :
        "hover a token to see its lines alone";
      cached = out;
      return out;
    }
    function y(row) { return top + row * rowH + rowH / 2; }
    function paint(ctx, from, to) {  // rows' pixels from..to (CSS) of the whole drawing, into ctx at 0
      ctx.translate(0, -from);
      var active = on.filter(Boolean).length;
      if (focus) {  // the other side's tokens behind boxes of the focus's weights, one strip a head
        var strip = (colW - 8) / Math.max(1, active), s = 0;
        for (var h = 0; h < H; h++) {
          if (!on[h]) continue;
          ctx.fillStyle = colourOf(h);
          var count = focus[0] === "q" ? nk : n;
          for (var other = 0; other < count; other++) {
            var w = focus[0] === "q" ? weightOf(records[h], focus[1], other) : weightOf(records[h], other, focus[1]);
            if (w < FAINTEST) continue;
            ctx.globalAlpha = Math.min(1, w);
            var x = focus[0] === "q" ? colW + gap + 4 + s * strip : 4 + s * strip;
            ctx.fillRect(x, top + other * rowH + 1, strip, rowH - 2);
          }
          s++;
        }
        ctx.globalAlpha = 1;
      }
      var buckets = {};
      lines().forEach(function (line) {
        var a = y(line[1]), b = y(line[2]);
        if ((a < from && b < from) || (a > to && b > to)) return;  // wholly off screen
        var k = line[0] * BUCKETS + Math.min(BUCKETS - 1, Math.floor(line[3] * BUCKETS));
        (buckets[k] = buckets[k] || []).push(line);
      });
      ctx.lineWidth = 1;  // a hairline: six times faster to stroke than 1.5
      Object.keys(buckets).forEach(function (k) {
        ctx.strokeStyle = colourOf(Math.floor(k / BUCKETS));
        ctx.globalAlpha = ((k % BUCKETS) + 0.5) / BUCKETS;
        ctx.beginPath();
        buckets[k].forEach(function (line) {
          ctx.moveTo(colW, y(line[1]));
          ctx.lineTo(colW + gap, y(line[2]));
        });
        ctx.stroke();
      });
      ctx.globalAlpha = 1;
      ctx.font = font;
      ctx.textBaseline = "middle";
      ctx.fillStyle = "#111827";
      var first = Math.max(0, Math.floor((from - top) / rowH)), last = Math.min(rows, Math.ceil((to - top) / rowH) + 1);
      ctx.textAlign = "right";
      for (var i = first; i < Math.min(last, n); i++) ctx.fillText(shown(tokens[i]), colW - 6, y(i));
      ctx.textAlign = "left";
      for (var j = first; j < Math.min(last, nk); j++) ctx.fillText(shown(keys[j]), colW + gap + 6, y(j));
    }
    function draw() {
      var from = Math.min(scroll.scrollTop, height - viewH);
      paint(sized(canvas, width, viewH), from, from + viewH);
      swatches.forEach(function (sw, h) { sw.style.opacity = on[h] ? "1" : "0.25"; });
      mark(layer + ":" + on.map(function (v, h) { return v ? h : null; }).filter(function (v) { return v !== null; }));
    }
    function changed() { cached = null; if (records) draw(); }
    function show(l) {
      var ticket = ++wanted;
      layer = l;
      layerPick.select.value = String(l);
      var all = [];
      for (var h = 0; h < H; h++) all.push(load(l, h));
      return Promise.all(all).then(function (decoded) {
        if (ticket !== wanted) return;
        records = decoded;
        changed();
      });
    }
    layerPick.select.addEventListener("change", function () { show(+layerPick.select.value); });
    swatches.forEach(function (sw, h) {
      sw.addEventListener("click", function () { on[h] = !on[h]; changed(); });
      sw.addEventListener("dblclick", function () {
        on = on.map(function (_, k) { return k === h; });
        changed();
      });
    });
    var pending = false;
    scroll.addEventListener("scroll", function () {
      if (pending || !records) return;
      pending = true;
      requestAnimationFrame(function () { pending = false; draw(); });
    });
    canvas.addEventListener("mousemove", function (ev) {
      if (!records) return;
      var box = canvas.getBoundingClientRect(), x = ev.clientX - box.left;
      var row = Math.floor((ev.clientY - box.top + Math.min(scroll.scrollTop, height - viewH) - top) / rowH);
      var next = null;
      if (x < colW && row >= 0 && row < n) next = ["q", row];
      else if (x > colW + gap && row >= 0 && row < nk) next = ["k", row];
      if (String(next) !== String(focus)) { focus = next; changed(); }
      if (next) tip.show((next[0] === "q" ? "from " : "to ") + "“" + shown((next[0] === "q" ? tokens : keys)[row]) + "” (" + (row + 1) + ")", ev);
      else tip.hide();
    });
    canvas.addEventListener("mouseleave", function () { tip.hide(); if (focus) { focus = null; changed(); } });
    function png() {  // the whole drawing, every row, not only the rows on screen
      var whole = document.createElement("canvas");
      paint(sized(whole, width, height), 0, height);
      return new Promise(function (resolve) { whole.toBlob(resolve, "image/png"); });
    }
    function svg() {
      if (!records) return null;
      var parts = [svgOpen(width, height)];
      lines().forEach(function (line) {
        parts.push('<line x1="' + colW + '" y1="' + y(line[1]) + '" x2="' + (colW + gap) + '" y2="' + y(line[2]) +
          '" stroke="' + colourOf(line[0]) + '" stroke-width="1" stroke-opacity="' + line[3].toFixed(3) + '"/>');
      });
      parts.push('<g font-size="' + (rowH - 5) + '" fill="#111827" dominant-baseline="middle">');
      tokens.forEach(function (t, i) { parts.push(svgText(colW - 6, y(i), shown(t), ' text-anchor="end"')); });
      keys.forEach(function (t, j) { parts.push(svgText(colW + gap + 6, y(j), shown(t))); });
      parts.push("</g></svg>");
      return parts.join("");
    }
    return {ready: show(layer), canvas: function () { return canvas; }, svg: svg, png: png};
  }

  // "neuron": bertviz's neuron view for one layer's head.
  function neuronView(body, payload, mark, tip) {
    var tokens = payload.tokens, keys = payload.keys || tokens, n = tokens.length, nk = keys.length;
    var d = payload.d, q = floats(payload.q), k = floats(payload.k), causal = !!payload.causal && n === nk;
    var scale = 1 / Math.sqrt(d), query = payload.query === undefined ? n - 1 : payload.query;
    var cw = d <= 32 ? 8 : d <= 64 ? 5 : 3, rowH = nk <= 64 ? 16 : 9, labelled = rowH >= 12;
    var bar = node("div", "margin:4px 0 8px"), pick = A.picker("query", 0, "");
    tokens.forEach(function (t, i) { pick.select.appendChild(new Option((i + 1) + " “" + shown(t) + "”", String(i))); });
    bar.appendChild(pick.wrap);
    var caption = node("span", "font-size:0.85rem;color:#374151",
      "layer " + (payload.layer + 1) + ", head " + (payload.head + 1) + ": q · k split over the " + d + " dimensions");
    bar.appendChild(caption);
    var scroll = node("div", SCROLL), canvas = node("canvas", "display:block");
    canvas.className = "attnlab-view-neuron";
    scroll.appendChild(canvas);
    body.appendChild(bar);
    body.appendChild(scroll);
    var labelW = 110, block = d * cw, gap = 14, top = 34;
    var kx = labelW, px = kx + block + gap, sx = px + block + gap, bx = sx + 70, width = bx + 110;
    var state = null;

    function compute(i) {  // this query's products, scores and softmax over its keys
      var seen = causal ? i + 1 : nk, products = new Float32Array(seen * d), scores = new Float64Array(seen);
      var kMax = 0, pMax = 0, qMax = 0;
      for (var c = 0; c < d; c++) qMax = Math.max(qMax, Math.abs(q[i * d + c]));
      for (var j = 0; j < seen; j++) {
        var s = 0;
        for (c = 0; c < d; c++) {
          var p = q[i * d + c] * k[j * d + c];
          products[j * d + c] = p;
          s += p;
          pMax = Math.max(pMax, Math.abs(p));
          kMax = Math.max(kMax, Math.abs(k[j * d + c]));
        }
        scores[j] = s * scale;
      }
      var top_ = -Infinity, sum = 0, weights = new Float64Array(seen);
      for (j = 0; j < seen; j++) top_ = Math.max(top_, scores[j]);
      for (j = 0; j < seen; j++) sum += (weights[j] = Math.exp(scores[j] - top_));
      for (j = 0; j < seen; j++) weights[j] /= sum;
      return {i: i, seen: seen, products: products, scores: scores, weights: weights,
        kMax: kMax || 1, pMax: pMax || 1, qMax: qMax || 1};
    }
    function cells(i) {  // [x, y, w, h, colour] of every cell drawn for query i
      var out = [];
      for (var c = 0; c < d; c++) out.push([px + c * cw, 14, cw, 14, diverging(q[i * d + c] / state.qMax)]);
      for (var j = 0; j < state.seen; j++) {
        var yy = top + j * rowH;
        for (c = 0; c < d; c++) {
          out.push([kx + c * cw, yy, cw, rowH - 1, diverging(k[j * d + c] / state.kMax)]);
          out.push([px + c * cw, yy, cw, rowH - 1, diverging(state.products[j * d + c] / state.pMax)]);
        }
        out.push([bx, yy + 1, Math.max(1, 100 * state.weights[j]), rowH - 3, [31, 119, 180]]);
      }
      return out;
    }
    function texts() {  // [x, y, text, anchor]
      var out = [[kx, 10, "k (each key)", "start"], [px, 10, "q (query " + (state.i + 1) + ")   ·   q × k below", "start"],
        [sx, top - 6, "q·k/√d", "start"], [bx, top - 6, "softmax", "start"]];
      if (!labelled) return out;
      for (var j = 0; j < state.seen; j++) {
        var yy = top + j * rowH + rowH / 2;
        out.push([labelW - 6, yy, shown(keys[j]).slice(0, 14), "end"]);
        out.push([sx, yy, state.scores[j].toFixed(2), "start"]);
        out.push([bx + 104, yy, state.weights[j].toFixed(3), "end"]);
      }
      return out;
    }
    function height() { return top + nk * rowH + 6; }
    function draw(i) {
      query = i;
      pick.select.value = String(i);
      state = compute(i);
      var ctx = sized(canvas, width, height());
      cells(i).forEach(function (c) { ctx.fillStyle = rgb(c[4]); ctx.fillRect(c[0], c[1], c[2], c[3]); });
      ctx.font = "11px sans-serif";
      ctx.fillStyle = "#111827";
      ctx.textBaseline = "middle";
      texts().forEach(function (t) { ctx.textAlign = t[3] === "end" ? "right" : "left"; ctx.fillText(t[2], t[0], t[1]); });
      mark("query " + i);
    }
    pick.select.addEventListener("change", function () { draw(+pick.select.value); });
    canvas.addEventListener("mousemove", function (ev) {
      var box = canvas.getBoundingClientRect(), x = ev.clientX - box.left, yy = ev.clientY - box.top;
      var j = Math.floor((yy - top) / rowH), i = state.i;
      if (j < 0 || j >= state.seen) { tip.hide(); return; }
      var c = Math.floor((x - (x >= px ? px : kx)) / cw), text = "key " + (j + 1) + " “" + shown(keys[j]) + "”";
      if (x >= kx && c >= 0 && c < d && (x < kx + block || (x >= px && x < px + block))) {
        text += ", dimension " + (c + 1) + ": q " + q[i * d + c].toFixed(3) + " × k " + k[j * d + c].toFixed(3) +
          " = " + state.products[j * d + c].toFixed(3);
      } else {
        text += ": q·k/√d " + state.scores[j].toFixed(3) + ", softmax " + state.weights[j].toFixed(4);
      }
      tip.show(text, ev);
    });
    canvas.addEventListener("mouseleave", function () { tip.hide(); });
    function svg() {
      var parts = [svgOpen(width, height())];
      cells(query).forEach(function (c) {
        parts.push('<rect x="' + c[0] + '" y="' + c[1] + '" width="' + c[2] + '" height="' + c[3] + '" fill="' +
          rgb(c[4]) + '"/>');
      });
      parts.push('<g font-size="11" fill="#111827" dominant-baseline="middle">');
      texts().forEach(function (t) { parts.push(svgText(t[0], t[1], t[2], ' text-anchor="' + t[3] + '"')); });
      parts.push("</g></svg>");
      return parts.join("");
    }
    draw(query);
    return {ready: Promise.resolve(), canvas: function () { return canvas; }, svg: svg};
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

  // "caption": the image once, then one tile a word with the attention that wrote it.
  function captionView(body, payload, mark, tip) {
    var img = payload.image, words = payload.words, T = words.length, h = payload.grid[0], w = payload.grid[1];
    var pixels = A.fromBase64(img.data), channels = img.channels, index = [];
    for (var p = 0; p < img.width * img.height; p++) index.push(p);
    var picture = bitmap(index, img.height, img.width, function (at) {  // grey (1 channel) or RGB (3), HWC
      var base = at * channels;
      return channels === 1 ? [pixels[base], pixels[base], pixels[base], 255]
        : [pixels[base], pixels[base + 1], pixels[base + 2], 255];
    });
    var maps = A.decode(A.fromBase64(payload.maps), T, false, h * w);
    var masks = [];
    for (var t = 0; t < T; t++) {  // darkness where the word did not look: 1 - weight / its largest
      masks.push(bitmap(maps.levels.subarray(t * h * w, (t + 1) * h * w), h, w,
        function (v) { return [0, 0, 0, Math.round(200 * (1 - v / 255))]; }));
    }
    var tile = Math.max(64, Math.min(128, Math.floor(720 / Math.min(T + 1, 6)) - 10)), pad = 8, label = 18;
    var per = Math.max(1, Math.min(T + 1, Math.floor(760 / (tile + pad)))), rowsN = Math.ceil((T + 1) / per);
    var width = per * (tile + pad) + pad, height = rowsN * (tile + label + pad) + pad;
    var canvas = node("canvas", "display:block");
    canvas.className = "attnlab-view-caption";
    body.appendChild(canvas);
    function at(index) { return [pad + (index % per) * (tile + pad), pad + Math.floor(index / per) * (tile + label + pad)]; }
    function draw() {
      var ctx = sized(canvas, width, height);
      ctx.imageSmoothingEnabled = true;
      ctx.font = "12px sans-serif";
      ctx.textAlign = "center";
      ctx.fillStyle = "#111827";
      for (var index = 0; index <= T; index++) {
        var xy = at(index);
        ctx.drawImage(picture, xy[0], xy[1], tile, tile);
        if (index > 0) ctx.drawImage(masks[index - 1], xy[0], xy[1], tile, tile);
        ctx.fillText(index === 0 ? "image" : shown(words[index - 1]), xy[0] + tile / 2, xy[1] + tile + 13);
      }
      mark("words " + T);
    }
    canvas.addEventListener("mousemove", function (ev) {
      var box = canvas.getBoundingClientRect(), x = ev.clientX - box.left, yy = ev.clientY - box.top;
      for (var index = 1; index <= T; index++) {
        var xy = at(index), cx = x - xy[0], cy = yy - xy[1];
        if (cx >= 0 && cy >= 0 && cx < tile && cy < tile) {
          var r = Math.floor(cy / tile * h), c = Math.floor(cx / tile * w);
          tip.show("“" + shown(words[index - 1]) + "” (word " + index + "), region " + (r + 1) + "," + (c + 1) + ": " +
            maps.weight(index - 1, r * w + c).toFixed(4), ev);
          return;
        }
      }
      tip.hide();
    });
    canvas.addEventListener("mouseleave", function () { tip.hide(); });
    function svg() {
      var href = picture.toDataURL("image/png"), parts = [svgOpen(width, height)];
      for (var index = 0; index <= T; index++) {
        var xy = at(index);
        parts.push('<image x="' + xy[0] + '" y="' + xy[1] + '" width="' + tile + '" height="' + tile + '" href="' + href +
          '" preserveAspectRatio="none"/>');
        if (index > 0) {
          for (var r = 0; r < h; r++) {
            for (var c = 0; c < w; c++) {
              var dark = 200 / 255 * (1 - maps.levels[(index - 1) * h * w + r * w + c] / 255);
              if (dark > 0.004) {
                parts.push('<rect x="' + (xy[0] + c * tile / w) + '" y="' + (xy[1] + r * tile / h) + '" width="' + tile / w +
                  '" height="' + tile / h + '" fill="#000000" fill-opacity="' + dark.toFixed(3) + '"/>');
              }
            }
          }
        }
        parts.push(svgText(xy[0] + tile / 2, xy[1] + tile + 13, index === 0 ? "image" : shown(words[index - 1]),
          ' text-anchor="middle" font-size="12"'));
      }
      parts.push("</svg>");
      return parts.join("");
    }
    draw();
    return {ready: Promise.resolve(), canvas: function () { return canvas; }, svg: svg};
  }

  // "memory": a Neural Turing Machine's panels, time across, one row a location (or channel).
  function memoryView(body, payload, mark, tip) {
    var T = payload.steps, panels = payload.panels, left = 54, title = 16, gap = 10;
    var cw = Math.max(3, Math.min(16, Math.floor(760 / T))), width = left + T * cw + 10, y = 4;
    var grey = A.palettes.grey.rgb;
    panels.forEach(function (panel) {
      panel.levels = A.fromBase64(panel.data);
      panel.rowH = Math.max(2, Math.min(cw, Math.floor(220 / panel.rows)));
      panel.top = y + title;
      y = panel.top + panel.rows * panel.rowH + gap;
      panel.colour = function (level) {
        if (!panel.signed) return grey[255 - level];  // white 0, black 1: attnlab's NTM figures
        return diverging((level / 255) * 2 - 1);
      };
      panel.value = function (level) { return panel.lo + (panel.hi - panel.lo) * level / 255; };
    });
    var height = y, canvas = node("canvas", "display:block");
    canvas.className = "attnlab-view-memory";
    body.appendChild(canvas);
    function draw() {
      var ctx = sized(canvas, width, height);
      ctx.imageSmoothingEnabled = false;
      panels.forEach(function (panel) {
        var picture = bitmap(panel.levels, panel.rows, T, function (level) { return panel.colour(level).concat([255]); });
        ctx.drawImage(picture, left, panel.top, T * cw, panel.rows * panel.rowH);
        ctx.fillStyle = "#111827";
        ctx.font = "12px sans-serif";
        ctx.textAlign = "left";
        ctx.textBaseline = "alphabetic";
        ctx.fillText(panel.name, left, panel.top - 4);
        ctx.font = "10px sans-serif";
        ctx.textAlign = "right";
        ctx.textBaseline = "top";
        ctx.fillText(String(panel.first), left - 4, panel.top);
        ctx.textBaseline = "bottom";
        ctx.fillText(String(panel.first + panel.rows - 1), left - 4, panel.top + panel.rows * panel.rowH);
      });
      mark("steps " + T);
    }
    canvas.addEventListener("mousemove", function (ev) {
      var box = canvas.getBoundingClientRect(), x = ev.clientX - box.left, yy = ev.clientY - box.top;
      var t = Math.floor((x - left) / cw);
      for (var p = 0; p < panels.length; p++) {
        var panel = panels[p], r = Math.floor((yy - panel.top) / panel.rowH);
        if (t >= 0 && t < T && r >= 0 && r < panel.rows) {
          tip.show(panel.name + ": step " + (t + 1) + ", " + panel.label + " " + (panel.first + r) + ": " +
            panel.value(panel.levels[r * T + t]).toFixed(3), ev);
          return;
        }
      }
      tip.hide();
    });
    canvas.addEventListener("mouseleave", function () { tip.hide(); });
    function svg() {
      var parts = [svgOpen(width, height)];
      panels.forEach(function (panel) {
        parts.push(svgText(left, panel.top - 4, panel.name, ' font-size="12"'));
        for (var r = 0; r < panel.rows; r++) {
          for (var t = 0; t < T;) {
            var level = panel.levels[r * T + t], run = 1;
            while (t + run < T && panel.levels[r * T + t + run] === level) run++;
            parts.push('<rect x="' + (left + t * cw) + '" y="' + (panel.top + r * panel.rowH) + '" width="' + run * cw +
              '" height="' + panel.rowH + '" fill="' + rgb(panel.colour(level)) + '"/>');
            t += run;
          }
        }
      });
      parts.push("</svg>");
      return parts.join("");
    }
    draw();
    return {ready: Promise.resolve(), canvas: function () { return canvas; }, svg: svg};
  }

  var KINDS = {map: mapView, lines: headView, neuron: neuronView, caption: captionView, memory: memoryView};

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
    var make = KINDS[payload.kind];
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

  /* The mount of one view's cell: the element with that id (or, while the notebook has not yet
   * put the output in its page, the element beside the running script), its JSON, drawn. */
  function boot(id, script) {
    var tries = 0;
    (function find() {
      var root = document.getElementById(id);
      if (!root && script && script.parentNode) {
        root = script.parentNode.id === id ? script.parentNode : script.parentNode.querySelector("#" + id);
      }
      if (!root || !root.isConnected) {
        if (tries++ < 200) setTimeout(find, 50);
        return;
      }
      if (root.attnlabView) return;
      var data = root.querySelector("script.attnlab-view-data");
      render(root, JSON.parse(data.textContent));
    })();
  }

  A.views = {render: render, boot: boot, version: 1};
})();
