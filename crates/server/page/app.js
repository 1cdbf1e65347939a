// The analyst's page: a conversation sidebar, the transcript with each assistant turn in its
// fixed order, the context meter, and a composer. No framework, no build step. Every word it
// shows comes from the catalogues (i18n/*.json, served as /page/i18n.js).
// Model output is hostile: Markdown arrives rendered and sanitised by the server; text is only
// ever set with textContent; an HTML report runs in a sandboxed frame (see reportFrame).
'use strict';
(() => {
  const $ = (s) => document.querySelector(s);
  const el = (tag, attrs = {}, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const kid of kids.flat()) if (kid != null) e.append(kid);
    return e;
  };
  // ---- language: the catalogues of /page/i18n.js, in the language the person chose on the
  // page (kept in localStorage) or else the browser's first (zh… → Simplified Chinese, anything
  // else → English). The server's errors carry a code; the page says them in its language.
  const CATALOGUES = window.BA_I18N || { en: {} };
  const pickLang = () => {
    const kept = localStorage.getItem('ba-lang');
    if (kept && CATALOGUES[kept]) return kept;
    const first = (navigator.languages && navigator.languages[0]) || navigator.language || 'en';
    return /^zh/i.test(first) && CATALOGUES['zh-CN'] ? 'zh-CN' : 'en';
  };
  let lang = pickLang();
  function tx(key, vars) {
    const s = (CATALOGUES[lang] || {})[key] ?? CATALOGUES.en[key] ?? key;
    return vars ? s.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m)) : s;
  }
  // A phrase with a count: `key.one` or `key.other`, as the language's plural rules choose.
  const tn = (key, n, vars) => tx(key + (new Intl.PluralRules(lang).select(n) === 'one' ? '.one' : '.other'), Object.assign({ n: fmt(n) }, vars));
  // What an error answer says: in English the server's own sentence (it names what failed); in
  // another language the catalogue's sentence for its code, or the server's when it has none.
  function errText(e) {
    const code = e && e.code; const own = code && CATALOGUES[lang] && CATALOGUES[lang]['error.' + code];
    if (own && (lang !== 'en' || !e.message)) return own;
    return (e && e.message) || (code ? code : '');
  }
  function applyStatic() {
    document.documentElement.lang = lang;
    document.querySelectorAll('[data-i18n]').forEach((n) => { n.textContent = tx(n.dataset.i18n); });
    for (const a of ['placeholder', 'title', 'aria-label']) {
      document.querySelectorAll('[data-i18n-' + a + ']').forEach((n) => n.setAttribute(a, tx(n.getAttribute('data-i18n-' + a))));
    }
    $('#lang').value = lang;
  }
  const COMPONENTS = ['task_analysis', 'execution_plan', 'tool_call_status', 'final_report',
    'code_blocks', 'recommended_questions', 'download_links'];
  // The token is pasted once into the sign-in form and kept in this tab's sessionStorage: no
  // URL ever carries it. One that arrives in the address bar anyway (an old link) is taken out
  // at once, unused, so no bookmark, history entry or shared screen keeps it.
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.has('token')) {
    hash.delete('token');
    const u = new URL(location.href); u.hash = hash.toString(); history.replaceState(null, '', u);
  }
  let token = sessionStorage.getItem('ba-token') || '';
  const nonce = (document.querySelector('meta[name="ba-nonce"]') || {}).content || '';
  const S = {
    conv: new URLSearchParams(location.search).get('conversation'), meta: null,
    entries: [], bySeq: new Set(), maxSeq: 0, lastId: null, gen: 0, abort: null,
    running: null, live: null, lastError: null, attachments: [], echarts: false,
    turnEls: new Map(), demo: [], ended: new Set(), approvals: [], rewound: [], me: null,
  };
  // Behind a proxy or an identity provider's front there is no token: the front signs requests.
  const headers = (extra = {}) => Object.assign(token ? { Authorization: 'Bearer ' + token } : {}, extra);
  const base = () => '/api/v1/conversations/' + encodeURIComponent(S.conv);

  async function api(path, { method = 'GET', body, form } = {}) {
    const init = { method, headers: headers(), cache: 'no-store' };
    if (form) init.body = form;
    else if (body !== undefined) { init.body = JSON.stringify(body); init.headers['Content-Type'] = 'application/json'; }
    const r = await reach(fetch(path, init));
    const text = await r.text();
    const data = text ? JSON.parse(text) : null;
    if (!r.ok) {
      const err = new Error((data && data.error && data.error.message) || r.statusText);
      err.status = r.status; err.data = data; err.code = data && data.error && data.error.code; throw err;
    }
    return data;
  }
  // A request that gets no answer at all (not an HTTP error): the server is down or unreachable.
  // A banner says so until /health answers again; then the page picks up where it was.
  let healthTimer = 0;
  function reach(pending) {
    return pending.then((r) => { serverDown(false); return r; }, (e) => {
      if (e.name !== 'AbortError') serverDown(true);
      throw e;
    });
  }
  function serverDown(down) {
    if ((document.body.dataset.server === 'down') === down) return;
    document.body.dataset.server = down ? 'down' : 'up';
    $('#offline').hidden = !down;
    clearTimeout(healthTimer);
    if (!down) { loadList(); return; }
    const check = (n) => { healthTimer = setTimeout(() => fetch('/health', { cache: 'no-store' }).then((r) => { if (r.ok) serverDown(false); else check(n + 1); }, () => check(n + 1)), backoff(n)); };
    check(0);
  }
  function notice(text, kind) {
    const n = $('#notice');
    n.hidden = !text; n.textContent = text || ''; n.className = kind || '';
  }
  const fmt = (n) => Number(n || 0).toLocaleString(lang);
  // A time the server sent (RFC 3339), in the page's language; anything else as it came.
  const when = (s) => {
    const d = typeof s === 'string' && /^\d{4}-\d\d-\d\dT/.test(s) ? new Date(s) : null;
    return d && !isNaN(d) ? new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'long' }).format(d) : s;
  };
  const uuid = () => (crypto.randomUUID ? crypto.randomUUID()
    : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join(''));
  const textOf = (entry) => {
    const c = entry && entry.content;
    if (typeof c === 'string') return c;
    if (Array.isArray(c)) return c.map((p) => p.text || '').join('');
    return '';
  };

  // ---- downloads (the token goes in a header, so files come through fetch and a blob)
  async function download(path) {
    try {
      const r = await reach(fetch(path, { headers: headers() }));
      if (!r.ok) throw new Error('HTTP ' + r.status);
      const url = URL.createObjectURL(await r.blob());
      const a = el('a', { href: url, download: savedName(r.headers.get('content-disposition'), path.split('/').pop()) });
      document.body.append(a); a.click(); a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) { notice(tx('download.failed', { error: errText(e) }), 'error'); }
  }

  // The name a download is saved under: RFC 6266's `filename*` (UTF-8, percent-encoded: the
  // file's own name) when it reads, else the plain `filename` (the server's ASCII fallback);
  // no folder part, no control character, never empty.
  function savedName(h, fallback) {
    h = String(h || ''); let name = '';
    const star = /filename\*\s*=\s*([^;]+)/i.exec(h);
    const m = star && /^\s*utf-8'[^']*'([^\s]*)\s*$/i.exec(star[1]);
    if (m) try { name = decodeURIComponent(m[1]); } catch (e) { name = ''; }
    if (!name) { const q = /(?:^|;)\s*filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))/i.exec(h); if (q) name = q[1] != null ? q[1].replace(/\\(.)/g, '$1') : q[2]; }
    name = name.replace(/[\/\\\u0000-\u001f\u007f]/g, '_').trim();
    return name && !/^\.+$/.test(name) ? name : fallback;
  }

  // ---- the conversation's files (id → kind, name, media type), fetched again when the log grew
  const files = { conv: null, seq: -1, promise: null };
  function filesOf() {
    if (files.conv !== S.conv || files.seq !== S.maxSeq) {
      files.conv = S.conv; files.seq = S.maxSeq;
      files.promise = api(base() + '/files').then((r) => new Map(r.files.map((f) => [f.id, f]))).catch(() => new Map());
    }
    return files.promise;
  }
  const IMAGE = /^image\/(png|jpeg|gif|webp)$/;
  // An image output shown in place: fetched with the token header, drawn from a blob URL.
  function inlineImage(id, name) {
    const img = el('img', { alt: name });
    const fig = el('figure', { class: 'output-image', 'data-file-id': id }, img, el('figcaption', { text: name }));
    fetch(base() + '/files/' + encodeURIComponent(id), { headers: headers() })
      .then((r) => { if (!r.ok) throw new Error('HTTP ' + r.status); return r.blob(); })
      .then((b) => { const url = URL.createObjectURL(b); img.addEventListener('load', () => URL.revokeObjectURL(url), { once: true }); img.src = url; })
      .catch((e) => fig.replaceChildren(el('figcaption', { text: tx('image.failed', { name, error: e.message }) })));
    return fig;
  }

  // ---- sidebar
  // The most recently changed first (the server pages by id; up to 2,000 are read).
  async function loadList() {
    const q = ($('#conv-search') || {}).value || '';
    const items = []; let after = null; let shared = [];
    try {
      for (let page = 0; page < 4; page += 1) {
        const list = await api('/api/v1/conversations?limit=500' + (q.trim() ? '&q=' + encodeURIComponent(q.trim()) : '') + (after ? '&after=' + encodeURIComponent(after) : ''));
        items.push(...list.items); after = list.next;
        if (page === 0) shared = list.shared || [];
        if (!after) break;
      }
    } catch (e) { return authError(e); }
    if (q !== (($('#conv-search') || {}).value || '')) return; // a newer search is on its way
    items.sort((a, b) => (b.updated_ms - a.updated_ms) || (a.id < b.id ? 1 : -1));
    $('#conv-list').replaceChildren(...items.map((c) => convItem(c)));
    $('#shared-list').replaceChildren(...shared.map((c) => convItem(c)));
    $('#shared-head').hidden = shared.length === 0;
  }
  // A branch reads as its parent's title: its own question (the edited one) tells it apart.
  // Read once for each length of its log (the question cannot change while the log does not).
  const forkQuestions = new Map();
  function forkQuestion(c, into) {
    const key = c.id + ':' + c.last_seq;
    let known = forkQuestions.get(key);
    if (!known) {
      known = api('/api/v1/conversations/' + encodeURIComponent(c.id) + '/messages?from_seq=' + (c.fork.at_seq + 1)).then((r) => {
        const u = r.entries.find((m) => m.entry.role === 'user' && !isContinue(m.entry));
        return u ? questionOf(u.entry).text.trim() : '';
      }).catch(() => { forkQuestions.delete(key); return ''; });
      forkQuestions.set(key, known);
    }
    known.then((text) => { if (text) { into.textContent = '✎ ' + text; into.closest('button').title += '\n✎ ' + text; } });
  }
  function convItem(c) {
    const title = c.title || tx('conv.untitled', { id: c.id.slice(0, 8) });
    const li = el('li', { class: c.id === S.conv ? 'current' : null, 'data-id': c.id });
    const edited = c.fork ? el('span', { class: 'edited', text: tx('conv.branch', { seq: c.fork.at_seq }) }) : null;
    const open = el('button', { type: 'button', class: 'open', title,
      'aria-current': c.id === S.conv ? 'page' : null, onclick: () => openConv(c.id) }, el('span', { class: 'name', text: title }), edited);
    if (edited) forkQuestion(c, edited);
    const badge = c.status === 'idle' ? null : el('span', { class: 'badge ' + c.status, text: statusName(c.status) });
    if (c.access === 'read') {
      li.append(open, el('span', { class: 'meta', text: tx('conv.from', { owner: c.owner }) }), badge || '');
      return li;
    }
    const rename = el('button', { type: 'button', class: 'small', text: tx('conv.rename'), 'aria-label': tx('conv.rename_of', { title }),
      onclick: () => {
        const input = el('input', { type: 'text', value: c.title || '', 'aria-label': tx('conv.new_title') });
        input.addEventListener('keydown', async (ev) => {
          if (ev.key === 'Escape') return loadList();
          if (ev.key !== 'Enter') return;
          ev.preventDefault();
          await api('/api/v1/conversations/' + c.id, { method: 'PATCH', body: { title: input.value.trim() } });
          if (c.id === S.conv) $('#conv-title').textContent = input.value.trim() || tx('conv.untitled_short');
          loadList();
        });
        open.replaceWith(input); input.focus(); input.select();
      } });
    let armed = false;
    const del = el('button', { type: 'button', class: 'small', text: tx('conv.delete'), 'aria-label': tx('conv.delete_of', { title }),
      onclick: async () => {
        if (!armed) { armed = true; del.textContent = tx('conv.really_delete'); setTimeout(() => { armed = false; del.textContent = tx('conv.delete'); }, 4000); return; }
        try {
          await api('/api/v1/conversations/' + c.id, { method: 'DELETE' });
          if (c.id === S.conv) openConv(null);
          loadList();
        } catch (e) { notice(e.message, 'error'); }
      } });
    li.append(...[open, el('span', { class: 'meta', text: modeName(c.mode) }), badge, rename, del].filter(Boolean));
    return li;
  }
  function authError(e) {
    if (e.status === 401) { signIn(tx('signin.again')); return; }
    notice(errText(e), 'error');
  }

  // ---- signing in: who the server says we are (`/api/v1/me`); a sign-in form when it needs a
  // token (behind a proxy or an identity provider's front, it does not).
  let started = false;
  async function whoami() {
    try { S.me = await api('/api/v1/me'); } catch (e) {
      if (e.status === 401) { signIn(token ? tx('signin.refused') : ''); return; }
      notice(e.message, 'error'); return;
    }
    document.body.dataset.signin = 'done';
    const dlg = $('#signin'); if (dlg.open) dlg.close();
    const me = S.me;
    const parts = [me.name + ' (' + roleName(me.role) + ')'];
    if (me.spend && me.budget && me.budget.month_usd != null) parts.push(tx('me.month_of', { spent: dollars(me.spend.usd), cap: dollars(me.budget.month_usd) }));
    else if (me.spend && me.spend.usd) parts.push(tx('me.month', { spent: dollars(me.spend.usd) }));
    $('#whoami-text').textContent = parts.join(' · ');
    $('#whoami').hidden = false;
    $('#sign-out').hidden = !token;
    $('#admin-open').hidden = me.role !== 'admin';
    $('#new-conv').hidden = me.role === 'viewer';
    document.body.dataset.role = me.role;
    if (!started) { started = true; begin(); }
  }
  // The names the server sends as codes, in the page's language.
  const roleName = (r) => ({ admin: tx('role.admin'), analyst: tx('role.analyst'), viewer: tx('role.viewer') }[r] || r);
  const modeName = (m) => ({ chat: tx('mode.chat'), agent: tx('mode.agent'), run: tx('mode.run') }[m] || m);
  const statusName = (s) => ({ running: tx('status.running'), interrupted: tx('status.interrupted'), failed: tx('status.failed'),
    budget_reached: tx('status.budget_reached'), awaiting_approval: tx('status.awaiting_approval'), broken: tx('status.broken') }[s] || String(s).replace(/_/g, ' '));
  const runStatus = (s) => ({ running: tx('status.running'), answered: tx('run.answered'), failed: tx('status.failed'), round_limit: tx('run.round_limit'),
    budget_reached: tx('status.budget_reached'), model_failed: tx('run.model_failed'), cancelled: tx('run.cancelled') }[s] || s);
  const meterStatus = (s) => ({ normal: tx('meter.normal'), warning: tx('meter.warning'), compressing: tx('meter.compressing') }[s] || s);
  // A failed run's event names its kind: in English its own sentence, else the catalogue's.
  function runError(d) {
    const known = { busy: tx('run_error.busy'), store: tx('run_error.store'), lease_lost: tx('run_error.lease_lost'), context: tx('run_error.context'),
      config: tx('run_error.config'), input: tx('run_error.input'), model: tx('run_error.model'), hook: tx('run_error.hook'),
      round_limit: tx('run_error.round_limit'), budget_reached: tx('run_error.budget_reached'), format: tx('run_error.format'), cancelled: tx('run_error.cancelled') }[d.kind];
    return lang === 'en' || !known ? d.message : known;
  }
  function signIn(why) {
    document.body.dataset.signin = 'needed';
    $('#signin-error').textContent = why || '';
    const dlg = $('#signin');
    if (!dlg.open) dlg.showModal();
    $('#signin-token').focus();
  }
  function signInSubmitted(ev) {
    ev.preventDefault();
    const given = $('#signin-token').value.trim();
    if (!given) return;
    token = given; sessionStorage.setItem('ba-token', token);
    $('#signin-token').value = '';
    whoami();
  }
  function signOut() {
    sessionStorage.removeItem('ba-token'); token = ''; S.me = null;
    location.replace(location.pathname);
  }
  // A conversation the caller may only read: no composer, no edits, no decisions.
  function readOnly() {
    return Boolean((S.me && S.me.role === 'viewer') || (S.meta && S.meta.access === 'read'));
  }
  function showAccess() {
    const ro = readOnly();
    document.body.dataset.readonly = ro ? 'yes' : 'no';
    $('#composer').hidden = ro;
  }

  // ---- the admin dialog: users, their roles, budgets and tokens.
  async function showAdmin() {
    const dlg = $('#admin-dialog'); const body = $('#admin-body');
    let users;
    try { users = (await api('/api/v1/users')).users; } catch (e) { notice(errText(e), 'error'); return; }
    const rows = users.map((u) => {
      const role = el('select', { 'aria-label': tx('admin.role_of', { name: u.name }) }, ['admin', 'analyst', 'viewer'].map((r) => el('option', { value: r, text: roleName(r), selected: r === u.role })));
      const usd = el('input', { type: 'number', min: '0', step: '0.01', 'aria-label': tx('admin.usd_of', { name: u.name }), value: u.budget && u.budget.month_usd != null ? u.budget.month_usd : '' });
      const toks = el('input', { type: 'number', min: '0', step: '1', 'aria-label': tx('admin.tokens_of', { name: u.name }), value: u.budget && u.budget.month_tokens != null ? u.budget.month_tokens : '' });
      const out = el('output', { class: 'secret' });
      const save = el('button', { type: 'button', text: tx('admin.save'), onclick: async () => {
        const num = (v) => (v === '' ? null : Number(v));
        try {
          await api('/api/v1/users/' + encodeURIComponent(u.name), { method: 'PATCH', body: { role: role.value, budget: { month_usd: num(usd.value), month_tokens: num(toks.value) } } });
          out.textContent = tx('admin.saved');
        } catch (e) { out.textContent = errText(e); }
      } });
      const issue = el('button', { type: 'button', text: tx('admin.new_token'), onclick: async () => {
        try {
          const tk = await api('/api/v1/users/' + encodeURIComponent(u.name) + '/tokens', { method: 'POST' });
          out.textContent = tx('admin.token_once', { secret: tk.secret });
        } catch (e) { out.textContent = errText(e); }
      } });
      return el('tr', { 'data-user': u.name }, el('th', { scope: 'row', text: u.name }), el('td', {}, role), el('td', {}, usd), el('td', {}, toks), el('td', {}, save, issue, out));
    });
    const name = el('input', { type: 'text', 'aria-label': tx('admin.new_name'), placeholder: tx('admin.name') });
    const role = el('select', { 'aria-label': tx('admin.new_role') }, ['analyst', 'viewer', 'admin'].map((r) => el('option', { value: r, text: roleName(r) })));
    const add = el('button', { type: 'button', text: tx('admin.add'), onclick: async () => {
      try { await api('/api/v1/users', { method: 'POST', body: { name: name.value.trim(), role: role.value } }); showAdmin(); } catch (e) { notice(errText(e), 'error'); }
    } });
    body.replaceChildren(
      el('table', {}, el('thead', {}, el('tr', {}, [tx('admin.user'), tx('admin.role'), tx('admin.usd'), tx('admin.tokens'), ''].map((h) => el('th', { scope: 'col', text: h })))), el('tbody', {}, rows)),
      el('p', {}, name, role, add));
    if (!dlg.open) dlg.showModal();
  }

  // ---- scheduled workflows: each with its next and last run, its status, the result's
  // conversation, and pause / resume / run now; refreshed while a run goes on.
  async function schedules() {
    const dlg = $('#schedules-dialog'); let list;
    try { list = (await api('/api/v1/schedules')).schedules; } catch (e) { notice(errText(e), 'error'); return; }
    const act = (path, opts) => api(path, opts).catch((e) => notice(errText(e), 'error')).then(schedules);
    const button = (cls, text, onclick) => el('button', { type: 'button', class: cls, text, onclick });
    const row = (s) => {
      const path = '/api/v1/schedules/' + s.id; const last = s.last_run;
      const result = last && el('a', { href: '#', class: 'schedule-result', text: tx('sched.result'), onclick: (e) => {
        e.preventDefault(); dlg.close(); openConv(last.conversation_id);
      } });
      return el('tr', { 'data-schedule': s.id },
        el('th', { text: s.name }),
        el('td', { class: 'schedule-next', text: s.paused ? tx('sched.paused') : when(s.next_run) }),
        el('td', { class: 'schedule-last', text: last ? when(last.occurrence) : tx('sched.never') }),
        el('td', { class: 'schedule-status', text: last && runStatus(last.status) }),
        el('td', {}, result),
        el('td', {},
          button('schedule-pause', s.paused ? tx('sched.resume') : tx('sched.pause'), () => act(path, { method: 'PATCH', body: { paused: !s.paused } })),
          button('schedule-run', tx('sched.run_now'), () => act(path + '/run', { method: 'POST' }))));
    };
    $('#schedules-body').replaceChildren(el('table', {}, el('thead', {}, el('tr', {}, [tx('sched.name'), tx('sched.next'), tx('sched.last'), tx('sched.status'), tx('sched.result'), tx('sched.actions')].map((h) => el('th', { scope: 'col', text: h })))), el('tbody', {}, list.map(row))));
    if (!dlg.open) dlg.showModal();
    if (list.some((s) => s.last_run && s.last_run.status === 'running')) S.st = setTimeout(() => dlg.open && schedules(), 1000);
  }

  // ---- opening a conversation
  async function openConv(id) {
    S.gen += 1; if (S.abort) S.abort.abort();
    Object.assign(S, { conv: id, meta: null, entries: [], bySeq: new Set(), maxSeq: 0, lastId: null,
      running: null, live: null, lastError: null, cancelled: false });
    S.turnEls = new Map(); S.ended = new Set(); S.approvals = []; renderApprovals(); S.siblings = null;
    try { S.anchor = id ? JSON.parse(sessionStorage.getItem(anchorKey()) || 'null') : null; } catch (e) { S.anchor = null; }
    S.rewound = [];
    const url = new URL(location.href);
    if (id) url.searchParams.set('conversation', id); else url.searchParams.delete('conversation');
    history.replaceState(null, '', url);
    $('#transcript').replaceChildren();
    notice('');
    setMeter(null); $('#spend').hidden = true;
    document.querySelectorAll('#conv-list li').forEach((li) => li.classList.toggle('current', li.dataset.id === id));
    restoreDraft();
    if (!id) { $('#conv-title').textContent = tx('conv.new'); showAccess(); showCost(); renderAll(); updateControls(); return; }
    const gen = S.gen;
    try {
      S.meta = await api(base());
      const t0 = performance.now();
      const msgs = await api(base() + '/messages');
      if (gen !== S.gen) return;
      for (const m of msgs.entries) addEntry(m, false);
      S.lastId = String(S.maxSeq);
      renderAll();
      document.body.dataset.renderMs = String(Math.round(performance.now() - t0));
      document.body.dataset.entries = String(S.entries.length);
      if (S.meta.status === 'running' && !S.ended.has(S.meta.active_run_id)) S.running = S.meta.active_run_id;
      if (S.meta.status === 'awaiting_approval') loadApprovals();
      loadBranches(gen); showCost();
      showMeta(); updateControls();
      api(base() + '/context').then((c) => c && c.usage && setMeter(c.usage)).catch(() => {});
      showSpend();
      stream(gen);
    } catch (e) { authError(e); }
  }
  function showMeta() {
    showAccess();
    const m = S.meta; if (!m) return;
    $('#conv-title').textContent = m.title || tx('conv.untitled', { id: m.id.slice(0, 8) });
    const radio = document.querySelector('#mode input[value="' + m.mode + '"]');
    if (radio) radio.checked = true;
    renderWorkflowForm();
  }
  async function refreshMeta() {
    if (!S.conv) return;
    try { S.meta = await api(base()); } catch (e) { return; }
    if (!S.running && S.meta.status === 'running' && !S.ended.has(S.meta.active_run_id)) S.running = S.meta.active_run_id;
    if (S.meta.status === 'awaiting_approval') loadApprovals(); else { S.approvals = []; renderApprovals(); }
    showMeta(); updateControls(); loadList(); showCost();
  }

  // ---- the event stream: fetch + ReadableStream (the token stays in a header), reconnecting
  // with the last event id, backoff doubling up to 10 s.
  // The wait before reconnect attempt `n` (0 after a stream that delivered frames).
  const backoff = (n) => Math.min(500 * 2 ** Math.max(0, n), 10000);
  async function stream(gen) {
    let attempt = 0;
    while (gen === S.gen) {
      const ctrl = new AbortController(); S.abort = ctrl;
      try {
        const h = headers(); if (S.lastId) h['Last-Event-ID'] = S.lastId;
        const r = await reach(fetch(base() + '/events', { headers: h, signal: ctrl.signal, cache: 'no-store' }));
        if (r.status === 404 || r.status === 401) { notice(tx('stream.refused', { status: r.status }), 'error'); return; }
        if (!r.ok) throw new Error('HTTP ' + r.status);
        document.body.dataset.stream = 'open';
        if (S.running) recheckRun(gen);
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done || gen !== S.gen) break;
          buf += value.replace(/\r\n?/g, '\n');
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i); buf = buf.slice(i + 2);
            if (frame(block)) attempt = 0;
          }
        }
      } catch (e) { if (gen !== S.gen) return; }
      if (gen !== S.gen) return;
      document.body.dataset.stream = 'reconnecting';
      await new Promise((res) => setTimeout(res, backoff(attempt)));
      attempt += 1;
    }
  }
  // A run the conversation's state said was going may have ended before this stream joined:
  // its `finished` frame is then in no log to catch up from. Asked again once subscribed.
  async function recheckRun(gen) {
    const run = S.running;
    let meta; try { meta = await api(base()); } catch (e) { return; }
    if (gen !== S.gen || S.running !== run || meta.status === 'running') return;
    S.ended.add(run); S.running = null; S.live = null; rerenderLast(); refreshMeta();
  }
  function frame(block) {
    let id = null; let event = 'message'; const data = [];
    for (const line of block.split('\n')) {
      if (!line || line.startsWith(':')) continue;
      const k = line.indexOf(':');
      const field = k < 0 ? line : line.slice(0, k);
      const value = k < 0 ? '' : line.slice(k + 1).replace(/^ /, '');
      if (field === 'id') id = value; else if (field === 'event') event = value; else if (field === 'data') data.push(value);
    }
    if (!data.length) return false;
    let d; try { d = JSON.parse(data.join('\n')); } catch (e) { return false; }
    if (id && event !== 'sync') S.lastId = id;
    onEvent(event, d);
    return true;
  }
  function onEvent(name, d) {
    const live = () => (S.live = S.live || { round: 0, text: '', calls: new Map(), plan: null });
    switch (name) {
      case 'entry': addEntry(d, true); break;
      case 'run_started': S.running = d.run_id; S.lastError = null; S.cancelled = false; S.live = null; notice(''); updateControls(); loadList(); break;
      case 'round_started': S.running = S.running || d.run_id; S.live = { round: d.round, text: '', calls: new Map(), plan: null }; break;
      case 'text_delta': live().text += d.text; scheduleLive(); break;
      case 'plan': live().plan = d; scheduleLive(); break;
      case 'tool_call_started': live().calls.set(d.call_id, { name: d.name, arguments: d.arguments }); scheduleLive(); break;
      case 'tool_result': if (S.live) S.live.calls.delete(d.call_id); scheduleLive(); break;
      case 'context_status': setMeter(d); break;
      case 'context_compressed': live().compressed = d; scheduleLive(); break;
      case 'sync': {
        S.running = d.run_id;
        const calls = new Map((d.open_tool_calls || []).map((c) => [c.call_id, c]));
        S.live = { round: d.round, text: d.text_so_far || '', calls, plan: null };
        updateControls(); scheduleLive(); break;
      }
      case 'error': S.lastError = d; notice(runError(d) + (d.resumable ? tx('run.continue_hint') : ''), 'error'); break;
      case 'approval_requested': S.approvals = d.calls || []; renderApprovals(); rerenderLast(); break;
      case 'cancelled': S.cancelled = true; notice(tx('run.stopped')); break;
      case 'finished':
        // Remembered: a run can end before the request that started it has answered.
        S.ended.add(d.run_id); document.body.dataset.finished = d.run_id || '';
        S.running = null; S.live = null; rerenderLast(); refreshMeta(); showSpend(); whoami(); break;
      case 'reset': openConv(S.conv); break;
      default: break;
    }
  }
  function addEntry(m, render) {
    if (S.bySeq.has(m.seq) || m.seq <= S.maxSeq) return;
    S.bySeq.add(m.seq); S.maxSeq = m.seq;
    // A rewind takes the entries after its point out of the history: they leave the page.
    // The calls it took back are counted apart in the sidebar's cost line.
    if (m.entry.kind === 'rewind' && m.entry.rewind) {
      const to = m.entry.rewind.to_seq;
      S.rewound.push(...S.entries.filter((x) => x.seq > to));
      S.entries = S.entries.filter((x) => x.seq <= to);
      if (render) { renderAll(); showCost(); }
      return;
    }
    const e = Object.assign({}, m.entry, { seq: m.seq, api: m.api_response || null, html: m.response_html || null,
      usage: m.usage || m.entry.usage || null, cost: typeof m.cost_usd === 'number' ? m.cost_usd : null, inWindow: m.in_window, dropped: m.dropped_reason || null });
    if (m.rewound) { S.rewound.push(e); return; }
    S.entries.push(e);
    if (render && e.role === 'assistant') showCost();
    if (S.live && e.role === 'assistant') S.live.text = '';
    if (S.live && e.role === 'tool') S.live.calls.delete(e.tool_call_id);
    if (!render) return;
    if (e.role === 'user' && !isContinue(e)) renderAll(); else rerenderLast();
  }
  // Entries the loop wrote (a `continue`, a format correction, a compaction) are not turns.
  const isContinue = (e) => ['continue', 'format_error', 'compaction'].includes(e.kind);

  // ---- turns: a user message and everything up to the next one
  function turns() {
    const out = []; let cur = null;
    for (const e of S.entries) {
      if (e.role === 'user' && !isContinue(e)) { cur = { user: e, rest: [] }; out.push(cur); }
      else if (cur) cur.rest.push(e);
      else out.push({ user: null, rest: [e] });
    }
    return out;
  }
  function renderAll() {
    const box = $('#transcript');
    const list = turns();
    if (!list.length) { box.replaceChildren(emptyState()); return; }
    const frag = document.createDocumentFragment();
    S.turnEls = new Map();
    grown.disconnect();
    list.forEach((t, i) => { const n = renderTurn(t, i === list.length - 1); S.turnEls.set(i, n); frag.append(n); grown.observe(n); });
    box.replaceChildren(frag);
    holdAnchor();
  }
  function rerenderLast() {
    const list = turns();
    if (!list.length) return renderAll();
    const i = list.length - 1; const old = S.turnEls.get(i);
    if (!old) return renderAll();
    const n = renderTurn(list[i], true);
    grown.unobserve(old); old.replaceWith(n); S.turnEls.set(i, n); grown.observe(n);
    holdAnchor();
    updateControls();
  }
  // ---- where the person reads: the turn at the top of the view and how far into it, or the
  // bottom (the default, and after sending). Taken when the person scrolls, kept per
  // conversation in this tab, and held while turns grow (code that loads, an image, a report's
  // frame, streamed text), so a reload lands where the person was, not mid-report.
  let touched = -1e9;
  const anchorKey = () => 'ba-scroll:' + S.conv;
  function saveAnchor() {
    const box = $('#transcript'); const top = box.getBoundingClientRect().top;
    const art = box.scrollHeight - box.scrollTop - box.clientHeight < 4 ? null
      : [...box.querySelectorAll('article.turn')].find((a) => a.getBoundingClientRect().bottom > top + 1);
    S.anchor = art ? { seq: art.dataset.seq, off: top - art.getBoundingClientRect().top } : null;
    if (S.conv) sessionStorage.setItem(anchorKey(), JSON.stringify(S.anchor));
  }
  function holdAnchor() {
    const box = $('#transcript'); const a = S.anchor;
    const art = a && box.querySelector('article.turn[data-seq="' + a.seq + '"]');
    const to = art ? box.scrollTop + art.getBoundingClientRect().top - box.getBoundingClientRect().top + a.off : box.scrollHeight;
    box.scrollTop = Math.round(Math.max(0, Math.min(to, box.scrollHeight - box.clientHeight)));
  }
  const grown = new ResizeObserver(() => holdAnchor());
  let liveTimer = 0;
  function scheduleLive() { if (!liveTimer) liveTimer = requestAnimationFrame(() => { liveTimer = 0; rerenderLast(); }); }
  function emptyState() {
    const box = el('div', { class: 'empty' }, el('p', { text: tx('empty.ask') }));
    if (S.demo.length) box.append(el('p', { text: tx('empty.demo') }), el('div', { class: 'chips questions' },
      S.demo.map((q) => el('button', { type: 'button', text: q, onclick: () => fill(q) }))));
    return box;
  }
  function fill(q) { const i = $('#input'); i.value = q; i.focus(); saveDraft(); }

  // ---- branches: an edited question is a fork of the conversation at the entry before it;
  // the conversations that part at a question are its branches (`‹ 1 / 2 ›`).
  async function loadBranches(gen) {
    try {
      const mine = await api(base() + '/branches');
      let parent = null;
      if (mine.fork) parent = await api('/api/v1/conversations/' + encodeURIComponent(mine.fork.parent) + '/branches');
      if (gen !== S.gen) return;
      S.siblings = { mine, parent };
      if (S.entries.length) renderAll();
    } catch (e) { /* no branches shown */ }
  }
  // The conversations whose question at `seq` parts from this one's: oldest first.
  function branchesAt(seq) {
    const b = S.siblings; if (!b) return [S.conv];
    const at = seq - 1; let list;
    if (b.mine.fork && b.mine.fork.at_seq === at && b.parent) {
      list = [b.parent.id, ...b.parent.forks.filter((f) => f.at_seq === at).map((f) => f.id)];
    } else {
      list = [S.conv, ...b.mine.forks.filter((f) => f.at_seq === at).map((f) => f.id)];
    }
    return list.includes(S.conv) ? list : [S.conv, ...list];
  }
  function userTools(u) {
    const bar = el('div', { class: 'user-tools' });
    const list = branchesAt(u.seq);
    if (list.length > 1) {
      const i = list.indexOf(S.conv);
      bar.append(el('span', { class: 'branches', 'data-component': 'branches', role: 'group', 'aria-label': tx('branch.versions') },
        el('button', { type: 'button', class: 'prev', 'aria-label': tx('branch.prev'), disabled: i <= 0, text: '‹', onclick: () => openConv(list[i - 1]) }),
        el('span', { class: 'count', text: (i + 1) + ' / ' + list.length }),
        el('button', { type: 'button', class: 'next', 'aria-label': tx('branch.next'), disabled: i >= list.length - 1, text: '›', onclick: () => openConv(list[i + 1]) })));
    }
    // Always there; hidden while a run goes on (see updateControls), so no re-render is needed.
    bar.append(el('button', { type: 'button', class: 'edit', text: tx('edit.button'), 'aria-label': tx('edit.this'), onclick: (ev) => editQuestion(u, ev.target.closest('article')) }));
    return bar;
  }
  // A question as the person wrote it: their words and the files they attached as chips, never
  // the note the model is handed. An entry with an `attachments` record holds the words in its
  // first text block; an older one is cut at the note, whose lines name the files.
  const NOTE = '\n\nUploaded files (';
  function questionOf(e) {
    const c = e.content;
    if (Array.isArray(e.attachments)) {
      const first = Array.isArray(c) ? ((c.find((p) => p.type === 'text') || {}).text || '') : textOf(e);
      return { text: cutNote(first).text, files: e.attachments.filter((a) => a && typeof a.id === 'string') };
    }
    return cutNote(textOf(e));
  }
  function cutNote(full) {
    const at = full.lastIndexOf(NOTE);
    const files = at < 0 ? [] : [...full.slice(at).matchAll(/^- <file_ref>([^<\n]{1,200})<\/file_ref> (.+?) \(([^(),\n]*), (\d+) bytes\)/gm)]
      .map((m) => ({ id: m[1].trim(), name: m[2], media_type: m[3], size: Number(m[4]) }));
    return files.length ? { text: full.slice(0, at), files } : { text: full, files: [] };
  }
  // Attached files as chips: a click downloads one; with `remove`, each has a × that drops it.
  function fileChips(files, remove) {
    return el('div', { class: 'chips files', role: 'group', 'aria-label': tx('files.attached') }, files.map((f) => {
      const name = f.name || f.id;
      const chip = el('span', { class: 'chip', title: [f.media_type, f.size != null ? tn('bytes', f.size) : ''].filter(Boolean).join(', ') },
        el('button', { type: 'button', class: 'file-ref', 'data-file-ref': f.id, text: name, 'aria-label': tx('files.download', { name }),
          onclick: () => download(base() + '/uploads/' + encodeURIComponent(f.id)) }));
      if (remove) chip.append(el('button', { type: 'button', class: 'remove', text: '×', 'aria-label': tx('files.remove', { name }), onclick: () => remove(f) }));
      return chip;
    }));
  }
  function editQuestion(u, art) {
    const q = questionOf(u); let kept = q.files.slice();
    const box = el('form', { class: 'edit-question', 'aria-label': tx('edit.form') });
    const area = el('textarea', { rows: 3, 'aria-label': tx('edit.new') }); area.value = q.text;
    const chips = el('div', { class: 'edit-files' });
    const showChips = () => chips.replaceChildren(...(kept.length ? [fileChips(kept, (f) => { kept = kept.filter((x) => x !== f); showChips(); area.focus(); })] : []));
    showChips();
    const send = el('button', { type: 'submit', class: 'primary', text: tx('edit.send') });
    const cancel = el('button', { type: 'button', text: tx('edit.cancel'), onclick: () => renderAll() });
    box.append(area, chips, el('div', { class: 'actions' }, cancel, send));
    box.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const text = area.value.trim(); if (!text) { area.focus(); return; }
      send.disabled = true;
      try {
        // The question's branch: a fork at the entry before it, then the new question with the
        // files kept.
        const f = await api(base() + '/fork', { method: 'POST', body: { at_seq: u.seq - 1 } });
        const upload_ids = await carry(f.id, kept);
        await api('/api/v1/conversations/' + encodeURIComponent(f.id) + '/runs', { method: 'POST', body: { request_id: uuid(), input: { type: 'message', text, upload_ids } } });
        S.anchor = null; await openConv(f.id); loadList();
      } catch (e) { notice(errText(e), 'error'); send.disabled = false; }
    });
    const user = art.querySelector('.user'); if (user) user.replaceWith(box);
    const tools = art.querySelector('.user-tools'); if (tools) tools.remove();
    area.focus();
  }
  // The ids of `files` in the branch `fork`: its own when the fork carries them, else copies of
  // this conversation's (a server whose forks start without the files).
  async function carry(fork, files) {
    if (!files.length) return [];
    const at = '/api/v1/conversations/' + encodeURIComponent(fork) + '/uploads';
    const listed = await api(at);
    const have = new Set((Array.isArray(listed) ? listed : listed.uploads || []).map((x) => x.id));
    const ids = [];
    for (const f of files) {
      if (have.has(f.id)) { ids.push(f.id); continue; }
      const r = await reach(fetch(base() + '/uploads/' + encodeURIComponent(f.id), { headers: headers() }));
      if (!r.ok) throw new Error(tx('edit.file_failed', { name: f.name || f.id, status: r.status }));
      const form = new FormData(); form.append('file', await r.blob(), f.name || f.id);
      ids.push((await api(at, { method: 'POST', form })).id);
    }
    return ids;
  }

  function renderTurn(t, last) {
    const art = el('article', { class: 'turn', 'data-seq': t.user ? t.user.seq : t.rest[0].seq });
    if (t.user) {
      const q = questionOf(t.user);
      art.append(el('div', { class: 'user', 'data-role': 'user' }, userText(q.text), q.files.length ? fileChips(q.files) : null), userTools(t.user));
    }
    if (t.user && t.user.workflow && t.user.workflow.event === 'started') art.append(workflowSteps(t.user.workflow));
    if (t.user && t.user.inWindow === false) {
      art.append(el('div', { class: 'marker out', role: 'note', text: t.user.dropped ? tx('turn.out_why', { why: reason(t.user.dropped) }) : tx('turn.out') }));
    }
    // A `/compact` is a notice of its own; an automatic compaction record is told by the
    // compression notice of the round it was made for.
    const markers = t.rest.filter((e) => e.kind === 'compaction' && e.compaction && (e.compaction.strategies || []).includes('compact'))
      .map((e) => el('div', { class: 'marker', role: 'note', 'data-notice': 'compaction', text: e.compaction.tokens_before ? tx('turn.compacted_tokens', { before: fmt(e.compaction.tokens_before), after: fmt(e.compaction.tokens_after) }) : tx('turn.compacted') }));
    const assistant = t.rest.filter((e) => e.role === 'assistant');
    const liveHere = last && S.live && S.running;
    if (!assistant.length && !liveHere) { art.append(...markers); return art; }
    art.append(answer(t, assistant, liveHere ? S.live : null, markers));
    art.append(...memoryNotices(t));
    return art;
  }
  // ---- memory: a notice where the model changed the person's memory (the change a click
  // away, and Undo: each version it made taken back — a new file deleted, an edit restored to
  // the version before), and the Memory panel (files, view, edit, delete, history, restore).
  const memUrl = (path) => '/api/v1/memory/' + path.replace(/^\/memories\//, '').split('/').map(encodeURIComponent).join('/');
  const memName = (path) => path.replace(/^\/memories\//, '');
  function memoryNotices(t) {
    return t.rest.filter((e) => e.role === 'tool' && e.memory_change && (e.memory_change.versions || []).length).map((e) => {
      const m = e.memory_change;
      const names = m.versions.map((v) => memName(v.path));
      const label = m.command === 'rename' ? tx('mem.renamed', { names: names.slice(0, 2).reverse().join(' → ') })
        : m.command === 'delete' ? tx('mem.forgot', { names: names.join(', ') }) : tx('mem.remembered', { names: names.join(', ') });
      const out = el('output', { class: 'small' });
      const change = el('details', { class: 'mem-change' }, el('summary', { text: tx('mem.change') }));
      change.addEventListener('toggle', async () => {
        if (!change.open || change.dataset.loaded) return;
        change.dataset.loaded = '1';
        for (const v of m.versions) {
          try {
            const h = (await api(memUrl(v.path) + '/versions')).versions || [];
            const now = h.find((x) => x.version === v.version);
            const before = h.find((x) => x.version === v.version - 1);
            change.append(diffView(before && !before.deleted ? before.text : '', now && !now.deleted ? now.text : '', tx('mem.version_of', { path: v.path, version: v.version })));
          } catch (err) { change.append(el('p', { text: v.path + ': ' + errText(err) })); }
        }
      });
      const undo = el('button', { type: 'button', class: 'small', 'data-action': 'memory-undo', text: tx('mem.undo'), onclick: async () => {
        undo.disabled = true;
        try {
          for (const v of [...m.versions].reverse()) {
            if (v.version === 1) await api(memUrl(v.path), { method: 'DELETE' });
            else await api(memUrl(v.path) + '/restore', { method: 'POST', body: { version: v.version - 1 } });
          }
          out.textContent = tx('mem.undone'); note.dataset.state = 'undone';
        } catch (err) { out.textContent = errText(err); undo.disabled = false; }
      } });
      const note = el('div', { class: 'marker memory', role: 'note', 'data-notice': 'memory', 'data-state': 'done' }, label + ' ', change, undo, out);
      if (readOnly()) undo.hidden = true;
      return note;
    });
  }
  async function showMemory(open) {
    const dlg = $('#memory-dialog'); const body = $('#memory-body');
    let listed;
    try { listed = await api('/api/v1/memory'); } catch (e) { notice(errText(e), 'error'); return; }
    const writable = (f) => !f.team || listed.team_writable;
    const view = el('div', { id: 'memory-view' });
    const openFile = async (path, team) => {
      const text = el('textarea', { id: 'memory-text', rows: '10', 'aria-label': tx('mem.text_of', { path }), readOnly: team && !listed.team_writable });
      const out = el('output', { class: 'small', id: 'memory-out' });
      const hist = el('ul', { class: 'mem-history', 'aria-label': tx('mem.versions_of', { path }) });
      try { text.value = (await api(memUrl(path))).text || ''; } catch (e) { out.textContent = errText(e); }
      const save = el('button', { type: 'button', id: 'memory-save', text: tx('mem.save'), onclick: async () => {
        try { await api(memUrl(path), { method: 'PUT', body: { text: text.value } }); out.textContent = tx('mem.saved'); showMemory(path); } catch (e) { out.textContent = errText(e); }
      } });
      const del = el('button', { type: 'button', id: 'memory-delete', text: tx('mem.delete'), onclick: async () => {
        try { await api(memUrl(path), { method: 'DELETE' }); showMemory(); } catch (e) { out.textContent = errText(e); }
      } });
      const history = el('button', { type: 'button', id: 'memory-history', text: tx('mem.history'), onclick: async () => {
        try {
          const vs = (await api(memUrl(path) + '/versions')).versions || [];
          hist.replaceChildren(...vs.map((v) => el('li', { 'data-version': v.version },
            'v' + v.version + ' · ' + when(v.created) + ' · ' + (v.deleted ? tx('mem.deleted') : tn('bytes', v.size)) + ' · ' +
              (v.author.conversation ? tx('mem.by_conversation', { id: v.author.conversation }) : (v.author.user || '')) + ' ',
            (v.deleted || !writable({ team })) ? null : el('button', { type: 'button', class: 'small', 'data-action': 'memory-restore', text: tx('mem.restore'), onclick: async () => {
              try { await api(memUrl(path) + '/restore', { method: 'POST', body: { version: v.version } }); showMemory(path); } catch (e) { out.textContent = errText(e); }
            } }))));
        } catch (e) { out.textContent = errText(e); }
      } });
      if (!writable({ team })) { save.hidden = true; del.hidden = true; }
      view.replaceChildren(el('h4', { text: path }), text, el('div', { class: 'actions' }, save, del, history, out), hist);
    };
    const rows = listed.files.map((f) => el('li', { 'data-path': f.path },
      el('button', { type: 'button', class: 'linkish', text: memName(f.path), onclick: () => openFile(f.path, f.team) }),
      ' ' + tn('bytes', f.size) + ' · v' + f.versions + (f.team ? ' · ' + (listed.team_writable ? tx('mem.team') : tx('mem.team_ro')) : '')));
    const name = el('input', { type: 'text', id: 'memory-new-name', 'aria-label': tx('mem.new_name'), placeholder: 'notes.md' });
    const create = el('button', { type: 'button', text: tx('mem.new_file'), onclick: async () => {
      const p = name.value.trim(); if (!p) return;
      try { await api(memUrl(p), { method: 'PUT', body: { text: '' } }); showMemory('/memories/' + p); } catch (e) { notice(errText(e), 'error'); }
    } });
    body.replaceChildren(rows.length ? el('ul', { id: 'memory-files' }, rows) : el('p', { text: tx('mem.nothing') }),
      el('div', { class: 'actions' }, name, create), view);
    if (!dlg.open) dlg.showModal();
    if (typeof open === 'string') { const f = listed.files.find((x) => x.path === open); if (f) openFile(f.path, f.team); }
  }
  // ---- workflows (run mode): each run's steps, read from the log's records (the start names
  // the nodes; each completion its outputs and the next node), and the form that starts one.
  function workflowSteps(w) {
    const nodes = (w.definition && w.definition.nodes) || [];
    const done = new Map();
    let active = nodes.length ? nodes[0].id : null;
    for (const e of S.entries) {
      const r = e.workflow;
      if (r && r.event === 'node_completed' && r.run_id === w.run_id) { done.set(r.node, r.outputs || {}); active = r.next || null; }
    }
    const show = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
    const ol = el('ol', { class: 'wf-steps', 'data-component': 'workflow_steps', 'data-run-id': w.run_id, 'data-state': active ? 'running' : 'complete',
      'aria-label': tx('wf.steps_of', { name: w.workflow }) });
    for (const n of nodes) {
      const state = done.has(n.id) ? 'done' : n.id === active ? 'active' : active ? 'pending' : 'skipped';
      const li = el('li', { 'data-node': n.id, 'data-state': state },
        el('span', { class: 'wf-mark', 'aria-hidden': 'true', text: { done: '✓', active: '●', pending: '○', skipped: '–' }[state] }),
        el('span', { class: 'wf-title', text: n.title }), el('span', { class: 'sr-only', text: ' (' + { done: tx('wf.done'), active: tx('wf.active'), pending: tx('wf.pending'), skipped: tx('wf.skipped') }[state] + ')' }));
      if (done.has(n.id)) li.append(el('div', { class: 'wf-out', text: Object.entries(done.get(n.id)).map(([k, v]) => k + ': ' + show(v)).join(' · ').slice(0, 600) }));
      ol.append(li);
    }
    return ol;
  }
  async function loadWorkflows() {
    try { S.workflows = (await api('/api/v1/workflows')).workflows || []; } catch (e) { S.workflows = []; }
    renderWorkflowForm();
  }
  function renderWorkflowForm() {
    const box = $('#workflow-start');
    const mode = (document.querySelector('#mode input:checked') || {}).value;
    box.hidden = mode !== 'run' || !(S.workflows || []).length;
    if (box.hidden || box.dataset.ready) return;
    box.dataset.ready = '1';
    const select = el('select', { id: 'wf-name' }, S.workflows.map((w) => el('option', { value: w.name, text: w.name })));
    const desc = el('p', { class: 'wf-desc' });
    const fields = el('div', { class: 'wf-inputs' });
    const fill = () => {
      const w = S.workflows.find((x) => x.name === select.value);
      desc.textContent = w ? w.description : '';
      fields.replaceChildren(...(w ? w.inputs : []).map((i) => {
        const id = 'wf-in-' + i.name;
        return el('label', { for: id }, i.name + (i.description ? ' — ' + i.description : ''),
          el('input', { id, name: i.name, value: i.default == null ? '' : String(i.default), required: Boolean(i.required), placeholder: i.type }));
      }));
    };
    select.addEventListener('change', fill); fill();
    const go = el('button', { type: 'button', class: 'primary', id: 'wf-start', text: tx('wf.start'), onclick: async () => {
      if (S.running) return;
      const inputs = {};
      fields.querySelectorAll('input').forEach((x) => { if (x.value !== '') inputs[x.name] = x.value; });
      go.disabled = true;
      try { await start({ type: 'workflow', name: select.value, inputs }); } finally { go.disabled = false; }
    } });
    box.replaceChildren(el('h3', { text: tx('wf.run') }), el('label', { for: 'wf-name', text: tx('wf.workflow') }), select, desc, fields, go);
  }
  function userText(text) {
    const frag = document.createDocumentFragment();
    const re = /<file_ref>([^<]{1,200})<\/file_ref>/g; let at = 0; let m;
    while ((m = re.exec(text))) {
      frag.append(text.slice(at, m.index));
      const id = m[1].trim();
      frag.append(el('button', { type: 'button', class: 'file-ref', 'data-file-ref': id, text: id,
        'aria-label': tx('files.download_upload', { id }), onclick: () => download(base() + '/uploads/' + encodeURIComponent(id)) }));
      at = re.lastIndex;
    }
    frag.append(text.slice(at));
    return frag;
  }
  // Reads a string field out of a JSON answer still streaming (a partial JSON document).
  function partialField(text, key) {
    const m = new RegExp('"' + key + '"\\s*:\\s*"').exec(text);
    if (!m) return null;
    let i = m.index + m[0].length; let raw = '';
    while (i < text.length) {
      const c = text[i];
      if (c === '\\') { if (i + 1 >= text.length) break; raw += c + text[i + 1]; i += 2; continue; }
      if (c === '"') break;
      raw += c; i += 1;
    }
    raw = raw.replace(/\\u[0-9a-fA-F]{0,3}$/, '');
    try { return JSON.parse('"' + raw + '"'); } catch (e) { return raw; }
  }

  function planOf(e) {
    const text = textOf(e).trim();
    if (!text.startsWith('{')) return null;
    let v = null; try { v = JSON.parse(text); } catch (err) { v = null; }
    const ta = v ? v.task_analysis : partialField(text, 'task_analysis');
    const ep = v ? v.execution_plan : partialField(text, 'execution_plan');
    return ta || ep ? { metadata: { task_analysis: ta || '', execution_plan: ep || '' } } : null;
  }
  function answer(t, assistant, live, markers) {
    const box = el('div', { class: 'answer', 'data-role': 'assistant' }, markers);
    // One notice per compression, where it happened: before the calls of the round it was
    // made for (or before the report, for the last round), the meter's explanation a click away.
    // A list item keeps its role (a list of anything else is no list to a screen reader).
    const notice = (e) => el('li', { class: 'marker', 'data-notice': 'compression', 'data-round': e.round || '' },
      tx('ans.compressed', { round: e.round || '?', strategies: (e.context.strategies || []).join(', '), dropped: fmt(e.context.dropped),
        before: fmt(e.context.tokens_before), after: fmt(e.context.tokens_after) }) + ' ',
      el('button', { type: 'button', class: 'small why', text: tx('ans.why'), 'aria-label': tx('ans.why_label'), onclick: () => $('#meter').click() }));
    const compressed = assistant.filter((e) => e.context && e.context.compressed);
    if (live && live.compressed) box.append(el('div', { class: 'marker', role: 'note', text: tx('ans.compressed_live', { round: live.compressed.round, dropped: fmt(live.compressed.dropped) }) }));
    // A tool-call round's entry holds the structured answer as its text: read its analysis and
    // plan out of it (never shown raw).
    const apis = assistant.map((e) => e.api || planOf(e)).filter(Boolean);
    const lastApi = apis[apis.length - 1];
    const final = [...assistant].reverse().find((e) => e.api && e.api.metadata.action_type === 'complete');
    const structuredLive = live && live.text.trimStart().startsWith('{');
    let analysis = lastApi ? lastApi.metadata.task_analysis : '';
    let plan = lastApi ? lastApi.metadata.execution_plan : '';
    if (live && !final) {
      if (live.plan) { analysis = live.plan.task_analysis || analysis; plan = live.plan.execution_plan || plan; }
      if (structuredLive) { analysis = partialField(live.text, 'task_analysis') || analysis; plan = partialField(live.text, 'execution_plan') || plan; }
    }
    // 1. task_analysis (blue, collapsible): every round's reading, newest last.
    if (analysis) {
      const rounds = apis.map((a) => a.metadata.task_analysis).filter(Boolean);
      if (!rounds.length || rounds[rounds.length - 1] !== analysis) rounds.push(analysis);
      box.append(el('details', { class: 'box ta', 'data-component': 'task_analysis', open: true },
        el('summary', { text: tx('ans.analysis') }), rounds.map((r) => el('p', { text: r }))));
    }
    // 2. execution_plan (orange, fixed)
    if (plan) {
      const steps = plan.split(/;\s*/).filter((s) => s.trim());
      box.append(el('div', { class: 'box plan', 'data-component': 'execution_plan' },
        el('div', { class: 'title', text: tx('ans.plan') }), el('ol', {}, steps.map((s) => el('li', { text: s.trim() })))));
    }
    // 3. tool_call_status: a spinner per running call, then ✓/✗, duration, observation.
    const results = new Map(t.rest.filter((e) => e.role === 'tool').map((e) => [e.tool_call_id, e]));
    const calls = [];
    for (const e of assistant) {
      if (e.context && e.context.compressed) calls.push({ notice: e });
      for (const c of e.tool_calls || []) calls.push({ id: c.id, name: c.function ? c.function.name : c.name });
    }
    if (live) for (const [id, c] of live.calls) if (!calls.some((x) => x.id === id)) calls.push({ id, name: c.name });
    if (calls.some((c) => !c.notice)) {
      const ul = el('ul');
      for (const c of calls) {
        if (c.notice) { ul.append(notice(c.notice)); continue; }
        const r = results.get(c.id);
        if (r) {
          const bad = r.is_error === true;
          ul.append(el('li', { 'data-call': c.id, 'data-state': bad ? 'failed' : 'done' },
            el('span', { class: bad ? 'fail' : 'ok', text: bad ? '✗ ' : '✓ ' }), c.name + (r.duration_ms != null ? ' · ' + fmt(r.duration_ms) + ' ms' : ''),
            el('details', {}, el('summary', { text: tx('ans.observation') }), el('pre', { tabindex: '0', text: textOf(r).slice(0, 20000) }))));
        } else if (S.running && live) {
          ul.append(el('li', { 'data-call': c.id, 'data-state': 'running' }, el('span', { class: 'spinner', role: 'img', 'aria-label': tx('ans.running_label') }), ' ' + tx('ans.running', { name: c.name })));
        } else if (S.approvals.some((a) => a.call_id === c.id)) {
          ul.append(el('li', { 'data-call': c.id, 'data-state': 'awaiting' }, '‖ ' + tx('ans.awaiting', { name: c.name })));
        } else {
          // Only an interrupted run is resumed, and only then does the page offer Resume.
          const st = S.meta ? S.meta.status : 'idle';
          ul.append(el('li', { 'data-call': c.id, 'data-state': 'pending' }, '… ' + (st === 'awaiting_approval' ? tx('ans.after_decision', { name: c.name }) : st === 'interrupted' ? tx('ans.not_yet', { name: c.name }) : tx('ans.not_run', { name: c.name }))));
        }
      }
      box.append(el('div', { class: 'box tools', 'data-component': 'tool_call_status' }, el('div', { class: 'title', text: tx('ans.tools') }), ul));
    } else if (compressed.length) {
      box.append(el('ul', { class: 'notices' }, compressed.map(notice)));
    }
    // 4. final_report: always present. The round is counted from the log (the question's model
    // calls so far), so a run that a decision or a resume started counts on from the question.
    const lastA = assistant[assistant.length - 1];
    const open = lastA && (lastA.tool_calls || []).some((c) => !results.has(c.id));
    box.append(report(final, assistant, live, structuredLive, assistant.length + (open ? 0 : 1)));
    const md = final ? final.api.metadata : null;
    // 5. code_blocks
    if (md && md.code_refs && md.code_refs.length) {
      box.append(el('div', { class: 'code-list', 'data-component': 'code_blocks' },
        el('div', { class: 'title', text: tx('ans.code') }),
        el('div', { class: 'chips' }, [...md.code_refs].sort((a, b) => a.index - b.index).map((c) => codeButtons(c)))));
    }
    // 6. recommended_questions
    if (md && md.recommended_questions && md.recommended_questions.length) {
      box.append(el('div', { class: 'chips questions', 'data-component': 'recommended_questions', role: 'group', 'aria-label': tx('ans.questions') },
        md.recommended_questions.map((q) => el('button', { type: 'button', text: q, onclick: () => fill(q) }))));
    }
    // 7. download_links
    if (md && md.download_links && md.download_links.length) {
      const buttons = md.download_links.map((id) => el('button', { type: 'button', 'data-file-id': id, text: '⬇ ' + id, onclick: () => download(base() + '/files/' + encodeURIComponent(id)) }));
      box.append(el('div', { class: 'chips', 'data-component': 'download_links', role: 'group', 'aria-label': tx('ans.downloads') }, buttons));
      // Each button takes its file's name; an image is also shown in the report.
      const rep = box.querySelector('[data-component="final_report"]');
      filesOf().then((known) => md.download_links.forEach((id, i) => {
        const f = known.get(id);
        if (!f) return;
        buttons[i].textContent = '⬇ ' + f.name;
        if (IMAGE.test(f.media_type) && rep && ![...rep.querySelectorAll('figure.output-image')].some((x) => x.dataset.fileId === id)) rep.append(inlineImage(id, f.name));
      }));
    }
    // Export: the answer as a file to send — one self-contained HTML file, or a zip with the
    // files it names beside it (the Markdown always comes so, for its images).
    if (final && final.api.response) {
      const path = (f) => base() + '/report/' + final.seq + '?format=' + f + '&lang=' + encodeURIComponent(lang);
      const button = (text, format) => el('button', { type: 'button', text, 'data-format': format, onclick: () => download(path(format)) });
      box.append(el('div', { class: 'chips export', 'data-component': 'export_report', role: 'group', 'aria-label': tx('export.label') },
        button(tx('export.html'), 'html'),
        button(tx('export.md'), 'md'),
        button(tx('export.zip'), 'zip'),
        el('button', { type: 'button', text: tx('export.print'), onclick: () => printAnswer(box) })));
    }
    if (assistant.some((e) => e.usage)) {
      const t = tally(assistant);
      box.append(el('div', { class: 'usage', 'data-component': 'cost', 'data-cost': t.cost === null ? '' : String(t.cost), text: costLine(t) }));
    }
    return box;
  }
  // Print one answer: the page's print stylesheet shows only the turn marked for printing.
  function printAnswer(box) {
    const turn = box.closest('.turn') || box;
    turn.classList.add('printing');
    document.body.classList.add('print-one');
    const done = () => { turn.classList.remove('printing'); document.body.classList.remove('print-one'); window.removeEventListener('afterprint', done); };
    window.addEventListener('afterprint', done);
    window.print();
  }
  // "Tokens: 12,345 in · 678 out · 9,000 cached · 3 model calls · $0.0123": the same figures
  // for an answer (its calls) and for the conversation. Tokens written to the provider's cache
  // (Anthropic bills them apart) are shown when there are any.
  const usdIn = (usd, digits) => new Intl.NumberFormat(lang, { style: 'currency', currency: 'USD', minimumFractionDigits: digits, maximumFractionDigits: digits }).format(usd);
  const money = (usd) => usdIn(usd, usd >= 0.1 ? 2 : 4);
  const dollars = (v) => usdIn(Number(v || 0), 2);
  function costLine(s) {
    let line = tx('cost.tokens', { input: fmt(s.input), output: fmt(s.output), cached: fmt(s.cached) });
    if (s.written) line += tx('cost.written', { n: fmt(s.written) });
    line += tn('cost.calls', s.calls);
    if (s.cost !== null) line += ' · ' + money(s.cost) + (s.unpriced ? tx('cost.unpriced', { n: fmt(s.unpriced) }) : '');
    return line;
  }
  // What entries add up to, counted as the metrics report (`inspect`) counts: a model call is
  // an assistant entry without a model failure; tokens and money come from each call's usage.
  function tally(list) {
    const t = { input: 0, output: 0, cached: 0, written: 0, calls: 0, cost: null, unpriced: 0 };
    for (const e of list) {
      if (e.role !== 'assistant') continue;
      if (!e.llm_error) t.calls += 1;
      const u = e.usage; if (!u) continue;
      t.input += u.input_tokens || 0; t.output += u.output_tokens || 0; t.cached += u.cache_read_tokens || 0; t.written += u.cache_write_tokens || 0;
      if (e.cost === null) t.unpriced += 1; else t.cost = (t.cost || 0) + e.cost;
    }
    return t;
  }
  // The conversation's totals in the sidebar: the calls of its history; those a rewind took
  // back were paid for too, and are named apart.
  function showCost() {
    const box = $('#conv-cost'); const t = tally(S.entries); const back = tally(S.rewound);
    box.hidden = !S.conv || !(t.calls || back.calls);
    box.dataset.cost = t.cost === null ? '' : String(t.cost);
    box.textContent = tx('cost.conversation', { line: costLine(t) }) + (back.calls ? tn('cost.rewound', back.calls) + (back.cost !== null ? ' (' + money(back.cost) + ')' : '') : '');
  }
  function codeButtons(c) {
    return el('span', { class: 'chip' }, c.language + ' · ' + (c.description || c.code_id) + ' ',
      ...codeActions(c));
  }
  const codeActions = (c) => [
    el('button', { type: 'button', text: tx('code.view'), 'aria-label': tx('code.view_of', { id: c.code_id }), onclick: () => viewCode(c) }),
    el('button', { type: 'button', text: tx('code.download'), 'aria-label': tx('code.download_of', { id: c.code_id }), onclick: () => download(base() + '/code/' + encodeURIComponent(c.code_id) + '/download') })];
  async function viewCode(c) {
    const d = $('#code-dialog');
    $('#code-title').textContent = c.language + ' · ' + (c.description || c.code_id);
    const body = $('#code-body'); body.textContent = tx('loading');
    d.showModal();
    try { const r = await api(base() + '/code/' + encodeURIComponent(c.code_id)); body.replaceChildren(el('code', {}, highlight(r.code, c.language))); } catch (e) { body.textContent = errText(e); }
  }
  function report(final, assistant, live, structuredLive, round) {
    const box = el('div', { class: 'report', 'data-component': 'final_report' });
    if (final) {
      const md = final.api.metadata;
      if (md.content_type === 'html') box.append(reportFrame(final.api.response));
      else if (final.html) { box.innerHTML = final.html; placeholders(box, md); } // sanitised by the server
      else box.textContent = final.api.response;
      return box;
    }
    const lastA = assistant[assistant.length - 1];
    if (live) {
      box.classList.add('streaming');
      if (!structuredLive && live.text) box.textContent = live.text;
      else box.textContent = tx('ans.working_round', { round });
      return box;
    }
    if (lastA && lastA.llm_error) {
      const e = lastA.llm_error;
      box.append(el('div', { class: 'error', text: e.kind === 'cancelled' ? tx('ans.stopped') : tx('ans.model_failed', { error: e.message }) }));
    } else if (lastA && !lastA.api && !(lastA.tool_calls || []).length) {
      box.textContent = textOf(lastA);
    } else {
      box.textContent = S.running ? tx('ans.working') : tx('ans.none');
    }
    return box;
  }
  // {{CODE:N}} → the code block at its place; {{FILE:N}} → the file reference.
  function placeholders(root, md) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const hits = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode()) if (/\{\{(CODE|FILE):\d+\}\}/.test(n.nodeValue)) hits.push(n);
    for (const n of hits) {
      const frag = document.createDocumentFragment();
      const parts = n.nodeValue.split(/(\{\{(?:CODE|FILE):\d+\}\})/);
      for (const p of parts) {
        const m = /^\{\{(CODE|FILE):(\d+)\}\}$/.exec(p);
        if (!m) { frag.append(p); continue; }
        const i = Number(m[2]);
        if (m[1] === 'CODE') {
          const c = (md.code_refs || []).find((x) => x.index === i);
          frag.append(c ? codeBlock(c) : p);
        } else {
          const f = (md.file_refs || []).find((x) => x.index === i);
          if (f && f.size_bytes && /^(png|jpe?g|gif|webp)$/.test(f.file_type)) { frag.append(inlineImage(f.file_id, f.filename || f.file_id)); continue; }
          frag.append(f ? el('button', { type: 'button', class: 'file-ref', 'data-file-ref': f.file_id,
            text: (f.filename || f.file_id) + (f.size_bytes ? ' (' + f.file_type + ', ' + tn('bytes', f.size_bytes) + ')' : ''),
            onclick: () => download(base() + '/files/' + encodeURIComponent(f.file_id)) }) : p);
        }
      }
      // A placeholder alone in its paragraph: the block replaces the paragraph.
      const parent = n.parentNode;
      if (parent.nodeName === 'P' && parent.childNodes.length === 1 && parts.filter((x) => x.trim()).length === 1 && frag.firstElementChild && frag.firstElementChild.tagName === 'FIGURE') parent.replaceWith(frag);
      else n.replaceWith(frag);
    }
  }
  const codeCache = new Map();
  function codeBlock(c) {
    const pre = el('pre', { class: 'code-view', tabindex: '0' }, el('code', { text: tx('code.loading') }));
    const fig = el('figure', { class: 'code-block', 'data-code-id': c.code_id },
      el('figcaption', {}, el('span', { class: 'lang', text: c.language }), el('span', { class: 'desc', text: c.description }),
        ...codeActions(c)),
      pre);
    const key = S.conv + '/' + c.code_id;
    if (!codeCache.has(key)) codeCache.set(key, api(base() + '/code/' + encodeURIComponent(c.code_id)).then((r) => r.code));
    codeCache.get(key).then((code) => pre.firstChild.replaceChildren(highlight(code, c.language)))
      .catch((e) => { pre.firstChild.textContent = tx('code.failed', { error: errText(e) }); });
    return fig;
  }
  // A small highlighter for Python and SQL (and a rough one for the rest): comments, strings
  // (Python's triple-quoted ones and SQL's over several lines), numbers and keywords. It builds
  // text nodes and spans, one numbered line each; the code is never parsed as HTML.
  const words = (w) => new Set(w.split(' '));
  const PY = { com: /#[^\n]*/, str: /[rRbBuUfF]{0,2}(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)/,
    kw: words('False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case print') };
  const SQL = { com: /--[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/, str: /'(?:[^']|'')*'?|"[^"\n]*"?/, ci: true,
    kw: words('select from where group by order having join left right inner outer full cross on as and or not in is null like between case when then else end limit offset distinct union all insert into values update set delete create table view with over partition asc desc exists cast count sum avg min max round') };
  const OTHER = { com: /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)|#[^\n]*/, str: /"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?/,
    kw: words('function const let var new async await of null undefined fn pub use struct impl match mut return if else for while class import from true false def') };
  function highlight(code, lang) {
    const g = /^(py|python3?)$/i.test(lang) ? PY : /sql/i.test(lang) ? SQL : OTHER;
    const re = new RegExp('(' + g.com.source + ')|(' + g.str.source + ')|(\\b\\d+(?:\\.\\d+)?(?:[eE][+-]?\\d+)?\\b)|([A-Za-z_]\\w*)', 'g');
    const frag = document.createDocumentFragment(); let n = 0; let line;
    const next = () => { line = el('span', { class: 'l', 'data-n': String(++n) }); frag.append(line); };
    const put = (text, cls) => text.split('\n').forEach((part, i) => { if (i) next(); if (part) line.append(cls ? el('span', { class: cls, text: part }) : part); });
    next();
    code = String(code).replace(/\n$/, ''); let at = 0; let m;
    while ((m = re.exec(code)) && m[0]) {
      put(code.slice(at, m.index));
      put(m[0], m[1] ? 'tk-com' : m[2] ? 'tk-str' : m[3] ? 'tk-num' : g.kw.has(g.ci ? m[4].toLowerCase() : m[4]) ? 'tk-kw' : null);
      at = re.lastIndex;
    }
    put(code.slice(at));
    return frag;
  }
  const codeView = (code, language) => el('pre', { class: 'code-view', tabindex: '0', 'data-lang': language || null }, el('code', {}, highlight(code, language)));
  // An HTML report: parsed inertly, external scripts dropped, inline scripts given the
  // page's nonce, a stricter CSP (no network) put first, then shown in a frame sandboxed to
  // an opaque origin (allow-scripts only): it cannot read the page, its storage or its token.
  function reportFrame(html) {
    const doc = new DOMParser().parseFromString(html, 'text/html');
    doc.querySelectorAll('script[src], base, meta[http-equiv], link, object, embed').forEach((n) => n.remove());
    doc.querySelectorAll('script').forEach((s) => s.setAttribute('nonce', nonce));
    inlineHandlers(doc);
    const echarts = location.origin + '/assets/echarts.min.js';
    const csp = doc.createElement('meta');
    csp.setAttribute('http-equiv', 'Content-Security-Policy');
    csp.setAttribute('content', "default-src 'none'; script-src 'nonce-" + nonce + "'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'");
    const boot = doc.createElement('script'); boot.setAttribute('nonce', nonce);
    boot.textContent = "addEventListener('load',function(){setTimeout(function(){parent.postMessage({baReportHeight:document.documentElement.scrollHeight},'*')},50)})";
    const add = [csp, boot];
    if (S.echarts) { const s = doc.createElement('script'); s.setAttribute('src', echarts); s.setAttribute('nonce', nonce); add.push(s); }
    doc.head.prepend(...add);
    const wrap = el('div', { class: 'html-report' });
    if (!S.echarts && /echarts/i.test(html)) {
      wrap.append(el('p', { class: 'error', text: tx('report.no_echarts') }));
    }
    const frame = el('iframe', { sandbox: 'allow-scripts', title: tx('report.frame'), referrerpolicy: 'no-referrer' });
    frame.srcdoc = '<!doctype html>' + doc.documentElement.outerHTML;
    wrap.append(frame);
    return wrap;
  }
  // Inline handlers (onclick="…") are refused by the policy the frame inherits from the page
  // (a nonce policy runs no attribute code without 'unsafe-hashes', which would weaken the page
  // itself). Each becomes a listener added by a script carrying the nonce: the same code with
  // the same rights as the report's own scripts — the sandbox's, not the page's.
  const WINDOW_EVENTS = /^(load|unload|beforeunload|resize|scroll|message|hashchange|pageshow|pagehide|error)$/;
  function inlineHandlers(doc) {
    let n = 0;
    for (const node of doc.querySelectorAll('*')) {
      for (const a of [...node.attributes]) {
        if (!/^on[a-z]+$/i.test(a.name)) continue;
        node.removeAttribute(a.name);
        const type = a.name.slice(2).toLowerCase();
        if (!node.dataset.baOn) node.dataset.baOn = String(n++);
        const target = node.tagName === 'BODY' && WINDOW_EVENTS.test(type) ? 'window'
          : 'document.querySelector(\'[data-ba-on="' + node.dataset.baOn + '"]\')';
        // One script a handler: a handler that does not parse breaks only itself. `</script`
        // and `<!--` are escaped so the code cannot end its script element early.
        const s = doc.createElement('script'); s.setAttribute('nonce', nonce);
        s.textContent = ('(function (n) { if (n) n.addEventListener(' + JSON.stringify(type) +
          ', function (event) { if ((function (event) {' + a.value + '\n}).call(n, event) === false) event.preventDefault(); }); })(' +
          target + ');').replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\!--');
        doc.body.append(s);
      }
    }
  }
  window.addEventListener('message', (ev) => {
    const h = ev.data && ev.data.baReportHeight;
    if (typeof h !== 'number') return;
    for (const f of document.querySelectorAll('.report iframe')) {
      if (f.contentWindow === ev.source) f.style.height = Math.min(Math.max(h + 20, 200), 3000) + 'px';
    }
  });

  // ---- context meter
  function setMeter(u) {
    const m = $('#meter');
    // Before anything was sent there is no window to measure: it says so, not "0 / 0".
    const known = Boolean(u && u.total);
    const used = known ? u.used : 0; const total = known ? u.total : 0; const pct = known ? u.percent : 0;
    m.dataset.status = known ? u.status : 'normal';
    m.querySelector('.fill').style.width = Math.min(100, pct || 0) + '%';
    const status = known ? meterStatus(u.status) : '';
    $('#meter-text').textContent = known ? tx('meter.text', { used: fmt(used), total: fmt(total), status }) : tx('meter.empty');
    // The accessible name starts with the words shown, so a person who says what they see
    // can name the button.
    m.setAttribute('aria-label', (known ? tx('meter.label', { used: fmt(used), total: fmt(total), percent: Math.round(pct || 0), status })
      : tx('meter.empty')) + tx('meter.show'));
  }
  const reason = (r) => String(typeof r === 'object' ? JSON.stringify(r) : r).replace(/_/g, ' ');
  async function showContext() {
    const body = $('#context-body'); body.replaceChildren(el('p', { text: tx('loading') }));
    $('#context-dialog').showModal();
    if (!S.conv) { body.replaceChildren(el('p', { text: tx('ctx.no_conv') })); return; }
    try {
      const c = await api(base() + '/context');
      const u = c.usage; const r = c.last_call && c.last_call.record;
      const rows = [el('p', { text: tx('ctx.last_call', { used: fmt(u.used), total: fmt(u.total), percent: Math.round(u.percent), status: meterStatus(u.status), reserved: fmt(c.budget.reserved_for_response) }) })];
      if (!r) rows.push(el('p', { text: tx('ctx.no_call') }));
      else if (!r.compressed && !r.dropped) rows.push(el('p', { text: tx('ctx.whole', { n: fmt(r.system_tokens) }) }));
      else {
        rows.push(el('p', { text: tn('ctx.dropped', r.dropped, { before: fmt(r.tokens_before), after: fmt(r.tokens_after) }) }));
        rows.push(el('p', { text: tx('ctx.why', { why: (r.strategies || []).join(', ') || tx('ctx.compression') }) }));
        if ((r.skills_reinjected || []).length) rows.push(el('p', { text: tx('ctx.skills', { names: r.skills_reinjected.join(', ') }) }));
        rows.push(el('p', { text: tx('ctx.kept') }));
      }
      // Entry by entry: what the next call leaves out, and why (from /messages).
      const msgs = await api(base() + '/messages');
      // The tools: how many definitions the last call sent, how many waited for the tool
      // search, and what the search found (offered from then on).
      if (r && r.tools_sent) {
        const found = [];
        msgs.entries.forEach((m) => (m.entry.tools_found || []).forEach((n) => { if (!found.includes(n)) found.push(n); }));
        rows.push(el('p', { class: 'context-tools', text: tx('ctx.tools', { n: fmt(r.tools_sent) }) +
          (r.tools_deferred ? tx('ctx.deferred', { n: fmt(r.tools_deferred) }) : '') +
          (found.length ? tx('ctx.found', { names: found.join(', ') }) : '') + tx('ctx.end') }));
      }
      const out = msgs.entries.filter((m) => m.in_window === false);
      if (out.length) {
        rows.push(el('p', { text: tx('ctx.left_out') }), el('ul', {}, out.slice(-50).map((m) =>
          el('li', { text: '#' + m.seq + ' ' + m.entry.role + ': ' + textOf(m.entry).slice(0, 80) + ' — ' + (m.dropped_reason ? reason(m.dropped_reason) : tx('ctx.outside')) }))));
      }
      body.replaceChildren(...rows);
    } catch (e) { body.replaceChildren(el('p', { text: errText(e) })); }
  }

  // ---- spend against the caps (`…/spend`): the conversation's next to the meter; a run that
  // stopped at a cap says which, the same after a reload as when it happened.
  async function showSpend() {
    const conv = S.conv; const box = $('#spend');
    if (!conv) { box.hidden = true; return; }
    let r; try { r = await api(base() + '/spend'); } catch (e) { return; }
    if (conv !== S.conv) return;
    const c = r.conversation; const parts = [];
    const spent = c.usd > 0 || !c.tokens ? dollars(c.usd) : tx('spend.tokens', { n: fmt(c.tokens) });
    if (r.conversation_usd_cap != null) parts.push(tx('spend.of', { spent: dollars(c.usd), cap: dollars(r.conversation_usd_cap) }));
    else if (r.conversation_tokens_cap != null) parts.push(tx('spend.tokens_of', { spent: fmt(c.tokens), cap: fmt(r.conversation_tokens_cap) }));
    else parts.push(spent);
    if (r.owner_month && r.month_usd_cap != null) parts.push(tx('spend.month_of', { owner: r.owner, spent: dollars(r.owner_month.usd), cap: dollars(r.month_usd_cap) }));
    else if (r.owner_month && r.month_tokens_cap != null) parts.push(tx('spend.month_tokens_of', { owner: r.owner, spent: fmt(r.owner_month.tokens), cap: fmt(r.month_tokens_cap) }));
    box.textContent = tx('spend.spent', { parts: parts.join(' · ') }) + (r.reached ? tx('spend.reached') : '');
    box.dataset.reached = String(Boolean(r.reached));
    box.title = r.reached || tx('spend.title');
    box.hidden = false;
    if (r.reached && S.meta && S.meta.status === 'budget_reached' && !S.running && !S.lastError) {
      notice(r.reached + tx('run.continue_hint'), 'error');
    }
  }

  // ---- composer
  function lastEntry() { return S.entries[S.entries.length - 1]; }
  function updateControls() {
    const send = $('#send');
    const running = Boolean(S.running);
    document.body.classList.toggle('running', running);
    send.textContent = running ? tx('send.stop') : tx('send.send');
    send.classList.toggle('stop', running);
    send.setAttribute('aria-label', running ? tx('send.stop_label') : tx('send.send_label'));
    const st = S.meta ? S.meta.status : 'idle';
    const last = lastEntry();
    const cut = last && last.role === 'assistant' && last.llm_error;
    $('#continue').hidden = running || !((S.lastError && S.lastError.resumable) || S.cancelled || st === 'failed' || st === 'budget_reached' || cut);
    $('#resume').hidden = running || st !== 'interrupted' || Boolean(cut);
  }
  // ---- approvals: the calls that wait for the person, each with its arguments and the
  // decisions (Approve, Approve for this conversation, Reject with a reason, Edit the
  // arguments); a decision is a run of its own (202), followed on the stream.
  async function loadApprovals() {
    const conv = S.conv;
    try {
      const r = await api(base() + '/approvals');
      if (conv !== S.conv) return;
      S.approvals = r.pending || [];
    } catch (e) { S.approvals = []; }
    renderApprovals(); rerenderLast();
  }
  // A call's arguments as a person reads them: code as code (highlighted, numbered lines), an
  // edit (old and new text) as the change it makes, the rest as name: value.
  const CODE_ARG = /^(code|source|script|sql|query|statement|python|program)$/i;
  const EDIT_PAIRS = [['old_string', 'new_string'], ['old_text', 'new_text'], ['oldText', 'newText'], ['old', 'new'], ['search', 'replace'], ['before', 'after']];
  const pairsOf = (o) => (o && typeof o === 'object' ? EDIT_PAIRS.filter(([a, b]) => typeof o[a] === 'string' && typeof o[b] === 'string') : []);
  const isCode = (k, v) => typeof v === 'string' && (CODE_ARG.test(k) || v.includes('\n'));
  const langOf = (tool, k, v) => (/sql|query|statement/i.test(k) || /^\s*(select|with|insert|update|delete|create)\b/i.test(v) ? 'sql'
    : /python|code|script|source|program/i.test(k + ' ' + tool) ? 'python' : '');
  function argsView(tool, args) {
    const box = el('div', { class: 'args' });
    const paired = new Set(pairsOf(args).flat());
    const rows = el('dl', { class: 'arg-list' });
    for (const [k, v] of Object.entries(args && typeof args === 'object' ? args : { arguments: args })) {
      if (paired.has(k)) continue;
      if (isCode(k, v)) {
        const lang = langOf(tool, k, v);
        box.append(el('div', { class: 'arg-code', 'data-arg': k }, el('div', { class: 'arg-name', text: k + (lang ? ' · ' + lang : '') }), codeView(v, lang)));
      } else rows.append(el('dt', { text: k }), el('dd', { text: typeof v === 'string' ? v : JSON.stringify(v, null, 1) }));
    }
    if (rows.childNodes.length) box.prepend(rows);
    const edits = [args, ...(Array.isArray(args && args.edits) ? args.edits : [])];
    for (const e of edits) for (const [a, b] of pairsOf(e)) box.append(diffView(e[a], e[b], tx('args.change')));
    return box;
  }
  // The lines of `a` and `b` as a line diff, [op, line] with op ' ', '-' or '+' (a longest
  // common subsequence; past four million cells, all of `a` removed and all of `b` added).
  function diffLines(a, b) {
    const x = a.split('\n'); const y = b.split('\n'); const n = x.length; const m = y.length;
    if (n * m > 4e6) return [...x.map((t) => ['-', t]), ...y.map((t) => ['+', t])];
    const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i -= 1) for (let j = m - 1; j >= 0; j -= 1) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    const out = []; let i = 0; let j = 0;
    while (i < n && j < m) {
      if (x[i] === y[j]) { out.push([' ', x[i]]); i += 1; j += 1; } else if (L[i + 1][j] >= L[i][j + 1]) out.push(['-', x[i++]]); else out.push(['+', y[j++]]);
    }
    while (i < n) out.push(['-', x[i++]]);
    while (j < m) out.push(['+', y[j++]]);
    return out;
  }
  // A diff to read: unchanged stretches keep three lines of context either side.
  function diffView(a, b, title) {
    const lines = diffLines(a, b); const n = lines.length; const out = [];
    for (let i = 0; i < n;) {
      if (lines[i][0] !== ' ') { out.push(lines[i]); i += 1; continue; }
      let j = i; while (j < n && lines[j][0] === ' ') j += 1;
      const head = i ? 3 : 0; const tail = j < n ? 3 : 0;
      if (j - i > head + tail + 1) out.push(...lines.slice(i, i + head), ['⋯', tn('diff.unchanged', j - i - head - tail)], ...lines.slice(j - tail, j));
      else out.push(...lines.slice(i, j));
      i = j;
    }
    return el('div', { class: 'diff', 'data-component': 'diff', role: 'group', 'aria-label': title },
      el('div', { class: 'arg-name', text: lines.some(([op]) => op !== ' ') ? title : tx('diff.none', { title }) }),
      el('pre', {}, out.map(([op, t]) => el('span', { class: 'd' + (op === '-' ? ' del' : op === '+' ? ' add' : op === '⋯' ? ' skip' : ''), 'data-op': op, text: op + ' ' + t }))));
  }
  // The editor of a call's arguments: each code or edit text in a box of its own (real lines,
  // not JSON escapes), the rest as JSON; below, what the person changed, as they type.
  function argsEditor(c) {
    const args = c.arguments && typeof c.arguments === 'object' && !Array.isArray(c.arguments) ? c.arguments : null;
    const texts = new Map(); const rest = {}; const paired = new Set(pairsOf(args).flat());
    if (args) for (const [k, v] of Object.entries(args)) { if (isCode(k, v) || paired.has(k)) texts.set(k, v); else rest[k] = v; }
    const boxes = [...texts].map(([k, v]) => {
      const box = el('textarea', { class: 'edit-code', 'data-arg': k, spellcheck: 'false', rows: Math.min(12, v.split('\n').length + 1), 'aria-label': tx('args.arg_of', { arg: k, tool: c.tool }) });
      box.value = v; return [k, box];
    });
    const json = el('textarea', { class: 'edit-args', rows: 4, spellcheck: 'false', 'aria-label': tx('args.json_of', { tool: c.tool }) });
    const was = JSON.stringify(args ? rest : c.arguments, null, 2);
    json.value = was;
    const hasJson = !args || Object.keys(rest).length > 0;
    const changes = el('div', { class: 'changes', 'aria-live': 'polite' });
    // The edited arguments, in their first order; throws when the JSON part does not parse.
    const value = () => {
      const more = hasJson ? JSON.parse(json.value) : {};
      if (!args) return more;
      const out = {};
      for (const k of Object.keys(args)) { const b = boxes.find(([x]) => x === k); if (b) out[k] = b[1].value; else if (k in more) out[k] = more[k]; }
      return Object.assign(out, more);
    };
    const show = () => {
      const views = boxes.filter(([k, b]) => b.value !== args[k]).map(([k, b]) => diffView(args[k], b.value, tx('args.your_change', { arg: k })));
      let now = json.value; try { now = JSON.stringify(JSON.parse(now), null, 2); } catch (e) { /* compared as typed */ }
      if (hasJson && now !== was) views.push(diffView(was, now, tx('args.your_change_all')));
      changes.replaceChildren(...views);
    };
    for (const b of [...boxes.map(([, b]) => b), json]) b.addEventListener('input', show);
    const form = el('div', { class: 'arg-editor', hidden: true },
      boxes.map(([k, b]) => el('label', { class: 'arg-name' }, k, b)), hasJson ? json : null, changes);
    return { form, value, first: boxes.length ? boxes[0][1] : json };
  }
  function renderApprovals() {
    const box = $('#approvals'); if (!box) return;
    const calls = S.approvals || [];
    box.hidden = !calls.length;
    box.replaceChildren(...(calls.length ? [el('h3', { text: tn('appr.waiting', calls.length) })] : []),
      ...calls.map((c) => {
        const reasonId = 'reason-' + c.call_id;
        const editor = argsEditor(c);
        const reason = el('input', { id: reasonId, class: 'reason', type: 'text', placeholder: tx('appr.why'), 'aria-label': tx('appr.reason_for', { tool: c.tool }) });
        const editBtn = el('button', { type: 'button', 'data-act': 'edit', text: tx('appr.edit') });
        const view = argsView(c.tool, c.arguments);
        const act = (decision) => async () => {
          const body = { decision };
          if (reason.value.trim()) body.reason = reason.value.trim();
          if (decision === 'edit') {
            try { body.arguments = editor.value(); } catch (e) { notice(tx('appr.not_json', { error: e.message }), 'error'); editor.first.focus(); return; }
          }
          try {
            const r = await api(base() + '/approvals/' + encodeURIComponent(c.call_id), { method: 'POST', body });
            S.approvals = S.approvals.filter((x) => x.call_id !== c.call_id); renderApprovals();
            if (!(S.ended && S.ended.has(r.run_id))) S.running = r.run_id;
            notice(''); updateControls();
          } catch (e) { notice(errText(e), 'error'); if (e.status === 409) loadApprovals(); }
        };
        editBtn.addEventListener('click', () => {
          // The editor takes the place of what it edits; the change shows below it as it is typed.
          if (editor.form.hidden) { view.hidden = true; editor.form.hidden = false; editBtn.textContent = tx('appr.run_edited'); editor.first.focus(); } else act('edit')();
        });
        return el('div', { class: 'approval', 'data-component': 'approval_request', 'data-call-id': c.call_id },
          el('p', {}, el('strong', { text: c.tool }), tx('appr.wants')),
          view, editor.form,
          reason,
          el('div', { class: 'actions' },
            el('button', { type: 'button', class: 'primary', 'data-act': 'approve', text: tx('appr.approve'), onclick: act('approve') }),
            el('button', { type: 'button', 'data-act': 'approve_for_conversation', text: tx('appr.approve_conv'), onclick: act('approve_for_conversation') }),
            el('button', { type: 'button', 'data-act': 'reject', text: tx('appr.reject'), onclick: act('reject') }),
            editBtn));
      }));
  }
  // A conversation is created by the first message or upload; the draft moves with it.
  async function ensureConv() {
    if (S.conv) return;
    const mode = (document.querySelector('#mode input:checked') || {}).value || 'agent';
    const c = await api('/api/v1/conversations', { method: 'POST', body: { mode } });
    saveDraft();
    sessionStorage.setItem('ba-draft:' + c.id, sessionStorage.getItem(draftKey()) || '');
    sessionStorage.removeItem(draftKey());
    await openConv(c.id); loadList();
  }
  async function start(input) {
    await ensureConv();
    const body = { request_id: uuid(), input };
    for (let attempt = 0; ; attempt += 1) {
      try {
        const r = await api(base() + '/runs', { method: 'POST', body });
        if (!S.ended.has(r.run_id)) { S.running = r.run_id; S.lastError = null; S.cancelled = false; notice(''); }
        updateControls();
        return true;
      } catch (e) {
        if (e.status === 409) { notice(tx('run.busy')); const a = e.data && e.data.error && e.data.error.active_run_id; if (a && !S.ended.has(a)) S.running = a; updateControls(); return false; }
        if (e.status || attempt >= 2) { notice(errText(e), 'error'); return false; }
        await new Promise((res) => setTimeout(res, 500 * (attempt + 1))); // same request_id: never a second run
      }
    }
  }
  async function submit(ev) {
    if (ev) ev.preventDefault();
    if (S.running) {
      try { await api(base() + '/runs/' + encodeURIComponent(S.running) + '/cancel', { method: 'POST' }); } catch (e) { notice(errText(e), 'error'); }
      return;
    }
    const text = $('#input').value.trim();
    if (!text) { $('#input').focus(); return; }
    const upload_ids = S.attachments.map((a) => a.id);
    S.anchor = null;
    if (await start({ type: 'message', text, upload_ids })) { $('#input').value = ''; S.attachments = []; showAttachments(); }
  }
  async function upload(files) {
    await ensureConv();
    for (const f of files) {
      const form = new FormData(); form.append('file', f, f.name);
      try { const meta = await api(base() + '/uploads', { method: 'POST', form }); S.attachments.push(meta); }
      catch (e) { notice(tx('upload.failed', { name: f.name, error: errText(e) }), 'error'); }
    }
    showAttachments();
  }
  // The draft and its attachments survive a reload (per conversation, this tab only).
  const draftKey = () => 'ba-draft:' + (S.conv || 'new');
  function saveDraft() {
    sessionStorage.setItem(draftKey(), JSON.stringify({ text: $('#input').value, attachments: S.attachments }));
  }
  function restoreDraft() {
    let d = null; try { d = JSON.parse(sessionStorage.getItem(draftKey()) || 'null'); } catch (e) { d = null; }
    $('#input').value = (d && d.text) || '';
    S.attachments = (d && Array.isArray(d.attachments)) ? d.attachments : [];
    showAttachments();
  }
  function showAttachments() {
    $('#attachments').replaceChildren(...S.attachments.map((a) => el('span', { class: 'chip', 'data-upload-id': a.id },
      a.name + ' (' + a.id + ') ',
      el('button', { type: 'button', text: '×', 'aria-label': tx('files.remove', { name: a.name }), onclick: () => { S.attachments = S.attachments.filter((x) => x !== a); showAttachments(); } }))));
    saveDraft();
  }

  function init() {
    $('#composer').addEventListener('submit', submit);
    $('#input').addEventListener('input', saveDraft);
    $('#input').addEventListener('keydown', (ev) => { if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) submit(ev); });
    $('#continue').addEventListener('click', () => start({ type: 'continue' }));
    $('#resume').addEventListener('click', () => start({ type: 'resume' }));
    $('#upload').addEventListener('click', () => $('#file').click());
    $('#file').addEventListener('change', (ev) => { upload([...ev.target.files]); ev.target.value = ''; });
    const comp = $('#composer');
    comp.addEventListener('dragover', (ev) => { ev.preventDefault(); comp.classList.add('drop'); });
    comp.addEventListener('dragleave', () => comp.classList.remove('drop'));
    comp.addEventListener('drop', (ev) => { ev.preventDefault(); comp.classList.remove('drop'); if (ev.dataTransfer.files.length) upload([...ev.dataTransfer.files]); });
    $('#new-conv').addEventListener('click', () => openConv(null));
    // Search as you type, on the server (titles, questions and answers), a quarter second after
    // the last key.
    let searchTimer = 0;
    $('#conv-search').addEventListener('input', () => { clearTimeout(searchTimer); searchTimer = setTimeout(loadList, 250); });
    $('#meter').addEventListener('click', showContext);
    // A scroll the person makes (wheel, keys, touch, the scroll bar) moves the anchor; one the
    // page makes to hold it does not.
    const tr = $('#transcript');
    const touch = () => { touched = performance.now(); };
    for (const ev of ['wheel', 'pointerdown', 'touchstart']) tr.addEventListener(ev, touch, { passive: true });
    document.addEventListener('keydown', touch);
    tr.addEventListener('scroll', () => { if (performance.now() - touched < 1500) saveAnchor(); }, { passive: true });
    document.querySelectorAll('#mode input').forEach((r) => r.addEventListener('change', async () => {
      renderWorkflowForm();
      if (!S.conv) return;
      try { S.meta = await api(base(), { method: 'PATCH', body: { mode: r.value } }); loadList(); } catch (e) { notice(errText(e), 'error'); }
    }));
    $('#signin-form').addEventListener('submit', signInSubmitted);
    $('#sign-out').addEventListener('click', signOut);
    $('#admin-open').addEventListener('click', showAdmin);
    $('#memory-open').addEventListener('click', () => showMemory());
    $('#schedules-open').addEventListener('click', schedules);
    // Another language: the page's words change in place; what the server rendered is fetched
    // again (the open conversation, the list, who is signed in).
    $('#lang').addEventListener('change', (ev) => {
      if (!CATALOGUES[ev.target.value]) return;
      lang = ev.target.value; localStorage.setItem('ba-lang', lang);
      applyStatic(); updateControls(); setMeter(null);
      if (started) { whoami(); loadList(); openConv(S.conv); }
    });
    applyStatic();
    whoami();
  }
  // Once signed in: the lists, the demo questions, the conversation in the address.
  function begin() {
    api('/api/v1/demo/questions').then((q) => { S.demo = q || []; if (!S.entries.length) renderAll(); }).catch(() => {});
    loadList(); loadWorkflows();
    // ECharts first: a report drawn before we know whether it is served would lack it.
    fetch('/page/status').then((r) => r.json()).then((s) => { S.echarts = Boolean(s.echarts); })
      .catch(() => {}).finally(() => { document.body.dataset.echarts = S.echarts ? 'yes' : 'missing'; openConv(S.conv); });
  }
  // For the browser tests: the pure parts of the page.
  window.baAgentPage = Object.freeze({ backoff, savedName, questionOf, diffLines });
  init();
})();
