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

  // postJSON posts body as JSON to one of this UI's two POST paths (an
  // approval's answer, a client's reset) and returns the reply, or throws
  // the server's error. Every page's Referrer-Policy is no-referrer, with
  // which a browser sends "Origin: null" on a POST; the server wants the
  // page's own origin, which same-origin sends.
  async function postJSON(url, body) {
    const r = await fetch(url, {
      method: 'POST', credentials: 'same-origin', cache: 'no-store', referrerPolicy: 'same-origin',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    let reply = null;
    try { reply = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((reply && reply.error) || (r.status + ' ' + r.statusText));
    return reply;
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
      fill($('#state-dir'), d.source ? d.source : 'state directory ' + d.state_dir);
      const pa = $('#approvals-link');
      pa.hidden = !d.pending_approvals;
      fill(pa, el('a', { href: '/approvals' }, d.pending_approvals + (d.pending_approvals === 1 ? ' approval waits' : ' approvals wait') + ' for your answer'));
      const note = $('#note');
      note.hidden = !d.note;
      fill(note, d.note || '');
      const tbody = $('#runs tbody');
      fill(tbody, d.runs.map((r) => el('tr', { dataset: { run: r.id } },
        el('td', { class: 'mono' }, el('a', { href: runURL(r.id) }, r.id)),
        el('td', {}, r.task, r.node ? el('span', { class: 'muted small' }, ' on ' + r.node) : null),
        el('td', {}, r.principal),
        el('td', {}, badge(r.state), r.error ? el('span', { class: 'muted small', title: r.error }, ' ' + r.error.slice(0, 80)) : null),
        el('td', { class: 'num' }, r.exit === null ? '—' : String(r.exit)),
        el('td', {}, fmtTime(r.started)),
        el('td', { class: 'num' + (r.denials ? ' hot' : '') }, String(r.denials)),
        el('td', { class: 'grants small' }, r.grants || '—'))));
      if (!d.runs.length && d.total) {
        fill(tbody, el('tr', {}, el('td', { colspan: 8, class: 'muted' }, 'No run matches the filters.')));
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
    live(load, (c) => { if (c.list || c.runs.length || c.approvals) load(); });
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
      renderEffects();
      renderOutputs();
      renderAudit();
      fill($('#receipts'), data.receipts.note);
      renderApprovals();
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

    function renderEffects() {
      fill($('#effects-count'), String(data.effects.length + data.effects_dropped));
      fill($('#effects'), table([
        { title: 'Time', get: (f) => clock(f.time), cls: 'nowrap' },
        { title: 'Task', get: (f) => f.task, mono: true, cls: 'nowrap' },
        { title: 'Capability', get: (f) => capCell(f.cap) },
        { title: 'What was done', get: (f) => f.summary, mono: true },
        { title: 'Outcome', get: (f) => f.outcome, mono: true },
      ], data.effects.map((v) => ({ v, cls: v.errno ? 'denied' : null })), 'No call changed anything outside the kernel.'),
      data.effects_dropped ? el('p', { class: 'muted' }, data.effects_dropped + ' more are in the audit log only.') : null);
    }

    function renderOutputs() {
      fill($('#outputs'), data.outputs.length ? data.outputs.map((o) => el('div', { class: 'output' },
        el('h3', {}, el('span', { class: 'mono' }, o.task), ' ', o.stream,
          el('span', { class: 'muted small' }, ' ' + o.bytes + ' bytes' + (o.cut ? ', first ' + o.text.length + ' characters shown' : '') +
            (o.truncated ? ', truncated at the task\'s output limit (' + o.dropped + ' bytes dropped)' : ''))),
        o.withheld ? el('p', { class: 'muted' }, 'Withheld: the task wrote this after it read untrusted data, and its answer may not carry any ' +
          '(result { accepts_untrusted = false }). It is not shown as the task\'s answer; mandate logs --raw shows it.')
          : el('pre', { class: 'out' }, o.text))) : el('p', { class: 'muted' }, 'No output was kept.'));
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

    function renderApprovals() {
      fill($('#approvals-count'), String(data.approvals.length));
      fill($('#approvals'), approvalsTable(data.approvals, 'This run asked no person anything.'));
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
        sizeGraph();
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

    // The picture's size. "readable" (the default) fits the column but
    // never shrinks below MIN_GRAPH_SCALE of its own size, so that its text
    // stays readable (a large graph scrolls in its box instead); "actual"
    // is its own size; "whole" fits the column however small its text.
    // The button names the next.
    const MIN_GRAPH_SCALE = 0.75;
    const GRAPH_SIZES = { readable: ['actual', 'actual size'], actual: ['whole', 'whole width'], whole: ['readable', 'readable size'] };
    let graphSize = 'readable';
    function sizeGraph() {
      const box = $('#graph');
      box.classList.toggle('full', graphSize === 'actual');
      fill($('#graph-size'), GRAPH_SIZES[graphSize][1]);
      const svg = box.querySelector('svg');
      if (!svg) return;
      const w = naturalWidth(svg);
      // Set through the CSSOM (the CSP forbids style attributes).
      svg.style.minWidth = graphSize === 'readable' && w ? Math.round(w * MIN_GRAPH_SCALE) + 'px' : '';
    }
    // naturalWidth is the picture's own width in CSS pixels: its width
    // attribute (Graphviz writes points), else its viewBox's (in points).
    function naturalWidth(svg) {
      const m = /^([0-9.]+)(pt|px)?$/.exec(svg.getAttribute('width') || '');
      if (m) return parseFloat(m[1]) * (m[2] === 'pt' ? 4 / 3 : 1);
      const vb = svg.viewBox && svg.viewBox.baseVal;
      return vb && vb.width ? vb.width * 4 / 3 : 0;
    }
    $('#graph-size').addEventListener('click', () => {
      graphSize = GRAPH_SIZES[graphSize][0];
      sizeGraph();
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
      if (c.audit || c.approvals || c.runs.includes(data.run.id) || (id === 'last' && c.list)) load();
    });
  }

  // ---- Approvals ----

  const approvalURL = (id) => '/approvals/' + encodeURIComponent(id);

  function answerText(a) {
    if (a.state === 'pending') return 'waiting until ' + fmtTime(a.expires);
    const parts = [];
    if (a.channel) parts.push('on ' + a.channel);
    if (a.by) parts.push('by ' + a.by);
    if (a.answered) parts.push(fmtTime(a.answered));
    if (a.note) parts.push('(' + a.note + ')');
    return parts.join(' ');
  }

  function approvalsTable(list, empty) {
    return table([
      { title: 'Approval', get: (a) => el('a', { href: approvalURL(a.id), class: 'mono' }, a.id) },
      { title: 'Asks to', get: (a) => a.summary },
      { title: 'Task', get: (a) => [el('span', { class: 'mono' }, a.task), ' for ', a.principal] },
      { title: 'Capability', get: (a) => a.kind + ' "' + a.cap_name + '"' },
      { title: 'State', get: (a) => badge(a.state) },
      { title: 'Answer', get: (a) => answerText(a) },
      { title: 'Asked', get: (a) => clock(a.created), cls: 'nowrap' },
    ], list.map((v) => ({ v })), empty);
  }

  function approvalsPage() {
    let last = null, timer = null;
    const load = refresher(async () => {
      const d = await getJSON('/api/approvals');
      // A pending approval expires, or its waiter ends, with no file
      // changing: look again while one is pending.
      clearTimeout(timer);
      if (d.pending.length) timer = setTimeout(load, 3000);
      const key = JSON.stringify(d);
      if (key === last) return;
      last = key;
      fill($('#pending-count'), String(d.pending.length));
      const note = $('#note');
      note.hidden = !d.note;
      fill(note, d.note || '');
      fill($('#pending'), d.pending.length ? d.pending.map((a) => el('div', { class: 'approval-line', dataset: { approval: a.id } },
        el('a', { href: approvalURL(a.id), class: 'approval-link' }, a.summary),
        el('div', { class: 'small muted' }, 'task ', el('span', { class: 'mono' }, a.task), ' acting for ', a.principal,
          ' · ', a.kind, ' "', a.cap_name, '" · asked by ', a.waiter, a.run ? [' in run ', el('a', { href: runURL(a.run), class: 'mono' }, a.run)] : '',
          ' · ', answerText(a)))) : el('p', { class: 'muted' }, 'Nothing waits for an answer.'));
      fill($('#answered'), approvalsTable(d.answered, 'None yet.'));
    });
    load();
    live(load, (c) => { if (c.approvals) load(); });
  }

  function approvalPage() {
    const id = decodeURIComponent(location.pathname.slice('/approvals/'.length));
    let last = null, timer = null, sending = false;
    const load = refresher(async () => {
      const a = await getJSON('/api/approvals/' + encodeURIComponent(id));
      clearTimeout(timer);
      if (a.state === 'pending') timer = setTimeout(load, 3000);
      const key = JSON.stringify(a);
      if (key === last) return;
      last = key;
      render(a);
    });

    async function answer(yes, nonce) {
      if (sending) return;
      sending = true;
      for (const b of document.querySelectorAll('#answer-buttons button')) b.disabled = true;
      const msg = $('#answer-result');
      msg.hidden = false;
      try {
        await postJSON('/approvals/' + encodeURIComponent(id) + '/answer', { nonce: nonce, yes: yes });
        fill(msg, yes ? 'Approved.' : 'Refused.');
        msg.className = 'verdict ok';
      } catch (e) {
        fill(msg, String(e.message || e));
        msg.className = 'verdict bad';
      }
      sending = false;
      last = null;
      load();
    }

    function render(a) {
      document.title = 'Mandate: approval ' + a.id;
      fill($('#crumb-approval'), a.id);
      const rows = [
        ['Asks to', el('strong', { id: 'summary' }, a.summary)],
        ['Task', [el('span', { class: 'mono' }, a.task), ' acting for ', el('strong', {}, a.principal)]],
        ['Capability', [a.kind, ' "', a.cap_name, '" ', el('span', { class: 'mono' }, a.cap)]],
        ['Operation', el('span', { class: 'mono' }, a.op)],
        ['Module', el('span', { class: 'mono' }, a.module)],
        ['Because', a.reasons.length ? el('ul', { class: 'plain' }, a.reasons.map((r) => el('li', {}, r))) : '—'],
        ['Effect digest', el('span', { class: 'mono', id: 'digest' }, a.digest)],
        ['Asked by', [a.waiter, ' (pid ', String(a.pid), ')', a.run ? [' in run ', el('a', { href: runURL(a.run), class: 'mono' }, a.run)] : '']],
        ['Asked', fmtTime(a.created)],
        ['Expires', fmtTime(a.expires)],
        ['State', [badge(a.state), ' ', el('span', { id: 'answer-text' }, answerText(a))]],
      ];
      const pending = a.state === 'pending' && a.nonce;
      const result = $('#answer-result') || el('p', { id: 'answer-result', class: 'verdict', hidden: true });
      fill($('#approval'),
        el('h1', {}, 'Approval ', el('span', { class: 'mono' }, a.id)),
        el('dl', { class: 'facts' }, rows.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
        pending ? el('div', { id: 'answer-buttons', class: 'answer-buttons', dataset: { nonce: a.nonce } },
          el('button', { type: 'button', id: 'approve', class: 'approve', on: { click: () => answer(true, a.nonce) } }, 'Approve'),
          el('button', { type: 'button', id: 'refuse', class: 'refuse', on: { click: () => answer(false, a.nonce) } }, 'Refuse'),
          el('span', { class: 'muted small' }, ' A yes is to the effect below, digest ' + a.digest + '.')) : null,
        result);
      fill($('#details'), a.details.length ? a.details.map((d) => el('div', { class: 'output detail-part' },
        el('h3', {}, d.name, el('span', { class: 'muted small' }, ' ' + d.bytes + ' bytes')),
        el('pre', { class: 'out' }, d.value))) : el('p', { class: 'muted' }, 'The kind showed no details.'));
    }

    load();
    live(load, (c) => { if (c.approvals) load(); });
  }

  // ---- MCP clients ----

  const clientURL = (name) => '/clients/' + encodeURIComponent(name);

  // clientLabel is a client's label as mandate graph writes it, or
  // 'unlabelled' (written {}/{}).
  const clientLabel = (l) => (l.conf.length || l.integ.length ? l.text : 'unlabelled');

  function clientsPage() {
    let last = null;
    const load = refresher(async () => {
      const d = await getJSON('/api/clients');
      const key = JSON.stringify(d);
      if (key === last) return;
      last = key;
      fill($('#count'), String(d.clients.length));
      const note = $('#note');
      note.hidden = !d.note;
      fill(note, d.note || '');
      fill($('#clients'), table([
        { title: 'Client', get: (c) => el('a', { href: clientURL(c.name), class: 'mono' }, c.name) },
        { title: 'Label', get: (c) => el('span', { class: 'mono' }, clientLabel(c.label)) },
        { title: 'Last rose', get: (c) => fmtTime(c.raised) },
        { title: 'Sessions', get: (c) => String(c.sessions), num: true },
      ], d.clients.map((v) => ({ v })), 'No client yet.'));
    });
    load();
    live(load, (c) => { if (c.clients || c.list) load(); });
  }

  function eventText(e) {
    switch (e.event) {
      case 'raise': return ['raised by ', el('span', { class: 'mono' }, e.label.text), e.tool ? [' (tool ', el('span', { class: 'mono' }, e.tool), ')'] : '',
        e.run ? [' in session ', el('a', { href: runURL(e.run), class: 'mono' }, e.run)] : ''];
      case 'reset': return ['reset by ', el('strong', {}, e.by), ': ', el('span', { class: 'why' }, e.why), ' (dropped ', el('span', { class: 'mono' }, clientLabel(e.label)), ')'];
      case 'expiry': return ['expired: ', e.why, ' (dropped ', el('span', { class: 'mono' }, e.label.text), ')'];
    }
    return [e.event, ' ', e.by, ' ', e.why];
  }

  function clientPage() {
    const name = decodeURIComponent(location.pathname.slice('/clients/'.length));
    let last = null, nonce = null, sending = false;
    const button = $('#reset'), reason = $('#reset-reason'), msg = $('#reset-result');
    const ready = () => { button.disabled = sending || !nonce || !reason.value.trim(); };
    reason.addEventListener('input', ready);
    const load = refresher(async () => {
      const c = await getJSON('/api/clients/' + encodeURIComponent(name));
      nonce = c.nonce;
      ready();
      delete c.nonce;
      const key = JSON.stringify(c);
      if (key === last) return;
      last = key;
      render(c);
    });

    button.addEventListener('click', async () => {
      if (sending || !nonce) return;
      sending = true;
      ready();
      msg.hidden = false;
      const n = nonce;
      nonce = null;
      try {
        await postJSON('/clients/' + encodeURIComponent(name) + '/reset', { nonce: n, reason: reason.value });
        fill(msg, 'Reset: sessions of ' + name + ' started from now on begin unlabelled.');
        msg.className = 'verdict ok';
        reason.value = '';
      } catch (e) {
        fill(msg, String(e.message || e));
        msg.className = 'verdict bad';
      }
      sending = false;
      last = null;
      load();
    });

    function render(c) {
      document.title = 'Mandate: MCP client ' + c.name;
      fill($('#crumb-client'), c.name);
      fill($('#client'),
        el('h1', {}, 'MCP client ', el('span', { class: 'mono' }, c.name)),
        el('dl', { class: 'facts' },
          el('dt', {}, 'Label'), el('dd', {}, el('span', { class: 'mono', id: 'client-label' }, clientLabel(c.label))),
          el('dt', {}, 'Last rose'), el('dd', {}, fmtTime(c.raised)),
          el('dt', {}, 'Sessions'), el('dd', {}, String(c.sessions))));
      fill($('#history-count'), String(c.history.length));
      fill($('#history'), table([
        { title: 'When', get: (e) => fmtTime(e.time), cls: 'nowrap' },
        { title: 'Event', get: (e) => badge(e.event) },
        { title: 'What', get: (e) => eventText(e) },
      ], c.history.slice().reverse().map((v) => ({ v, cls: 'event-' + cls(v.event) })), 'Nothing yet.'));
      fill($('#runs-count'), String(c.runs.length));
      fill($('#runs'), table([
        { title: 'Run', get: (r) => el('a', { href: runURL(r.id) }, r.id), mono: true },
        { title: 'Principal', get: (r) => r.principal },
        { title: 'State', get: (r) => badge(r.state) },
        { title: 'Started', get: (r) => fmtTime(r.started) },
        { title: 'Denials', get: (r) => String(r.denials), num: true },
      ], c.runs.map((v) => ({ v })), 'No session recorded.'));
    }

    load();
    live(load, (c) => { if (c.clients || c.list) load(); });
  }

  document.addEventListener('DOMContentLoaded', () => {
    const page = document.body.dataset.page;
    if (page === 'runs') runsPage();
    if (page === 'run') runPage();
    if (page === 'approvals') approvalsPage();
    if (page === 'approval') approvalPage();
    if (page === 'clients') clientsPage();
    if (page === 'client') clientPage();
  });
})();
