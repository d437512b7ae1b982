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

  live();
  filter();
  addCopyButtons();
})();
