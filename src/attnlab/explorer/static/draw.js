/* attnlab attention explorer, drawing: heatmaps, the head view's lines and pickers
 * (the tooltip is tip.js's).
 *
 * Plain JavaScript, no library. explorer.js (loaded after this file) builds the panels with
 * these. Attention arrives as nested lists: a translation's (layers, heads, target, source), a
 * GPT token's (layers, heads, context), a head view's (layers, heads, tokens, tokens).
 */
window.attnlabDraw = window.attnlabDraw || (function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /* A token as a label: line breaks and tabs made visible, an empty token shown as a dot. */
  function shown(token) {
    return String(token).replace(/\n/g, "↵").replace(/\t/g, "⇥") || "·";
  }

  function shade(w) {
    return "hsl(214, 80%, " + Math.round(100 - 62 * Math.max(0, Math.min(1, w))) + "%)";
  }

  /* Options "1".."count" (values 0..count-1) and "mean"; `selected` is a value. */
  function fillPicker(select, count, selected) {
    select.textContent = "";
    for (var i = 0; i < count; i++) select.appendChild(new Option(String(i + 1), String(i)));
    select.appendChild(new Option("mean", "mean"));
    select.value = String(selected);
  }

  function mean(arrays) {
    if (arrays.length === 1) return arrays[0];
    if (typeof arrays[0][0] === "number") {
      return arrays[0].map(function (_, j) {
        return arrays.reduce(function (s, a) { return s + a[j]; }, 0) / arrays.length;
      });
    }
    return arrays[0].map(function (_, i) { return mean(arrays.map(function (a) { return a[i]; })); });
  }

  /* attention[layer][head] -> the chosen layer's head, or the mean over layers and/or heads. */
  function pick(attention, layer, head) {
    var layers = layer === "mean" ? attention : [attention[+layer]];
    var chosen = [];
    layers.forEach(function (heads) {
      (head === "mean" ? heads : [heads[+head]]).forEach(function (m) { chosen.push(m); });
    });
    return mean(chosen);
  }

  function makeTip(root) { return window.attnlabTip(root.querySelector(".attnlab-tip")); }

  /* A table heatmap: one td.cell per (row, column), its weight in data-weight; hover names it. */
  function heatmap(box, rows, cols, matrix, tip, arrow) {
    box.textContent = "";
    var table = el("table", "heatmap");
    var head = table.insertRow();
    head.appendChild(el("th", "corner"));
    cols.forEach(function (c) {
      var th = el("th", "col-label");
      th.appendChild(el("span", null, shown(c)));
      head.appendChild(th);
    });
    matrix.forEach(function (row, i) {
      var tr = table.insertRow();
      tr.appendChild(el("th", "row-label", shown(rows[i])));
      row.forEach(function (w, j) {
        var td = el("td", "cell");
        td.dataset.row = i;
        td.dataset.col = j;
        td.dataset.weight = w.toFixed(4);
        td.style.background = shade(w);
        tr.appendChild(td);
      });
    });
    table.addEventListener("mouseover", function (ev) {
      var td = ev.target.closest("td.cell");
      if (!td) return;
      var i = +td.dataset.row, j = +td.dataset.col;
      tip.show(shown(rows[i]) + " " + arrow + " " + shown(cols[j]) + ": " + td.dataset.weight, ev);
    });
    table.addEventListener("mouseleave", tip.hide);
    box.appendChild(table);
  }

  /* The head view: queries on the left, keys on the right, a line per pair as dark as its weight. */
  function linesView(box, tokens, matrix, tip) {
    box.textContent = "";
    var step = 22, left = 150, right = 330, height = tokens.length * step + 12;
    var root = svg("svg", {"class": "lines", width: 480, height: height, viewBox: "0 0 480 " + height});
    var lines = svg("g", {});
    root.appendChild(lines);
    matrix.forEach(function (row, i) {
      row.forEach(function (w, j) {
        if (w < 0.005) return;
        lines.appendChild(svg("line", {x1: left + 6, y1: 16 + i * step, x2: right - 6, y2: 16 + j * step,
          "stroke-opacity": w, "data-query": i, "data-key": j, "data-weight": w.toFixed(4)}));
      });
    });
    tokens.forEach(function (t, i) {
      root.appendChild(svg("text", {x: left, y: 20 + i * step, "text-anchor": "end", "class": "query",
        "data-index": i}, shown(t)));
      root.appendChild(svg("text", {x: right, y: 20 + i * step, "class": "key", "data-index": i}, shown(t)));
    });
    root.addEventListener("mouseover", function (ev) {
      var target = ev.target;
      if (target.classList.contains("query")) {
        var i = +target.dataset.index;
        root.classList.add("focused");
        lines.querySelectorAll("line").forEach(function (line) {
          line.classList.toggle("on", +line.dataset.query === i);
        });
        var top = matrix[i].map(function (w, j) { return [w, j]; });
        top.sort(function (a, b) { return b[0] - a[0]; });
        tip.show(shown(tokens[i]) + " → " + top.slice(0, 3).map(function (p) {
          return shown(tokens[p[1]]) + " " + p[0].toFixed(4);
        }).join(", "), ev);
      } else if (target.tagName === "line") {
        tip.show(shown(tokens[+target.dataset.query]) + " → " + shown(tokens[+target.dataset.key]) + ": " +
          target.dataset.weight, ev);
      }
    });
    root.addEventListener("mouseleave", function () { root.classList.remove("focused"); tip.hide(); });
    box.appendChild(root);
  }

  return {el: el, shown: shown, fillPicker: fillPicker, pick: pick, makeTip: makeTip, heatmap: heatmap,
    linesView: linesView};
})();
