// mandate ui: builds the runs list and a run's page from the JSON the
// server sends (GET /api/runs, /api/runs/ID), live through the event
// stream (GET /api/events).
//
// Every string of a record was written by someone the page must not
// trust (a guest, a manifest): it is only ever set as text (text nodes,
// textContent, option.value); nothing here parses a string as HTML or
// builds a URL from data but through encodeURIComponent under a fixed
// path. The graph picture is parsed as
// XML and rebuilt from an allowlist before it joins the page.
'use strict';

(function () {
  const SVGNS = 'http://www.w3.org/2000/svg';

  // el makes an element. attrs are set with setAttribute, except
  // "dataset" (an object) and "on" (event listeners); kids are nodes or
  // strings, and strings become text nodes.
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'dataset') {
        for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = String(dv);
      } else if (k === 'on') {
        for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
      } else {
        e.setAttribute(k, v === true ? '' : String(v));
      }
    }
    add(e, kids);
    return e;
  }

  function add(parent, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === undefined || k === null || k === false) continue;
      parent.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return parent;
  }

  function fill(parent, ...kids) {
    parent.replaceChildren();
    return add(parent, kids);
  }

  const $ = (sel) => document.querySelector(sel);

  // cls keeps the letters of s, for a class name made from data.
  const cls = (s) => String(s).toLowerCase().replace(/[^a-z_]/g, '');

  async function getJSON(url) {
    const r = await fetch(url, { credentials: 'same-origin', cache: 'no-store' });
    let body = null;
    try { body = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((body && body.error) || (r.status + ' ' + r.statusText));
    return body;
  }

  function showError(err) {
    const p = $('#error');
    if (!p) return;
    if (!err) { p.hidden = true; return; }
    fill(p, String(err.message || err));
    p.hidden = false;
  }

  function fmtTime(s) {
    if (!s || s.startsWith('0001-')) return '—';
    const d = new Date(s);
    if (isNaN(d)) return s;
    return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
  }

  // clock is the time of day of s to the millisecond, with the whole
  // time as its title: for the tables.
  function clock(s) {
    const d = new Date(s);
    if (!s || isNaN(d)) return s || '—';
    const p = (n, w) => String(n).padStart(w || 2, '0');
    const t = p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds()) + '.' + p(d.getMilliseconds(), 3);
    return el('span', { class: 'clock', title: s }, t);
  }

  function fmtDuration(a, b) {
    const ms = new Date(b) - new Date(a);
    if (!(ms >= 0)) return '';
    if (ms < 1000) return ms + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    return Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
  }

  const runURL = (id) => '/runs/' + encodeURIComponent(id);

  function badge(state) {
    return el('span', { class: 'state state-' + cls(state) }, state);
  }

  function labelText(l) {
    if (!l) return 'unbounded';
    const c = l.conf.length ? l.conf.join(', ') : 'public';
    return l.integ.length ? c + ' / integrity ' + l.integ.join(', ') : c;
  }

  // refresher runs fn now, or once more after the run in progress: a burst
  // of changes costs at most two fetches, never overlapping ones.
  function refresher(fn) {
    let busy = false, again = false;
    const go = async () => {
      if (busy) { again = true; return; }
      busy = true;
      try { await fn(); showError(null); } catch (e) { showError(e); }
      busy = false;
      if (again) { again = false; setTimeout(go, 150); }
    };
    return go;
  }

  // live opens the event stream: ready (the server took its state: the
  // page fetches again) and change events.
  function live(onReady, onChange) {
    const b = $('#live');
    const es = new EventSource('/api/events');
    es.addEventListener('ready', () => { fill(b, 'live'); b.className = 'live on'; onReady(); });
    es.addEventListener('change', (e) => {
      let c;
      try { c = JSON.parse(e.data); } catch (err) { return; }
      onChange(c);
    });
    es.addEventListener('error', () => {
      if (es.readyState === EventSource.CLOSED) { fill(b, 'not live'); } else { fill(b, 'reconnecting'); }
      b.className = 'live off';
    });
  }

  function table(cols, rows, empty) {
    if (!rows.length) return el('p', { class: 'muted' }, empty);
    return el('table', { class: 'grid' },
      el('thead', {}, el('tr', {}, cols.map((c) => el('th', { class: c.num ? 'num' : null }, c.title)))),
      el('tbody', {}, rows.map((r) => el('tr', { class: r.cls || null }, cols.map((c) => {
        const v = c.get(r.v);
        return el('td', { class: [c.num ? 'num' : '', c.mono ? 'mono' : '', c.cls || ''].join(' ').trim() || null }, v);
      })))));
  }

  // ---- The runs list ----

  function runsPage() {
    const params = new URLSearchParams(location.search);
    const fp = $('#f-principal'), fs = $('#f-state'), fd = $('#f-denials');
    fd.checked = ['1', 'true', 'yes', 'on'].includes((params.get('denials') || '').toLowerCase());

    function choices(sel, values, current) {
      const opts = [el('option', { value: '' }, 'any')];
      const all = values.slice();
      if (current && !all.includes(current)) all.push(current);
      for (const v of all) {
        const o = el('option', {}, v);
        o.value = v;
        opts.push(o);
      }
      fill(sel, opts);
      sel.value = current || '';
    }

    function query() {
      const q = new URLSearchParams();
      if (params.get('principal')) q.set('principal', params.get('principal'));
      if (params.get('state')) q.set('state', params.get('state'));
      if (fd.checked) q.set('denials', '1');
      return q;
    }

    let last = null;
    const load = refresher(async () => {
      const d = await getJSON('/api/runs?' + query());
      const key = JSON.stringify(Object.assign({}, d, { now: '', took_ns: 0 }));
      if (key === last) return; // nothing changed: keep the page as it is
      last = key;
      choices(fp, d.principals, params.get('principal'));
      choices(fs, d.states, params.get('state'));
      fill($('#count'), d.runs.length === d.total ? String(d.total) : d.runs.length + ' of ' + d.total);
      fill($('#state-dir'), 'state directory ' + d.state_dir);
      const note = $('#note');
      note.hidden = !d.note;
      fill(note, d.note || '');
      const tbody = $('#runs tbody');
      fill(tbody, d.runs.map((r) => el('tr', { dataset: { run: r.id } },
        el('td', { class: 'mono' }, el('a', { href: runURL(r.id) }, r.id)),
        el('td', {}, r.task),
        el('td', {}, r.principal),
        el('td', {}, badge(r.state), r.error ? el('span', { class: 'muted small', title: r.error }, ' ' + r.error.slice(0, 80)) : null),
        el('td', { class: 'num' }, r.exit === null ? '—' : String(r.exit)),
        el('td', {}, fmtTime(r.started)),
        el('td', { class: 'num' + (r.denials ? ' hot' : '') }, String(r.denials)))));
      if (!d.runs.length && d.total) {
        fill(tbody, el('tr', {}, el('td', { colspan: 7, class: 'muted' }, 'No run matches the filters.')));
      }
    });

    function changed() {
      for (const [k, sel] of [['principal', fp], ['state', fs]]) {
        if (sel.value) params.set(k, sel.value); else params.delete(k);
      }
      if (fd.checked) params.set('denials', '1'); else params.delete('denials');
      const q = params.toString();
      history.replaceState(null, '', q ? '?' + q : location.pathname);
      load();
    }
    fp.addEventListener('change', changed);
    fs.addEventListener('change', changed);
    fd.addEventListener('change', changed);

    load();
    live(load, (c) => { if (c.list || c.runs.length) load(); });
  }

  // ---- A run's page ----

  const ALLOWED_SVG = new Set(['svg', 'g', 'title', 'desc', 'text', 'tspan', 'polygon', 'polyline', 'path', 'ellipse',
    'circle', 'rect', 'line', 'defs', 'linearGradient', 'radialGradient', 'stop']);
  const ALLOWED_SVG_ATTRS = new Set(['id', 'class', 'width', 'height', 'viewBox', 'preserveAspectRatio', 'version',
    'x', 'y', 'x1', 'y1', 'x2', 'y2', 'cx', 'cy', 'r', 'rx', 'ry', 'dx', 'dy', 'points', 'd', 'transform', 'offset',
    'fill', 'fill-opacity', 'stroke', 'stroke-width', 'stroke-dasharray', 'stroke-opacity', 'stroke-linecap',
    'stroke-linejoin', 'opacity', 'stop-color', 'stop-opacity', 'gradientUnits', 'font-family', 'font-size',
    'font-weight', 'font-style', 'text-anchor', 'text-decoration', 'dominant-baseline', 'textLength', 'lengthAdjust']);

  function safeAttrValue(v) {
    const l = v.toLowerCase();
    if (l.includes('url(')) return /^url\(#[A-Za-z0-9_.:-]+\)$/.test(v.trim());
    return !l.includes('javascript:') && !l.includes('data:');
  }

  // sanitizeSVG parses text as an SVG document (never as HTML) and keeps
  // only allowed elements (their content with them) and attributes; the
  // server did the same, this is the second line.
  function sanitizeSVG(text) {
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    const root = doc.documentElement;
    if (doc.getElementsByTagName('parsererror').length || root.localName !== 'svg' || root.namespaceURI !== SVGNS) {
      throw new Error('the picture is not an SVG document');
    }
    const walk = (node) => {
      for (const child of Array.from(node.childNodes)) {
        if (child.nodeType === Node.TEXT_NODE) continue;
        if (child.nodeType !== Node.ELEMENT_NODE || child.namespaceURI !== SVGNS || !ALLOWED_SVG.has(child.localName)) {
          child.remove();
          continue;
        }
        walk(child);
      }
      if (node.nodeType === Node.ELEMENT_NODE) {
        for (const a of Array.from(node.attributes)) {
          if (a.namespaceURI !== null || !ALLOWED_SVG_ATTRS.has(a.name) || !safeAttrValue(a.value)) node.removeAttribute(a.name);
        }
      }
    };
    walk(root);
    return document.importNode(root, true);
  }

  function runPage() {
    const id = decodeURIComponent(location.pathname.slice('/runs/'.length));
    let data = null;
    let graphKey = null;
    let selected = new URLSearchParams(location.hash.slice(1)).get('cap');
    const capsByID = new Map();
    const byElement = new Map(); // a node's id in the picture -> ['cap' or 'task', id]

    let last = null;
    const load = refresher(async () => {
      const d = await getJSON('/api/runs/' + encodeURIComponent(id));
      const key = JSON.stringify(Object.assign({}, d, { took_ns: 0,
        audit: Object.assign({}, d.audit, { verify: Object.assign({}, d.audit.verify, { at: '', took_ns: 0 }) }) }));
      if (d.audit.verify.stale) setTimeout(load, 1500);
      if (key === last) return; // nothing changed: keep the page (and what is open in it) as it is
      last = key;
      data = d;
      capsByID.clear();
      byElement.clear();
      for (const c of data.caps) { capsByID.set(c.id, c); byElement.set(c.element, ['cap', c.id]); }
      for (const t of data.tasks) byElement.set(t.element, ['task', t.id]);
      render();
    });

    function render() {
      const r = data.run;
      document.title = 'Mandate: run ' + r.id;
      fill($('#crumb-run'), r.id);
      renderHead(r);
      renderGraph();
      renderTasks();
      renderDenials();
      renderFlows();
      renderOutputs();
      renderAudit();
      fill($('#receipts'), data.receipts.note);
      renderDetail();
    }

    function renderHead(r) {
      // In two columns: what ran and for whom on the left, from what on
      // the right.
      const rows = [
        ['Task', r.task], ['Manifest', el('span', { class: 'mono' }, r.manifest)],
        ['Principal', r.principal], ['Module', el('span', { class: 'mono' }, r.module)],
        ['State', [badge(r.state), ' exit ', r.exit === null ? '—' : String(r.exit)]], ['Digest', el('span', { class: 'mono' }, r.digest)],
        ['Started', fmtTime(r.started)], ['Engine', r.engine],
        ['Ended', r.ended ? fmtTime(r.ended) + ' (' + fmtDuration(r.started, r.ended) + ')' : '—'],
      ];
      if (r.error) rows.push(['Error', el('span', { class: 'error-text' }, r.error)]);
      const counts = data.tasks.length + ' tasks, ' + data.caps.length + ' capabilities, ' +
        (data.denials.length + data.denials_dropped) + ' denials, ' + (data.flows.length + data.flows_dropped) + ' flows';
      fill($('#head'),
        el('h1', {}, 'Run ', el('span', { class: 'mono' }, r.id)),
        el('p', { class: 'muted' }, counts),
        el('dl', { class: 'facts' }, rows.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])));
    }

    function capTitle(c) {
      return [c.id, ' ', c.kind, c.name ? ' "' + c.name + '"' : ''].join('');
    }

    function capButton(c, extra) {
      return el('button', { type: 'button', class: 'cap' + (c.id === selected ? ' selected' : '') + (c.revoked ? ' revoked' : ''),
        dataset: { cap: c.id }, on: { click: () => select(c.id) } }, capTitle(c), extra || null);
    }

    function capSummary(c) {
      const parts = c.fields.map((f) => f.name + '=' + f.value);
      if (c.when.length) parts.push('when ' + c.when.join(' && '));
      if (c.approve_when.length) parts.push('approve_when ' + c.approve_when.join(' || '));
      if (c.rate) parts.push('rate ' + c.rate);
      if (c.max_uses) parts.push('uses ' + c.uses + ' of ' + c.max_uses);
      if (c.budget) parts.push('spent ' + c.spent + ' of ' + c.budget);
      return parts.join('  ');
    }

    function renderTasks() {
      const root = el('ul', { class: 'tree' });
      const kidsOf = new Map();
      for (const t of data.tasks) {
        const caps = el('ul', { class: 'caps' }, t.caps.map((cid) => {
          const c = capsByID.get(cid);
          if (!c) return null;
          const flags = [];
          if (c.path.length === 1) flags.push(el('span', { class: 'tag grant' }, 'grant'));
          if (c.passed) flags.push(el('span', { class: 'tag' }, 'passed'));
          if (c.audited) flags.push(el('span', { class: 'tag' }, 'audited'));
          if (c.revoked) flags.push(el('span', { class: 'tag bad' }, 'revoked'));
          if (c.dropped) flags.push(el('span', { class: 'tag' }, 'dropped'));
          if (c.denials.length) flags.push(el('span', { class: 'tag bad' }, c.denials.length + ' denied'));
          return el('li', {},
            capButton(c), ' ', flags,
            c.parent ? el('span', { class: 'muted small' }, ' from ' + c.parent) : null,
            el('div', { class: 'summary mono' }, capSummary(c)));
        }));
        const kids = el('ul', { class: 'tree' });
        kidsOf.set(t.id, kids);
        const li = el('li', { class: 'task', dataset: { task: t.id } },
          el('div', { class: 'task-head' },
            el('strong', { class: 'mono' }, t.id), ' acting for ', el('strong', {}, t.principal), ' ', badge(t.state),
            t.denials ? el('span', { class: 'tag bad' }, t.denials + ' denials') : null),
          el('div', { class: 'small' },
            'label ', el('span', { class: 'mono' }, labelText(t.label)),
            ' · clearance ', el('span', { class: 'mono' }, t.clearance ? labelText(t.clearance) : 'unbounded'),
            ' · module ', el('span', { class: 'mono' }, t.module)),
          t.error ? el('div', { class: 'error-text small' }, t.error) : null,
          caps, kids);
        const parent = kidsOf.get(t.parent);
        (t.depth > 0 && parent ? parent : root).appendChild(li);
      }
      fill($('#tasks'), data.tasks.length ? root : el('p', { class: 'muted' }, 'No tasks recorded (yet).'));
    }

    function capCell(cid) {
      const c = capsByID.get(cid);
      return c ? capButton(c) : (cid || '—');
    }

    const denialCols = [
      { title: 'Time', get: (d) => clock(d.time), cls: 'nowrap' },
      { title: 'Task', get: (d) => d.task, mono: true, cls: 'nowrap' },
      { title: 'Capability', get: (d) => capCell(d.cap) },
      { title: 'Op', get: (d) => d.op, mono: true, cls: 'op' },
      { title: 'Errno', get: (d) => d.errno, mono: true, cls: 'nowrap' },
      { title: 'Kernel\'s reason', get: (d) => d.reason },
    ];

    function renderDenials() {
      const n = data.denials.length + data.denials_dropped;
      fill($('#denials-count'), String(n));
      fill($('#denials'), table(denialCols, data.denials.map((v) => ({ v })), 'No call was refused.'),
        data.denials_dropped ? el('p', { class: 'muted' }, data.denials_dropped + ' more are in the audit log only.') : null);
    }

    function renderFlows() {
      fill($('#flows-count'), String(data.flows.length + data.flows_dropped));
      fill($('#flows'), table([
        { title: 'Time', get: (f) => clock(f.time), cls: 'nowrap' },
        { title: 'Task', get: (f) => f.task, mono: true, cls: 'nowrap' },
        { title: 'Capability', get: (f) => capCell(f.cap) },
        { title: 'Op', get: (f) => f.op, mono: true, cls: 'op' },
        { title: 'Decision', get: (f) => f.decision },
        { title: 'Errno', get: (f) => f.errno, mono: true, cls: 'nowrap' },
        { title: 'Label', get: (f) => f.label, mono: true },
        { title: 'Kernel\'s reason', get: (f) => f.reason },
      ], data.flows.map((v) => ({ v, cls: v.decision === 'deny' ? 'denied' : null })), 'No labelled data met a sink.'),
      data.flows_dropped ? el('p', { class: 'muted' }, data.flows_dropped + ' more are in the audit log only.') : null);
    }

    function renderOutputs() {
      fill($('#outputs'), data.outputs.length ? data.outputs.map((o) => el('div', { class: 'output' },
        el('h3', {}, el('span', { class: 'mono' }, o.task), ' ', o.stream,
          el('span', { class: 'muted small' }, ' ' + o.bytes + ' bytes' + (o.cut ? ', first ' + o.text.length + ' characters shown' : '') +
            (o.truncated ? ', truncated at the task\'s output limit (' + o.dropped + ' bytes dropped)' : ''))),
        el('pre', { class: 'out' }, o.text))) : el('p', { class: 'muted' }, 'No output was kept.'));
    }

    const entryCols = [
      { title: 'Seq', get: (e) => String(e.seq), num: true },
      { title: 'Time', get: (e) => clock(e.time), cls: 'nowrap' },
      { title: 'Task', get: (e) => e.task, mono: true, cls: 'nowrap' },
      { title: 'Capability', get: (e) => capCell(e.cap) },
      { title: 'Op', get: (e) => e.op, mono: true, cls: 'op' },
      { title: 'Decision', get: (e) => e.decision },
      { title: 'Errno', get: (e) => e.errno, mono: true, cls: 'nowrap' },
      { title: 'Reason', get: (e) => e.reason },
    ];

    function renderAudit() {
      const a = data.audit;
      fill($('#entries-count'), a.available ? String(a.total) : '');
      if (!a.available) {
        fill($('#verify'), el('p', { class: 'muted' }, a.note));
        fill($('#entries'));
        return;
      }
      const v = a.verify;
      let verdict;
      if (!v.done) {
        verdict = el('p', { class: 'verdict' }, 'Not verified yet.');
      } else if (v.ok) {
        verdict = el('p', { class: 'verdict ok', id: 'verdict' }, '✓ The audit log verifies: ', String(v.entries), ' entries, ',
          String(v.checkpoints), ' signed checkpoints checked; the latest signs size ', String(v.latest_size),
          v.latest_hash ? [', root hash ', el('span', { class: 'mono' }, v.latest_hash)] : '', '.');
      } else {
        verdict = el('p', { class: 'verdict bad', id: 'verdict' }, '✗ The audit log does not verify: ',
          v.problem || v.error, v.first_bad >= 0 ? ' (first entry that does not match: ' + v.first_bad + ')' : '');
      }
      fill($('#verify'), verdict,
        el('p', { class: 'small muted' }, 'Verified ', fmtTime(v.at), ' in ', (v.took_ns / 1e6).toFixed(1), ' ms, the whole log ',
          el('span', { class: 'mono' }, a.path), ' (the check mandate audit verify makes)', v.stale ? '; the log changed since, verifying again soon' : '', '.'),
        el('p', { class: a.covered ? 'coverage' : 'coverage warn', id: 'coverage' }, a.coverage),
        a.key ? el('p', { class: 'small muted' }, 'Verifier key ', el('span', { class: 'mono' }, a.key)) : null);
      fill($('#entries'), table(entryCols, a.entries.map((v) => ({ v, cls: v.decision === 'deny' ? 'denied' : null })),
        'This run has no audit entries.'),
      a.total > a.entries.length ? el('p', { class: 'muted' }, 'The first ' + a.entries.length + ' of ' + a.total + ' entries are shown: mandate audit --run ' + data.run.id + ' lists them all.') : null);
    }

    async function renderGraph() {
      const sec = $('#graph-sec');
      sec.hidden = !data.graph;
      if (!data.graph) return;
      const key = JSON.stringify([data.tasks, data.caps, data.denials.length, data.flows.length]);
      if (key === graphKey) { markGraph(); return; }
      graphKey = key;
      try {
        const r = await fetch('/api/runs/' + encodeURIComponent(data.run.id) + '/graph.svg', { credentials: 'same-origin', cache: 'no-store' });
        if (!r.ok) throw new Error('the picture: ' + (await r.text()));
        const svg = sanitizeSVG(await r.text());
        fill($('#graph'), svg);
        markGraph();
      } catch (e) {
        fill($('#graph'), el('p', { class: 'error-text' }, String(e.message || e)));
      }
    }

    function markGraph() {
      const c = selected && capsByID.get(selected);
      for (const g of document.querySelectorAll('#graph g[id]')) {
        g.classList.toggle('selected', !!c && g.getAttribute('id') === c.element);
      }
    }

    // The picture fits the column, or shows at its own size (scrolling).
    $('#graph-size').addEventListener('click', () => {
      const full = $('#graph').classList.toggle('full');
      fill($('#graph-size'), full ? 'fit width' : 'actual size');
    });

    // A click in the picture selects the capability whose node it is in,
    // or shows the task whose node it is in in the tree.
    $('#graph').addEventListener('click', (e) => {
      for (let n = e.target.closest('g[id]'); n; n = n.parentElement && n.parentElement.closest('g[id]')) {
        const hit = byElement.get(n.getAttribute('id'));
        if (!hit) continue;
        if (hit[0] === 'cap') { select(hit[1]); return; }
        for (const li of document.querySelectorAll('li.task')) {
          if (li.dataset.task === hit[1]) { li.scrollIntoView({ behavior: 'smooth', block: 'center' }); break; }
        }
        return;
      }
    });

    function select(cid) {
      selected = cid;
      history.replaceState(null, '', '#cap=' + encodeURIComponent(cid));
      for (const b of document.querySelectorAll('button.cap')) b.classList.toggle('selected', b.dataset.cap === cid);
      markGraph();
      renderDetail();
    }

    function renderDetail() {
      const box = $('#detail');
      const c = selected && capsByID.get(selected);
      if (!c) {
        fill(box, el('h2', {}, 'Capability'), el('p', { class: 'muted' }, 'Select a capability in the graph or the lists.'));
        return;
      }
      const path = el('ol', { class: 'path', id: 'detail-path' }, c.path.map((p, i) => el('li', { dataset: { cap: p.id } },
        el('span', { class: 'mono' }, p.id), ' ', p.kind, p.name ? ' "' + p.name + '"' : '',
        el('span', { class: 'muted' }, i === 0 ? ' — the manifest\'s grant, held by ' + p.holder :
          (p.passed ? ' — passed to ' + p.holder : ' — derived, held by ' + p.holder)))));
      const limits = [];
      for (const w of c.when) limits.push(el('li', {}, 'when ', el('code', {}, w)));
      for (const w of c.approve_when) limits.push(el('li', {}, 'approve_when ', el('code', {}, w)));
      if (c.rate) limits.push(el('li', {}, 'rate ', el('code', {}, c.rate)));
      for (const w of c.inherited) limits.push(el('li', { class: 'muted' }, 'from an ancestor: ', el('code', {}, w)));
      const use = [];
      if (c.max_uses) use.push(el('li', {}, 'used ' + c.uses + ' of ' + c.max_uses + ' times (max_uses, this capability and those derived from it)'));
      if (c.budget) use.push(el('li', {}, 'spent ' + c.spent + ' of ' + c.budget + ' (its budget)'));
      const allowed = c.entries.map((i) => data.audit.entries[i]).filter((e) => e && e.decision === 'allow').length;
      if (c.audited) use.push(el('li', {}, allowed + ' allowed ' + (allowed === 1 ? 'use' : 'uses') + ' in the audit log'));
      if (!use.length) use.push(el('li', { class: 'muted' }, 'Not counted: it has no max_uses or budget, and is not audited.'));
      const denials = c.denials.map((i) => data.denials[i]).filter(Boolean);
      const entries = c.entries.map((i) => data.audit.entries[i]).filter(Boolean);
      fill(box,
        el('h2', {}, capTitle(c)),
        el('p', {}, 'held by ', el('strong', { class: 'mono' }, c.holder || '(none)'),
          c.revoked ? el('span', { class: 'tag bad' }, 'revoked') : null,
          c.dropped ? el('span', { class: 'tag' }, 'dropped') : null,
          c.audited ? el('span', { class: 'tag' }, 'audited') : null,
          c.passed ? el('span', { class: 'tag' }, 'passed') : null),
        el('h3', {}, 'Scope'),
        c.fields.length ? el('table', { class: 'kv', id: 'detail-scope' }, c.fields.map((f) => el('tr', {}, el('th', {}, f.name), el('td', { class: 'mono' }, f.value))))
          : el('p', { class: 'muted' }, 'The kind describes no limits.'),
        el('details', {}, el('summary', {}, 'the scope as recorded (JSON)'), el('pre', { class: 'out' }, c.scope)),
        el('h3', {}, 'Constraints'),
        limits.length ? el('ul', { class: 'plain' }, limits) : el('p', { class: 'muted' }, 'None beyond the scope.'),
        el('h3', {}, 'Uses'),
        el('ul', { class: 'plain' }, use),
        el('h3', {}, 'Derivation from the manifest\'s grant ', el('span', { class: 'muted' }, '"' + c.grant + '"')),
        path,
        el('h3', {}, 'Denials on it ', el('span', { class: 'count', id: 'detail-denials-count' }, String(denials.length))),
        denials.length ? el('ul', { class: 'events', id: 'detail-denials' }, denials.map((d) => el('li', { class: 'denied' },
          el('div', { class: 'small' }, clock(d.time), ' ', el('span', { class: 'mono' }, d.task), ' ', el('span', { class: 'mono' }, d.op), ' ',
            el('strong', { class: 'mono' }, d.errno)),
          el('div', {}, d.reason)))) : el('p', { class: 'muted' }, 'None.'),
        el('h3', {}, 'Its decisions in the audit log ', el('span', { class: 'count', id: 'detail-entries-count' }, String(entries.length))),
        c.audited ? null : el('p', { class: 'muted small' }, 'Not an audited capability: the log holds its denials and the decisions where labelled data met it, not every use.'),
        entries.length ? el('ul', { class: 'events' }, entries.map((e) => el('li', { class: e.decision === 'deny' ? 'denied' : 'allowed' },
          el('div', { class: 'small' }, '#' + e.seq, ' ', clock(e.time), ' ', el('span', { class: 'mono' }, e.task), ' ', el('span', { class: 'mono' }, e.op), ' ',
            el('strong', {}, e.decision), e.errno && e.errno !== 'ESUCCESS' ? [' ', el('span', { class: 'mono' }, e.errno)] : ''),
          e.reason ? el('div', {}, e.reason) : null))) : el('p', { class: 'muted' }, 'None.'));
    }

    load();
    live(load, (c) => {
      if (!data) { load(); return; }
      if (c.audit || c.runs.includes(data.run.id) || (id === 'last' && c.list)) load();
    });
  }

  document.addEventListener('DOMContentLoaded', () => {
    const page = document.body.dataset.page;
    if (page === 'runs') runsPage();
    if (page === 'run') runPage();
  });
})();
