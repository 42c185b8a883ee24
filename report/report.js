// The report page's behaviour (cli/report.h): hover and keyboard readouts of the exact
// values, the log-scale switch, enlarging a heat map. The page is complete without it.
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

  // ---------------------------------------------------------------- charts
  function Chart(c) {
    this.c = c;
    this.svg = document.getElementById('chart-' + c.id);
    this.figure = this.svg.closest('figure');
    this.out = this.figure.querySelector('output');
    this.cursor = this.svg.querySelector('.cursor');
    this.log = false;
    var seen = {};
    this.steps = [];
    c.series.forEach(function (s) {
      s.x.forEach(function (x) { if (!seen[x]) { seen[x] = true; this.steps.push(x); } }, this);
    }, this);
    this.steps.sort(function (a, b) { return a - b; });
    this.index = -1;
    this.listen();
  }
  Chart.prototype.px = function (x) {
    var c = this.c, span = c.x[1] - c.x[0];
    return c.plot[0] + (x - c.x[0]) / span * (c.plot[2] - c.plot[0]);
  };
  Chart.prototype.py = function (y) {
    var r = this.log ? this.c.y.log : this.c.y.lin, f = this.log ? Math.log10 : Number;
    return this.c.plot[3] + (f(y) - f(r[0])) / (f(r[1]) - f(r[0])) * (this.c.plot[1] - this.c.plot[3]);
  };
  Chart.prototype.show = function (index) {
    if (index < 0 || index >= this.steps.length) return;
    this.index = index;
    var step = this.steps[index], x = this.px(step), chart = this;
    clear(this.cursor);
    clear(this.out);
    this.cursor.appendChild(make('line', {x1: x, x2: x, y1: this.c.plot[1], y2: this.c.plot[3]}));
    this.item('step ' + step, null);
    this.c.series.forEach(function (s) {
      var k = nearest(s.x, step);
      if (k < 0 || s.y[k] === null || (chart.log && s.y[k] <= 0)) return;
      var text = s.name + ' ' + s.y[k] + (chart.c.unit ? ' ' + chart.c.unit : '');
      if (s.x[k] !== step) text += ' (step ' + s.x[k] + ')';
      chart.item(text, s.colour);
      chart.cursor.appendChild(make('circle', {cx: chart.px(s.x[k]), cy: chart.py(s.y[k]), r: 4, fill: s.colour}));
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
    var p = svgPoint(this.svg, clientX, clientY), c = this.c;
    var step = c.x[0] + (p.x - c.plot[0]) / (c.plot[2] - c.plot[0]) * (c.x[1] - c.x[0]);
    return nearest(this.steps, step);
  };
  Chart.prototype.listen = function () {
    var chart = this, toggle = this.figure.querySelector('input[type=checkbox]');
    this.svg.addEventListener('pointermove', function (e) { chart.show(chart.at(e.clientX, e.clientY)); });
    this.svg.addEventListener('focus', function () { chart.show(chart.index < 0 ? chart.steps.length - 1 : chart.index); });
    this.svg.addEventListener('keydown', function (e) {
      var moves = {ArrowLeft: -1, ArrowRight: 1, PageDown: -10, PageUp: 10};
      if (e.key in moves) chart.show(Math.max(0, Math.min(chart.steps.length - 1, chart.index + moves[e.key])));
      else if (e.key === 'Home') chart.show(0);
      else if (e.key === 'End') chart.show(chart.steps.length - 1);
      else return;
      e.preventDefault();
    });
    if (toggle) toggle.addEventListener('change', function () {
      chart.log = toggle.checked;
      chart.figure.classList.toggle('log', chart.log);
      if (chart.index >= 0) chart.show(chart.index);
    });
  };

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
  function move(target, p) {
    target.dispatchEvent(new PointerEvent('pointermove', {clientX: p.x, clientY: p.y, bubbles: true}));
  }
  function selftest(charts, maps) {
    var result = {charts: [], maps: [], log: null, loss: null};
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
      var charts = data.charts.map(function (c) { return new Chart(c); });
      var maps = data.maps.map(function (m) { return new HeatMap(m); });
      listenTokens();
      if (location.hash === '#selftest') selftest(charts, maps);
    } catch (e) {
      recordError('script error: ' + e.message);
      if (location.hash === '#selftest') document.body.setAttribute('data-selftest', 'errors');
    }
  });
})();
