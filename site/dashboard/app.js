// Meridian live dashboard: polls dashboard.json and redraws every panel.
// Plain JavaScript, no dependencies; every chart is hand-built SVG. Text
// from the JSON only ever reaches the DOM through textContent.
'use strict';

(() => {
  const SVGNS = 'http://www.w3.org/2000/svg';
  const PHASES = ['generate', 'fetch', 'update'];
  const STATES = ['self', 'up', 'suspect', 'down', 'unknown'];

  let polls = 0;          // successful polls rendered
  let intervalMs = 1000;  // until the first answer says otherwise
  let last = null;        // the last answer, redrawn on resize

  // ---- DOM helpers ----

  const $ = (id) => document.getElementById(id);

  function setText(id, s) {
    $(id).textContent = s;
  }

  // el creates an SVG element with attributes, appended to parent if given.
  function el(tag, attrs, parent) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  // label creates an SVG text element.
  function label(parent, x, y, s, attrs) {
    const t = el('text', Object.assign({ x, y }, attrs), parent);
    t.textContent = s;
    return t;
  }

  // sizeSVG sets the SVG's viewBox to its laid-out width (so text keeps its
  // pixel size) and the given height; it returns the width.
  function sizeSVG(svg, h, minW) {
    const w = Math.max(minW || 300, Math.round(svg.getBoundingClientRect().width) || 800);
    svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
    svg.setAttribute('height', h);
    svg.replaceChildren();
    return w;
  }

  // fillTable replaces tbody's rows: rows is a list of lists of cells, each
  // a string or {text, cls}. An empty list shows a single "none" row.
  function fillTable(id, rows, cols) {
    const body = $(id).tBodies[0];
    const trs = rows.map((cells) => {
      const tr = document.createElement('tr');
      for (const c of cells) {
        const td = document.createElement('td');
        const cell = typeof c === 'object' && c !== null ? c : { text: c };
        td.textContent = String(cell.text);
        if (cell.cls) td.className = cell.cls;
        tr.appendChild(td);
      }
      return tr;
    });
    if (trs.length === 0) {
      const tr = document.createElement('tr');
      const td = document.createElement('td');
      td.colSpan = cols;
      td.className = 'none';
      td.textContent = 'none';
      tr.appendChild(td);
      trs.push(tr);
    }
    body.replaceChildren(...trs);
  }

  // ---- formatting ----

  const num = (v) => (typeof v === 'number' && isFinite(v) ? v : 0);
  const arr = (v) => (Array.isArray(v) ? v : []);

  // toMs reads a time as Unix milliseconds (a number, or an RFC 3339 string).
  function toMs(v) {
    if (typeof v === 'number') return v;
    if (typeof v === 'string') {
      const t = Date.parse(v);
      return isNaN(t) ? 0 : t;
    }
    return 0;
  }

  function fmtInt(v) {
    return Math.round(num(v)).toLocaleString('en-US');
  }

  // fmtShort is a compact count: 950, 12.3k, 4.56M.
  function fmtShort(v) {
    v = num(v);
    const a = Math.abs(v);
    if (a < 1000) return String(Math.round(v * 10) / 10);
    for (const [d, u] of [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']]) {
      if (a >= d) return (v / d).toFixed(a / d < 10 ? 2 : 1) + u;
    }
    return String(v);
  }

  function fmtBytes(v) {
    v = num(v);
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? String(v) : v.toFixed(v < 10 ? 2 : 1)) + ' ' + units[i];
  }

  // fmtDur is a duration in seconds: 12.3s, 4m05s, 2h03m, 3d04h.
  function fmtDur(s) {
    s = num(s);
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + 's';
    const pad = (n) => String(Math.floor(n)).padStart(2, '0');
    if (s < 3600) return Math.floor(s / 60) + 'm' + pad(s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h' + pad((s % 3600) / 60) + 'm';
    return Math.floor(s / 86400) + 'd' + pad((s % 86400) / 3600) + 'h';
  }

  function fmtCash(v) {
    v = num(v);
    const a = Math.abs(v);
    if (a >= 1000) return fmtShort(v);
    if (a >= 1 || a === 0) return v.toFixed(2);
    return v.toPrecision(3);
  }

  function fmtClock(ms, secs) {
    const d = new Date(ms);
    const p = (n) => String(n).padStart(2, '0');
    return p(d.getHours()) + ':' + p(d.getMinutes()) + (secs ? ':' + p(d.getSeconds()) : '');
  }

  // ---- scales and axes ----

  // niceStep is a 1, 2 or 5 × 10^k step splitting range into about n parts.
  function niceStep(range, n) {
    const raw = range / n;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const f of [1, 2, 5, 10]) if (f * mag >= raw) return f * mag;
    return 10 * mag;
  }

  function niceMax(max) {
    if (!(max > 0)) return 1;
    const step = niceStep(max, 4);
    return Math.ceil(max / step) * step;
  }

  // timeTicks are round times between t0 and t1 (ms), about n of them.
  function timeTicks(t0, t1, n) {
    const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
    const want = (t1 - t0) / 1000 / n;
    const step = (steps.find((s) => s >= want) || 86400) * 1000;
    const ticks = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) ticks.push(t);
    return { ticks, secs: step < 60000 };
  }

  // timeAxis draws vertical grid lines and time labels under the plot.
  function timeAxis(g, t0, t1, X, top, bottom, n) {
    const { ticks, secs } = timeTicks(t0, t1, n);
    for (const t of ticks) {
      const x = X(t);
      el('line', { x1: x, x2: x, y1: top, y2: bottom, class: 'gridline' }, g);
      if (x - X(t0) < 24 || X(t1) - x < 24) continue; // clear of the y labels
      label(g, x, bottom + 13, fmtClock(t, secs), { class: 'tick', 'text-anchor': 'middle' });
    }
    el('line', { x1: X(t0), x2: X(t1), y1: bottom, y2: bottom, class: 'axis' }, g);
  }

  // legend draws coloured swatches with labels from x, y; items are
  // [text, attrs of the swatch].
  function legend(g, x, y, items, shape) {
    for (const [text, attrs] of items) {
      if (shape === 'line') {
        el('line', Object.assign({ x1: x, x2: x + 16, y1: y - 4, y2: y - 4 }, attrs), g);
      } else if (shape === 'circle') {
        el('circle', Object.assign({ cx: x + 6, cy: y - 4, r: 5 }, attrs), g);
      } else {
        el('rect', Object.assign({ x, y: y - 9, width: 14, height: 10 }, attrs), g);
      }
      label(g, x + 20, y, text, { class: 'legend' });
      x += 34 + text.length * 6.5;
    }
  }

  // ---- line charts ----

  // lineChart draws lines over times xs (ms). Each line is {name, cls, ys,
  // right, max, fmt}: lines with right=true use a right-hand axis.
  function lineChart(svg, h, xs, lines) {
    const w = sizeSVG(svg, h);
    const hasRight = lines.some((l) => l.right);
    const m = { l: 46, r: hasRight ? 46 : 14, t: 20, b: 20 };
    const top = m.t, bottom = h - m.b, left = m.l, right = w - m.r;
    legend(svg, left, 12, lines.map((l) => [l.name, { class: 'line ' + l.cls }]), 'line');
    if (xs.length === 0) {
      label(svg, (left + right) / 2, (top + bottom) / 2, 'no samples yet', { class: 'empty', 'text-anchor': 'middle' });
      return;
    }
    const t0 = xs[0], t1 = Math.max(xs[xs.length - 1], t0 + 1);
    const X = (t) => left + ((t - t0) / (t1 - t0)) * (right - left);
    timeAxis(svg, t0, t1, X, top, bottom, Math.max(2, Math.floor((right - left) / 90)));

    // One vertical scale per side, with ticks and labels on that side.
    const scales = {};
    for (const side of hasRight ? [false, true] : [false]) {
      const ls = lines.filter((l) => !!l.right === side);
      const max = ls[0].max || niceMax(Math.max(0, ...ls.flatMap((l) => l.ys.map(num))));
      const Y = (v) => bottom - (num(v) / max) * (bottom - top);
      scales[side] = Y;
      const step = niceStep(max, 4);
      const fmt = ls[0].fmt || fmtShort;
      for (let v = 0; v <= max + step / 1e6; v += step) {
        if (!side) el('line', { x1: left, x2: right, y1: Y(v), y2: Y(v), class: 'gridline' }, svg);
        label(svg, side ? right + 5 : left - 5, Y(v) + 4, fmt(v), {
          class: 'tick', 'text-anchor': side ? 'start' : 'end',
        });
      }
    }
    el('line', { x1: left, x2: left, y1: top, y2: bottom, class: 'axis' }, svg);
    if (hasRight) el('line', { x1: right, x2: right, y1: top, y2: bottom, class: 'axis' }, svg);

    for (const l of lines) {
      const Y = scales[!!l.right];
      const d = xs.map((t, i) => (i ? 'L' : 'M') + X(t).toFixed(1) + ' ' + Y(l.ys[i]).toFixed(1)).join('');
      el('path', { d, class: 'line ' + l.cls }, svg);
    }
  }

  function drawRate(d) {
    const series = arr(d.series);
    const xs = series.map((s) => num(s.t));
    lineChart($('chart-rate'), 220, xs, [
      { name: 'pages/s', cls: 'c-pages', ys: series.map((s) => s.pages_s) },
      { name: 'ok/s (2xx)', cls: 'c-ok', ys: series.map((s) => s.ok_s) },
    ]);
    lineChart($('chart-load'), 120, xs, [
      { name: 'busy', cls: 'c-busy', ys: series.map((s) => s.busy), max: 1, fmt: (v) => Math.round(v * 100) + '%' },
      { name: 'in flight', cls: 'c-inflight', ys: series.map((s) => s.in_flight), right: true },
    ]);
  }

  // ---- rounds timeline ----

  function drawRounds(d, now) {
    const svg = $('chart-rounds');
    const rounds = arr(d.rounds);
    const rowH = Math.max(6, Math.min(30, Math.floor(300 / Math.max(1, rounds.length))));
    const m = { l: rounds.some((r) => r.shard != null) ? 70 : 46, r: 60, t: 22, b: 20 };
    const h = m.t + Math.max(1, rounds.length) * rowH + m.b;
    const w = sizeSVG(svg, h);
    const left = m.l, right = w - m.r, top = m.t, bottom = h - m.b;
    legend(svg, left, 12, PHASES.map((p) => [p, { class: 'sw', 'data-k': p }]));

    const starts = rounds.flatMap((r) => PHASES.map((p) => num((r[p] || {}).start))).filter((t) => t > 0);
    if (starts.length === 0) {
      label(svg, (left + right) / 2, top + 12, 'no rounds yet', { class: 'empty', 'text-anchor': 'middle' });
      return;
    }
    const t0 = Math.min(...starts), t1 = Math.max(now, t0 + 1000);
    const X = (t) => left + ((Math.min(t, t1) - t0) / (t1 - t0)) * (right - left);
    timeAxis(svg, t0, t1, X, top, bottom, Math.max(2, Math.floor((right - left) / 90)));

    // Oldest round on top, newest at the bottom; the three phases of a
    // round are staggered a little so that overlaps stay visible.
    const barH = rowH * 0.6, shift = rowH * 0.15;
    rounds.forEach((r, i) => {
      const y = top + i * rowH + 1;
      const labelled = rowH >= 12; // thin rows: every fifth round only
      if (labelled || i % 5 === 0 || i === rounds.length - 1) {
        // A site of shards: each shard's own rounds, named s<shard> r<round>.
        const name = (r.shard != null ? 's' + r.shard + ' ' : '') + 'r' + r.round;
        label(svg, left - 5, y + rowH * 0.6 + 1, name, { class: 'tick', 'text-anchor': 'end' });
      }
      PHASES.forEach((p, k) => {
        const s = r[p] || {};
        const start = num(s.start);
        if (!start) return;
        const end = num(s.end) || now;
        const x = X(start);
        const bar = el('rect', {
          x: x.toFixed(1), y: (y + k * shift).toFixed(1),
          width: Math.max(1.5, X(end) - x).toFixed(1), height: barH.toFixed(1),
          class: 'phase', 'data-round': String(r.round), 'data-phase': p, 'data-shard': r.shard != null ? String(r.shard) : '',
        }, svg);
        const title = el('title', {}, bar);
        title.textContent = `${r.shard != null ? 'shard ' + r.shard + ' ' : ''}round ${r.round} ${p}: ${fmtDur((end - start) / 1000)}${s.end ? '' : ' (running)'}`;
      });
      if (r.done && labelled) {
        label(svg, right + 5, y + rowH * 0.6 + 1, fmtShort(r.pages) + ' p', { class: 'tick' });
      }
    });
    // The present.
    el('line', { x1: X(now), x2: X(now), y1: top, y2: bottom, class: 'now' }, svg);
  }

  // ---- federation map ----

  function drawMap(fed) {
    const svg = $('map');
    const w = sizeSVG(svg, 0, 320);
    const h = Math.round(w / 2);
    svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
    svg.setAttribute('height', h);
    const P = (lat, lon) => [((num(lon) + 180) / 360) * w, ((90 - num(lat)) / 180) * h];

    // Graticule every 30 degrees.
    el('rect', { x: 0, y: 0, width: w, height: h, class: 'sea' }, svg);
    for (let lon = -150; lon < 180; lon += 30) {
      const [x] = P(0, lon);
      el('line', { x1: x, x2: x, y1: 0, y2: h, class: lon === 0 ? 'graticule main' : 'graticule' }, svg);
    }
    for (let lat = -60; lat <= 60; lat += 30) {
      const [, y] = P(lat, 0);
      el('line', { x1: 0, x2: w, y1: y, y2: y, class: lat === 0 ? 'graticule main' : 'graticule' }, svg);
    }

    const sites = arr(fed.sites);
    const byName = new Map(sites.map((s) => [s.name, s]));
    const self = sites.find((s) => s.self);

    // Links first, so that the sites are drawn over them.
    for (const l of arr(fed.links)) {
      const a = byName.get(l.from), b = byName.get(l.to);
      if (!a || !b) continue;
      const peer = self && a.name === self.name ? b : a;
      const state = l.state || peer.state || 'unknown';
      const bad = state === 'suspect' || state === 'down';
      const [x1, y1] = P(a.lat, a.lon), [x2, y2] = P(b.lat, b.lon);
      el('line', {
        x1, y1, x2, y2, class: 'link', 'data-state': state,
        'data-from': String(l.from), 'data-to': String(l.to),
        'data-sent': String(num(l.sent_urls)), 'data-recv': String(num(l.recv_urls)),
      }, svg);
      label(svg, (x1 + x2) / 2, (y1 + y2) / 2 - 5,
        `↑${fmtShort(l.sent_urls_s)}/s ↓${fmtShort(l.recv_urls_s)}/s`,
        { class: 'link-label' + (bad ? ' bad' : ''), 'text-anchor': 'middle' });
    }

    for (const s of sites) {
      const [x, y] = P(s.lat, s.lon);
      const state = s.self ? 'self' : STATES.includes(s.state) ? s.state : 'unknown';
      const c = el('circle', {
        cx: x, cy: y, r: s.self ? 8 : 6, class: 'site',
        'data-name': String(s.name), 'data-state': String(s.state || 'unknown'), 'data-k': state,
      }, svg);
      el('title', {}, c).textContent = `${s.name}: ${s.state || 'unknown'} (${num(s.lat)}, ${num(s.lon)})`;
      const east = x > w - 80;
      label(svg, x + (east ? -11 : 11), y + 4, String(s.name), {
        class: 'site-name', 'text-anchor': east ? 'end' : 'start',
      });
    }

    const lg = el('g', { class: 'map-legend' }, svg);
    el('rect', { x: 4, y: h - 24, width: 330, height: 20, rx: 3, class: 'legend-bg' }, lg);
    legend(lg, 10, h - 10, STATES.map((s) => [s, { class: 'sw-site', 'data-k': s }]), 'circle');
  }

  function drawFederation(fed) {
    $('federation-panel').hidden = !fed;
    if (!fed) return;
    drawMap(fed);
    setText('fed-partitioner', fed.partitioner || '–');
    setText('fed-outbox', fmtInt(fed.outbox_entries));
    setText('fed-cache', (num(fed.sent_cache_hit_rate) * 100).toFixed(1) + '%');
    fillTable('fed-links', arr(fed.links).map((l) => [
      String(l.from), String(l.to), { text: l.state || 'unknown', cls: 'state-' + (STATES.includes(l.state) ? l.state : 'unknown') },
      { text: num(l.sent_urls_s).toFixed(1), cls: 'num' }, { text: num(l.recv_urls_s).toFixed(1), cls: 'num' },
      { text: fmtInt(l.sent_urls), cls: 'num' }, { text: fmtInt(l.recv_urls), cls: 'num' },
      { text: fmtInt(l.outbox_pending), cls: 'num' },
    ]), 8);
  }

  // ---- the other panels ----

  function drawHeader(d) {
    setText('h-region', d.region || '–');
    setText('h-node', d.node || '–');
    setText('h-role', d.role || '–');
    setText('h-round', String(num(d.round)));
    setText('h-phase', d.phase || '–');
    setText('h-uptime', fmtDur(d.uptime_s));
    const fin = $('h-finished');
    fin.hidden = !d.finished;
    fin.textContent = d.finished ? 'finished: ' + d.finished : '';

    const rate = d.rate || {};
    const ps = $('pages-s');
    ps.textContent = num(rate.pages_s).toFixed(1);
    ps.setAttribute('data-value', String(rate.pages_s));
    ps.setAttribute('data-t', String(rate.t));
  }

  function drawTables(d) {
    const db = d.crawldb || {};
    setText('db-urls', fmtInt(db.urls));
    setText('db-frontier', fmtInt(db.frontier));
    setText('db-fetched', fmtInt(db.fetched));
    setText('db-disk', fmtBytes(db.disk_bytes));

    const o = d.opic || {};
    setText('opic-virtual', fmtCash(o.virtual_cash));
    setText('opic-injected', fmtCash(o.injected_cash));
    setText('opic-spent', fmtCash(o.spent_cash));
    fillTable('opic-top', arr(o.top).map((u) => [
      { text: String(u.url), cls: 'url' }, { text: fmtCash(u.cash), cls: 'num' },
    ]), 2);

    const hs = d.hosts || {};
    setText('hosts-total', `(${fmtInt(hs.total)} known)`);
    fillTable('hosts-slowest', arr(hs.slowest).map((x) => [
      { text: String(x.host), cls: 'url' }, { text: num(x.delay_s).toFixed(1) + 's', cls: 'num' },
      { text: fmtDur(x.busy_s), cls: 'num' },
    ]), 3);
    fillTable('hosts-troubled', arr(hs.troubled).map((x) => [
      { text: String(x.host), cls: 'url' }, String(x.reason || ''), { text: fmtInt(x.count), cls: 'num' },
    ]), 3);
    fillTable('hosts-ips', arr(hs.ips).map((x) => [
      String(x.ip), { text: fmtInt(x.hosts), cls: 'num' }, { text: fmtDur(x.busy_s), cls: 'num' },
    ]), 3);

    const nodes = Array.isArray(d.nodes) ? d.nodes : null;
    $('nodes-panel').hidden = !nodes;
    if (nodes) {
      fillTable('nodes', nodes.map((n) => [
        String(n.id), n.role || '–', { text: n.alive ? 'yes' : 'no', cls: n.alive ? 'alive' : 'dead' },
        { text: fmtInt(n.hosts), cls: 'num' }, { text: fmtInt(n.in_flight), cls: 'num' },
        { text: num(n.pages_s).toFixed(1), cls: 'num' },
      ]), 6);
    }
  }

  // drawRefetch draws the recent rounds' refetch figures and the pages
  // waiting for their refetch (r is null on a site that does not refetch
  // and refetched nothing: the panel stays hidden).
  function drawRefetch(r) {
    $('refetch-panel').hidden = !r;
    if (!r) return;
    const n = num(r.refetches);
    const share = (v) => (n > 0 ? (num(v) * 100).toFixed(1) + '%' : '–');
    setText('refetch-sub', n > 0
      ? `(${fmtInt(n)} in the last ${fmtInt(r.rounds)} rounds, ${fmtDur(r.window_s)})`
      : '(none in the last rounds)');
    setText('refetch-rate', num(r.refetches_s).toFixed(1));
    setText('refetch-304', share(r.not_modified_share));
    setText('refetch-fresh', share(r.est_freshness));
    setText('refetch-scheduled', fmtInt(r.scheduled));
    // Data attributes for tests and scripts: the figures as received.
    const p = $('refetch-panel');
    p.dataset.refetches = String(n);
    p.dataset.rate = String(num(r.refetches_s));
    p.dataset.notModifiedShare = String(num(r.not_modified_share));
    p.dataset.freshness = String(num(r.est_freshness));
    p.dataset.scheduled = String(num(r.scheduled));
  }

  // drawControls draws the operator's controls (c is null while there are
  // none: the panel stays hidden): pause, limits, per-host overrides and
  // the last changes.
  function drawControls(c) {
    $('controls-panel').hidden = !c;
    if (!c) return;
    const p = $('controls-panel');
    p.dataset.paused = String(!!c.paused);
    p.dataset.version = String(num(c.version));
    $('controls-paused').hidden = !c.paused;
    setText('controls-sub', `(${fmtInt(num(c.version))} changes)`);
    const lim = $('controls-limits');
    lim.textContent = '';
    for (const [name, v] of [['width', c.width], ['k per host', c.per_host], ['host budget', c.host_budget]]) {
      if (!num(v)) continue;
      const dt = document.createElement('dt');
      dt.textContent = name;
      const dd = document.createElement('dd');
      dd.textContent = fmtInt(num(v));
      lim.append(dt, dd);
    }
    const hosts = Object.entries(c.hosts || {}).sort((a, b) => (a[0] < b[0] ? -1 : 1)).slice(0, 20);
    p.dataset.hosts = String(Object.keys(c.hosts || {}).length);
    $('controls-hosts').hidden = hosts.length === 0;
    fillTable('controls-hosts', hosts.map(([h, o]) => [
      h, o.delay ? fmtDur(num(o.delay) / 1e9) : '–',
      o.blocked ? (o.until ? 'until ' + new Date(o.until).toISOString() : 'yes') : '–',
    ]), 3);
    const ul = $('controls-changes');
    ul.textContent = '';
    for (const ch of arr(c.changes).slice(-5).reverse()) {
      const li = document.createElement('li');
      li.textContent = `${new Date(ch.at).toISOString()} ${ch.by || ''}: ${ch.what}`;
      ul.append(li);
    }
  }

  // drawShards draws a sharded node's shards and the site's nodes (sh is
  // null on a site without shards: the panel stays hidden).
  function drawShards(sh) {
    $('shards-panel').hidden = !sh;
    if (!sh) return;
    const rows = arr(sh.rows);
    setText('shards-sub', `(${fmtInt(sh.held)} of the site's ${fmtInt(sh.shards)} held here; target R = ${fmtInt(sh.replicas)})`);
    const partial = $('shards-partial');
    partial.hidden = !sh.partial;
    partial.textContent = sh.partial
      ? `Partial view: this node holds replicas of ${fmtInt(sh.held)} of the site's ${fmtInt(sh.shards)} shards; ` +
        'the other shards, and the nodes\' leads and replicas among them, are not shown here (see the site-wide shards).'
      : '';
    const win = num(sh.rate_window_s);
    $('shards-rate-h').title = 'URLs whose result the shard\'s crawl database recorded, per second over the last ' +
      fmtDur(win) + ' (a shard records its results once per round)';
    fillTable('shards', rows.map((r) => {
      const reps = arr(r.replicas).map(String);
      const down = arr(r.down).map(String);
      const state = [];
      if (r.under_replicated) state.push(`under-replicated (${reps.length} of ${fmtInt(r.want_replicas)})`);
      if (down.length) state.push('down: ' + down.join(', '));
      if (r.moving) state.push('moving: ' + String(r.moving));
      if (r.step) state.push(String(r.step));
      if (r.finished) state.push('finished');
      return [
        { text: String(num(r.shard)), cls: 'num' },
        { text: r.leader ? String(r.leader) : 'none', cls: r.leader ? '' : 'under' },
        { text: reps.join(', ') || '–', cls: r.under_replicated ? 'under' : '' },
        { text: fmtInt(r.frontier), cls: 'num' }, { text: fmtInt(r.fetched), cls: 'num' },
        { text: num(r.pages_s).toFixed(1), cls: 'num' },
        { text: state.join('; ') || 'ok', cls: r.under_replicated || down.length ? 'under' : '' },
      ];
    }), 7);
    // Data attributes for tests and scripts: one row per shard.
    const trs = $('shards').tBodies[0].rows;
    rows.forEach((r, i) => {
      if (!trs[i]) return;
      trs[i].dataset.shard = String(num(r.shard));
      trs[i].dataset.leader = String(r.leader || '');
      trs[i].dataset.under = r.under_replicated ? 'true' : 'false';
    });
    fillTable('shard-nodes', arr(sh.nodes).map((n) => {
      const alive = n.alive === true ? ['yes', 'alive'] : n.alive === false ? ['no', 'dead'] : ['?', 'unknown'];
      return [
        String(n.id) + (n.self ? ' (this node)' : ''), String(n.api_addr || n.raft_addr || '–'),
        { text: fmtInt(n.shards_led), cls: 'num' }, { text: fmtInt(n.replicas_held), cls: 'num' },
        { text: alive[0], cls: alive[1] },
      ];
    }), 5);
  }

  // drawSite draws a sharded site's site-wide view: every shard, from the
  // node whose replica gave its row, and every node, up if it answered
  // (site is null on a site without shards: the panel stays hidden).
  function drawSite(site) {
    $('site-panel').hidden = !site;
    if (!site) return;
    const rows = arr(site.rows);
    const nodes = arr(site.nodes);
    const silent = nodes.filter((n) => !n.up).map((n) => String(n.id));
    setText('site-sub', `(${fmtInt(site.shards)} shards; gathered by ${String(site.by || '–')} from ` +
      `${fmtInt(nodes.length - silent.length)} of ${fmtInt(nodes.length)} nodes` +
      (silent.length ? `; not answering within ${fmtDur(site.wait_s)}: ${silent.join(', ')}` : '') +
      (site.federation ? `; federation, summed over ${fmtInt(site.federation_shards)} shards: sent ${fmtInt(site.federation.sent_urls)} URLs, ` +
        `received ${fmtInt(site.federation.received_urls)}, outboxes ${fmtInt(site.federation.outbox_entries)} entries` : '') + ')');
    fillTable('site-shards', rows.map((r) => {
      const na = arr(r.not_answering).map(String);
      if (!r.from) {
        const placed = arr(r.target).map(String);
        return [
          { text: String(num(r.id)), cls: 'num' }, { text: '?', cls: 'unknown' }, { text: '?', cls: 'unknown' },
          { text: '?', cls: 'unknown' }, { text: '?', cls: 'num unknown' }, { text: '?', cls: 'num unknown' },
          { text: 'meta', cls: 'unknown' },
          { text: 'not answering: ' + (na.join(', ') || '–') + (placed.length ? '; placed on ' + placed.join(', ') : ''), cls: 'under' },
        ];
      }
      const reps = arr(r.replicas).map(String);
      const down = arr(r.down).map(String);
      const state = [];
      if (na.length) state.push('not answering: ' + na.join(', '));
      if (r.under_replicated) state.push(`under-replicated (${reps.length})`);
      if (down.length) state.push('down: ' + down.join(', '));
      if (r.step) state.push(String(r.step));
      if (r.finished) state.push('finished');
      return [
        { text: String(num(r.id)), cls: 'num' },
        { text: r.leader ? String(r.leader) : 'none', cls: r.leader ? '' : 'under' },
        { text: reps.join(', ') || '–', cls: r.under_replicated ? 'under' : '' },
        arr(r.learners).map(String).join(', ') || '–',
        { text: fmtInt(r.frontier), cls: 'num' }, { text: num(r.pages_s).toFixed(1), cls: 'num' },
        String(r.from),
        { text: state.join('; ') || 'ok', cls: na.length || r.under_replicated || down.length ? 'under' : '' },
      ];
    }), 8);
    // Data attributes for tests and scripts: one row per shard (its
    // number is the row's id, as in /status's shards).
    const trs = $('site-shards').tBodies[0].rows;
    rows.forEach((r, i) => {
      if (!trs[i]) return;
      trs[i].dataset.shard = String(num(r.id));
      trs[i].dataset.leader = String(r.leader || '');
      trs[i].dataset.from = String(r.from || '');
      trs[i].dataset.notAnswering = arr(r.not_answering).map(String).join(',');
    });
    fillTable('site-nodes', nodes.map((n) => [
      String(n.id) + (n.self ? ' (this node)' : ''), String(n.api_addr || n.raft_addr || '–'),
      { text: fmtInt(n.shards_led), cls: 'num' }, { text: fmtInt(n.replicas_held), cls: 'num' },
      { text: n.up ? 'yes' : 'no', cls: n.up ? 'alive' : 'dead' },
    ]), 5);
  }

  // render draws one answer. The panels shown first come first, so that
  // the SVGs measure their final widths.
  function render(d) {
    let now = toMs(d.now);
    if (!now) now = num((d.rate || {}).t) || Date.now();
    drawHeader(d);
    drawTables(d);
    drawRefetch(d.refetch || null);
    drawControls(d.controls || null);
    drawShards(d.sharded || null);
    drawSite((d.sharded || {}).site || null);
    drawFederation(d.federation || null);
    drawRate(d);
    drawRounds(d, now);
  }

  // ---- polling ----

  function setConnected(ok) {
    $('disconnected').hidden = ok;
  }

  async function poll() {
    let d = null;
    try {
      const resp = await fetch('dashboard.json', { cache: 'no-store' });
      if (resp.ok) d = await resp.json();
    } catch (e) {
      d = null; // network error or bad JSON: shown as the badge, not logged
    }
    try {
      if (d && typeof d === 'object') {
        polls++;
        last = d;
        const iv = num(d.interval_s);
        intervalMs = iv > 0 ? Math.max(200, iv * 1000) : 1000;
        setConnected(true);
        render(d);
        const up = $('updated');
        up.setAttribute('data-polls', String(polls));
        up.textContent = `updated ${fmtClock(Date.now(), true)} · every ${intervalMs / 1000}s`;
      } else {
        setConnected(false);
      }
    } finally {
      setTimeout(poll, intervalMs);
    }
  }

  let resizeTimer = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (last) render(last); }, 150);
  });

  poll();
})();
