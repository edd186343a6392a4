// A store's webhooks: its endpoints and the events each is sent (PUT of the store's `webhooks`),
// a new signing secret shown once (POST .../webhooks/secret), and the last deliveries
// (GET .../webhooks/deliveries), newest first.

import { useState } from "preact/hooks";
import { api, storePath } from "../api.js";
import { MissingPage, StoreHeader } from "./stores.js";
import {
  Empty, ErrorState, FieldProblems, FormErrors, html, Loading, missingOf, Notice, problemsByField, said, settled,
  Text, Time, useLoad,
} from "../ui.js";

const EVENTS = [
  "extraction.completed", "extraction.failed", "memory.created", "memory.updated", "memory.superseded", "memory.deleted",
  "session.deleted", "profile.updated", "store.deleted",
];

function Endpoints({ instance, store, webhooks, onSaved }) {
  const [rows, setRows] = useState(webhooks.map((w) => ({ url: w.url, events: [...w.events] })));
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const problems = problemsByField(error);
  const save = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api("PUT", storePath(instance, store), { body: { webhooks: rows.map((r) => ({ url: r.url.trim(), events: r.events })) } });
      onSaved();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const change = (index, update) => setRows(rows.map((r, i) => (i === index ? { ...r, ...update } : r)));
  // Saving is offered only when there is something to save: endpoints that differ from the
  // store's (removing the last one is a change too).
  const saved = JSON.stringify(webhooks.map((w) => ({ url: w.url, events: [...w.events].sort() })));
  const changed = JSON.stringify(rows.map((r) => ({ url: r.url.trim(), events: [...r.events].sort() }))) !== saved;
  return html`<form onSubmit=${save} novalidate aria-labelledby="endpoints-title">
    <h2 id="endpoints-title">Endpoints</h2>
    <${FormErrors} error=${error} />
    <${FieldProblems} id="p-webhooks" problems=${problems.webhooks} />
    ${rows.length === 0 && html`<p class="muted">No endpoints: nothing is sent.${webhooks.length ? " Save to remove the store's endpoints." : " Add one to be told of this store's events."}</p>`}
    ${rows.map((row, index) => html`<fieldset key=${index} class="endpoint">
      <legend>Endpoint ${index + 1}</legend>
      <div class="field">
        <label for=${`hook-url-${index}`}>URL</label>
        <input id=${`hook-url-${index}`} type="url" value=${row.url} placeholder="https://app.example.com/hooks/memory"
          onInput=${(e) => change(index, { url: e.currentTarget.value })} />
        <${FieldProblems} id=${`hook-url-${index}`} problems=${problems[`webhooks.${index}.url`]} />
      </div>
      <div class="field checkboxes" role="group" aria-label=${`Events of endpoint ${index + 1}`}>
        ${EVENTS.map((name) => html`<label key=${name}><input type="checkbox" checked=${row.events.includes(name)}
          onChange=${(e) => change(index, { events: e.currentTarget.checked ? [...row.events, name] : row.events.filter((x) => x !== name) })} /> <code>${name}</code></label>`)}
        <${FieldProblems} id=${`hook-events-${index}`} problems=${problems[`webhooks.${index}.events`]} />
      </div>
      <button type="button" onClick=${() => setRows(rows.filter((_, i) => i !== index))}>Remove endpoint ${index + 1}</button>
    </fieldset>`)}
    <div class="actions">
      ${rows.length < 5 && html`<button type="button" class=${rows.length === 0 && !changed ? "primary" : undefined} onClick=${() => setRows([...rows, { url: "", events: ["extraction.completed"] }])}>Add an endpoint</button>`}
      ${changed && html`<button type="submit" class="primary" disabled=${busy}>${busy ? "Saving…" : "Save endpoints"}</button>`}
    </div>
  </form>`;
}

function Deliveries({ deliveries }) {
  if (deliveries.length === 0) return html`<${Empty} title="No deliveries yet."><p>Events are sent once an endpoint asks for them.</p><//>`;
  return html`<table class="list deliveries">
    <caption class="visually-hidden">The last deliveries, newest first</caption>
    <thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last answer</th><th scope="col">Made</th><th scope="col">Next attempt</th></tr></thead>
    <tbody>
      ${deliveries.map((d) => html`<tr key=${d.webhook_id}>
        <th scope="row"><code>${d.event}</code><br /><span class="muted"><code>${d.webhook_id}</code></span></th>
        <td><span class=${`status status-${d.status}`}>${d.status}</span></td>
        <td>${d.attempts}</td>
        <td>${d.last_status_code ? `HTTP ${d.last_status_code}` : ""}${d.last_error ? html` <${Text} value=${d.last_error} max=${120} />` : ""}</td>
        <td><${Time} value=${d.created_at} /></td>
        <td>${d.next_attempt_at ? html`<${Time} value=${d.next_attempt_at} />` : "—"}</td>
      </tr>`)}
    </tbody>
  </table>`;
}

export function WebhooksPage({ instance, store }) {
  const loaded = useLoad(async () => {
    const [config, log] = await settled([
      api("GET", storePath(instance, store)),
      api("GET", storePath(instance, store, "webhooks", "deliveries")),
    ]);
    return { config, deliveries: log.deliveries };
  }, [instance, store]);
  const [secret, setSecret] = useState(null);
  const [notice, setNotice] = useState(null);
  const [busy, setBusy] = useState(false);
  const rotate = async () => {
    setBusy(true);
    try {
      setSecret(await api("POST", storePath(instance, store, "webhooks", "secret")));
      loaded.reload();
    } catch (failure) {
      setNotice({ kind: "error", text: `No new secret: ${said(failure)}` });
    } finally {
      setBusy(false);
    }
  };
  const missing = missingOf(loaded.error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  const data = loaded.data;
  const forbidden = loaded.error && loaded.error.status === 403;
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="webhooks" title="Webhooks" />
    <p class="lede">Endpoints told of this store's events, signed as Standard Webhooks has it (docs/webhooks.md).</p>
    <${Notice} notice=${notice} />
    ${loaded.loading && !data && html`<${Loading} what="webhooks" />`}
    ${forbidden && html`<div class="state error" role="alert"><p><strong>This key cannot read the store's webhooks.</strong> A key limited to actors reads only its actors' data.</p></div>`}
    ${!forbidden && html`<${ErrorState} error=${loaded.error} retry=${loaded.reload} what="the webhooks" />`}
    ${data && html`
      <${Endpoints} key=${data.config.updated_at} instance=${instance} store=${store} webhooks=${data.config.webhooks || []}
        onSaved=${() => { setNotice({ text: "Endpoints saved." }); loaded.reload(); }} />
      <h2>Signing secret</h2>
      <p>${data.config.has_webhook_secret ? "The store has a secret; it is never shown again." : "No secret yet: one is made when the first endpoint is saved."}</p>
      ${secret && html`<div class="notice ok secret" role="status">
        <p><strong>New secret.</strong> Copy it now: it is shown this once. Events from now on are signed with it.</p>
        <p><code class="api-key" aria-label="The new signing secret"><${Text} value=${secret.secret} /></code></p>
        <button type="button" onClick=${() => setSecret(null)}>I have copied it</button>
      </div>`}
      <div class="actions"><button type="button" onClick=${rotate} disabled=${busy}>${busy ? "Making…" : "Make a new secret"}</button></div>
      <h2>Last deliveries <button type="button" class="small" onClick=${loaded.reload}>Refresh</button></h2>
      <${Deliveries} deliveries=${data.deliveries} />`}
  </section>`;
}
