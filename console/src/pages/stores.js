// Stores: every store of the organization (GET /agent-memory), one database's tab
// (GET /instances/{id}/agent-memory), creating one, and one store's page (GET, DELETE).

import { useEffect, useRef, useState } from "preact/hooks";
import { allPages, api, path, storePath } from "../api.js";
import { href, navigate, storeHref } from "../router.js";
import { PROFILE_TYPES } from "../steering.js";
import { LABELS, SETTINGS, StoreForm } from "../storeform.js";
import {
  ConfirmDialog, duration, Empty, ErrorState, FieldProblems, flash, html, Loading, missingOf, Notice, plural, said, Text, Time, useFlash,
  useLoad,
} from "../ui.js";

// Instances seen in the last organization listing, for the database tabs.
let knownInstances = [];

function InstanceTabs({ current }) {
  const ids = [...new Set([...knownInstances, ...(current ? [current] : [])])].sort();
  return html`<nav class="tabs" aria-label="Databases">
    <a href="#/agent-memory" aria-current=${current ? undefined : "page"}>All stores</a>
    ${ids.map(
      (id) => html`<a href=${href(["instances", id, "agent-memory"])} aria-current=${id === current ? "page" : undefined}>
        Database <${Text} value=${id} /></a>`,
    )}
  </nav>`;
}

function provider(store, kind) {
  const name = store[`${kind}_provider`];
  if (name === "none") return html`<span class="muted">none</span>`;
  return html`${name} · <${Text} value=${store[`${kind}_model`]} max=${40} />`;
}

function StoreTable({ stores, showInstance }) {
  return html`<table class="list">
    <caption class="visually-hidden">Stores</caption>
    <thead>
      <tr>
        <th scope="col">Store</th>
        ${showInstance && html`<th scope="col">Database</th>`}
        <th scope="col">Language model</th>
        <th scope="col">Embeddings</th>
        <th scope="col">Updated</th>
      </tr>
    </thead>
    <tbody>
      ${stores.map(
        (s) => html`<tr key=${s.instance_id + "/" + s.name}>
          <th scope="row"><a href=${storeHref(s.instance_id, s.name)}><${Text} value=${s.name} /></a></th>
          ${showInstance && html`<td><a href=${href(["instances", s.instance_id, "agent-memory"])}><${Text} value=${s.instance_id} /></a></td>`}
          <td>${provider(s, "llm")}</td>
          <td>${provider(s, "embed")}</td>
          <td><${Time} value=${s.updated_at} /></td>
        </tr>`,
      )}
    </tbody>
  </table>`;
}

function OpenInstance() {
  const [id, setId] = useState("");
  const submit = (event) => {
    event.preventDefault();
    if (id.trim()) navigate(href(["instances", id.trim(), "agent-memory"]));
  };
  return html`<form class="inline-form" onSubmit=${submit}>
    <label for="open-instance">Open a database by id</label>
    <input id="open-instance" value=${id} onInput=${(e) => setId(e.currentTarget.value)} autocomplete="off" spellcheck="false" />
    <button type="submit">Open</button>
  </form>`;
}

// The select's option for a database the listing does not name (one without stores: the API
// lists no instances, only stores and the databases that could not be reached).
const ANOTHER = "";

/**
 * "Create a store on database [local ▾] [Create a store]": leads to a database's create page.
 * The databases come from the organization's listing; one it does not name is typed, and an
 * organization without stores (whose listing names none) types its database's id.
 */
function CreateOnDatabase({ instances }) {
  const [choice, setChoice] = useState(instances[0] ?? ANOTHER);
  const [typed, setTyped] = useState("");
  const [problem, setProblem] = useState(null);
  const typing = instances.length === 0 || choice === ANOTHER;
  const field = useRef(null);
  const submit = (event) => {
    event.preventDefault();
    const id = typing ? typed.trim() : choice;
    if (!id) {
      setProblem(["Type the database's id."]);
      field.current.focus();
      return;
    }
    navigate(href(["instances", id, "create"]));
  };
  const typedId = instances.length === 0 ? "create-instance" : "create-instance-id";
  const described = [instances.length === 0 ? "h-create-instance" : "", problem ? "p-create-instance" : ""].filter(Boolean).join(" ");
  return html`<form class="create-on" onSubmit=${submit} novalidate>
    <label for="create-instance">Create a store on database</label>
    ${instances.length > 0 &&
    html`<select id="create-instance" value=${choice} onChange=${(e) => { setChoice(e.currentTarget.value); setProblem(null); }}>
      ${instances.map((id) => html`<option value=${id}>${id}</option>`)}
      <option value=${ANOTHER}>Another database (type its id)</option>
    </select>`}
    ${typing && html`
      ${instances.length > 0 && html`<label class="visually-hidden" for=${typedId}>Database id</label>`}
      <input id=${typedId} ref=${field} value=${typed} autocomplete="off" spellcheck="false"
        placeholder=${instances.length > 0 ? "Database id" : undefined}
        onInput=${(e) => { setTyped(e.currentTarget.value); setProblem(null); }}
        aria-invalid=${problem ? "true" : undefined} aria-describedby=${described || undefined} />`}
    <button type="submit" class="primary">Create a store</button>
    ${instances.length === 0 &&
    html`<span class="help" id="h-create-instance">The id your database was registered with (the local stack's is <code>local</code>).</span>`}
    <${FieldProblems} id="p-create-instance" problems=${problem} />
  </form>`;
}

export function AllStores() {
  const { data, error, loading, reload } = useLoad(() => allPages("/agent-memory", "stores"), []);
  if (data) knownInstances = [...new Set([...data.stores.map((s) => s.instance_id), ...data.unreachable.map((u) => u.instance_id)])];
  return html`<section>
    <h1 tabindex="-1">Agent memory</h1>
    <p class="lede">Every store of your organization, with the database it lives in.</p>
    <${InstanceTabs} />
    ${data && html`<${CreateOnDatabase} instances=${[
      // The databases that answered first: a store can be created there now.
      ...new Set([...data.stores.map((s) => s.instance_id).sort(), ...data.unreachable.map((u) => u.instance_id).sort()]),
    ]} />`}
    ${loading && !data && html`<${Loading} what="stores" />`}
    <${ErrorState} error=${error} retry=${reload} what="the stores" />
    ${data && data.unreachable.length > 0 &&
    html`<div class="notice warning" role="alert">
      <p><strong>${plural(data.unreachable.length, "database")} could not be reached; ${plural(data.unreachable.length, "its", "their", { word: true })} stores are not listed.</strong></p>
      <ul>${data.unreachable.map((u) => html`<li><a href=${href(["instances", u.instance_id, "agent-memory"])}><${Text} value=${u.instance_id} /></a>: <${Text} value=${u.message} /></li>`)}</ul>
    </div>`}
    ${data && data.stores.length === 0 &&
    html`<${Empty} title="No stores yet.">
      <p>A store keeps the sessions and memories of one agent. Create one with the form above, on a database of your organization, then send it messages from your agent (or try it here).</p>
    <//>`}
    ${data && data.stores.length > 0 && html`<${StoreTable} stores=${data.stores} showInstance=${true} />`}
    <${OpenInstance} />
  </section>`;
}

export function InstanceStores({ instance }) {
  const { data, error, loading, reload } = useLoad(() => allPages(path("instances", instance, "agent-memory"), "stores"), [instance]);
  const flashed = useFlash();
  if (data && !knownInstances.includes(instance)) knownInstances = [...knownInstances, instance];
  const missing = missingOf(error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  return html`<section>
    <h1 tabindex="-1">Database <${Text} value=${instance} /></h1>
    <p class="lede">The agent memory stores of this database.</p>
    <${InstanceTabs} current=${instance} />
    <${Notice} notice=${flashed} />
    ${data && html`<p><a class="button primary" href=${href(["instances", instance, "create"])}>Create a store here</a></p>`}
    ${loading && !data && html`<${Loading} what="stores" />`}
    <${ErrorState} error=${error} retry=${reload} what="this database's stores" />
    ${data && data.stores.length === 0 &&
    html`<${Empty} title="This database has no stores yet.">
      <p>Create one with the button above, or with <code>PUT /instances/${instance}/agent-memory/{store}</code>.</p>
    <//>`}
    ${data && data.stores.length > 0 && html`<${StoreTable} stores=${data.stores} showInstance=${false} />`}
  </section>`;
}

export function CreateStore({ instance }) {
  // The database must exist before its form is worth filling in.
  const { data, error, loading, reload } = useLoad(() => api("GET", path("instances", instance, "agent-memory")), [instance]);
  const missing = missingOf(error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  const created = (saved) => {
    flash("The store was created.");
    navigate(storeHref(instance, saved.name));
  };
  return html`<section>
    <h1 tabindex="-1">Create a store on <${Text} value=${instance} /></h1>
    <p class="lede">Every field but the name is optional: what you leave as it is takes the default.</p>
    ${loading && !data && html`<${Loading} what="the database" />`}
    <${ErrorState} error=${error} retry=${reload} what="the database" />
    ${data && html`<${StoreForm} instance=${instance} onSaved=${created} />`}
  </section>`;
}

/**
 * The page for an address whose database or store does not exist: what is missing in the
 * console's words, the API's answer as detail, and the way back; no tabs, nothing to act on.
 */
export function MissingPage({ instance, error }) {
  const heading = useRef(null);
  useEffect(() => {
    // It replaces the page that was loading, whose heading had the focus.
    if (!document.activeElement || document.activeElement === document.body) heading.current.focus();
  }, []);
  const database = error.code === "instance_not_found";
  const detail = html`<p class="muted">The API answered ${error.status}, <code>${error.code}</code>: <${Text} value=${error.message} /></p>`;
  if (database) {
    return html`<section class="missing">
      <h1 tabindex="-1" ref=${heading}>No such database</h1>
      <div class="state error" role="alert">
        <p><strong>There is no database instance <${Text} value=${instance} /> in your organization.</strong></p>
        <p>Check the address, or pick a database from the list of every store.</p>
        ${detail}
      </div>
      <p><a class="button" href="#/agent-memory">See every store</a></p>
    </section>`;
  }
  const stores = href(["instances", instance, "agent-memory"]);
  return html`<section class="missing">
    <nav class="breadcrumbs" aria-label="Breadcrumbs">
      <a href="#/agent-memory">Stores</a>${" › "}<a href=${stores}><${Text} value=${instance} /></a>
    </nav>
    <h1 tabindex="-1" ref=${heading}>No such store</h1>
    <div class="state error" role="alert">
      <p><strong>This store does not exist.</strong> Create it from the <a href=${stores}>stores page</a>.</p>
      ${detail}
    </div>
  </section>`;
}

export function StoreTabs({ instance, store, current }) {
  const tabs = [
    ["", "Overview"],
    ["sessions", "Sessions"],
    ["memories", "Memories"],
    ["search", "Search"],
    ["keyed", "Keyed"],
    ["usage", "Usage"],
    ["webhooks", "Webhooks"],
    ["try", "Try it"],
    ["settings", "Settings"],
  ];
  return html`<nav class="tabs" aria-label="Store">
    ${tabs.map(
      ([part, label]) => html`<a href=${part ? storeHref(instance, store, part) : storeHref(instance, store)}
        aria-current=${current === part ? "page" : undefined}>${label}</a>`,
    )}
  </nav>`;
}

export function StoreHeader({ instance, store, current, title }) {
  return html`<header class="page-header">
    <nav class="breadcrumbs" aria-label="Breadcrumbs">
      <a href="#/agent-memory">Stores</a>${" › "}<a href=${href(["instances", instance, "agent-memory"])}><${Text} value=${instance} /></a>${" › "}<a href=${storeHref(instance, store)}><${Text} value=${store} /></a>
    </nav>
    <h1 tabindex="-1">${title}</h1>
    <${StoreTabs} instance=${instance} store=${store} current=${current} />
  </header>`;
}

function Counts({ counts }) {
  const count = (n) => html`<span class="count">${n.toLocaleString("en")}</span>`;
  return html`<ul class="counts" aria-label="Counts">
    <li>${count(counts.sessions)} ${plural(counts.sessions, "session", "sessions", { word: true })}</li>
    <li>${count(counts.memories)} ${plural(counts.memories, "memory", "memories", { word: true })}</li>
    <li>${count(counts.waiting_for_extraction)} waiting for extraction</li>
  </ul>`;
}

/** A store's extraction examples: each conversation, and what it should give (or nothing). */
function ExamplesShown({ examples }) {
  if (examples.length === 0) return html`<span class="muted">none</span>`;
  return html`<ol class="examples-shown">${examples.map((e) => html`<li>
    <ul class="example-messages">${e.messages.map((m) => html`<li><span class="role">${m.role}</span>: “<${Text} value=${m.content} />”</li>`)}</ul>
    <p class="muted">${e.memories.length === 0
      ? "Keeps nothing (an example of what not to keep)."
      : html`Keeps ${e.memories.map((m, i) => html`${i ? "; " : ""}[${m.type}] “<${Text} value=${m.text} />”`)}.`}</p>
  </li>`)}</ol>`;
}

export function StorePage({ instance, store }) {
  const { data, error, loading, reload } = useLoad(() => api("GET", storePath(instance, store)), [instance, store]);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState(null);
  const flashed = useFlash();
  const remove = async () => {
    setBusy(true);
    try {
      await api("DELETE", storePath(instance, store));
      setConfirming(false);
      const { sessions, memories } = data.counts;
      flash(`Store ${store} was deleted, with its ${plural(sessions, "session")} and ${plural(memories, "memory", "memories")}.`);
      navigate(href(["instances", instance, "agent-memory"]));
    } catch (failure) {
      setConfirming(false);
      setNotice({ kind: "error", text: `Not deleted: ${said(failure)}` });
    } finally {
      setBusy(false);
    }
  };
  const missing = missingOf(error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="" title=${html`Store <${Text} value=${store} />`} />
    <${Notice} notice=${flashed} />
    <${Notice} notice=${notice} />
    ${loading && !data && html`<${Loading} what="the store" />`}
    <${ErrorState} error=${error} retry=${reload} what="the store" />
    ${data && html`
      ${data.last_extraction_error &&
      html`<div class="notice error extraction-error" role="alert">
        <h2>The last extraction failed</h2>
        <p><${Text} value=${data.last_extraction_error} /></p>
        <p class="muted">Fix the provider settings below (or the provider), then extract a session again from its page.</p>
      </div>`}
      <${Counts} counts=${data.counts} />
      ${data.counts.sessions === 0 && data.counts.memories === 0 &&
      html`<${Empty} title="This store is empty.">
        <p>Send a conversation's messages with <code>POST …/sessions/{session}/events</code> from your agent, or open <a href=${storeHref(instance, store, "try")}>Try it</a> to recall and add a turn here.</p>
      <//>`}
      <h2>Extraction</h2>
      <dl class="facts">
        <dt>Last run</dt><dd><${Time} value=${data.last_extraction_at} /></dd>
        <dt>Last error</dt><dd>${data.last_extraction_error ? html`<${Text} value=${data.last_extraction_error} />` : html`<span class="muted">none</span>`}</dd>
        <dt>Language model</dt><dd>${data.llm_provider === "none" ? html`none: sessions are not extracted or summarized` : html`${data.llm_provider} · <${Text} value=${data.llm_model} />`}</dd>
      </dl>
      <h2>Providers</h2>
      <dl class="facts">
        <dt title="llm_provider">${LABELS.llm_provider}</dt><dd>${data.llm_provider}</dd>
        <dt title="llm_model">${LABELS.llm_model}</dt><dd><${Text} value=${data.llm_model} /></dd>
        <dt title="llm_base_url">${LABELS.llm_base_url}</dt><dd><${Text} value=${data.llm_base_url} /></dd>
        <dt>Language model API key</dt><dd data-key=${data.has_llm_api_key ? "present" : "absent"}>${data.has_llm_api_key ? "present" : "absent"}</dd>
        <dt title="embed_provider">${LABELS.embed_provider}</dt><dd>${data.embed_provider}</dd>
        <dt title="embed_model">${LABELS.embed_model}</dt><dd><${Text} value=${data.embed_model} /></dd>
        <dt title="embed_base_url">${LABELS.embed_base_url}</dt><dd><${Text} value=${data.embed_base_url} /></dd>
        <dt>Embedding API key</dt><dd data-key=${data.has_embed_api_key ? "present" : "absent"}>${data.has_embed_api_key ? "present" : "absent"}</dd>
        <dt title="dimensions">${LABELS.dimensions}</dt><dd>${data.dimensions}</dd>
        <dt title="rerank_provider">${LABELS.rerank_provider}</dt><dd>${data.rerank_provider}</dd>
        <dt title="rerank_model">${LABELS.rerank_model}</dt><dd><${Text} value=${data.rerank_model} /></dd>
        <dt title="rerank_base_url">${LABELS.rerank_base_url}</dt><dd><${Text} value=${data.rerank_base_url} /></dd>
        <dt>Reranker API key</dt><dd data-key=${data.has_rerank_api_key ? "present" : "absent"}>${data.has_rerank_api_key ? "present" : "absent"}</dd>
        <dt title="rerank_candidates">${LABELS.rerank_candidates}</dt><dd>${data.rerank_candidates}</dd>
        <dt title="aws_region">${LABELS.aws_region}</dt><dd><${Text} value=${data.aws_region} /></dd>
      </dl>
      <h2>Settings</h2>
      <dl class="facts">
        ${SETTINGS.map(([name]) => html`<dt title=${name}>${LABELS[name]}</dt><dd>${name.endsWith("_seconds") ? html`${data[name].toLocaleString("en")} <span class="muted">(${duration(data[name])})</span>` : String(data[name])}</dd>`)}
        <dt title="redact_pii">${LABELS.redact_pii}</dt><dd>${data.redact_pii ? "on" : "off"}</dd>
        <dt title="redact_card_digit_runs">${LABELS.redact_card_digit_runs}</dt><dd>${data.redact_card_digit_runs ? "on" : "off"}</dd>
        <dt title="custom_types">${LABELS.custom_types}</dt>
        <dd>${data.custom_types.length === 0
          ? html`<span class="muted">none</span>`
          : html`<ul>${data.custom_types.map((t) => html`<li><code><${Text} value=${t.name} /></code>: <${Text} value=${t.description} />${t.examples && t.examples.length > 0
            ? html`<br /><span class="muted">Examples: ${t.examples.map((x, i) => html`${i ? ", " : ""}“<${Text} value=${x} />”`)}</span>` : ""}</li>`)}</ul>`}</dd>
        <dt title="extraction_instructions">${LABELS.extraction_instructions}</dt>
        <dd>${data.extraction_instructions ? html`<p class="instructions"><${Text} value=${data.extraction_instructions} /></p>` : html`<span class="muted">none</span>`}</dd>
        <dt title="extraction_examples">${LABELS.extraction_examples}</dt>
        <dd><${ExamplesShown} examples=${data.extraction_examples || []} /></dd>
        <dt title="profile_fields">${LABELS.profile_fields}</dt>
        <dd>${(data.profile_fields || []).length === 0
          ? html`<span class="muted">none: actors have no profile</span>`
          : html`<ul>${data.profile_fields.map((f) => html`<li><code><${Text} value=${f.name} /></code> (${PROFILE_TYPES[f.type]}): <${Text} value=${f.description} /></li>`)}</ul>`}</dd>
        <dt>Created</dt><dd><${Time} value=${data.created_at} /></dd>
        <dt>Updated</dt><dd><${Time} value=${data.updated_at} /></dd>
      </dl>
      <p><a class="button" href=${storeHref(instance, store, "settings")}>Change settings</a></p>
      <section class="danger-zone" aria-labelledby="danger-title">
        <h2 id="danger-title">Delete this store</h2>
        <p>Deleting removes the store, its ${plural(data.counts.sessions, "session")} and ${plural(data.counts.memories, "memory", "memories")}, at once and for good.</p>
        <button type="button" class="danger" onClick=${() => setConfirming(true)}>Delete store…</button>
      </section>
      <${ConfirmDialog} open=${confirming} title=${html`Delete store <${Text} value=${store} />?`}
        action="Delete store" typeToConfirm=${store} busy=${busy}
        onConfirm=${remove} onClose=${() => setConfirming(false)}>
        <p>This removes ${plural(data.counts.sessions, "session")} and ${plural(data.counts.memories, "memory", "memories")}. It cannot be undone.</p>
      <//>
    `}
  </section>`;
}

export function EditStore({ instance, store }) {
  const { data, error, loading, reload } = useLoad(() => api("GET", storePath(instance, store)), [instance, store]);
  const missing = missingOf(error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  const saved = () => {
    flash("The settings were saved.");
    navigate(storeHref(instance, store));
  };
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="settings" title=${html`Settings of <${Text} value=${store} />`} />
    ${loading && !data && html`<${Loading} what="the settings" />`}
    <${ErrorState} error=${error} retry=${reload} what="the settings" />
    ${data && html`<${StoreForm} key=${data.updated_at} instance=${instance} store=${data}
      onSaved=${saved} />`}
  </section>`;
}
