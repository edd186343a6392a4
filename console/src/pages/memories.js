// Memories: browse newest first with filters (GET .../memories), search in each mode (POST
// .../memories/search), and one memory with its versions (GET, PATCH, DELETE .../memories/{id}).
// An actor's page (pages/actors.js) forgets an actor.

import { useState } from "preact/hooks";
import { api, storePath } from "../api.js";
import { navigate, storeHref } from "../router.js";
import { MissingPage, StoreHeader } from "./stores.js";
import {
  ActorId, ConfirmDialog, Empty, ErrorState, FieldProblems, flash, FormErrors, html, Id, Json, Loading, missingOf,
  Notice, Pager, plural, problemsByField, said, settled, Text, Time, useFlash, useLoad,
} from "../ui.js";

const memoryCount = (count) => plural(count, "memory", "memories");

const PAGE = 20;

function typesOf(config) {
  return ["semantic", "episodic", ...((config && config.custom_types) || []).map((t) => t.name)];
}

/** A JSON array of numbers from a textarea, or null when it is empty; throws on bad input. */
function parseVector(text, dimensions) {
  if (!text.trim()) return null;
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error("The vector is not JSON: write it as [0.1, 0.2, …].");
  }
  if (!Array.isArray(value) || !value.every((x) => typeof x === "number" && Number.isFinite(x))) {
    throw new Error("The vector must be a JSON array of numbers.");
  }
  if (dimensions && value.length !== dimensions) {
    throw new Error(`The vector has ${plural(value.length, "number")}; this store's vectors have ${dimensions.toLocaleString("en")}.`);
  }
  return value;
}

/** A table of memories, each linked to its page; `scores` adds a search's, `actorColumn` (on
 * unless false) each memory's actor, linked to the actor's page. */
export function MemoryRows({ memories, instance, store, scores, actorColumn = true }) {
  return html`<table class="list">
    <caption class="visually-hidden">${scores ? "Search results, best first" : "Memories, newest first"}</caption>
    <thead>
      <tr>
        ${scores && html`<th scope="col" class="num">Score</th>`}
        ${scores && html`<th scope="col" class="num">Cosine</th>`}
        <th scope="col">Memory</th>
        <th scope="col">Type</th>
        ${actorColumn && html`<th scope="col">Actor</th>`}
        <th scope="col">Topics</th>
        <th scope="col">Kept</th>
      </tr>
    </thead>
    <tbody>
      ${memories.map(
        (m) => html`<tr key=${m.id}>
          ${scores && html`<td class="num score">${m.score === null || m.score === undefined ? "—" : m.score.toFixed(4)}</td>`}
          ${scores && html`<td class="num similarity">${m.similarity === null || m.similarity === undefined ? "—" : m.similarity.toFixed(4)}</td>`}
          <th scope="row"><a href=${storeHref(instance, store, "memories", m.id)}><${Text} value=${m.text} max=${160} /></a></th>
          <td>${m.type}</td>
          ${actorColumn && html`<td><${ActorId} instance=${instance} store=${store} actor=${m.actor_id} max=${40} /></td>`}
          <td>${m.topics.length ? m.topics.map((t, i) => html`${i ? ", " : ""}<${Text} value=${t} />`) : html`<span class="muted">—</span>`}</td>
          <td><${Time} value=${m.created_at} /></td>
        </tr>`,
      )}
    </tbody>
  </table>`;
}

export function MemoriesPage({ instance, store, query }) {
  const offset = Math.max(0, Number(query.get("offset") || 0) | 0);
  const actor = query.get("actor_id") || "";
  const type = query.get("type") || "";
  const [actorInput, setActorInput] = useState(actor);
  const [typeInput, setTypeInput] = useState(type);
  const config = useLoad(() => api("GET", storePath(instance, store)), [instance, store]);
  const listed = useLoad(
    () => api("GET", storePath(instance, store, "memories"), { query: { offset, limit: PAGE, actor_id: actor, type } }),
    [instance, store, offset, actor, type],
  );
  const link = (o, a = actor, t = type) => storeHref(instance, store, "memories", { actor_id: a, type: t, offset: o || "" });
  const filter = (event) => {
    event.preventDefault();
    navigate(link(0, actorInput.trim(), typeInput));
  };
  const data = listed.data;
  const flashed = useFlash();
  const missing = missingOf(listed.error, config.error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="memories" title="Memories" />
    <p class="lede">Long-term memory, newest first. Each memory belongs to an actor (a user).</p>
    <form class="filters" onSubmit=${filter} role="search" aria-label="Filter memories">
      <div class="field">
        <label for="filter-actor">Actor</label>
        <input id="filter-actor" value=${actorInput} onInput=${(e) => setActorInput(e.currentTarget.value)} autocomplete="off" spellcheck="false" placeholder="every actor" />
      </div>
      <div class="field">
        <label for="filter-type">Type</label>
        <select id="filter-type" value=${typeInput} onChange=${(e) => setTypeInput(e.currentTarget.value)}>
          <option value="">every type</option>
          ${typesOf(config.data).map((t) => html`<option value=${t}>${t}</option>`)}
        </select>
      </div>
      <button type="submit">Filter</button>
      ${(actor || type) && html`<a class="button" href=${link(0, "", "")}>Clear filters</a>`}
    </form>
    <${Notice} notice=${flashed} />
    ${actor && html`<p class="actor-link">The page of actor <${ActorId} instance=${instance} store=${store} actor=${actor} copy=${false} /> shows its profile and sessions, and forgets everything the store keeps about it.</p>`}
    ${listed.loading && !data && html`<${Loading} what="memories" />`}
    <${ErrorState} error=${listed.error} retry=${listed.reload} what="the memories" />
    ${data && html`<p class="muted" aria-live="polite">${memoryCount(data.total)}${actor ? html` of actor <${Text} value=${actor} />` : ""}${type ? ` of type ${type}` : ""}.</p>`}
    ${data && data.memories.length === 0 &&
    html`<${Empty} title=${actor || type ? "No memory matches these filters." : "No memories yet."}>
      <p>Memories are extracted from quiet sessions by the store's language model, or added with <code>POST …/memories</code>.</p>
    <//>`}
    ${data && data.memories.length > 0 && html`<${MemoryRows} memories=${data.memories} instance=${instance} store=${store} />`}
    ${data && html`<${Pager} offset=${offset} next=${data.next_offset} limit=${PAGE} label="Memories pages" link=${(o) => link(o)} />`}
  </section>`;
}

export function SearchPage({ instance, store }) {
  const config = useLoad(() => api("GET", storePath(instance, store)), [instance, store]);
  const [form, setForm] = useState({
    query: "", mode: null, actor_id: "", limit: "10", vector: "", types: [], min_score: "", time_filter: false, rerank: true,
  });
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const store_ = config.data;
  const embeds = store_ && store_.embed_provider !== "none";
  const hasVector = form.vector.trim() !== "";
  const vectorModes = embeds || hasVector;
  // The store's best mode, as the API, the clients and the MCP tool default to: hybrid when the
  // store embeds the query, keyword when it cannot (without a vector, the others are refused).
  const best = embeds ? "hybrid" : "keyword";
  const chosen = form.mode || best;
  const mode = !vectorModes && chosen !== "keyword" ? "keyword" : chosen;
  const problems = problemsByField(error);
  const set = (name) => (e) => setForm({ ...form, [name]: e.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    let vector = null;
    try {
      vector = mode === "keyword" ? null : parseVector(form.vector, store_ && store_.dimensions);
    } catch (bad) {
      setError({ status: 0, code: "vector_invalid", message: bad.message, details: [{ field: "query_vector", problem: bad.message }] });
      return;
    }
    const body = { query: form.query, mode, limit: Number(form.limit) || 10 };
    if (form.actor_id.trim()) body.actor_id = form.actor_id.trim();
    if (form.types.length) body.types = form.types;
    if (vector) body.query_vector = vector;
    if (form.min_score.trim() !== "") body.min_score = Number(form.min_score);
    if (form.time_filter) body.time_filter = true;
    if (store_.rerank_provider !== "none" && !form.rerank) body.rerank = false;
    setBusy(true);
    try {
      setResult({ ...(await api("POST", storePath(instance, store, "memories", "search"), { body })), mode });
    } catch (failure) {
      if (failure.status !== 401) setError(failure);
      setResult(null);
    } finally {
      setBusy(false);
    }
  };
  const toggleType = (t) => (e) =>
    setForm({ ...form, types: e.currentTarget.checked ? [...form.types, t] : form.types.filter((x) => x !== t) });
  const missing = missingOf(config.error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="search" title="Search memories" />
    ${config.loading && !store_ && html`<${Loading} what="the store" />`}
    <${ErrorState} error=${config.error} retry=${config.reload} what="the store" />
    ${store_ && html`<form class="search-form" onSubmit=${submit} role="search" aria-label="Search memories" novalidate>
      <${FormErrors} error=${error} />
      <div class=${`field${problems.query ? " invalid" : ""}`}>
        <label for="search-query">Query</label>
        <input id="search-query" name="query" value=${form.query} onInput=${set("query")} required
          aria-invalid=${problems.query ? "true" : undefined} aria-describedby=${problems.query ? "p-query" : undefined} />
        <${FieldProblems} id="p-query" problems=${problems.query} />
      </div>
      <fieldset class="modes">
        <legend>Mode</legend>
        ${[
          ["hybrid", "Hybrid (both, fused)"],
          ["semantic", "Semantic (cosine)"],
          ["keyword", "Keyword (BM25)"],
        ].map(([value, label]) => {
          const disabled = value !== "keyword" && !vectorModes;
          return html`<label class=${`radio${disabled ? " disabled" : ""}`}>
            <input type="radio" name="mode" value=${value} checked=${mode === value} disabled=${disabled}
              onChange=${() => setForm({ ...form, mode: value })} aria-describedby="modes-help" /> ${label}${value === best ? html` <span class="muted best">(this store's best)</span>` : ""}
          </label>`;
        })}
        <p class="help" id="modes-help">${embeds
          ? html`This store embeds queries, so hybrid search (meaning and keywords, fused) is its best mode and the default here, as in the API, the clients and the MCP tool.`
          : html`This store has no embedding model, so keyword search is its best mode and the default here; semantic and hybrid search need the query's vector (${plural(store_.dimensions, "number")}). Paste one below to use them.`}</p>
      </fieldset>
      ${!embeds && html`<div class=${`field${problems.query_vector ? " invalid" : ""}`}>
        <label for="search-vector">Query vector (JSON array of ${plural(store_.dimensions, "number")}, optional)</label>
        <textarea id="search-vector" rows="2" value=${form.vector} onInput=${set("vector")} spellcheck="false"
          aria-invalid=${problems.query_vector ? "true" : undefined} aria-describedby=${problems.query_vector ? "p-query_vector" : undefined}></textarea>
        <${FieldProblems} id="p-query_vector" problems=${problems.query_vector} />
      </div>`}
      <div class="row">
        <div class=${`field${problems.actor_id ? " invalid" : ""}`}>
          <label for="search-actor">Actor (optional)</label>
          <input id="search-actor" value=${form.actor_id} onInput=${set("actor_id")} autocomplete="off" spellcheck="false" placeholder="every actor"
            aria-invalid=${problems.actor_id ? "true" : undefined} aria-describedby=${problems.actor_id ? "p-actor_id" : undefined} />
          <${FieldProblems} id="p-actor_id" problems=${problems.actor_id} />
        </div>
        <div class=${`field${problems.limit ? " invalid" : ""}`}>
          <label for="search-limit">Results</label>
          <input id="search-limit" type="number" min="1" max="100" value=${form.limit} onInput=${set("limit")} />
          <${FieldProblems} id="p-limit" problems=${problems.limit} />
        </div>
        <div class=${`field${problems.min_score ? " invalid" : ""}`}>
          <label for="search-min-score">Minimum score (optional)</label>
          <input id="search-min-score" type="number" min="0" max="1" step="0.01" inputmode="decimal" value=${form.min_score} onInput=${set("min_score")}
            placeholder="0: every result" aria-describedby=${problems.min_score ? "p-min_score h-min_score" : "h-min_score"}
            aria-invalid=${problems.min_score ? "true" : undefined} />
          <span class="help" id="h-min_score">Leave out results scoring below it, 0 to 1 (0.03 suits MiniLM-like embeddings).</span>
          <${FieldProblems} id="p-min_score" problems=${problems.min_score} />
        </div>
      </div>
      <div class="field checkbox">
        <input type="checkbox" id="search-time-filter" checked=${form.time_filter}
          onChange=${(e) => setForm({ ...form, time_filter: e.currentTarget.checked })} aria-describedby="h-time_filter" />
        <label for="search-time-filter">Only memories of the time the query names</label>
        <span class="help" id="h-time_filter">A query naming a time ("in May 2023", "last week") ranks the memories of that time first; checked, it keeps only them.</span>
      </div>
      ${store_.rerank_provider !== "none" && html`<div class="field checkbox">
        <input type="checkbox" id="search-rerank" checked=${form.rerank}
          onChange=${(e) => setForm({ ...form, rerank: e.currentTarget.checked })} aria-describedby="h-rerank" />
        <label for="search-rerank">Rerank with the store's reranker (${store_.rerank_provider})</label>
        <span class="help" id="h-rerank">Unchecked: the first stage's order and scores.</span>
      </div>`}
      <fieldset class="types">
        <legend>Types (none checked: every type)</legend>
        ${typesOf(store_).map((t) => html`<label class="checkbox-inline"><input type="checkbox" checked=${form.types.includes(t)} onChange=${toggleType(t)} /> ${t}</label>`)}
      </fieldset>
      <div class="actions"><button type="submit" class="primary" disabled=${busy}>${busy ? "Searching…" : "Search"}</button></div>
    </form>`}
    ${result && html`<h2>Results</h2>
      <p class="muted" role="status">${memoryCount(result.memories.length)} by ${result.mode} search, best first${result.reranked ? ", ordered by the store's reranker" : ""}${result.reranked === false ? " (the reranker failed: fused order)" : ""}. Scores are on 0 to 1 in every mode, comparable across queries (0.5: as likely relevant as not); the cosine is the raw similarity of ${result.mode === "keyword" ? "a vector match (none in keyword mode)" : "the memory's vector to the query's"}.</p>
      ${result.time_window && html`<p class="muted" data-time-window>The query names a time: “<${Text} value=${result.time_window.said} />”, read as ${result.time_window.start} to ${result.time_window.end} (UTC); memories that happened then rank first${form.time_filter ? ", and only they are kept" : ""}.</p>`}
      ${result.memories.length === 0
        ? html`<${Empty} title="Nothing matched."><p>Try other words, another mode, or no actor.</p><//>`
        : html`<${MemoryRows} memories=${result.memories} instance=${instance} store=${store} scores=${true} />`}`}
  </section>`;
}

function EditMemory({ instance, store, memory, config, onSaved, onCancel }) {
  const [values, setValues] = useState({
    text: memory.text,
    type: memory.type,
    topics: memory.topics.join(", "),
    importance: memory.importance === null ? "" : String(memory.importance),
    metadata: JSON.stringify(memory.metadata, null, 2),
    vector: "",
  });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const problems = problemsByField(error);
  const embeds = config.embed_provider !== "none";
  const set = (name) => (e) => setValues({ ...values, [name]: e.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    const body = {};
    const local = [];
    if (values.text !== memory.text) body.text = values.text;
    if (values.type !== memory.type) body.type = values.type;
    const topics = values.topics.split(",").map((t) => t.trim()).filter(Boolean);
    if (JSON.stringify(topics) !== JSON.stringify(memory.topics)) body.topics = topics;
    const importance = values.importance.trim() === "" ? null : Number(values.importance);
    if (importance !== memory.importance) body.importance = importance;
    try {
      const metadata = JSON.parse(values.metadata || "{}");
      if (JSON.stringify(metadata) !== JSON.stringify(memory.metadata)) body.metadata = metadata;
    } catch (bad) {
      local.push({ field: "metadata", problem: "not JSON: write an object such as {\"source\": \"crm\"}" });
    }
    try {
      const vector = parseVector(values.vector, config.dimensions);
      if (vector) body.vector = vector;
    } catch (bad) {
      local.push({ field: "vector", problem: bad.message });
    }
    if (local.length) {
      setError({ status: 0, code: "validation_error", message: "Fix the fields below.", details: local });
      return;
    }
    if (Object.keys(body).length === 0) {
      setError({ status: 0, code: "nothing_changed", message: "Nothing changed: there is nothing to save.", details: [] });
      return;
    }
    setBusy(true);
    try {
      onSaved(await api("PATCH", storePath(instance, store, "memories", memory.id), { body }));
    } catch (failure) {
      if (failure.status !== 401) setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const field = (name, label, control, help) => html`<div class=${`field${problems[name] ? " invalid" : ""}`}>
    <label for=${`m-${name}`}>${label}</label>
    ${control}
    ${help && html`<span class="help" id=${`mh-${name}`}>${help}</span>`}
    <${FieldProblems} id=${`mp-${name}`} problems=${problems[name]} />
  </div>`;
  const aria = (name, help) => ({
    "aria-invalid": problems[name] ? "true" : undefined,
    "aria-describedby": [help ? `mh-${name}` : "", problems[name] ? `mp-${name}` : ""].filter(Boolean).join(" ") || undefined,
  });
  return html`<form class="memory-form" onSubmit=${submit} novalidate aria-label="Edit memory">
    <h2>Edit this memory</h2>
    <p class="muted">The current state is kept as a version.</p>
    <${FormErrors} error=${error} />
    ${field("text", "Text", html`<textarea id="m-text" rows="4" value=${values.text} onInput=${set("text")} ...${aria("text")}></textarea>`)}
    ${field("type", "Type", html`<select id="m-type" value=${values.type} onChange=${set("type")} ...${aria("type")}>
      ${typesOf(config).map((t) => html`<option value=${t}>${t}</option>`)}</select>`)}
    ${field("topics", "Topics", html`<input id="m-topics" value=${values.topics} onInput=${set("topics")} ...${aria("topics", true)} />`, "Comma-separated, up to 10.")}
    ${field("importance", "Importance", html`<input id="m-importance" type="number" min="0" max="1" step="0.05" value=${values.importance} onInput=${set("importance")} ...${aria("importance", true)} />`, "0 to 1; empty clears it.")}
    ${field("metadata", "Metadata (JSON object)", html`<textarea id="m-metadata" rows="4" spellcheck="false" value=${values.metadata} onInput=${set("metadata")} ...${aria("metadata")}></textarea>`)}
    ${!embeds && field("vector", `Vector (JSON array of ${plural(config.dimensions, "number")})`, html`<textarea id="m-vector" rows="2" spellcheck="false" value=${values.vector} onInput=${set("vector")} ...${aria("vector", true)}></textarea>`, "This store has no embedding model: a new text needs its vector.")}
    <div class="actions">
      <button type="button" onClick=${onCancel}>Cancel</button>
      <button type="submit" class="primary" disabled=${busy}>${busy ? "Saving…" : "Save memory"}</button>
    </div>
  </form>`;
}

const cutText = (text, max = 80) => (Array.from(text).length > max ? `${Array.from(text).slice(0, max).join("")}…` : text);

/** Where a memory came from: extraction of a session, a consolidation run, a restore, or a caller. */
function MemorySourceText({ source, instance, store }) {
  if (source && source.consolidation_id) {
    return html`consolidation <a href=${storeHref(instance, store, "consolidations", source.consolidation_id)}><${Id} value=${source.consolidation_id} copy=${false} /></a>`;
  }
  if (source && source.restored_from) {
    return html`restored from <a href=${storeHref(instance, store, "memories", source.restored_from)}><${Id} value=${source.restored_from} copy=${false} /></a>`;
  }
  if (source && source.session_id) {
    return html`session <a href=${storeHref(instance, store, "sessions", source.session_id)}><${Id} value=${source.session_id} copy=${false} /></a>`;
  }
  return html`<span class="muted">added through the API (no session)</span>`;
}

/** The memories that replaced one another (oldest first), each replaced one with Restore…. */
function Chain({ view, instance, store, onRestore }) {
  const chain = view.chain || [];
  if (chain.length <= 1 && !view.valid_until) return null;
  return html`<section aria-labelledby="chain-title" data-chain>
    <h2 id="chain-title">Chain</h2>
    <p class="muted">The memories that replaced one another, oldest first. A replaced or retired one can be made current again: it comes back as a new memory, and whatever is current is replaced (and stays here).</p>
    <ol class="versions chain">
      ${chain.map((link) => html`<li key=${link.id} data-link=${link.id}>
        <p>${link.id === view.id ? html`<strong>This memory</strong>: ` : html`<a href=${storeHref(instance, store, "memories", link.id)}><${Id} value=${link.id} copy=${false} /></a>: `}<${Text} value=${link.text} /></p>
        <p class="muted">${link.valid_until
          ? html`From <${Time} value=${link.valid_from} /> until <${Time} value=${link.valid_until} />`
          : html`Current since <${Time} value=${link.valid_from} />`}
          ${link.valid_until && html` <button type="button" class="small" onClick=${() => onRestore(link)} aria-label=${`Restore “${cutText(link.text, 40)}”…`}>Restore…</button>`}</p>
      </li>`)}
    </ol>
  </section>`;
}

function RestoreChanges({ link, chain }) {
  const current = chain.filter((l) => !l.valid_until);
  return html`<p>“<${Text} value=${link.text} max=${200} />” becomes current again, as a new memory with its text and fields.</p>
    ${current.length
      ? html`<p>${current.map((l, i) => html`${i ? ", " : ""}“<${Text} value=${l.text} max=${200} />”`)} ${current.length === 1 ? "is" : "are"} replaced and ${current.length === 1 ? "stays" : "stay"} readable in this chain.</p>`
      : html`<p>No memory of this chain is current now: nothing else changes.</p>`}`;
}

export function MemoryPage({ instance, store, memory }) {
  const loaded = useLoad(
    () => settled([api("GET", storePath(instance, store, "memories", memory)), api("GET", storePath(instance, store))]),
    [instance, store, memory],
  );
  const [editing, setEditing] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState(null);
  const [restoring, setRestoring] = useState(null);
  const [view, config] = loaded.data || [];
  const restore = async () => {
    const link = restoring;
    setBusy(true);
    try {
      const made = await api("POST", storePath(instance, store, "memories", link.id, "restore"));
      setRestoring(null);
      flash(`The version “${cutText(link.text)}” is current again, as this new memory.`);
      navigate(storeHref(instance, store, "memories", made.id));
    } catch (failure) {
      setRestoring(null);
      if (failure.status !== 401) setNotice({ kind: "error", text: `Not restored: ${said(failure)}` });
    } finally {
      setBusy(false);
    }
  };
  const forget = async () => {
    setBusy(true);
    try {
      await api("DELETE", storePath(instance, store, "memories", memory));
      setConfirming(false);
      const versions = (view.versions || []).length;
      const cut = Array.from(view.text).length > 80 ? `${Array.from(view.text).slice(0, 80).join("")}…` : view.text;
      flash(`The memory “${cut}” was forgotten${versions ? `, with its ${plural(versions, "earlier version")}` : ""}.`);
      navigate(storeHref(instance, store, "memories"));
    } catch (failure) {
      setConfirming(false);
      setNotice({ kind: "error", text: `Not forgotten: ${said(failure)}` });
    } finally {
      setBusy(false);
    }
  };
  const saved = () => {
    setEditing(false);
    setNotice({ text: "The memory was saved; its previous state is the newest version below." });
    loaded.reload();
  };
  const missing = missingOf(loaded.error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  const versions = view ? (view.versions || []).length : 0;
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="memories" title="Memory" />
    <${Notice} notice=${notice} />
    ${loaded.loading && !view && html`<${Loading} what="the memory" />`}
    <${ErrorState} error=${loaded.error} retry=${loaded.reload} what="the memory" />
    ${view && html`
      <blockquote class="memory-text"><${Text} value=${view.text} /></blockquote>
      <dl class="facts">
        <dt>Id</dt><dd><code><${Id} value=${view.id} label="memory id" /></code></dd>
        <dt>Type</dt><dd>${view.type}</dd>
        <dt>Actor</dt><dd>${view.actor_id ? html`<${ActorId} instance=${instance} store=${store} actor=${view.actor_id} />` : html`<span class="muted">none</span>`}</dd>
        <dt>Topics</dt><dd>${view.topics.length ? view.topics.map((t, i) => html`${i ? ", " : ""}<${Text} value=${t} />`) : html`<span class="muted">none</span>`}</dd>
        <dt>Importance</dt><dd>${view.importance === null ? html`<span class="muted">—</span>` : view.importance}</dd>
        <dt>Confidence</dt><dd>${view.confidence === null ? html`<span class="muted">—</span>` : view.confidence}</dd>
        <dt>Source</dt><dd><${MemorySourceText} source=${view.source} instance=${instance} store=${store} /></dd>
        <dt>Kept</dt><dd><${Time} value=${view.created_at} /></dd>
        <dt>Last changed</dt><dd><${Time} value=${view.updated_at} /></dd>
        <dt>Expires</dt><dd><${Time} value=${view.expires_at} /></dd>
        <dt>Metadata</dt><dd><${Json} value=${view.metadata} label="Metadata" /></dd>
      </dl>
      <h2>Versions</h2>
      ${!view.versions || view.versions.length === 0
        ? html`<p class="muted">No earlier versions: this memory was never changed.</p>`
        : html`<p class="muted">Newest first: each is the memory as it was before a change.</p>
        <ol class="versions">
          ${view.versions.map(
            (v) => html`<li>
              <p>Until <${Time} value=${v.changed_at} />: <${Text} value=${v.text} /></p>
              <p class="muted">type ${v.type}; topics ${v.topics.length ? v.topics.join(", ") : "none"}; importance ${v.importance === null ? "—" : v.importance}</p>
            </li>`,
          )}
        </ol>`}
      <${Chain} view=${view} instance=${instance} store=${store} onRestore=${setRestoring} />
      ${editing
        ? html`<${EditMemory} instance=${instance} store=${store} memory=${view} config=${config} onSaved=${saved} onCancel=${() => setEditing(false)} />`
        : html`<div class="actions">
          <button type="button" onClick=${() => setEditing(true)}>Edit memory</button>
          <button type="button" class="danger" onClick=${() => setConfirming(true)}>Forget memory…</button>
        </div>`}
      <${ConfirmDialog} open=${restoring !== null} title="Restore this version?" action="Restore version" busy=${busy}
        onConfirm=${restore} onClose=${() => setRestoring(null)}>
        ${restoring && html`<${RestoreChanges} link=${restoring} chain=${view.chain || []} />`}
      <//>
      <${ConfirmDialog} open=${confirming} title="Forget this memory?" action="Forget memory" busy=${busy}
        onConfirm=${forget} onClose=${() => setConfirming(false)}>
        <p>“<${Text} value=${view.text} max=${200} />”${versions ? ` and its ${plural(versions, "earlier version")} are` : " is"} removed for good.</p>
      <//>
    `}
  </section>`;
}
