// API keys: the organization's keys with their scopes (GET /keys), a form that makes a scoped
// key and shows its secret once (POST /keys), and revoking one (DELETE /keys/{key_id}). Only
// the organization's admin key may do this; a scoped key sees why it cannot.

import { useState } from "preact/hooks";
import { allPages, api } from "../api.js";
import {
  ConfirmDialog, Empty, ErrorState, FieldProblems, FormErrors, html, Loading, Notice, plural,
  problemsByField, said, Text, Time, useLoad,
} from "../ui.js";

const lines = (text) => text.split(/[\n,]/).map((s) => s.trim()).filter(Boolean);

function Scope({ k }) {
  if (k.access === "admin") return html`<span class="badge">admin</span> <span class="muted">every instance, store and actor</span>`;
  const parts = [];
  if (k.instances) parts.push(html`instances ${k.instances.map((i, n) => html`${n ? ", " : ""}<${Text} value=${i} />`)}`);
  if (k.stores) parts.push(html`stores ${k.stores.map((s, n) => html`${n ? ", " : ""}<${Text} value=${`${s.instance_id}/${s.store}`} />`)}`);
  if (k.actors) parts.push(html`actors ${k.actors.map((a, n) => html`${n ? ", " : ""}<${Text} value=${a} />`)}`);
  return html`<span class="badge">${k.access}</span> ${parts.length ? parts.map((p, n) => html`${n ? "; " : ""}${p}`) : html`<span class="muted">every instance, store and actor</span>`}`;
}

function CreateKey({ onCreated }) {
  const [form, setForm] = useState({ name: "", access: "read", stores: "", actors: "", expires: "" });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (field) => (event) => setForm({ ...form, [field]: event.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    const body = { access: form.access };
    if (form.name.trim()) body.name = form.name.trim();
    const stores = lines(form.stores).map((s) => {
      const [instance_id, ...rest] = s.split("/");
      return { instance_id, store: rest.join("/") };
    });
    if (stores.length) body.stores = stores;
    const actors = lines(form.actors);
    if (actors.length) body.actors = actors;
    if (form.expires) body.expires_at = new Date(form.expires).toISOString();
    try {
      const created = await api("POST", "/keys", { body });
      setForm({ name: "", access: "read", stores: "", actors: "", expires: "" });
      onCreated(created);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const byField = problemsByField(error);
  // the API names a list's item (stores.0.store): each field gets its whole list's problems
  const problems = (name) =>
    Object.entries(byField).filter(([f]) => f === name || f.startsWith(`${name}.`)).flatMap(([, v]) => v);
  return html`<form class="create-key" onSubmit=${submit} novalidate aria-labelledby="create-key-title">
    <h2 id="create-key-title">Make a scoped key</h2>
    <${FormErrors} error=${error} />
    <div class="field">
      <label for="key-name">Name</label>
      <input id="key-name" value=${form.name} onInput=${set("name")} autocomplete="off" placeholder="ann's phone" />
      <${FieldProblems} id="key-name" problems=${problems("name")} />
    </div>
    <div class="field">
      <label for="key-access">Access</label>
      <select id="key-access" value=${form.access} onChange=${set("access")}>
        <option value="read">read: reads and searches only</option>
        <option value="write">write: reads and writes</option>
      </select>
    </div>
    <div class="field">
      <label for="key-stores">Stores</label>
      <textarea id="key-stores" rows="2" value=${form.stores} onInput=${set("stores")} placeholder="local/support-agent" aria-describedby="key-stores-help"></textarea>
      <span class="help" id="key-stores-help">One <code>instance/store</code> per line; empty: every store.</span>
      <${FieldProblems} id="key-stores" problems=${[...problems("stores"), ...problems("instances")]} />
    </div>
    <div class="field">
      <label for="key-actors">Actors</label>
      <textarea id="key-actors" rows="2" value=${form.actors} onInput=${set("actors")} placeholder="ann" aria-describedby="key-actors-help"></textarea>
      <span class="help" id="key-actors-help">One actor id per line; empty: every actor. A key per end user is what a browser or a phone gets.</span>
      <${FieldProblems} id="key-actors" problems=${problems("actors")} />
    </div>
    <div class="field">
      <label for="key-expires">Expires</label>
      <input id="key-expires" type="datetime-local" value=${form.expires} onInput=${set("expires")} aria-describedby="key-expires-help" />
      <span class="help" id="key-expires-help">In your browser's time zone; empty: never.</span>
      <${FieldProblems} id="key-expires" problems=${problems("expires_at")} />
    </div>
    <div class="actions"><button type="submit" class="primary" disabled=${busy}>${busy ? "Making…" : "Make key"}</button></div>
  </form>`;
}

export function KeysPage() {
  const listed = useLoad(() => allPages("/keys", "keys"), []);
  const [created, setCreated] = useState(null);
  const [revoking, setRevoking] = useState(null);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState(null);
  const revoke = async () => {
    const k = revoking;
    setBusy(true);
    try {
      await api("DELETE", `/keys/${encodeURIComponent(k.key_id)}`);
      setNotice({ text: `Revoked key ${k.key_id}: its next request is refused.` });
      if (created && created.key_id === k.key_id) setCreated(null);
      listed.reload();
    } catch (failure) {
      setNotice({ kind: "error", text: `Not revoked: ${said(failure)}` });
    } finally {
      setRevoking(null);
      setBusy(false);
    }
  };
  const forbidden = listed.error && listed.error.status === 403;
  const keys = listed.data ? listed.data.keys : null;
  return html`<section>
    <header class="page-header"><h1 tabindex="-1">API keys</h1></header>
    <p class="lede">Keys of your organization. The admin key reaches everything; a scoped key only the stores and actors it names, and only reads if it is read-only (docs/keys.md).</p>
    <${Notice} notice=${notice} />
    ${created && html`<div class="notice ok secret" role="status">
      <p><strong>Key ${created.key_id} made.</strong> Copy it now: it is shown this once, and only its hash is kept.</p>
      <p><code class="api-key" aria-label="The new API key"><${Text} value=${created.api_key} /></code></p>
      <button type="button" onClick=${() => setCreated(null)}>I have copied it</button>
    </div>`}
    ${forbidden && html`<div class="state error" role="alert"><p><strong>This key cannot manage keys.</strong> Only the organization's admin key can; sign in with it.</p></div>`}
    ${listed.loading && !listed.data && html`<${Loading} what="keys" />`}
    ${!forbidden && html`<${ErrorState} error=${listed.error} retry=${listed.reload} what="the keys" />`}
    ${keys && keys.length === 0 && html`<${Empty} title="No keys."><p>Make one below.</p><//>`}
    ${keys && keys.length > 0 && html`<table class="list">
      <caption class="visually-hidden">API keys, oldest first</caption>
      <thead><tr><th scope="col">Key</th><th scope="col">Name</th><th scope="col">Reaches</th><th scope="col">Expires</th><th scope="col">Made</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
      <tbody>
        ${keys.map((k) => html`<tr key=${k.key_id}>
          <th scope="row"><code>${k.key_id}</code></th>
          <td><${Text} value=${k.name} max=${60} /></td>
          <td><${Scope} k=${k} /></td>
          <td><${Time} value=${k.expires_at} /></td>
          <td><${Time} value=${k.created_at} /></td>
          <td><button type="button" class="danger" onClick=${() => setRevoking(k)}>Revoke…</button></td>
        </tr>`)}
      </tbody>
    </table>
    <p class="muted">${plural(keys.length, "key")}.</p>`}
    ${!forbidden && html`<${CreateKey} onCreated=${(k) => { setCreated(k); listed.reload(); }} />`}
    <${ConfirmDialog} open=${revoking !== null} title=${revoking ? html`Revoke key <code>${revoking.key_id}</code>?` : ""}
      action="Revoke" busy=${busy} onConfirm=${revoke} onClose=${() => setRevoking(null)}>
      <p>Every request with this key is refused from now on. It cannot be undone.</p>
    <//>
  </section>`;
}
