/* Attention over an image and over a memory, for attnlab's notebook views (views.js, loaded
 * first): a captioner's attention word by word (Xu et al. 2015, "Show, Attend and Tell", Figure
 * 3), the "caption" kind; a Neural Turing Machine's weightings over time (Graves et al. 2014,
 * Figure 6), the "memory" kind. */
(function () {
  "use strict";
  var A = window.attnlabAttention, V = A && A.views;
  if (!V || V.kinds.caption || V.kinds.memory) return;
  var tools = V.tools;
  var node = tools.node, shown = tools.shown, sized = tools.sized, svgOpen = tools.svgOpen, svgText = tools.svgText;
  var diverging = tools.diverging, rgb = tools.rgb, bitmap = tools.bitmap;

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

  V.kinds.caption = captionView;
  V.kinds.memory = memoryView;
})();
