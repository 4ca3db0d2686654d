/* bertviz's head view for attnlab's notebook views (views.js, loaded first): the tokens twice, a
 * line from each query (left) to each key (right) as opaque as its weight, a colour a head (Vig
 * 2019, "A Multiscale Visualization of Attention in the Transformer Model"). A layer's heads are
 * inflated when it is picked; hover a token for its lines alone. The "lines" kind. */
(function () {
  "use strict";
  var A = window.attnlabAttention, V = A && A.views;
  if (!V || V.kinds.lines) return;
  var tools = V.tools;
  var node = tools.node, shown = tools.shown, colourOf = tools.colourOf, sized = tools.sized, svgOpen = tools.svgOpen;
  var svgText = tools.svgText, heads = tools.heads;
  var BUCKETS = 20, FAINTEST = 0.01, LINES = 2000;

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
    /* Once a layer is drawn, the others are inflated while the page is idle, nearest first, so
     * picking one later only draws it (a layer of 512 tokens: 9 records, some 20-35 ms to inflate). */
    function prefetch() {
      var order = [];
      for (var d = 1; d < L; d++) [layer - d, layer + d].forEach(function (l) { if (l >= 0 && l < L) order.push(l); });
      var idle = window.requestIdleCallback || function (f) { return setTimeout(f, 30); };
      (function next() {
        if (!order.length || !body.isConnected) return;
        idle(function () {
          var l = order.shift(), all = [];
          for (var h = 0; h < H; h++) all.push(load(l, h));
          Promise.all(all).then(next, next);
        });
      })();
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
    var ready = show(layer);
    ready.then(prefetch);
    return {ready: ready, canvas: function () { return canvas; }, svg: svg, png: png};
  }

  V.kinds.lines = headView;
})();
