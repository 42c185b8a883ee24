// The report page's behaviour (report/report.h): hover and keyboard readouts of the exact
// values, the log-scale switch, the charts' controls (smoothing, the x axis, zoom, the CSV
// download: each chart drawn again here from every reported point when they change the
// view), the samples' sliders, enlarging a heat map. The page is complete without it.
// Everything it shows from the data goes in through textContent, never as markup. Errors it
// meets and requests the page's policy blocks are listed in #page-errors; with #selftest in
// the address it drives its own controls and writes what it saw into #selftest as JSON.
(function () {
  'use strict';
  var SVG = 'http://www.w3.org/2000/svg';
  var errorCount = 0, unshown = [];

  function showErrors() {
    var box = document.getElementById('page-errors');
    if (!box) return;  // the body is not there yet: shown when it is
    unshown.splice(0).forEach(function (text) {
      var item = document.createElement('li');
      item.textContent = text;
      box.querySelector('ul').appendChild(item);
    });
    box.hidden = box.querySelector('li') === null;
  }
  function recordError(text) {
    errorCount += 1;
    unshown.push(text);
    showErrors();
  }
  window.addEventListener('error', function (e) {
    recordError('script error: ' + e.message + ' (line ' + e.lineno + ')');
  });
  document.addEventListener('securitypolicyviolation', function (e) {
    recordError('blocked by the page\'s policy: ' + e.violatedDirective + ' ' + e.blockedURI);
  });

  function make(name, attrs) {
    var el = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { el.setAttribute(k, attrs[k]); });
    return el;
  }
  function svgPoint(svg, clientX, clientY) {
    var p = svg.createSVGPoint();
    p.x = clientX;
    p.y = clientY;
    return p.matrixTransform(svg.getScreenCTM().inverse());
  }
  function clientPoint(svg, x, y) {
    var p = svg.createSVGPoint();
    p.x = x;
    p.y = y;
    return p.matrixTransform(svg.getScreenCTM());
  }
  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
  }
  function nearest(xs, x) {  // index of the value of sorted xs nearest to x, -1 when empty
    var lo = 0, hi = xs.length - 1;
    if (hi < 0) return -1;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (xs[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo > 0 && x - xs[lo - 1] <= xs[lo] - x ? lo - 1 : lo;
  }

  // ---------------------------------------------------------------- numbers
  // Ticks and labels as line_chart.cpp makes them (linear_ticks, log_ticks, tick_label), for
  // the charts the controls redraw.
  function linearTicks(lo, hi, count) {
    if (!(hi > lo)) return [lo];
    var rough = (hi - lo) / count, power = Math.pow(10, Math.floor(Math.log10(rough))), step = power;
    [1, 2, 5, 10].some(function (m) { step = power * m; return step >= rough; });
    var ticks = [], first = Math.ceil(lo / step);
    for (var k = 0; k < 4 * count + 4; k++) {
      var t = (first + k) * step;
      if (!(t <= hi + step * 1e-9)) break;
      if (!ticks.length || t > ticks[ticks.length - 1]) ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    }
    return ticks;
  }
  function logTicks(lo, hi) {
    if (!(lo > 0 && hi > lo)) return [lo];
    if (hi / lo < 10) return linearTicks(lo, hi, 4);
    var all = [], decades = [];
    for (var d = Math.floor(Math.log10(lo)); d <= Math.ceil(Math.log10(hi)); d++) {
      [1, 2, 5].forEach(function (m) {
        var t = m * Math.pow(10, d);
        if (t < lo || t > hi) return;
        all.push(t);
        if (m === 1) decades.push(t);
      });
    }
    return all.length <= 9 || decades.length < 2 ? all : decades;
  }
  function tickLabel(v, spacing) {
    if (v === 0) return '0';
    var a = Math.abs(v);
    spacing = Math.abs(spacing) > 0 ? Math.abs(spacing) : a;
    function decimals(s) { return Math.max(0, -Math.floor(Math.log10(s) + 1e-9)); }
    if (a >= 1e6 && spacing >= 1e5) return (v / 1e6).toFixed(decimals(spacing / 1e6)) + 'M';
    if (a >= 1e4 && spacing >= 1e3) return (v / 1e3).toFixed(decimals(spacing / 1e3)) + 'k';
    if (a < 1e-3) return v.toExponential(Math.max(0, Math.floor(Math.log10(a)) - Math.floor(Math.log10(spacing) + 1e-9)));
    return v.toFixed(decimals(spacing));
  }
  function linearRange(lo, hi) {  // a little room around the values, as line_chart.cpp's
    if (!(lo <= hi)) { lo = 0; hi = 1; }
    var span = hi - lo;
    if (span <= 0) span = Math.max(Math.abs(hi) * 0.2, 1e-6);
    var from = lo - span * 0.05;
    return [lo >= 0 && from < 0 ? 0 : from, hi + span * 0.05];
  }
  function logRange(lo, hi) {
    if (!(lo <= hi)) { lo = 0.1; hi = 1; }
    var pad = Math.pow(10, Math.max(Math.log10(hi / lo), 0.1) * 0.05);
    return [lo / pad, hi * pad];
  }
  function bound(xs, x, after) {  // the first index of sorted xs above x (after) or at least x
    var lo = 0, hi = xs.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (xs[mid] < x || (after && xs[mid] === x)) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  // TensorBoard's smoothing: an exponential moving average, debiased so that it starts at
  // the first value instead of rising from 0.
  function smooth(ys, weight) {
    var last = 0, count = 0;
    return ys.map(function (y) {
      last = last * weight + (1 - weight) * y;
      count += 1;
      return last / (1 - Math.pow(weight, count));
    });
  }
  // line_chart.cpp's thin_points over the points idx of ys: per bucket, the first, lowest,
  // highest and last, so that spikes stay.
  function thin(idx, ys, max) {
    if (idx.length <= max) return idx;
    var keep = [], buckets = max >> 2, n = idx.length;
    for (var b = 0; b < buckets; b++) {
      var first = Math.floor(b * n / buckets), last = Math.floor((b + 1) * n / buckets) - 1, lo = first, hi = first;
      for (var i = first; i <= last; i++) {
        if (ys[idx[i]] < ys[idx[lo]]) lo = i;
        if (ys[idx[i]] > ys[idx[hi]]) hi = i;
      }
      [first, Math.min(lo, hi), Math.max(lo, hi), last].forEach(function (j) {
        if (!keep.length || keep[keep.length - 1] < idx[j]) keep.push(idx[j]);
      });
    }
    return keep;
  }
  function label(cls, x, y, anchor, content) {
    var t = make('text', {'class': cls, x: x, y: y, 'text-anchor': anchor});
    t.textContent = content;
    return t;
  }

  // ---------------------------------------------------------------- charts
  // What the controls chose, for every chart: the smoothing weight, the x axis and the range
  // zoomed to (in the axis's units; null: everything).
  var state = {smoothing: 0, axis: 'step', zoom: null};
  var COLUMN = {step: 'step', tokens: 'tokens', wall: 'wall_s'};
  var AXIS_LABEL = {step: 'step', tokens: 'tokens trained on', wall: 'wall time (seconds)'};
  var controls = null;

  // A chart's line: the points of its run's column that have a value (the page's data holds
  // every reported point of each run, controls.cpp).
  function Series(s, runs) {
    var cols = runs[s.run].columns, ys = cols[s.field];
    this.name = s.name;
    this.colour = s.colour;
    this.strong = s.strong;
    this.cols = cols;
    this.k = [];
    ys.forEach(function (y, k) { if (y !== null) this.k.push(k); }, this);
    this.y = this.k.map(function (k) { return ys[k]; });
    this.step = this.k.map(function (k) { return cols.step[k]; });
    this.sm = this.y;
  }
  Series.prototype.setAxis = function (axis) {  // x[i]: point i on the axis, null when unknown
    var col = this.cols[COLUMN[axis]];
    this.x = this.k.map(function (k) { return col[k]; });
    this.on = [];  // the points with a place on the axis, in order (the axes all grow with the step)
    this.x.forEach(function (x, i) { if (x !== null) this.on.push(i); }, this);
    this.onx = this.on.map(function (i) { return this.x[i]; }, this);
  };

  function Chart(c, runs) {
    this.c = c;
    this.svg = document.getElementById('chart-' + c.id);
    this.figure = this.svg.closest('figure');
    this.out = this.figure.querySelector('output');
    this.cursor = this.svg.querySelector('.cursor');
    this.axisLabel = this.svg.querySelector('.axes .axis-label');
    this.dyn = make('g', {'class': 'dyn'});  // the drawing when the controls change it
    this.svg.insertBefore(this.dyn, this.svg.querySelector('.axes'));
    this.log = false;
    this.series = c.series.map(function (s) { return new Series(s, runs); });
    this.setAxis('step');
    this.render();
    this.listen();
  }
  Chart.prototype.setAxis = function (axis) {
    this.series.forEach(function (s) { s.setAxis(axis); });
  };
  Chart.prototype.extent = function () {  // what the points span on the axis, null if nothing
    var lo = Infinity, hi = -Infinity;
    this.series.forEach(function (s) {
      if (s.onx.length) lo = Math.min(lo, s.onx[0]), hi = Math.max(hi, s.onx[s.onx.length - 1]);
    });
    return lo <= hi ? [lo, hi] : null;
  };
  Chart.prototype.px = function (x) {
    var p = this.c.plot, r = this.view.x;
    return p[0] + (x - r[0]) / (r[1] - r[0]) * (p[2] - p[0]);
  };
  Chart.prototype.py = function (y) {
    var p = this.c.plot, r = this.log ? this.view.y.log : this.view.y.lin, f = this.log ? Math.log10 : Number;
    return p[3] + (f(y) - f(r[0])) / (f(r[1]) - f(r[0])) * (p[1] - p[3]);
  };
  Chart.prototype.xAt = function (clientX, clientY) {  // the axis's value under a pointer
    var p = svgPoint(this.svg, clientX, clientY), c = this.c, r = this.view.x;
    return r[0] + (p.x - c.plot[0]) / (c.plot[2] - c.plot[0]) * (r[1] - r[0]);
  };
  // The static drawing (line_chart.cpp's) while the controls are as the page opened; else
  // the chart drawn here, with the range, smoothing and axis chosen.
  Chart.prototype.render = function () {
    var dynamic = state.smoothing > 0 || state.axis !== 'step' || state.zoom !== null;
    this.figure.classList.toggle('dynamic', dynamic);
    this.axisLabel.textContent = AXIS_LABEL[state.axis];
    clear(this.dyn);
    clear(this.cursor);
    clear(this.out);
    this.series.forEach(function (s) { s.sm = state.smoothing > 0 ? smooth(s.y, state.smoothing) : s.y; });
    this.view = dynamic ? this.fit() : {x: this.c.x, y: this.c.y};
    if (dynamic) this.draw();
    var seen = {}, xs = [], r = this.view.x;
    this.series.forEach(function (s) {
      s.onx.forEach(function (x) {
        if (x >= r[0] && x <= r[1] && !seen[x]) { seen[x] = true; xs.push(x); }
      });
    });
    this.xs = xs.sort(function (a, b) { return a - b; });  // where the cursor stops
    this.index = -1;
  };
  Chart.prototype.fit = function () {
    var x = state.zoom || this.extent() || [0, 1], lin = [Infinity, -Infinity], log = [Infinity, -Infinity];
    if (!(x[1] > x[0])) x = [x[0], x[0] + 1];
    function add(v) {
      lin = [Math.min(lin[0], v), Math.max(lin[1], v)];
      if (v > 0) log = [Math.min(log[0], v), Math.max(log[1], v)];
    }
    this.series.forEach(function (s) {
      s.on.forEach(function (i) { if (s.x[i] >= x[0] && s.x[i] <= x[1]) add(s.y[i]), add(s.sm[i]); });
    });
    if (!state.zoom) this.c.guides.forEach(function (g) { add(g.y); });
    return {x: x, y: {lin: linearRange(lin[0], lin[1]), log: logRange(log[0], log[1])}};
  };
  Chart.prototype.draw = function () {
    var chart = this, p = this.c.plot, r = this.view.x, yr = this.log ? this.view.y.log : this.view.y.lin;
    var clip = make('clipPath', {id: 'clip-' + this.c.id}), lines = make('g', {'clip-path': 'url(#clip-' + this.c.id + ')'});
    clip.appendChild(make('rect', {x: p[0], y: p[1], width: p[2] - p[0], height: p[3] - p[1]}));
    this.dyn.appendChild(clip);
    var xt = linearTicks(r[0], r[1], 6), yt = this.log ? logTicks(yr[0], yr[1]) : linearTicks(yr[0], yr[1], 5);
    xt.forEach(function (t) {
      var x = chart.px(t);
      chart.dyn.appendChild(make('line', {'class': 'grid', x1: x, x2: x, y1: p[1], y2: p[3]}));
      chart.dyn.appendChild(label('tick', x, p[3] + 16, 'middle', tickLabel(t, xt.length > 1 ? xt[1] - xt[0] : 1)));
    });
    yt.forEach(function (t) {
      var y = chart.py(t), text = label('tick', p[0] - 6, y, 'end', tickLabel(t, chart.log ? t : (yt.length > 1 ? yt[1] - yt[0] : t)));
      text.setAttribute('dy', '0.32em');
      chart.dyn.appendChild(make('line', {'class': 'grid', x1: p[0], x2: p[2], y1: y, y2: y}));
      chart.dyn.appendChild(text);
    });
    this.c.guides.forEach(function (g) {
      if (g.y < yr[0] || g.y > yr[1]) return;
      var y = chart.py(g.y), text = label('guide-label', p[2] - 4, y, 'end', g.label + ' ' + Number(g.y.toPrecision(4)));
      text.setAttribute('dy', '-3');
      lines.appendChild(make('line', {'class': 'guide', x1: p[0], x2: p[2], y1: y, y2: y}));
      lines.appendChild(text);
    });
    this.series.forEach(function (s) { chart.drawSeries(lines, s); });
    this.dyn.appendChild(lines);
  };
  // A line: its points in the range and one either side; smoothed, the raw line faint behind.
  Chart.prototype.drawSeries = function (g, s) {
    var chart = this, r = this.view.x, smoothed = state.smoothing > 0;
    var vis = s.on.slice(Math.max(0, bound(s.onx, r[0], false) - 1), bound(s.onx, r[1], true) + 1);
    var strong = s.strong ? ' strong' : '';
    (smoothed ? [[s.y, 'line raw'], [s.sm, 'line' + strong]] : [[s.y, 'line' + strong]]).forEach(function (line) {
      var d = '', down = false;
      thin(vis, line[0], 1200).forEach(function (i) {
        if (chart.log && line[0][i] <= 0) { down = false; return; }
        d += (down ? ' ' : 'M') + chart.px(s.x[i]).toFixed(1) + ' ' + chart.py(line[0][i]).toFixed(1);
        down = true;
      });
      if (!d) return;
      var path = make('path', {'class': line[1], stroke: s.colour, d: d}), title = make('title', {});
      title.textContent = s.name + (line[1] === 'line raw' ? ' (not smoothed)' : '');
      path.appendChild(title);
      g.appendChild(path);
    });
    if (s.strong && vis.length <= 80) vis.forEach(function (i) {
      if (!chart.log || s.y[i] > 0) g.appendChild(make('circle', {cx: chart.px(s.x[i]), cy: chart.py(s.y[i]), r: 2.6, fill: s.colour}));
    });
  };
  function axisText(x) {
    if (state.axis === 'tokens') return 'tokens ' + x;
    if (state.axis === 'wall') return 'wall time ' + Number(x.toFixed(2)) + ' s';
    return 'step ' + x;
  }
  Chart.prototype.show = function (index) {
    if (index < 0 || index >= this.xs.length) return;
    this.index = index;
    var at = this.xs[index], x = this.px(at), chart = this, r = this.view.x;
    clear(this.cursor);
    clear(this.out);
    this.cursor.appendChild(make('line', {x1: x, x2: x, y1: this.c.plot[1], y2: this.c.plot[3]}));
    this.item(axisText(at), null);
    this.series.forEach(function (s) {
      var j = nearest(s.onx, at);
      if (j < 0 || s.onx[j] < r[0] || s.onx[j] > r[1]) return;
      var i = s.on[j], y = s.sm[i];
      if (chart.log && y <= 0) return;
      var text = s.name + ' ' + s.y[i] + (chart.c.unit ? ' ' + chart.c.unit : '');
      if (state.smoothing > 0) text += ' (smoothed ' + Number(y.toPrecision(5)) + ')';
      if (state.axis !== 'step' || s.step[i] !== at) text += ' (step ' + s.step[i] + ')';
      chart.item(text, s.colour);
      chart.cursor.appendChild(make('circle', {cx: chart.px(s.x[i]), cy: chart.py(y), r: 4, fill: s.colour}));
    });
  };
  Chart.prototype.item = function (text, colour) {
    var span = document.createElement('span');
    span.className = 'item';
    if (colour) {
      var dot = document.createElement('span');
      dot.className = 'dot';
      dot.style.background = colour;
      span.appendChild(dot);
    }
    span.appendChild(document.createTextNode(text));
    this.out.appendChild(span);
    this.out.appendChild(document.createTextNode(' '));
  };
  Chart.prototype.at = function (clientX, clientY) {
    return nearest(this.xs, this.xAt(clientX, clientY));
  };
  Chart.prototype.listen = function () {
    var chart = this, toggle = this.figure.querySelector('input[type=checkbox]');
    this.svg.addEventListener('pointermove', function (e) { chart.show(chart.at(e.clientX, e.clientY)); });
    this.svg.addEventListener('focus', function () { chart.show(chart.index < 0 ? chart.xs.length - 1 : chart.index); });
    this.svg.addEventListener('keydown', function (e) {
      var moves = {ArrowLeft: -1, ArrowRight: 1, PageDown: -10, PageUp: 10}, at = chart.xs[chart.index];
      if (e.key in moves) chart.show(Math.max(0, Math.min(chart.xs.length - 1, chart.index + moves[e.key])));
      else if (e.key === 'Home') chart.show(0);
      else if (e.key === 'End') chart.show(chart.xs.length - 1);
      else if ((e.key === '+' || e.key === '=') && controls) controls.scale(0.5, at);
      else if (e.key === '-' && controls) controls.scale(2, at);
      else if (e.key === 'Escape' && controls) controls.zoomTo(null);
      else return;
      e.preventDefault();
    });
    if (toggle) toggle.addEventListener('change', function () {
      var index = chart.index;
      chart.log = toggle.checked;
      chart.figure.classList.toggle('log', chart.log);
      chart.render();
      if (index >= 0) chart.show(Math.min(index, chart.xs.length - 1));
    });
    this.listenDrag();
  };
  // Dragging across a chart zooms every chart to the range dragged over.
  Chart.prototype.listenDrag = function () {
    var chart = this, from = null;
    this.svg.addEventListener('pointerdown', function (e) {
      if (e.button !== 0) return;
      from = {clientX: e.clientX, x: chart.xAt(e.clientX, e.clientY)};
      try { chart.svg.setPointerCapture(e.pointerId); } catch (err) { /* a pointer no longer down */ }
    });
    this.svg.addEventListener('pointermove', function (e) {
      if (!from) return;
      var p = chart.c.plot, a = Math.max(p[0], Math.min(p[2], chart.px(from.x)));
      var b = Math.max(p[0], Math.min(p[2], chart.px(chart.xAt(e.clientX, e.clientY))));
      chart.cursor.appendChild(make('rect', {'class': 'band', x: Math.min(a, b), y: p[1], width: Math.abs(b - a), height: p[3] - p[1]}));
    });
    this.svg.addEventListener('pointerup', function (e) {
      if (!from) return;
      var to = chart.xAt(e.clientX, e.clientY), moved = Math.abs(e.clientX - from.clientX) >= 5;
      if (moved && controls) controls.zoomTo([Math.min(from.x, to), Math.max(from.x, to)]);
      from = null;
    });
    this.svg.addEventListener('pointercancel', function () { from = null; });
  };

  // ---------------------------------------------------------------- the charts' controls
  var CSV_COLUMNS = ['step', 'tokens', 'wall_s', 'loss', 'val_loss', 'val_bits_per_byte', 'lr',
                     'grad_norm', 'tokens_per_s', 'elapsed_s'];
  // A CSV cell: numbers as JSON wrote them; text quoted, and a text a spreadsheet would take
  // for a formula (= + - @, a tab or a return first) behind an apostrophe.
  function csvCell(v) {
    if (v === null || v === undefined) return '';
    if (typeof v === 'number') return String(v);
    var text = String(v);
    if (/^[=+\-@\t\r]/.test(text)) text = '\'' + text;
    return '"' + text.replace(/"/g, '""') + '"';
  }
  function metricsCsv(runs) {
    var lines = [['run'].concat(CSV_COLUMNS).join(',')];
    runs.forEach(function (run) {
      run.columns.step.forEach(function (step, k) {
        lines.push([csvCell(run.name)].concat(CSV_COLUMNS.map(function (c) { return csvCell(run.columns[c][k]); })).join(','));
      });
    });
    return lines.join('\r\n') + '\r\n';
  }

  function Controls(charts, runs) {
    var self = this;
    this.charts = charts;
    this.box = document.getElementById('chart-controls');
    this.smoothing = document.getElementById('smoothing');
    this.from = document.getElementById('zoom-from');
    this.to = document.getElementById('zoom-to');
    this.smoothing.addEventListener('input', function () {
      state.smoothing = Math.max(0, Math.min(0.99, Number(self.smoothing.value) || 0));
      self.apply();
    });
    this.box.querySelectorAll('input[name=x-axis]').forEach(function (radio) {
      radio.addEventListener('change', function () { if (radio.checked) self.setAxis(radio.value); });
    });
    [this.from, this.to].forEach(function (input) {
      input.addEventListener('change', function () { self.typed(); });
    });
    document.getElementById('zoom-in').addEventListener('click', function () { self.scale(0.5); });
    document.getElementById('zoom-out').addEventListener('click', function () { self.scale(2); });
    document.getElementById('zoom-reset').addEventListener('click', function () { self.zoomTo(null); });
    var link = document.getElementById('csv-download');
    link.href = URL.createObjectURL(new Blob([metricsCsv(runs)], {type: 'text/csv'}));
    this.restore();
    this.box.hidden = false;
  }
  Controls.prototype.full = function () {  // what every chart's points span on the axis
    var lo = Infinity, hi = -Infinity;
    this.charts.forEach(function (ch) {
      var e = ch.extent();
      if (e) lo = Math.min(lo, e[0]), hi = Math.max(hi, e[1]);
    });
    return lo < hi ? [lo, hi] : null;
  };
  Controls.prototype.apply = function () {
    var full = this.full(), zoom = state.zoom;
    document.getElementById('smoothing-value').textContent = state.smoothing.toFixed(2);
    document.getElementById('zoom-unit').textContent = {step: 'steps', tokens: 'tokens', wall: 'seconds'}[state.axis];
    this.from.value = zoom ? Number(zoom[0].toPrecision(7)) : '';
    this.to.value = zoom ? Number(zoom[1].toPrecision(7)) : '';
    this.from.placeholder = full ? String(full[0]) : '';
    this.to.placeholder = full ? String(full[1]) : '';
    this.charts.forEach(function (ch) { ch.render(); });
    try { sessionStorage.setItem('attograd-report', JSON.stringify({smoothing: state.smoothing, axis: state.axis})); } catch (e) { /* storage off */ }
  };
  // The view named in the address (#smoothing=0.6&axis=tokens&zoom=100,400: a view to
  // bookmark or share), else the one this tab chose last (a live page reloads itself).
  Controls.prototype.restore = function () {
    var saved = {};
    try { saved = JSON.parse(sessionStorage.getItem('attograd-report')) || {}; } catch (e) { /* none */ }
    location.hash.slice(1).split('&').forEach(function (part) {
      var kv = part.split('=');
      try { if (kv.length === 2) saved[kv[0]] = decodeURIComponent(kv[1]); } catch (e) { /* not a view */ }
    });
    var smoothing = Number(saved.smoothing), zoom = String(saved.zoom || '').split(',').map(Number);
    if (smoothing >= 0 && smoothing <= 0.99) this.smoothing.value = state.smoothing = smoothing;
    var radio = Array.prototype.filter.call(this.box.querySelectorAll('input[name=x-axis]'), function (r) {
      return r.value === saved.axis && !r.disabled;
    })[0];
    if (radio) radio.checked = true;
    this.setAxis(radio ? radio.value : 'step');
    if (zoom.length === 2 && zoom[0] < zoom[1]) this.zoomTo(zoom);
  };
  Controls.prototype.setAxis = function (axis) {
    state.axis = axis;
    state.zoom = null;  // a range in other units
    this.charts.forEach(function (ch) { ch.setAxis(axis); });
    this.apply();
  };
  Controls.prototype.zoomTo = function (range) {
    var full = this.full(), lo = range && full ? Math.max(full[0], range[0]) : 0;
    var hi = range && full ? Math.min(full[1], range[1]) : 0;
    state.zoom = lo < hi && (lo > full[0] || hi < full[1]) ? [lo, hi] : null;
    this.apply();
  };
  Controls.prototype.scale = function (factor, centre) {  // zoom in (factor < 1) or out
    var r = state.zoom || this.full();
    if (!r) return;
    var c = centre === undefined ? (r[0] + r[1]) / 2 : centre, half = (r[1] - r[0]) / 2 * factor;
    this.zoomTo([c - half, c + half]);
  };
  Controls.prototype.typed = function () {  // the range typed; an empty end is the data's end
    var full = this.full();
    if (!full || (this.from.value === '' && this.to.value === '')) return this.zoomTo(null);
    var a = this.from.value === '' ? full[0] : Number(this.from.value);
    var b = this.to.value === '' ? full[1] : Number(this.to.value);
    if (a < b) this.zoomTo([a, b]); else this.apply();  // reversed or not numbers: as it was
  };

  // ---------------------------------------------------------------- samples
  function listenSamples() {
    document.querySelectorAll('.sample-run').forEach(function (box) {
      var range = box.querySelector('input[type=range]'), out = box.querySelector('output');
      var items = box.querySelectorAll('ol.samples > li');
      function show() {
        var k = Math.max(0, Math.min(items.length - 1, Number(range.value) || 0));
        items.forEach(function (li, i) { li.hidden = i !== k; });
        out.textContent = items[k].querySelector('.sample-step').textContent + ' (' + (k + 1) + ' of ' + items.length + ')';
      }
      if (items.length < 2) return;  // nothing to choose from
      range.addEventListener('input', show);
      box.querySelector('.sample-control').hidden = false;
      box.classList.add('sliding');
      show();
    });
  }

  // ---------------------------------------------------------------- heat maps
  function HeatMap(m) {
    this.m = m;
    this.svg = document.getElementById(m.id);
    this.figure = this.svg.closest('figure');
    this.out = this.figure.querySelector('output');
    this.cursor = this.svg.querySelector('.cursor');
    var g = this.svg.getAttribute('data-grid').split(' ').map(Number);
    this.left = g[0]; this.top = g[1]; this.size = g[2]; this.n = g[3];
    this.cell = [this.n - 1, 0];
    this.listen();
  }
  HeatMap.prototype.weight = function (i, j) {
    return j > i ? null : this.m.v[i * (i + 1) / 2 + j] / 1e4;
  };
  HeatMap.prototype.show = function (i, j) {
    if (i < 0 || j < 0 || i >= this.n || j >= this.n) return;
    this.cell = [i, j];
    var w = this.weight(i, j), labels = this.m.labels;
    clear(this.cursor);
    this.cursor.appendChild(make('rect', {x: j, y: i, width: 1, height: 1}));
    this.out.textContent = 'query ' + i + ' \u2018' + labels[i] + '\u2019 \u2192 key ' + j + ' \u2018' +
      labels[j] + '\u2019: ' + (w === null ? 'masked (a future token), weight 0' : w.toFixed(4));
  };
  HeatMap.prototype.point = function (i, j) {  // client coordinates of a cell's centre
    return clientPoint(this.svg, this.left + (j + 0.5) * this.size, this.top + (i + 0.5) * this.size);
  };
  HeatMap.prototype.listen = function () {
    var map = this;
    this.svg.addEventListener('pointermove', function (e) {
      var p = svgPoint(map.svg, e.clientX, e.clientY);
      map.show(Math.floor((p.y - map.top) / map.size), Math.floor((p.x - map.left) / map.size));
    });
    this.svg.addEventListener('click', function () { map.figure.classList.toggle('zoomed'); });
    this.svg.addEventListener('focus', function () { map.show(map.cell[0], map.cell[1]); });
    this.svg.addEventListener('keydown', function (e) {
      var moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1]};
      if (e.key === 'Enter' || e.key === ' ') map.figure.classList.toggle('zoomed');
      else if (e.key in moves) map.show(map.cell[0] + moves[e.key][0], map.cell[1] + moves[e.key][1]);
      else return;
      e.preventDefault();
    });
  };

  // ---------------------------------------------------------------- the prompt's tokens
  function listenTokens() {
    var out = document.getElementById('loss-readout');
    if (!out) return;
    document.querySelectorAll('#loss-text .tok').forEach(function (span) {
      function show() { out.textContent = span.title; }
      span.addEventListener('pointerenter', show);
      span.addEventListener('focus', show);
    });
  }

  // ---------------------------------------------------------------- self-test
  function move(target, p, type) {
    target.dispatchEvent(new PointerEvent(type || 'pointermove', {clientX: p.x, clientY: p.y, bubbles: true, button: 0}));
  }
  function set(input, value) {
    input.value = value;
    input.dispatchEvent(new Event('input'));
    input.dispatchEvent(new Event('change'));
  }
  function press(chart, key) {
    chart.svg.dispatchEvent(new KeyboardEvent('keydown', {key: key}));
    return chart.out.textContent;
  }
  function zoomSeen(chart) {
    var x = chart.view.x;
    return {from: controls.from.value, to: controls.to.value, x: [x[0], x[1]], width: x[1] - x[0],
            dynamic: chart.figure.classList.contains('dynamic'), stops: chart.xs.length};
  }
  // Every control as a user would work it, and what the loss chart showed after each.
  function selftestControls(charts, runs) {
    var loss = charts[0], box = controls.box, c = loss.c, r = {shown: !box.hidden, axes: {}};
    set(controls.smoothing, '0.9');
    r.smoothing = {value: document.getElementById('smoothing-value').textContent, dynamic: loss.figure.classList.contains('dynamic'),
                   raw: loss.dyn.querySelectorAll('path.raw').length, lines: loss.dyn.querySelectorAll('path.line:not(.raw)').length,
                   readout: press(loss, 'End')};
    set(controls.smoothing, '0');
    r.smoothing.static_again = !loss.figure.classList.contains('dynamic') && loss.dyn.childNodes.length === 0;
    ['tokens', 'wall', 'step'].forEach(function (axis) {
      box.querySelector('input[name=x-axis][value=' + axis + ']').click();
      r.axes[axis] = {label: loss.axisLabel.textContent, readout: press(loss, 'End'), ticks: loss.dyn.querySelectorAll('text.tick').length,
                      unit: document.getElementById('zoom-unit').textContent};
    });
    var y = (c.plot[1] + c.plot[3]) / 2, w = c.plot[2] - c.plot[0];
    var a = clientPoint(loss.svg, c.plot[0] + w / 4, y), b = clientPoint(loss.svg, c.plot[0] + 3 * w / 4, y);
    var full = zoomSeen(loss);
    move(loss.svg, a, 'pointerdown');
    move(loss.svg, b);
    r.band = loss.cursor.querySelectorAll('rect.band').length;
    move(loss.svg, b, 'pointerup');
    r.zoom = {full: full, drag: zoomSeen(loss), others: charts.slice(1).map(function (ch) { return ch.view.x[0] + ' ' + ch.view.x[1]; })};
    document.getElementById('zoom-in').click();
    r.zoom.zoom_in = zoomSeen(loss);
    document.getElementById('zoom-out').click();
    r.zoom.zoom_out = zoomSeen(loss);
    document.getElementById('zoom-reset').click();
    r.zoom.reset = zoomSeen(loss);
    controls.from.value = '10';
    set(controls.to, '20');
    r.zoom.typed = zoomSeen(loss);
    press(loss, 'Escape');
    r.zoom.escape = zoomSeen(loss);
    press(loss, '+');
    r.zoom.plus = zoomSeen(loss);
    press(loss, '-');
    r.zoom.minus = zoomSeen(loss);
    var z = r.zoom, round = function (v) { return Math.round(v * 1000) / 1000; };
    z.ratios = {drag: round(z.drag.width / full.width), in: round(z.zoom_in.width / z.drag.width),
                out: round(z.zoom_out.width / z.drag.width), plus: round(z.plus.width / full.width)};
    z.linked = z.others.every(function (x) { return x === z.drag.x[0] + ' ' + z.drag.x[1]; });
    var link = document.getElementById('csv-download'), csv = metricsCsv(runs).split('\r\n');
    r.csv = {href: link.getAttribute('href').slice(0, 5), download: link.getAttribute('download'), header: csv[0],
             rows: csv.length - 2, last: csv[csv.length - 2],
             names: csv.slice(1, -1).map(function (line) { return line.slice(0, line.indexOf('",') + 1); })
               .filter(function (name, i, all) { return all.indexOf(name) === i; })};
    link.click();  // a real download (tests/cli/report_test.sh reads the file)
    r.samples = Array.prototype.map.call(document.querySelectorAll('.sample-run'), function (run) {
      var range = run.querySelector('input[type=range]'), out = run.querySelector('output'), seen = {};
      function visible() {
        return Array.prototype.filter.call(run.querySelectorAll('li'), function (li) { return !li.hidden; }).length;
      }
      seen.last = out.textContent;
      seen.visible_last = visible();
      set(range, '0');
      seen.first = out.textContent;
      seen.visible_first = visible();
      seen.control_shown = !run.querySelector('.sample-control').hidden;
      return seen;
    });
    return r;
  }
  function selftest(charts, maps, runs) {
    var result = {charts: [], maps: [], log: null, loss: null};
    if (controls) result.controls = selftestControls(charts, runs);
    charts.forEach(function (ch) {
      var c = ch.c, mid = clientPoint(ch.svg, (c.plot[0] + c.plot[2]) / 2, (c.plot[1] + c.plot[3]) / 2);
      move(ch.svg, mid);
      result.charts.push({id: c.id, readout: ch.out.textContent, markers: ch.cursor.querySelectorAll('circle').length});
    });
    var toggle = document.querySelector('.log-toggle input');
    if (toggle) {
      toggle.click();
      var fig = toggle.closest('figure');
      result.log = {
        log_shown: getComputedStyle(fig.querySelector('.scale.log')).display !== 'none',
        lin_hidden: getComputedStyle(fig.querySelector('.scale.lin')).display === 'none'
      };
      toggle.click();
    }
    maps.forEach(function (m) {
      move(m.svg, m.point(m.n - 1, 0));
      var below = m.out.textContent;
      move(m.svg, m.point(0, m.n - 1));
      result.maps.push({id: m.m.id, below: below, above: m.out.textContent});
    });
    var tok = document.querySelector('#loss-text .tok:not(.first)');
    if (tok) {
      tok.dispatchEvent(new Event('focus'));
      result.loss = document.getElementById('loss-readout').textContent;
    }
    result.overflow = document.documentElement.scrollWidth > window.innerWidth + 1;
    result.width = window.innerWidth;
    result.elements = {
      charts: document.querySelectorAll('svg.chart').length,
      maps: document.querySelectorAll('svg.heat-map').length,
      empty_paths: Array.prototype.filter.call(document.querySelectorAll('svg path'), function (p) {
        return !p.getAttribute('d');
      }).length,
      scripts: document.querySelectorAll('script').length
    };
    result.errors = errorCount;
    var out = document.getElementById('selftest');
    out.textContent = JSON.stringify(result);
    document.body.setAttribute('data-selftest', errorCount ? 'errors' : 'done');
  }

  // The script runs in the page's head, so that the listeners above hear everything the
  // body does; the rest waits for the body.
  document.addEventListener('DOMContentLoaded', function () {
    showErrors();
    try {
      var data = JSON.parse(document.getElementById('report-data').textContent);
      var charts = data.charts.map(function (c) { return new Chart(c, data.runs); });
      if (charts.length) controls = new Controls(charts, data.runs);
      var maps = data.maps.map(function (m) { return new HeatMap(m); });
      listenTokens();
      listenSamples();
      if (location.hash === '#selftest') selftest(charts, maps, data.runs);
    } catch (e) {
      recordError('script error: ' + e.message);
      if (location.hash === '#selftest') document.body.setAttribute('data-selftest', 'errors');
    }
  });
})();
