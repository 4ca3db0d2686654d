/* attnlab attention map: a model's self-attention over n tokens, every layer × head at a glance
 * and one head in full, drawn on <canvas> (no DOM node per cell), so 512 tokens × 30 layers × 9
 * heads stay responsive: the overview comes from small thumbnails, and a head's n × n weights
 * are fetched (or inflated) only when it is picked, then drawn in one putImageData.
 *
 * Self-contained: one global, window.attnlabAttention, no other script, no stylesheet; it draws
 * into the element it is given (the explorer's page, an exported file, a notebook cell).
 *
 *   var map = attnlabAttention.mount(element, source, options);
 *     options (all optional): layer, head (drawn first; default the last layer's first head),
 *     scale ("log", "sqrt", "row" or "linear"; default "log"), palette ("blue", or "grey": black
 *     to white, Bahdanau et al.'s Figure 3), grid (false: the pickers alone, no thumbnails),
 *     thumb (a thumbnail's side, CSS pixels), onSelect(layer, head) after each head drawn
 *   map.ready;                 // a Promise: the first head drawn
 *   map.select(layer, head);   // a Promise, resolved once that head is drawn (0-based)
 *   map.map;                   // the head's <canvas>; map.picture() its cells' colours and labels
 *   map.destroy();             // also what mounting into the same element again does
 *
 * source = {tokens: [n strings], layers: L, heads: H, causal: bool,
 *           thumbnail: {size: t, data: base64 of L·H·t·t uint8, layer-major},
 *           record: function (layer, head) -> Promise of a Uint8Array (that head's record)},
 *   optionally keys: [n_k strings] (a cross-attention's columns), headLabels: [H strings] (a
 *   last "mean" head), vmax (the top of the linear and √ scales; 1), axes: [rows', columns' name].
 * attnlabAttention.embedded(view) is the source of a reading written into a file (its records
 * zlib-compressed and base64-encoded, inflated by the browser's DecompressionStream).
 *
 * A record (attnlab/explorer/quantize.py): n little-endian float32 row maxima m_i, then uint8
 * levels q_ij, row by row (row i: columns 0..i of a causal model, 0..n_k-1 otherwise); the weight
 * is q_ij · m_i / 255. Colour: white to blue by log weight over 10⁻⁴…1 (a row's weights below
 * its own largest / 510 arrive as 0, white), by √weight, or by each weight over its row's
 * largest; above the diagonal of a causal model (masked, never attended) grey; the thumbnails
 * by √ of their block means. The element's data-drawn attribute names the head on screen
 * ("layer,head"), data-drawn-at when it was drawn (performance.now()).
 */
window.attnlabAttention = (window.attnlabAttention && window.attnlabAttention.version >= 2) ?
  window.attnlabAttention : (function () {
  "use strict";
  var SIDE = 560, LABELS_UP_TO = 48, MARGIN = 96, KEEP = 64;
  var DARK = [20, 70, 160], MASKED = [236, 238, 241];

  function sized(canvas, width, height) {  // a canvas of width × height CSS pixels, sharp on this screen
    var ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio); canvas.height = Math.round(height * ratio);
    canvas.style.width = width + "px"; canvas.style.height = height + "px";
    var ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);  // draw in CSS pixels
    return ctx;
  }

  function shown(token) {  // a token as a label: line breaks and tabs visible, empty as a dot
    return String(token).replace(/\n/g, "↵").replace(/\t/g, "⇥") || "·";
  }
  function fromBase64(text) {
    var raw = atob(text), bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes;
  }

  /* A palette: 256 colours, each also one RGBA pixel (a Uint32, byte order of the machine);
   * MASKED the grey of the cells a causal model never attends to. */
  function packed(rgb) {
    var pixel = new Uint8ClampedArray([rgb[0], rgb[1], rgb[2], 255]);
    return new Uint32Array(pixel.buffer)[0];
  }
  function ramp(from, to) {  // 256 colours from one RGB to another: [[r, g, b]], and as pixels
    var rgb = [], pixels = new Uint32Array(256);
    for (var k = 0; k < 256; k++) {
      rgb.push(from.map(function (f, c) { return Math.round(f + (to[c] - f) * k / 255); }));
      pixels[k] = packed(rgb[k]);
    }
    return {rgb: rgb, pixels: pixels};
  }
  var PALETTES = {blue: ramp([255, 255, 255], DARK), grey: ramp([0, 0, 0], [255, 255, 255])};
  var MASKED_PIXEL = packed(MASKED);

  /* The colour scales: for a row of maximum m, the palette index of level q (weight q·m/255). */
  var SQRT = new Float64Array(256), LOG = new Float64Array(256);
  for (var k = 0; k < 256; k++) {
    SQRT[k] = Math.sqrt(k / 255);
    LOG[k] = k ? Math.log10(k / 255) : -Infinity;
  }
  var SCALES = {
    sqrt: {label: "√weight", row: function (m, vmax) {
      var root = 255 * Math.sqrt(m / vmax);
      return function (q) { return Math.min(255, Math.round(root * SQRT[q])); };
    }},
    linear: {label: "weight", row: function (m, vmax) {
      var step = m / vmax;
      return function (q) { return Math.min(255, Math.round(q * step)); };
    }},
    log: {label: "log weight, 10⁻⁴…1", row: function (m) {
      var shift = Math.log10(m) + 4;
      return function (q) { return q ? Math.max(0, Math.min(255, Math.round(255 * (LOG[q] + shift) / 4))) : 0; };
    }},
    row: {label: "weight ÷ its row's largest", row: function () {
      return function (q) { return q; };
    }}
  };

  function colourIndex(weight) {  // a thumbnail's level, on the √ scale
    return Math.min(255, Math.round(255 * Math.sqrt(Math.max(0, weight))));
  }

  /* One head's record (n queries, nk keys: default n) as {maxima, weight(i, j)}. */
  function decode(bytes, n, causal, nk) {
    var maxima = new Float32Array(n), view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (var i = 0; i < n; i++) maxima[i] = view.getFloat32(4 * i, true);
    var levels = bytes.subarray(4 * n), width = nk === undefined ? n : nk;
    function start(row) { return causal ? row * (row + 1) / 2 : row * width; }
    if (levels.length !== start(n)) throw new Error("a record of " + n + " tokens has the wrong size");
    return {maxima: maxima, levels: levels, start: start, weight: function (row, col) {
      return causal && col > row ? null : levels[start(row) + col] * maxima[row] / 255;
    }};
  }

  function inflate(bytes) {
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).arrayBuffer().then(function (buffer) { return new Uint8Array(buffer); });
  }
  function embedded(view) {
    return {tokens: view.tokens, keys: view.keys, layers: view.layers, heads: view.heads, causal: view.causal,
      thumbnail: view.thumbnail, headLabels: view.headLabels, vmax: view.vmax, axes: view.axes,
      record: function (layer, head) {
        var bytes = fromBase64(view.records[layer * view.heads + head]);
        return view.compressed === "deflate" ? inflate(bytes) : Promise.resolve(bytes);
      }};
  }

  function node(tag, style, text) {
    var el = document.createElement(tag);
    if (style) el.style.cssText = style;
    if (text !== undefined) el.textContent = text;
    return el;
  }

  function picker(label, count, prefix, names) {
    var wrap = node("label", "display:inline-flex;flex-direction:column;font-size:0.85rem;margin-right:12px");
    var select = node("select", "font:inherit;padding:2px 4px");
    for (var i = 0; i < count; i++) select.appendChild(new Option(names ? names[i] : prefix + (i + 1), String(i)));
    wrap.appendChild(document.createTextNode(label));
    wrap.appendChild(select);
    return {wrap: wrap, select: select};
  }

  function mount(element, source, options) {
    options = options || {};
    var n = source.tokens.length, keys = source.keys || source.tokens, nk = keys.length;
    var L = source.layers, H = source.heads, causal = !!source.causal && n === nk, vmax = source.vmax || 1;
    var headName = function (h) { return source.headLabels ? String(source.headLabels[h]) : String(h + 1); };
    var axes = source.axes || ["query", "key"], colours = PALETTES[options.palette] || PALETTES.blue,
      plural = function (word) { return /[^aeiou]y$/.test(word) ? word.slice(0, -1) + "ies" : word + "s"; };
    var palette = colours.pixels;
    var labelled = Math.max(n, nk) <= LABELS_UP_TO;
    var margin = labelled ? MARGIN : 0;
    var cell = Math.max(1, Math.floor(SIDE / Math.max(n, nk))), width = cell * nk, height = cell * n;
    var thumb = options.thumb || Math.max(10, Math.min(40, Math.floor(SIDE / L) - 3));
    var gap = 3, gridLeft = 30, gridTop = 18, withGrid = options.grid !== false && L * H > 1;
    var records = new Map(), pending = new Map(), current = null, wanted = 0, pinned = null, alive = true;

    if (element.attnlabAttentionMap) element.attnlabAttentionMap.destroy();  // mounted again: the old one stops
    element.textContent = "";
    var bar = node("div", "margin:4px 0 8px");
    var layerPick = picker("layer", L, ""), scalePick = picker("colour", 0, "");
    var headPick = picker("head", H, "", source.headLabels && source.headLabels.map(String));
    Object.keys(SCALES).forEach(function (name) { scalePick.select.appendChild(new Option(SCALES[name].label, name)); });
    scalePick.select.value = options.scale || "log";
    var caption = node("span", "font-size:0.85rem;color:#374151");
    [L > 1 && layerPick.wrap, H > 1 && headPick.wrap, scalePick.wrap, caption].forEach(function (part) {
      if (part) bar.appendChild(part);
    });
    var row = node("div", "display:flex;gap:16px;align-items:flex-start;flex-wrap:wrap");
    var grid = node("canvas", "cursor:pointer;outline:none");
    grid.className = "attnlab-attention-grid";
    grid.tabIndex = 0;
    grid.setAttribute("aria-label", "every layer and head; arrow keys move");
    var map = node("canvas", "cursor:crosshair;image-rendering:pixelated");
    map.className = "attnlab-attention-map";
    var note = node("p", "font-size:0.85rem;color:#374151;min-height:1.3em;margin:6px 0");
    var tip = node("div", "position:fixed;z-index:20;background:#111827;color:#f9fafb;padding:3px 8px;" +
      "border-radius:4px;font-size:0.8rem;pointer-events:none;white-space:pre");
    tip.className = "attnlab-attention-tip";
    note.className = "attnlab-attention-note";
    tip.hidden = true;
    if (withGrid) row.appendChild(grid);
    row.appendChild(map);
    [bar, row, note, tip].forEach(function (part) { element.appendChild(part); });
    element.dataset.n = String(n);
    // Where things are, for a program driving the page: a thumbnail at (left + head·step,
    // top + layer·step), a cell at (margin + column·cell, margin + row·cell), in CSS pixels.
    grid.dataset.left = gridLeft;
    grid.dataset.top = gridTop;
    grid.dataset.step = thumb + gap;
    map.dataset.margin = margin;
    map.dataset.cell = cell;


    // The overview: every thumbnail once into one offscreen image, then scaled into the grid.
    var t = source.thumbnail.size, levels = fromBase64(source.thumbnail.data);
    var atlas = document.createElement("canvas");
    atlas.width = H * t;
    atlas.height = L * t;
    var atlasImage = atlas.getContext("2d").createImageData(H * t, L * t);
    var atlasPixels = new Uint32Array(atlasImage.data.buffer);
    for (var k = 0; k < levels.length; k++) {
      var block = Math.floor(k / (t * t)), inside = k % (t * t);
      var x = (block % H) * t + inside % t, y = Math.floor(block / H) * t + Math.floor(inside / t);
      atlasPixels[y * H * t + x] = palette[colourIndex(levels[k] / 255)];
    }
    atlas.getContext("2d").putImageData(atlasImage, 0, 0);
    var gridWidth = gridLeft + H * (thumb + gap), gridHeight = gridTop + L * (thumb + gap);

    function drawGrid() {
      var ctx = sized(grid, gridWidth, gridHeight);
      ctx.font = "10px sans-serif";
      ctx.fillStyle = "#4b5563";
      ctx.textAlign = "center";
      for (var h = 0; h < H; h++) ctx.fillText(headName(h), gridLeft + h * (thumb + gap) + thumb / 2, 12);
      ctx.textAlign = "right";
      ctx.imageSmoothingEnabled = true;
      for (var l = 0; l < L; l++) {
        var top = gridTop + l * (thumb + gap);
        ctx.fillText(String(l + 1), gridLeft - 6, top + thumb / 2 + 3);
        for (h = 0; h < H; h++) {
          ctx.drawImage(atlas, h * t, l * t, t, t, gridLeft + h * (thumb + gap), top, thumb, thumb);
        }
      }
      if (current) {
        ctx.strokeStyle = "#f59e0b";
        ctx.lineWidth = 2;
        ctx.strokeRect(gridLeft + current[1] * (thumb + gap) - 1, gridTop + current[0] * (thumb + gap) - 1,
          thumb + 2, thumb + 2);
      }
    }

    function levelsOf(record) {  // the palette index of every cell, row-major (-1: masked)
      var out = new Int16Array(n * nk), maxima = record.maxima, q = record.levels;
      var scale = SCALES[scalePick.select.value];
      for (var i = 0; i < n; i++) {
        var from = record.start(i), seen = causal ? i + 1 : nk, index = scale.row(maxima[i], vmax), at = i * nk;
        for (var j = 0; j < seen; j++) out[at + j] = index(q[from + j]);
        for (j = seen; j < nk; j++) out[at + j] = -1;
      }
      return out;
    }

    function drawMap(record) {
      var image = new ImageData(nk, n), pixels = new Uint32Array(image.data.buffer), cells = levelsOf(record);
      for (var k = 0; k < cells.length; k++) pixels[k] = cells[k] < 0 ? MASKED_PIXEL : palette[cells[k]];
      var offscreen = document.createElement("canvas");
      offscreen.width = nk;
      offscreen.height = n;
      offscreen.getContext("2d").putImageData(image, 0, 0);
      var ctx = sized(map, margin + width, margin + height);
      ctx.imageSmoothingEnabled = false;
      ctx.fillStyle = "#ffffff";  // white under the labels, in a saved PNG too
      ctx.fillRect(0, 0, margin + width, margin + height);
      ctx.drawImage(offscreen, margin, margin, width, height);
      if (!labelled) return;
      ctx.font = Math.min(12, cell - 1) + "px ui-monospace, monospace";
      ctx.fillStyle = "#111827";
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      source.tokens.forEach(function (token, i) {
        ctx.fillText(shown(token).slice(0, 12), margin - 4, margin + i * cell + cell / 2);
      });
      keys.forEach(function (token, j) {
        ctx.save();
        ctx.translate(margin + j * cell + cell / 2, margin - 4);
        ctx.rotate(-Math.PI / 2);
        ctx.textAlign = "left";
        ctx.fillText(shown(token).slice(0, 12), 0, 0);
        ctx.restore();
      });
    }

    function picture() {  // what is on screen, for a copy of it (views.js writes it as SVG)
      return shownRecord() ? {cells: levelsOf(shownRecord()), rows: source.tokens, columns: keys, cell: cell,
        margin: margin, labelled: labelled, rgb: function (q) { return q < 0 ? MASKED : colours.rgb[q]; }} : null;
    }

    function load(layer, head) {
      var key = layer * H + head;
      if (records.has(key)) return Promise.resolve(records.get(key));
      if (!pending.has(key)) {
        pending.set(key, source.record(layer, head).then(function (bytes) {
          var record = decode(bytes, n, causal, nk);
          records.set(key, record);
          if (records.size > KEEP) records.delete(records.keys().next().value);
          return record;
        }).finally(function () { pending.delete(key); }));
      }
      return pending.get(key);
    }

    function select(layer, head) {
      var ticket = ++wanted;
      current = [layer, head];
      layerPick.select.value = String(layer); headPick.select.value = String(head);
      drawGrid();
      caption.textContent = (n === nk ? n + " tokens" : n + " " + plural(axes[0]) + " × " + nk + " " + plural(axes[1])) +
        (L > 1 ? " · layer " + (layer + 1) + " of " + L : "") +
        (H > 1 ? (L > 1 ? ", head " : " · head ") + headName(head) + (source.headLabels ? "" : " of " + H) : "");
      return load(layer, head).then(function (record) {
        if (ticket !== wanted || !alive) return;  // another head was picked meanwhile
        drawMap(record);
        element.dataset.drawn = layer + "," + head;
        element.dataset.drawnAt = performance.now().toFixed(1);  // ms since the page began
        if (pinned !== null) explain(pinned);
        if (options.onSelect) options.onSelect(layer, head);
      }, function (err) {  // e.g. a reading the server no longer keeps: said under the map
        if (ticket === wanted && alive) note.textContent = err.message;
        throw err;
      });
    }
    function quietly(promise) { promise.catch(function () {}); }

    function cellAt(ev) {
      var box = map.getBoundingClientRect();
      var i = Math.floor((ev.clientY - box.top - margin) / cell), j = Math.floor((ev.clientX - box.left - margin) / cell);
      return i >= 0 && j >= 0 && i < n && j < nk ? [i, j] : null;
    }

    function shownRecord() {
      return current && records.get(current[0] * H + current[1]);
    }

    function explain(i) {  // the pinned query's strongest keys
      var record = shownRecord();
      if (!record) return;
      var keys = [];
      var strongest = [];
      for (var j = 0; j < (causal ? i + 1 : nk); j++) strongest.push([record.weight(i, j), j]);
      strongest.sort(function (a, b) { return b[0] - a[0]; });
      note.textContent = axes[0] + " " + (i + 1) + " “" + shown(source.tokens[i]) + "” looks most at: " +
        strongest.slice(0, 5).map(function (p) {
          return "“" + shown(keys[p[1]]) + "” (" + (p[1] + 1) + ") " + p[0].toFixed(4);
        }).join(", ");
    }

    map.addEventListener("mousemove", function (ev) {
      var at = cellAt(ev), record = shownRecord();
      if (!at || !record) { tip.hidden = true; return; }
      var w = record.weight(at[0], at[1]);
      tip.textContent = shown(source.tokens[at[0]]) + " (" + (at[0] + 1) + ") → " + shown(keys[at[1]]) +
        " (" + (at[1] + 1) + "): " + (w === null ? "masked" : w.toFixed(4));
      tip.hidden = false;
      tip.style.left = (ev.clientX + 14) + "px";
      tip.style.top = (ev.clientY + 14) + "px";
    });
    map.addEventListener("mouseleave", function () { tip.hidden = true; });
    map.addEventListener("click", function (ev) {
      var at = cellAt(ev);
      if (at) { pinned = at[0]; explain(pinned); }
    });
    function thumbnailAt(ev) {
      var box = grid.getBoundingClientRect();
      var h = Math.floor((ev.clientX - box.left - gridLeft) / (thumb + gap));
      var l = Math.floor((ev.clientY - box.top - gridTop) / (thumb + gap));
      return l >= 0 && h >= 0 && l < L && h < H ? [l, h] : null;
    }
    grid.addEventListener("click", function (ev) {
      var at = thumbnailAt(ev);
      if (at) quietly(select(at[0], at[1]));
    });
    grid.addEventListener("mousemove", function (ev) {  // the head under the pointer, fetched ahead of its click
      var at = thumbnailAt(ev);
      if (at) quietly(load(at[0], at[1]));
    });
    grid.addEventListener("keydown", function (ev) {
      var move = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1]}[ev.key];
      if (!move || !current) return;
      ev.preventDefault();
      quietly(select(Math.max(0, Math.min(L - 1, current[0] + move[0])),
        Math.max(0, Math.min(H - 1, current[1] + move[1]))));
    });
    function picked() { quietly(select(+layerPick.select.value, +headPick.select.value)); }
    layerPick.select.addEventListener("change", picked);
    scalePick.select.addEventListener("change", function () { if (shownRecord()) drawMap(shownRecord()); });
    headPick.select.addEventListener("change", picked);

    var start = options.layer === undefined ? L - 1 : options.layer;
    var controller = {
      select: select,
      map: map,
      picture: picture,
      ready: select(start, options.head || 0),
      destroy: function () {
        alive = false;
        records.clear();
        if (element.attnlabAttentionMap === controller) delete element.attnlabAttentionMap;
        element.textContent = "";
      }
    };
    element.attnlabAttentionMap = controller;
    return controller;
  }

  return {mount: mount, embedded: embedded, decode: decode, fromBase64: fromBase64, shown: shown, node: node,
    sized: sized, picker: picker, palettes: PALETTES, version: 2};
})();
