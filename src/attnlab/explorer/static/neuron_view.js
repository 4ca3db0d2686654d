/* bertviz's neuron view for attnlab's notebook views (views.js, loaded first): one query's q,
 * each key's k, their product dimension by dimension, q·k/√d_h and the softmax over the keys
 * (Vaswani et al. 2017, eq. 1; Vig 2019). The "neuron" kind. */
(function () {
  "use strict";
  var A = window.attnlabAttention, V = A && A.views;
  if (!V || V.kinds.neuron) return;
  var tools = V.tools;
  var node = tools.node, shown = tools.shown, sized = tools.sized, floats = tools.floats, svgOpen = tools.svgOpen;
  var svgText = tools.svgText, diverging = tools.diverging, rgb = tools.rgb;
  var SCROLL = "max-height:640px;overflow:auto";

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

  V.kinds.neuron = neuronView;
})();
