/* attnlab attention explorer: the three panels, the JSON API and the exported data.
 *
 * Each element .attnlab-explorer on the page is one explorer. Served by `attnlab serve`, it asks
 * the JSON API next to it (api/models, api/translate, api/generate, api/attention, api/heads), always as
 * application/json; when the server asks for a token (`attnlab serve --token`), the address it
 * printed carries ?token=..., which the page keeps for its tab (sessionStorage), removes from the
 * address bar and sends as "Authorization: Bearer ..." with every API request. Written by
 * `attnlab export-html`, it holds its views in a JSON script block of class attnlab-data and
 * never touches the network. Drawing is draw.js's (window.attnlabDraw) and, for the GPT's attention
 * map, attention.js's (window.attnlabAttention), both loaded first.
 */
(function () {
  "use strict";
  var draw = window.attnlabDraw, el = draw.el, shown = draw.shown, fillPicker = draw.fillPicker;
  var pick = draw.pick, heatmap = draw.heatmap, linesView = draw.linesView, makeTip = draw.makeTip;

  function counted(n, noun) {  // "1 layer", "2 layers"
    return n + " " + noun + (n === 1 ? "" : "s");
  }

  function setStatus(panel, text, state) {
    panel.querySelector(".status").textContent = text;
    panel.dataset.state = state;
  }

  function fillForm(form, values) {
    Object.keys(values || {}).forEach(function (k) {
      if (form.elements[k] && values[k] !== null && values[k] !== undefined) {
        if (form.elements[k].tagName === "SELECT" && !form.elements[k].options.length) {
          form.elements[k].appendChild(new Option(String(values[k]), String(values[k])));
        }
        form.elements[k].value = values[k];
      }
    });
  }

  function translatePanel(panel, ctx) {
    var form = panel.querySelector("form"), layer = panel.querySelector("[name=layer]");
    var head = panel.querySelector("[name=head]"), view = null;
    function draw() {
      heatmap(panel.querySelector(".heatmap-box"), view.target_tokens, view.source_tokens,
        pick(view.attention, layer.value, head.value), ctx.tip, "←");
    }
    function show(v) {
      view = v;
      panel.querySelector(".result").hidden = false;
      panel.querySelector(".translation").textContent = v.translation;
      if (!v.attention) {
        panel.querySelector(".heatmap-box").textContent = v.note;
        return setStatus(panel, "beam " + v.beam + "; no attention to draw", "ready");
      }
      fillPicker(layer, v.layers, v.layers - 1);
      fillPicker(head, v.heads, "mean");
      draw();
      setStatus(panel, "beam " + v.beam + ": " + v.target_tokens.length + " output × " +
        v.source_tokens.length + " source subwords; hover a cell for its weight", "ready");
    }
    layer.addEventListener("change", draw);
    head.addEventListener("change", draw);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var body = {text: form.elements.text.value, beam: +form.elements.beam.value || null,
        checkpoint: form.elements.checkpoint.value || null};
      setStatus(panel, "translating…", "loading");
      ctx.post("translate", body).then(show, function (err) { setStatus(panel, err.message, "error"); });
    });
    return {show: show};
  }

  function generatePanel(panel, ctx) {
    var form = panel.querySelector("form"), box = panel.querySelector(".tokens");
    var layer = panel.querySelector("[name=layer]"), head = panel.querySelector("[name=head]");
    var tokens = [], selected = null;
    function add(item, kind) {
      var span = el("span", "tok " + kind, shown(item.token).replace(/↵/g, "↵\n"));
      span.dataset.index = tokens.length;
      tokens.push({item: item, span: span});
      box.appendChild(span);
    }
    function draw() {
      tokens.forEach(function (t) {
        t.span.style.background = "";
        delete t.span.dataset.weight;
        t.span.classList.remove("chosen");
      });
      if (selected === null) return;
      var t = tokens[selected], start = t.item.context_start;
      var weights = pick(t.item.attention, layer.value, head.value);
      var top = Math.max.apply(null, weights) || 1;
      weights.forEach(function (w, k) {
        var span = tokens[start + k].span;
        span.dataset.weight = w.toFixed(4);
        span.style.background = "rgba(37, 99, 235, " + (0.85 * w / top).toFixed(3) + ")";
      });
      t.span.classList.add("chosen");
      var best = weights.indexOf(Math.max.apply(null, weights));
      panel.querySelector(".chosen-note").textContent = "“" + shown(t.item.token) + "” (position " +
        t.item.index + ") was drawn by a query over positions " + start + "–" + (t.item.index - 1) +
        "; it looked most at “" + shown(tokens[start + best].item.token) + "” (" +
        weights[best].toFixed(4) + "). Hover a token for its weight.";
    }
    function onEvent(e) {
      if (e.event === "prompt") {
        tokens = [];
        selected = null;
        box.textContent = "";
        panel.querySelector(".chosen-note").textContent = "";
        panel.querySelector(".result").hidden = false;
        fillPicker(layer, e.layers, e.layers - 1);
        fillPicker(head, e.heads, "mean");
        e.tokens.forEach(function (t) { add({token: t}, "prompt"); });
      } else if (e.event === "token") {
        add(e, "gen");
      } else if (e.event === "done") {
        setStatus(panel, counted(e.new_tokens, "new token") + "; click one to see what it attended to", "ready");
      } else if (e.event === "error") {
        setStatus(panel, e.error, "error");
      }
    }
    box.addEventListener("click", function (ev) {
      var span = ev.target.closest(".tok.gen");
      if (span) { selected = +span.dataset.index; draw(); }
    });
    box.addEventListener("mouseover", function (ev) {
      var span = ev.target.closest(".tok");
      if (span && span.dataset.weight !== undefined) {
        ctx.tip.show(shown(tokens[+span.dataset.index].item.token) + ": " + span.dataset.weight, ev);
      }
    });
    box.addEventListener("mouseleave", ctx.tip.hide);
    layer.addEventListener("change", draw);
    head.addEventListener("change", draw);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var f = form.elements, body = {prompt: f.prompt.value, max_new_tokens: +f.max_new_tokens.value,
        temperature: +f.temperature.value, seed: f.seed.value === "" ? null : +f.seed.value,
        checkpoint: f.checkpoint.value || null};
      var button = form.querySelector("button");
      button.disabled = true;  // one stream at a time: a second would interleave its tokens
      setStatus(panel, "generating…", "loading");
      ctx.stream("generate", body, onEvent).catch(function (err) {
        setStatus(panel, err.message, "error");
      }).then(function () { button.disabled = false; });
    });
    return {show: function (data) { data.events.forEach(onEvent); }};
  }

  function attentionPanel(panel, ctx) {
    var form = panel.querySelector("form"), box = panel.querySelector(".attention-map");
    function show(v, source) {
      panel.querySelector(".result").hidden = false;
      var cut = v.dropped ? " (the last " + v.n + " of " + (v.n + v.dropped) + ": the model's context)" : "";
      window.attnlabAttention.mount(box, source).ready.then(function () {
        setStatus(panel, counted(v.n, "token") + cut + ", " + counted(v.layers, "layer") + " × " +
          counted(v.heads, "head") + "; click a head, hover a cell", "ready");
      }, function (err) { setStatus(panel, err.message, "error"); });
    }
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      setStatus(panel, "reading…", "loading");
      var body = {text: form.elements.text.value, checkpoint: form.elements.checkpoint.value || null};
      ctx.post("attention", body).then(function (v) {
        var prefix = "attention/" + encodeURIComponent(v.id) + "/";
        show(v, {tokens: v.tokens, layers: v.layers, heads: v.heads, causal: v.causal, thumbnail: v.thumbnail,
          record: function (layer, head) { return ctx.bytes(prefix + layer + "/" + head); }});
      }, function (err) { setStatus(panel, err.message, "error"); });
    });
    return {show: function (v) { show(v, window.attnlabAttention.embedded(v)); }};
  }

  function headsPanel(panel, ctx) {
    var form = panel.querySelector("form"), layer = panel.querySelector("[name=layer]");
    var head = panel.querySelector("[name=head]"), view = null;
    function draw() {
      var matrix = pick(view.attention, layer.value, head.value);
      linesView(panel.querySelector(".lines-box"), view.tokens, matrix, ctx.tip);
      heatmap(panel.querySelector(".heatmap-box"), view.tokens, view.tokens, matrix, ctx.tip, "→");
    }
    function show(v) {
      view = v;
      panel.querySelector(".result").hidden = false;
      fillPicker(layer, v.layers, v.layers - 1);
      fillPicker(head, v.heads, 0);
      draw();
      setStatus(panel, counted(v.tokens.length, "word piece") + ", " + counted(v.layers, "layer") + " × " +
        counted(v.heads, "head"),
        "ready");
    }
    layer.addEventListener("change", draw);
    head.addEventListener("change", draw);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      setStatus(panel, "reading…", "loading");
      ctx.post("heads", {text: form.elements.text.value}).then(show, function (err) {
        setStatus(panel, err.message, "error");
      });
    });
    return {show: show};
  }

  function errorOf(response) {
    return response.text().then(function (text) {
      try {
        return new Error(JSON.parse(text).error);
      } catch (e) {
        return new Error(response.status + " " + text);
      }
    });
  }

  var TOKEN_KEY = "attnlab-token";

  function apiToken() {
    var params = new URLSearchParams(window.location.search), token = params.get("token");
    if (!token) {
      try { return window.sessionStorage.getItem(TOKEN_KEY); } catch (e) { return null; }
    }
    try {
      window.sessionStorage.setItem(TOKEN_KEY, token);
    } catch (e) { /* no storage (a sandboxed frame): the token lives as long as the page */ }
    params.delete("token");
    var rest = params.toString(), where = window.location;
    window.history.replaceState(null, "", where.pathname + (rest ? "?" + rest : "") + where.hash);
    return token;
  }

  function serverContext(root) {
    var api = root.dataset.api || "api/", token = apiToken();
    function request(path, body) {
      var headers = token ? {Authorization: "Bearer " + token} : {}, options = {headers: headers};
      if (body !== undefined) {
        headers["Content-Type"] = "application/json";
        options.method = "POST";
        options.body = JSON.stringify(body);
      }
      return fetch(api + path, options).then(function (r) {
        return r.ok ? r : errorOf(r).then(function (e) { throw e; });
      });
    }
    return {
      get: function (path) { return request(path).then(function (r) { return r.json(); }); },
      post: function (path, body) { return request(path, body).then(function (r) { return r.json(); }); },
      bytes: function (path) {
        return request(path).then(function (r) { return r.arrayBuffer(); }).then(function (b) {
          return new Uint8Array(b);
        });
      },
      stream: function (path, body, onEvent) {
        return request(path, body).then(function (r) {
          var reader = r.body.getReader(), decoder = new TextDecoder(), buffer = "";
          function next() {
            return reader.read().then(function (chunk) {
              buffer += decoder.decode(chunk.value || new Uint8Array(), {stream: !chunk.done});
              var lines = buffer.split("\n");
              buffer = lines.pop();
              lines.forEach(function (line) { if (line.trim()) onEvent(JSON.parse(line)); });
              if (!chunk.done) return next();
              if (buffer.trim()) onEvent(JSON.parse(buffer));
            });
          }
          return next();
        });
      }
    };
  }

  var FLAGS = {translate: ["translator", "--translator CKPT"], generate: ["gpt", "--gpt MODEL"],
    attention: ["gpt", "--gpt MODEL"], heads: ["bert", "--bert DIR"]};

  function configure(root, panels, models) {
    Object.keys(FLAGS).forEach(function (name) {
      var panel = root.querySelector("[data-panel=" + name + "]"), loaded = models[FLAGS[name][0]];
      var form = panel.querySelector("form");
      if (!loaded.length) {
        form.querySelector("button").disabled = true;
        return setStatus(panel, "not loaded: start attnlab serve with " + FLAGS[name][1], "off");
      }
      var pickCheckpoint = form.elements.checkpoint;
      if (pickCheckpoint) {
        loaded.forEach(function (m) { pickCheckpoint.appendChild(new Option(m.checkpoint, m.checkpoint)); });
      }
      Array.prototype.forEach.call(form.querySelectorAll("textarea"), function (area) {
        area.maxLength = name === "attention" ? models.limits.max_read_chars : models.limits.max_text_chars;
      });
      if (name === "translate") {
        for (var b = 1; b <= models.limits.max_beam; b++) {
          form.elements.beam.appendChild(new Option(String(b), String(b)));
        }
        form.elements.beam.value = String(loaded[0].beam);
      }
    });
  }

  function showExport(root, panels, data) {
    var note = root.querySelector(".mode-note");
    note.hidden = false;
    note.textContent = data.note;
    Object.keys(panels).forEach(function (name) {
      var panel = root.querySelector("[data-panel=" + name + "]"), form = panel.querySelector("form");
      Array.prototype.forEach.call(form.elements, function (field) { field.disabled = true; });
      if (!data[name]) return setStatus(panel, "not in this file: export-html with " + FLAGS[name][1], "off");
      fillForm(form, data[name].request);
      panels[name].show(data[name].view);
    });
  }

  function init(root) {
    if (root.dataset.ready) return;
    root.dataset.ready = "1";
    var tip = makeTip(root), block = root.querySelector("script.attnlab-data");
    var data = block ? JSON.parse(block.textContent) : null;
    var ctx = data ? {tip: tip} : serverContext(root);
    ctx.tip = tip;
    var panels = {translate: translatePanel(root.querySelector("[data-panel=translate]"), ctx),
      generate: generatePanel(root.querySelector("[data-panel=generate]"), ctx),
      attention: attentionPanel(root.querySelector("[data-panel=attention]"), ctx),
      heads: headsPanel(root.querySelector("[data-panel=heads]"), ctx)};
    root.querySelectorAll(".tabs button").forEach(function (button) {
      button.addEventListener("click", function () {
        root.querySelectorAll(".tabs button, .panel").forEach(function (n) { n.classList.remove("active"); });
        button.classList.add("active");
        root.querySelector("[data-panel=" + button.dataset.tab + "]").classList.add("active");
      });
    });
    if (data) return showExport(root, panels, data);
    ctx.get("models").then(function (models) {
      configure(root, panels, models);
      root.dataset.models = "loaded";
    }, function (err) {
      Object.keys(panels).forEach(function (name) {
        setStatus(root.querySelector("[data-panel=" + name + "]"), err.message, "error");
      });
      root.dataset.models = "error";
    });
  }

  document.querySelectorAll(".attnlab-explorer").forEach(init);
})();
