// Baton run page: live updates over server-sent events, a find-as-you-type filter and copy
// buttons. The page reads the same without it; this only keeps it current.
"use strict";
(function () {
  const body = document.body;
  const STATE = /\bs-[a-z_]+/;

  function setState(el, state) {
    if (!el) return;
    const cls = el.getAttribute("class") || "";
    el.setAttribute("class", STATE.test(cls) ? cls.replace(STATE, "s-" + state) : cls + " s-" + state);
  }

  function text(row, selector, value) {
    const cell = row.querySelector(selector);
    if (cell && cell.textContent !== value) cell.textContent = value;
  }

  function applyNodes(nodes) {
    const moved = [];
    for (const [id, values] of Object.entries(nodes)) {
      const [state, seconds, verdict, reason] = values;
      const box = document.getElementById("b-" + id);
      if (box) {
        setState(box, state);
        const title = box.querySelector("title");
        if (title) title.textContent = id + " · " + state;
      }
      const row = document.getElementById("r-" + id);
      if (!row) continue;
      if (row.dataset.state !== state) moved.push(id);
      setState(row, state);
      row.dataset.state = state;
      text(row, ".st", state);
      text(row, ".secs", seconds ? seconds.toFixed(1) + "s" : "");
      text(row, ".verdict", verdict);
      const why = row.querySelector(".reason");
      if (why) why.textContent = reason;
      const group = document.getElementById("g-" + state);
      if (group && row.parentNode !== group) group.appendChild(row);
    }
    if (moved.length) refreshRows(moved);
  }

  // A row whose state changed gets the server's whole row (its start time, its output toggle):
  // one fetch at a time, the rows changed meanwhile in the next.
  let rowsWanted = new Set();
  let rowsBusy = false;
  const rowTries = new Map();
  async function refreshRows(ids) {
    for (const id of ids) rowsWanted.add(id);
    if (rowsBusy) return;
    rowsBusy = true;
    try {
      while (rowsWanted.size) {
        const wanted = rowsWanted;
        rowsWanted = new Set();
        const response = await fetch(location.href, { cache: "no-store", credentials: "same-origin" });
        if (!response.ok) return;
        const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
        for (const id of wanted) {
          const row = document.getElementById("r-" + id);
          const next = fresh.getElementById("r-" + id);
          if (!row || !next) continue;
          if (next.dataset.state !== row.dataset.state) {  // the page was read before the change
            const tried = (rowTries.get(id) || 0) + 1;
            rowTries.set(id, tried);
            if (tried < 8) rowsWanted.add(id);
            continue;
          }
          rowTries.delete(id);
          const copy = document.importNode(next, true);
          copy.hidden = row.hidden;
          row.replaceWith(copy);
        }
        if (rowsWanted.size) await new Promise((done) => setTimeout(done, 250));
      }
    } finally {
      rowsBusy = false;
    }
  }

  // The tab's title and the header's counts follow the run (the rest of the header on reload).
  function applyHeader(update) {
    if (update.status) {
      document.title = document.title.replace(/ · [a-z_]+ · Baton$/, " · " + update.status + " · Baton");
    }
    const line = document.querySelector("#head .counts");
    const total = line && line.querySelector(".muted");
    if (!line || !total || !update.counts) return;
    while (line.firstChild && line.firstChild !== total) line.firstChild.remove();
    for (const state of Object.keys(update.counts).sort()) {
      if (!update.counts[state]) continue;
      const link = document.createElement("a");
      link.className = "state s-" + state;
      link.href = "#g-" + state + "-box";
      const n = document.createElement("span");
      n.id = "c-" + state;
      n.textContent = String(update.counts[state]);
      link.append(state + " ", n);
      line.insertBefore(link, total);
      line.insertBefore(document.createTextNode(" "), total);
    }
  }

  function applyCounts(counts) {
    for (const box of document.querySelectorAll("details.group")) {
      const state = box.id.replace(/^g-/, "").replace(/-box$/, "");
      const n = counts[state] || 0;
      const label = box.querySelector("summary .n");
      if (label) label.textContent = String(n);
      if (!document.getElementById("q") || !document.getElementById("q").value) box.hidden = n === 0;
    }
  }

  async function refreshPanels() {
    const response = await fetch(location.href, { cache: "no-store", credentials: "same-origin" });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const panel of document.querySelectorAll("[data-panel]")) {
      const next = fresh.getElementById(panel.id);
      if (next && !panel.contains(document.activeElement)) panel.replaceWith(document.importNode(next, true));
    }
    addCopyButtons();
  }

  function banner(message) {
    const note = document.createElement("div");
    note.className = "banner";
    note.textContent = message;
    body.appendChild(note);
  }

  function live() {
    const url = body.dataset.events;
    if (!url || !window.EventSource) return;
    const source = new EventSource(url);
    source.addEventListener("update", (event) => {
      const update = JSON.parse(event.data);
      applyNodes(update.nodes || {});
      applyCounts(update.counts || {});
      applyHeader(update);
      const status = document.getElementById("run-status");
      if (status && update.status) { status.textContent = update.status; setState(status, update.status); }
      body.dataset.status = update.status;
      if (update.reload) refreshPanels();
    });
    source.addEventListener("expired", () => {
      source.close();
      banner("This link has expired: ask Baton for a new one (Open run in chat).");
    });
  }

  function filter() {
    const input = document.getElementById("q");
    if (!input) return;
    input.addEventListener("input", () => {
      const q = input.value.trim().toLowerCase();
      for (const row of document.querySelectorAll("tr.node")) {  // as the server's search: not by needs
        const cells = Array.from(row.querySelectorAll("td:not(.needs)"), (td) => td.textContent).join(" ");
        row.hidden = q !== "" && !cells.toLowerCase().includes(q);
      }
      for (const box of document.querySelectorAll("svg.dag .box")) {
        const id = box.id.replace(/^b-/, "").toLowerCase();
        const row = document.getElementById("r-" + box.id.replace(/^b-/, ""));
        const hit = q === "" || id.includes(q) || (row && !row.hidden);
        box.classList.toggle("dim", !hit);
      }
    });
  }

  function addCopyButtons() {
    if (!navigator.clipboard) return;
    for (const code of document.querySelectorAll("code.copy")) {
      if (code.nextElementSibling && code.nextElementSibling.classList.contains("copy-button")) continue;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "copy-button";
      button.textContent = "Copy";
      button.addEventListener("click", async () => {
        await navigator.clipboard.writeText(code.textContent);
        button.textContent = "Copied";
      });
      code.after(button);
    }
  }

  // A big run's page lists its failed, waiting and running nodes; the other groups' rows and
  // the graph come from the server when opened (the same link; without JavaScript, the link
  // asks for the page with that group or the graph in it).
  async function fragment(url) {
    const response = await fetch(url, { cache: "no-store", credentials: "same-origin" });
    if (!response.ok) return null;
    return new DOMParser().parseFromString(await response.text(), "text/html");
  }

  async function loadRows(link) {
    if (link.dataset.loading) return;
    link.dataset.loading = "1";
    const fresh = await fragment(link.dataset.rows);
    const slot = link.closest("tr");
    if (!fresh || !slot) { delete link.dataset.loading; return; }
    const tbody = slot.parentNode;
    const q = (document.getElementById("q") || {}).value || "";
    for (const row of fresh.querySelectorAll("tr.node")) {
      const shown = document.getElementById(row.id);  // moved here by a live update meanwhile
      if (shown) shown.remove();
      const copy = document.importNode(row, true);
      if (q) copy.hidden = !copy.textContent.toLowerCase().includes(q.trim().toLowerCase());
      tbody.appendChild(copy);
    }
    slot.remove();
  }

  async function loadGraph(link) {
    if (link.dataset.loading) return;
    link.dataset.loading = "1";
    const fresh = await fragment(link.dataset.graph);
    const slot = document.getElementById("graph-deferred");
    if (!fresh || !slot) { delete link.dataset.loading; return; }
    const nodes = Array.from(fresh.body.childNodes, (n) => document.importNode(n, true));
    slot.replaceWith(...nodes);
  }

  function deferred() {
    document.addEventListener("click", (event) => {
      const link = event.target.closest && event.target.closest("a[data-rows], a[data-graph]");
      if (!link) return;
      event.preventDefault();
      if (link.dataset.rows) loadRows(link); else loadGraph(link);
    });
    for (const box of document.querySelectorAll("details.group")) {
      box.addEventListener("toggle", () => {
        const link = box.open && box.querySelector("a[data-rows]");
        if (link) loadRows(link);
      });
    }
  }

  live();
  filter();
  deferred();
  addCopyButtons();
})();
