import { PALETTE, scriptJson, uplot } from '../report/html.js'

/**
 * The live dashboard's page: self-contained (uPlot inlined, styles and script inline, no external
 * request), fed by `GET <page>/events`. Everything it shows is text set through the DOM, never
 * HTML built from data.
 *
 * In the page, `window.__dashboard` holds what is drawn: `series` (key, rule, outcome, total),
 * `points` (one per second), `charts.decisions` and `charts.latency` (uPlot instances: `.data`,
 * `.series`), `topKeys`, `breakers`, `context`, `updates` (events applied) and `connected`;
 * `document.body.dataset.ready` turns `"true"` with the first snapshot and
 * `document.body.dataset.updates` counts the events applied.
 */
export function renderDashboardPage(): string {
  const { js, css } = uplot()
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>edgelimit — live dashboard</title>
<style>${css}</style>
<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:20px auto;max-width:1200px;padding:0 16px;color:#222}
h1{font-size:22px;margin:0 0 4px;display:flex;gap:12px;align-items:center}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#555;margin:0 0 8px}.badge{font-size:12px;font-weight:600;padding:2px 8px;border-radius:10px;background:#eee;color:#555}
.badge.live{background:#e3f4e8;color:#0a7d32}.badge.down{background:#fdecea;color:#b00020}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}th,td{border-bottom:1px solid #e4e4e4;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f6f6f6}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}td.key{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.note{color:#555;font-size:13px}.chart{min-height:300px}.open{color:#b00020;font-weight:600}.half-open{color:#b36b00;font-weight:600}.closed{color:#0a7d32}
</style></head>
<body data-ready="false" data-updates="0">
<h1>edgelimit — live dashboard <span id="status" class="badge">connecting…</span></h1>
<p class="sub" id="context"></p>
<section><h2>Decisions per second, per rule and outcome</h2>
<div class="chart" id="decisions"></div>
<table id="totals"><thead><tr><th>rule</th><th>mode</th><th class="num">allowed</th><th class="num">denied</th><th class="num">shadow-denied</th><th class="num">unknown</th><th class="num">allowed (since start)</th><th class="num">denied (since start)</th><th class="num">shadow-denied (since start)</th><th class="num">unknown (since start)</th></tr></thead><tbody></tbody></table>
<p class="note" id="window-note"></p></section>
<section><h2>Store</h2>
<p class="note" id="store-note"></p>
<div class="chart" id="latency"></div>
<table id="breakers"><thead><tr><th>rule</th><th>tier</th><th>breaker</th><th>since</th></tr></thead><tbody></tbody></table>
<p class="note" id="errors"></p></section>
<section><h2>Top keys (since start)</h2>
<p class="note">Keys as the store sees them: hashed (HMAC under <code>identity.secret</code>), never the raw address or API key. Find one with <code>POST /admin/peek</code>.</p>
<table id="top-keys"><thead><tr><th>rule</th><th>tier</th><th>key</th><th class="num">requests</th><th class="num">allowed</th><th class="num">denied</th><th class="num">shadow-denied</th><th class="num">unknown</th></tr></thead><tbody></tbody></table>
<p class="note" id="keys-note"></p></section>
<script type="application/json" id="edgelimit-palette">${scriptJson(PALETTE)}</script>
<script>${js}</script>
<script>
(function () {
  var PALETTE = JSON.parse(document.getElementById('edgelimit-palette').textContent);
  // unknown: the rule's state was not known (failing open while the store is down, or not asked).
  var OUTCOME = { allowed: 'allowed', denied: 'denied', shadow_denied: 'shadow-denied', unknown: 'unknown' };
  var OUTCOMES = ['allowed', 'denied', 'shadow_denied', 'unknown'];
  var DASH = { allowed: undefined, denied: [6, 4], shadow_denied: [2, 3], unknown: [1, 4] };
  var D = { ready: false, connected: false, updates: 0, seconds: 300, series: [], points: [], charts: {},
    topKeys: [], breakers: [], storeErrors: {}, context: null, keys: null };
  window.__dashboard = D;
  var chartKeys = { decisions: '', latency: '' };

  function text(el, s) { el.textContent = s; return el; }
  function cell(row, s, cls) { var td = row.insertCell(); td.textContent = s; if (cls) td.className = cls; return td; }
  function fmt(n) { return Number(n).toLocaleString('en-US'); }
  function width(el) { return Math.max(320, el.clientWidth || 1100); }

  /** Replaces the points from the first one received on (it was partial), then keeps the window. */
  function merge(points, reset) {
    if (reset) D.points = [];
    if (points.length > 0) {
      var from = points[0].t;
      while (D.points.length > 0 && D.points[D.points.length - 1].t >= from) D.points.pop();
      Array.prototype.push.apply(D.points, points);
    }
    if (D.points.length > D.seconds) D.points.splice(0, D.points.length - D.seconds);
  }

  var X_AXIS = { space: 90, incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600],
    values: function (u, ticks) { return ticks.map(function (t) { return new Date(t * 1000).toLocaleTimeString(); }); } };

  function chart(id, key, opts, data) {
    var el = document.getElementById(id);
    var u = D.charts[id];
    if (u && chartKeys[id] === key) { u.setData(data); return; }
    if (u) u.destroy();
    chartKeys[id] = key;
    opts.width = width(el);
    opts.height = 280;
    D.charts[id] = new uPlot(opts, data, el);
  }

  function drawDecisions() {
    var xs = D.points.map(function (p) { return p.t; });
    var stepped = uPlot.paths.stepped({ align: 1 });
    var series = [{ label: 'time' }].concat(D.series.map(function (s, i) {
      return { label: s.rule + ' ' + (OUTCOME[s.outcome] || s.outcome), stroke: PALETTE[i % PALETTE.length],
        width: s.outcome === 'allowed' ? 1.5 : 2, dash: DASH[s.outcome], paths: stepped, points: { show: false } };
    }));
    var data = [xs].concat(D.series.map(function (s) {
      return D.points.map(function (p) { return p.counts[s.key] || 0; });
    }));
    chart('decisions', D.series.map(function (s) { return s.key; }).join('\\n'), {
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.05 : 1]; } } },
      axes: [X_AXIS, { label: 'decisions / s', size: 60 }], series: series, legend: { live: true }
    }, data);
  }

  function drawLatency() {
    var xs = D.points.map(function (p) { return p.t; });
    var pick = function (f) { return D.points.map(function (p) { return p.latency ? p.latency[f] : null; }); };
    chart('latency', 'latency', {
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } } },
      axes: [X_AXIS, { label: 'store round trip (ms)', size: 60 }],
      series: [{ label: 'time' },
        { label: 'p50', stroke: PALETTE[0], width: 1.5, points: { show: true, size: 4 } },
        { label: 'p99', stroke: PALETTE[1], width: 1.5, points: { show: true, size: 4 } },
        { label: 'max', stroke: PALETTE[8], width: 1, dash: [4, 3], points: { show: true, size: 3 } },
        { label: 'calls / s', show: false, stroke: PALETTE[2], points: { show: false } }],
      legend: { live: true }
    }, [xs, pick('p50'), pick('p99'), pick('max'), pick('n')]);
  }

  function drawTables() {
    var ctx = D.context;
    text(document.getElementById('context'), 'policy generation ' + ctx.generation + ' · ' + ctx.rules.length +
      ' rules · ' + ctx.store.type + ' store (' + ctx.store.status + ')' + (ctx.draining ? ' · draining' : '') +
      ' · updated ' + new Date().toLocaleTimeString());
    // Keyed by rule names (user text): no prototype, so a rule named toString is not a method.
    var sums = Object.create(null);
    D.points.forEach(function (p) { for (var k in p.counts) sums[k] = (sums[k] || 0) + p.counts[k]; });
    var totals = Object.create(null);
    D.series.forEach(function (s) { totals[s.key] = s.total; });
    var modes = Object.create(null);
    ctx.rules.forEach(function (r) { modes[r.name] = r.mode === 'shadow' ? 'shadow' : (r.enforce < 100 ? 'enforce ' + r.enforce + '%' : 'enforce'); });
    var rules = [];
    D.series.forEach(function (s) { if (rules.indexOf(s.rule) < 0) rules.push(s.rule); });
    var body = document.querySelector('#totals tbody');
    body.textContent = '';
    rules.forEach(function (rule) {
      var row = body.insertRow();
      row.dataset.rule = rule;
      cell(row, rule);
      cell(row, modes[rule] || 'removed');
      OUTCOMES.forEach(function (o) { cell(row, fmt(sums[rule + '/' + o] || 0), 'num'); });
      OUTCOMES.forEach(function (o) { cell(row, fmt(totals[rule + '/' + o] || 0), 'num'); });
    });
    text(document.getElementById('window-note'), 'The chart and the first four columns cover the last ' +
      D.points.length + ' s (at most ' + D.seconds + ' s are kept); the last point is the current second, still counting.');

    var remote = ctx.store.type !== 'memory';
    text(document.getElementById('store-note'), remote
      ? 'Round trips to the ' + ctx.store.type + ' store, per second (p50, p99 and max, ms).'
      : 'The memory store decides in-process: there are no store round trips or breakers to show.');
    var bb = document.querySelector('#breakers tbody');
    bb.textContent = '';
    D.breakers.forEach(function (b) {
      var row = bb.insertRow();
      cell(row, b.rule); cell(row, b.tier || '—'); cell(row, b.state, b.state);
      cell(row, new Date(b.since).toLocaleTimeString());
    });
    var errs = Object.keys(D.storeErrors).map(function (k) { return k + ' ' + fmt(D.storeErrors[k]); });
    text(document.getElementById('errors'), errs.length ? 'Store errors since start: ' + errs.join(', ') : (remote ? 'No store errors since start.' : ''));

    var kb = document.querySelector('#top-keys tbody');
    kb.textContent = '';
    D.topKeys.forEach(function (k) {
      var row = kb.insertRow();
      cell(row, k.rule); cell(row, k.tier || '—'); cell(row, k.key, 'key');
      cell(row, fmt(k.requests), 'num'); cell(row, fmt(k.allowed), 'num'); cell(row, fmt(k.denied), 'num'); cell(row, fmt(k.shadowDenied), 'num'); cell(row, fmt(k.unknown || 0), 'num');
    });
    text(document.getElementById('keys-note'), D.keys.exact
      ? D.keys.held + ' (rule, key) pairs; counts are exact.'
      : D.keys.held + ' (rule, key) pairs held: the least frequent were dropped, so a count may be short by the number shown in the data.');
  }

  function apply(msg, reset) {
    D.seconds = msg.seconds;
    D.series = msg.series;
    D.topKeys = msg.topKeys;
    D.keys = msg.keys;
    D.breakers = msg.breakers;
    D.storeErrors = msg.storeErrors;
    D.context = msg.context;
    merge(msg.points, reset);
    drawDecisions();
    drawLatency();
    drawTables();
    D.updates++;
    document.body.dataset.updates = String(D.updates);
    if (!D.ready) { D.ready = true; document.body.dataset.ready = 'true'; }
  }

  function status(cls, s) { var el = document.getElementById('status'); el.className = 'badge ' + cls; el.textContent = s; }
  var source = new EventSource(location.pathname.replace(/\\/?$/, '/') + 'events');
  source.addEventListener('snapshot', function (e) { apply(JSON.parse(e.data), true); });
  source.addEventListener('update', function (e) { apply(JSON.parse(e.data), false); });
  source.onopen = function () { D.connected = true; status('live', 'live'); };
  source.onerror = function () { D.connected = false; status('down', source.readyState === 2 ? 'disconnected' : 'reconnecting…'); };
  window.addEventListener('resize', function () {
    for (var id in D.charts) D.charts[id].setSize({ width: width(document.getElementById(id)), height: 280 });
  });
})();
</script>
</body></html>
`
}
