// Sessions: a page of them, most recent first (GET .../sessions), and one session with its
// summary, messages and extraction (GET, POST .../extract, DELETE).

import { useState } from "preact/hooks";
import { api, storePath } from "../api.js";
import { navigate, storeHref } from "../router.js";
import { MissingPage, StoreHeader } from "./stores.js";
import {
  ActorId, ConfirmDialog, duration, Empty, ErrorState, flash, html, Id, Loading, missingOf, Notice, Pager, plural, said,
  settled, StatusBadge, Text, Time, useFlash, useLoad,
} from "../ui.js";

const PAGE = 20;
// The session page asks for the newest 50 messages, or up to the API's most (MAX_RECENT).
const RECENT = 50;
const MAX_RECENT = 1000;

function offsetOf(query) {
  const value = Number(query.get("offset") || 0);
  return Number.isInteger(value) && value >= 0 ? value : 0;
}

export function SessionsPage({ instance, store, query }) {
  const offset = offsetOf(query);
  const { data, error, loading, reload } = useLoad(
    () => api("GET", storePath(instance, store, "sessions"), { query: { offset, limit: PAGE } }),
    [instance, store, offset],
  );
  const flashed = useFlash();
  const missing = missingOf(error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="sessions" title="Sessions" />
    <p class="lede">Working memory, one conversation each, most recent first.</p>
    <${Notice} notice=${flashed} />
    ${loading && !data && html`<${Loading} what="sessions" />`}
    <${ErrorState} error=${error} retry=${reload} what="the sessions" />
    ${data && data.sessions.length === 0 &&
    html`<${Empty} title=${offset ? "No more sessions." : "No sessions yet."}>
      <p>A session starts with its first messages: <code>POST …/sessions/{session}/events</code>, or
        <a href=${storeHref(instance, store, "try")}>Try it</a> here.</p>
    <//>`}
    ${data && data.sessions.length > 0 &&
    html`<table class="list">
      <caption class="visually-hidden">Sessions, most recent first</caption>
      <thead>
        <tr>
          <th scope="col">Session</th>
          <th scope="col">Actor</th>
          <th scope="col" class="num">Messages</th>
          <th scope="col">Last event</th>
          <th scope="col">Extraction</th>
        </tr>
      </thead>
      <tbody>
        ${data.sessions.map(
          (s) => html`<tr key=${s.session_id}>
            <th scope="row"><a href=${storeHref(instance, store, "sessions", s.session_id)}><${Id} value=${s.session_id} max=${60} copy=${false} /></a></th>
            <td><${ActorId} instance=${instance} store=${store} actor=${s.actor_id} max=${40} /></td>
            <td class="num">${s.message_count}</td>
            <td><${Time} value=${s.last_event_at} /></td>
            <td><${StatusBadge} status=${s.extraction.status} />${s.extraction.unread > 0 && html` <span class="muted">${s.extraction.unread} unread</span>`}</td>
          </tr>`,
        )}
      </tbody>
    </table>`}
    ${data && html`<${Pager} offset=${offset} next=${data.next_offset} limit=${PAGE} label="Sessions pages"
      link=${(o) => storeHref(instance, store, "sessions", { offset: o || "" })} />`}
  </section>`;
}

export function Messages({ messages }) {
  if (messages.length === 0) return html`<p class="muted">No messages.</p>`;
  return html`<ol class="messages">
    ${messages.map(
      (m) => html`<li key=${m.seq} class=${`message role-${m.role}`}>
        <p class="message-meta">
          <span class="seq">#${m.seq}</span>
          <span class="role">${m.role}</span>
          ${m.name && html`<span class="name"><${Text} value=${m.name} /></span>`}
          <${Time} value=${m.created_at} />
        </p>
        <p class="content"><${Text} value=${m.content} /></p>
      </li>`,
    )}
  </ol>`;
}

export function Extraction({ extraction }) {
  return html`<dl class="facts extraction">
    <dt>Status</dt><dd><${StatusBadge} status=${extraction.status} /></dd>
    <dt>Due</dt><dd><${Time} value=${extraction.due_at} /></dd>
    <dt>Last run</dt><dd><${Time} value=${extraction.last_run_at} /></dd>
    <dt>Last error</dt><dd>${extraction.last_error ? html`<strong class="error-text"><${Text} value=${extraction.last_error} /></strong>` : html`<span class="muted">none</span>`}</dd>
    <dt>Unread messages</dt><dd>${extraction.unread}</dd>
  </dl>`;
}

/**
 * What the messages shown are, of `view.message_count`, when `recent` were asked for, and
 * whether asking for more would show more: `{ text, more }`. The API gives the newest `recent`
 * of the messages kept verbatim; a summarized session keeps fewer than it counts (the older ones
 * are folded into its summary), so fewer than asked means every kept message is shown.
 */
function shownOf(view, recent) {
  const shown = view.messages.length;
  const total = view.message_count;
  const where = view.summary ? "folded into the summary above" : "no longer kept word for word";
  if (shown === 0) return { text: total ? `All ${plural(total, "message")} are ${where}.` : "", more: false };
  if (shown >= total) return { text: total === 1 ? "Its one message." : `All ${plural(total, "message")}, oldest first.`, more: false };
  const newest = `The newest ${plural(shown, "message")} of ${total.toLocaleString("en")}, oldest first`;
  if (shown < recent) {
    const older = total - shown;
    return { text: `${newest}; ${older === 1 ? "the older one is" : `the ${older.toLocaleString("en")} older ones are`} ${where}.`, more: false };
  }
  if (recent >= MAX_RECENT) return { text: `${newest}; the console shows at most ${MAX_RECENT.toLocaleString("en")}.`, more: false };
  return { text: `${newest}.`, more: true };
}

export function SessionPage({ instance, store, session }) {
  const [recent, setRecent] = useState(RECENT);
  const [notice, setNotice] = useState(null);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const loaded = useLoad(
    () =>
      settled([
        api("GET", storePath(instance, store, "sessions", session), { query: { recent } }),
        api("GET", storePath(instance, store)),
        recent,
      ]),
    [instance, store, session, recent],
  );
  // (`asked`: the `recent` of the answer shown, which a newer one may not have replaced yet)
  const [view, config, asked] = loaded.data || [];
  // "its summary and its 18 messages" / "its 1 message", and the word before it.
  const what = view ? `${view.summary ? "its summary and " : ""}its ${plural(view.message_count, "message")}` : "";
  const joined = view && view.summary ? ", " : " and ";
  const extract = async () => {
    setBusy(true);
    setNotice(null);
    try {
      await api("POST", storePath(instance, store, "sessions", session, "extract"));
      setNotice({ text: "Extraction was started; it runs in the background. Reload to see its result." });
      loaded.reload();
    } catch (failure) {
      setNotice({ kind: "error", text: `Not started: ${said(failure)}` });
    } finally {
      setBusy(false);
    }
  };
  const forget = async () => {
    setBusy(true);
    try {
      await api("DELETE", storePath(instance, store, "sessions", session));
      setConfirming(false);
      flash(`Session ${session} was forgotten, with ${what}.`);
      navigate(storeHref(instance, store, "sessions"));
    } catch (failure) {
      setConfirming(false);
      setNotice({ kind: "error", text: `Not forgotten: ${said(failure)}` });
    } finally {
      setBusy(false);
    }
  };
  const noModel = config && config.llm_provider === "none";
  const missing = missingOf(loaded.error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  const shown = view ? shownOf(view, asked) : null;
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="sessions" title=${html`Session <${Text} value=${session} />`} />
    <${Notice} notice=${notice} />
    ${loaded.loading && !view && html`<${Loading} what="the session" />`}
    <${ErrorState} error=${loaded.error} retry=${loaded.reload} what="the session" />
    ${view && html`
      <dl class="facts">
        <dt>Session</dt><dd><${Id} value=${view.session_id} label="session id" /></dd>
        <dt>Actor</dt><dd><${ActorId} instance=${instance} store=${store} actor=${view.actor_id} /></dd>
        <dt>Messages</dt><dd>${view.message_count}</dd>
        <dt>Started</dt><dd><${Time} value=${view.created_at} /></dd>
        <dt>Last event</dt><dd><${Time} value=${view.last_event_at} /></dd>
        <dt>Forgotten after</dt><dd><${Time} value=${view.expires_at} />${config && html` <span class="muted">(${duration(config.session_ttl_seconds)} after its last message; a new message moves it)</span>`}</dd>
      </dl>
      <h2>Summary</h2>
      ${view.summary
        ? html`<p class="summary"><${Text} value=${view.summary} /></p>`
        : html`<p class="muted">No summary yet: a session is summarized once it holds more than summarize_after messages${noModel ? ", and only in a store with a language model" : ""}.</p>`}
      <h2>Extraction</h2>
      <${Extraction} extraction=${view.extraction} />
      <div class="actions">
        <button type="button" onClick=${extract} disabled=${busy || noModel} aria-describedby=${noModel ? "no-model" : undefined}>Extract now</button>
        ${noModel && html`<span class="help" id="no-model">This store has no language model, so nothing is extracted.</span>`}
        <button type="button" onClick=${loaded.reload}>Reload</button>
      </div>
      <h2>Messages</h2>
      ${shown.text && html`<p class="muted messages-shown">${shown.text}</p>`}
      <${Messages} messages=${view.messages} />
      ${shown.more && html`<p><button type="button" onClick=${() => setRecent(MAX_RECENT)}>Show up to ${MAX_RECENT.toLocaleString("en")} messages</button></p>`}
      <section class="danger-zone" aria-labelledby="forget-title">
        <h2 id="forget-title">Forget this session</h2>
        <p>The session${joined}${what} are removed. Memories already extracted from it stay.</p>
        <button type="button" class="danger" onClick=${() => setConfirming(true)}>Forget session…</button>
      </section>
      <${ConfirmDialog} open=${confirming} title="Forget this session?" action="Forget session" busy=${busy}
        onConfirm=${forget} onClose=${() => setConfirming(false)}>
        <p>Session <strong><${Text} value=${session} /></strong>${joined}${what} are removed for good.</p>
      <//>
    `}
  </section>`;
}
