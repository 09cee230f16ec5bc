// The console's one script: a page's live stream (server-sent events) and the composer.
// Plain JavaScript, shipped with the package: no build step, works offline. Every text from the
// server goes in as text; only the server's own rendered fragments go in as HTML.
"use strict";

(function () {
  const live = document.getElementById("live");
  const csrf = document.querySelector('meta[name="csrf"]')?.content || "";

  function say(text) { if (live) live.textContent = text; }

  function within(agent) {
    return document.querySelectorAll('[data-agent="' + CSS.escape(agent) + '"]');
  }

  // The agents page's filter: a row shows when it holds every word typed (its name, state,
  // host, last reply), as it is now; the words stay in the address, for a reload.
  const filter = document.getElementById("filter");
  const rows = document.querySelector("#agents tbody");

  function words() {
    return filter ? filter.value.toLowerCase().split(/\s+/).filter(Boolean) : [];
  }

  function sift(row, wanted) {
    const text = row.textContent.toLowerCase();
    row.hidden = !wanted.every(function (w) { return text.includes(w); });
  }

  function count() {
    const all = rows.rows.length;
    const shown = filter.value.trim() ? rows.querySelectorAll("tr:not([hidden])").length : all;
    document.getElementById("shown").textContent =
      (shown === all ? "" : shown + " of ") + all + " agents";
  }

  function siftAll() {
    const wanted = words();
    for (const row of rows.rows) sift(row, wanted);
    count();
    const address = new URL(location.href);
    if (filter.value.trim()) address.searchParams.set("q", filter.value.trim());
    else address.searchParams.delete("q");
    history.replaceState(null, "", address);
  }

  if (filter && rows) {
    filter.addEventListener("input", siftAll);
    if (filter.value) siftAll();
  }

  function onAgent(d) {
    const places = within(d.agent);
    if (!places.length && rows) rows.insertAdjacentHTML("beforeend", d.row);
    for (const place of places) {
      for (const [name, text] of Object.entries(d.fields)) {
        const field = place.querySelector('[data-field="' + name + '"]');
        if (!field) continue;
        field.textContent = text;
        if (name === "state") field.className = "state state-" + d.state;
      }
    }
    if (filter && rows) {
      for (const row of within(d.agent)) if (row.tagName === "TR") sift(row, words());
      count();
    }
  }

  function onEvent(d) {
    for (const place of within(d.agent)) {
      const at = place.querySelector('[data-field="last_event"]');
      if (at) at.textContent = d.at;
      const reply = place.querySelector('[data-field="last_reply"]');
      if (reply && d.reply) reply.textContent = d.reply;
    }
    const timeline = document.getElementById("timeline");
    if (d.html && timeline && !document.getElementById(d.id)) {
      timeline.insertAdjacentHTML("afterbegin", d.html);
    }
  }

  function onStatus(d) {
    const status = document.querySelector("#" + CSS.escape(d.id) + " .status");
    if (status) status.textContent = d.status;
  }

  function onApproval(d) {
    const shown = document.getElementById(d.id);
    const open = d.html.includes("<form");
    if (shown) {
      // Still open, it stays as it is shown: what the person ticked or typed there stays.
      if (!(open && shown.querySelector("form"))) shown.outerHTML = d.html;
      return;
    }
    const list = document.getElementById("approvals");
    if (list && open) list.insertAdjacentHTML("beforeend", d.html);
  }

  // A process agent's turn as it streams, on its own page: its words, tools and plan, as text.
  function onTurn(d) {
    const box = document.getElementById("live-turn");
    if (!box || box.dataset.turnOf !== d.agent) return;
    const part = function (name) { return box.querySelector('[data-turn="' + name + '"]'); };
    const state = part("state"), text = part("text"), tools = part("tools"), plan = part("plan");
    if (d.event === "TurnStart") {
      text.textContent = ""; tools.textContent = ""; plan.textContent = "";
    }
    for (const u of d.updates || []) {
      if (u.kind === "text") text.textContent += u.text;
      else if (u.kind === "tool") {
        let tool = tools.querySelector('[data-tool="' + CSS.escape(u.id) + '"]');
        if (!tool) {
          tool = document.createElement("li");
          tool.dataset.tool = u.id;
          for (const name of ["title", "status"]) {
            const span = document.createElement("span");
            span.className = name;
            tool.append(span, " ");
          }
          tool.querySelector(".title").textContent = "a tool";
          tools.append(tool);
        }
        if (u.title) tool.querySelector(".title").textContent = u.title;
        if (u.status) tool.querySelector(".status").textContent = u.status;
      } else if (u.kind === "plan") {
        plan.textContent = "";
        for (const entry of u.entries) {
          const li = document.createElement("li");
          li.textContent = entry;
          plan.append(li);
        }
      }
    }
    state.textContent = d.event === "TurnEnd" ? d.ended : "running…";
  }

  // A stream the browser gave up on (the gateway answered with an error, not a stream) is
  // tried again by reloading the page, less and less often, so a page left open for days comes
  // back by itself whenever the gateway does.
  let waitMs = 2000;

  function listen(url) {
    const source = new EventSource(url);
    let broken = false;
    source.onopen = function () {
      // Back after a break (a sleeping laptop, a restarted gateway): what was missed is
      // read again whole.
      if (broken) { location.reload(); return; }
      waitMs = 2000;
      say("live");
    };
    source.onerror = function () {
      broken = true;
      // While CONNECTING the browser retries by itself (every second, as the stream said).
      if (source.readyState !== EventSource.CLOSED) { say("reconnecting…"); return; }
      say("reconnecting in " + Math.round(waitMs / 1000) + " s…");
      setTimeout(function () { location.reload(); }, waitMs);
      waitMs = Math.min(waitMs * 2, 60000);
    };
    const handlers = {
      agent: onAgent, event: onEvent, status: onStatus, approval: onApproval, turn: onTurn,
    };
    for (const [kind, handle] of Object.entries(handlers)) {
      source.addEventListener(kind, function (e) { handle(JSON.parse(e.data)); });
    }
    // The gateway closing, or the page fallen behind: the stream ends and the browser connects
    // again by itself; the page is read again whole once it has, never before (a reload while
    // the gateway is down leaves the browser's own error page, which nothing brings back).
    source.addEventListener("again", function () { broken = true; say("reconnecting…"); });
  }

  async function post(form, button) {
    let answer;
    try {
      answer = await fetch(form.action, {
        method: "POST",
        headers: { "Accept": "application/json", "X-CSRF-Token": csrf },
        body: new URLSearchParams(new FormData(form, button)),
        credentials: "same-origin",
      });
    } catch (err) {
      throw new Error("the console does not answer; is the gateway running (`agentcomms up`)?");
    }
    // A refusal in words (an unknown agent, a full mailbox) is JSON; anything else (the token
    // changed, the gateway failed) is said by its status.
    const data = await answer.json().catch(function () { return {}; });
    if (!answer.ok) throw new Error(data.error || answer.status + " " + answer.statusText);
    return data;
  }

  async function follow(output, agent, eventId) {
    // queued → typed → submitted, as the mailbox says; each ask waits until it moves on.
    // Typed and asked again with no change: the agent's hooks do not report, or it has not
    // taken the prompt yet; either way the page has said all it can.
    let last = "";
    for (let asks = 0; asks < 30; asks++) {
      let data;
      try {
        const answer = await fetch("/agents/" + encodeURIComponent(agent) + "/sent/" +
          encodeURIComponent(eventId), { credentials: "same-origin" });
        data = await answer.json();
      } catch (err) {
        return; // the gateway away: the message was taken, and its timeline item moves on
      }
      // Sent again from this form since: the words beside it are about that one.
      if (output.dataset.following !== eventId) return;
      output.textContent = eventId + ": " + data.status + (data.error ? " (" + data.error + ")" : "");
      if (data.status !== "queued" && data.status !== "delivered") return;
      if (data.status === "delivered" && last === "delivered") return;
      last = data.status;
    }
  }

  // One listener for every form, those a stream adds later (an approval) included.
  document.addEventListener("submit", async function (e) {
    const form = e.target.closest("form[data-fetch]");
    if (!form) return;
    e.preventDefault();
    const output = form.querySelector("output");
    if (output) output.dataset.following = "";
    try {
      const data = await post(form, e.submitter);
      // An answer: its card as decided, by this answer or one before it.
      const card = form.closest("section.approval");
      if (card && data.html) { card.outerHTML = data.html; return; }
      // A new agent started: its own page, where its turns show.
      if (data.page) { location.href = data.page; return; }
      // An agent's button: what it did, in words.
      if (form.matches(".actions")) {
        if (output) {
          output.textContent = data.stopped ? "stopped; messages to it wait for its next start"
            : data.new_session ? "a new session starts; the old one is left as it was" : "";
        }
        return;
      }
      if (output && data.event_id) output.textContent = data.event_id + ": " + data.status;
      const message = form.querySelector("textarea");
      if (message) message.value = "";
      const agent = form.closest("main").querySelector("[data-agent]")?.dataset.agent;
      if (output && agent && data.event_id) {
        output.dataset.following = data.event_id;
        await follow(output, agent, data.event_id);
      }
    } catch (err) {
      const what = form.closest("section.approval") ? "not answered: "
        : form.matches(".new-agent") ? "not started: "
          : form.matches(".actions") ? "not done: " : "not sent: ";
      if (output) output.textContent = what + err.message;
      else alert(err.message);
    }
  });

  const stream = document.body.dataset.stream;
  if (stream) listen(stream); else say("");
})();
