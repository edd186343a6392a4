// Create a store or change its settings: every setting of the product's table and the provider
// fields (PUT .../agent-memory/{store}). API keys are write-only: the form shows whether one is
// stored, and sends one only when the person sets or replaces it (or removes it).

import { useState } from "preact/hooks";
import { api, storePath } from "./api.js";
import { storeHref } from "./router.js";
import {
  ExamplesEditor, heldFields, heldSaid, InstructionsField, placed, ProfileFieldsEditor, steeringBody, steeringOfStore,
  steeringValues, TypeExamplesField, typeValues,
} from "./steering.js";
import { FieldProblems, FormErrors, html, problemsByField } from "./ui.js";

// The product's settings table (name, default, what it does, input limits).
export const SETTINGS = [
  ["extraction_delay_seconds", 300, "How long after a session's newest unread message extraction runs (30 to 3600 s).", 30, 3600, 1],
  ["summarize_after", 40, "Summarize once a session holds more messages than this (1 to 1000).", 1, 1000, 1],
  ["keep_recent", 12, "Messages kept as they are when summarizing (0 to 999, below summarize_after).", 0, 999, 1],
  ["session_ttl_seconds", 3600, "A session is forgotten this long after its last message (60 s to one year).", 60, 31536000, 1],
  ["memory_ttl_seconds", 31536000, "A long-term memory is kept this long (60 s to ten years; default one year).", 60, 315360000, 1],
  ["dedupe_threshold", 0.92, "A new memory at least this similar to one the actor has is a duplicate (above 0, at most 1).", 0.01, 1, 0.01],
];

// What each setting and provider field is called on the console's pages (the API's name is in
// the field's help, and on the store page in the title of its label).
export const LABELS = {
  extraction_delay_seconds: "Extraction delay (seconds)",
  summarize_after: "Summarize after (messages)",
  keep_recent: "Keep recent (messages)",
  session_ttl_seconds: "Forget sessions after (seconds)",
  memory_ttl_seconds: "Keep memories for (seconds)",
  dedupe_threshold: "Duplicate threshold",
  redact_pii: "Redact personal data",
  redact_card_digit_runs: "Redact card numbers written as digit runs",
  custom_types: "Custom memory types",
  extraction_instructions: "Extraction instructions",
  extraction_examples: "Extraction examples",
  profile_fields: "Profile fields",
  llm_provider: "Language model provider",
  llm_model: "Language model",
  llm_base_url: "Language model base URL",
  embed_provider: "Embedding provider",
  embed_model: "Embedding model",
  embed_base_url: "Embedding base URL",
  dimensions: "Dimensions",
  rerank_provider: "Reranker provider",
  rerank_model: "Reranker model",
  rerank_base_url: "Reranker base URL",
  rerank_candidates: "Reranker candidates",
  aws_region: "AWS region",
};

// True on both kinds of stack: no API answer says which rule the one behind this page applies
// (KIVIDB_ALLOW_PRIVATE_ENDPOINTS is the local stack's, and never reaches a response).
const BASE_URL_HELP =
  "The base URL of an OpenAI-compatible server. The deployed service takes https:// URLs on public addresses only; " +
  "a local stack started with KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 also takes http:// and loopback or private addresses, " +
  "such as http://127.0.0.1:8765/v1.";

const LLM_PROVIDERS = ["none", "openai", "anthropic", "bedrock", "custom"];
const EMBED_PROVIDERS = ["none", "openai", "bedrock", "custom"];
const RERANK_PROVIDERS = ["none", "cohere", "voyage", "jina", "bedrock", "custom", "llm"];
// What each kind of provider is called in the form, and what "none" (or "llm") means for it.
const KIND = {
  llm: { legend: "Language model (extraction and summaries)", key: "Language model API key", newKey: "language model",
    help: "none: nothing is extracted or summarized." },
  embed: { legend: "Embeddings (semantic and hybrid search)", key: "Embedding API key", newKey: "embedding",
    help: "none: clients send vectors with memories and searches." },
  rerank: { legend: "Reranker (orders search and recall candidates)", key: "Reranker API key", newKey: "reranker",
    help: "none: the fused order is returned. cohere, voyage, jina: their hosted APIs, with a key. bedrock: Amazon Bedrock's Rerank, " +
      "with the AWS region below and no key. custom: Cohere's rerank shape at the base URL. llm: the store's language model scores the candidates." },
};
// Providers whose calls are signed by the service's role, or made with the language model's key: no key of their own.
const KEYLESS = ["none", "bedrock", "llm"];
const RERANK_BASE_URL_HELP =
  "The base URL of a server with Cohere's rerank shape (POST {base}/rerank). The deployed service takes https:// URLs on " +
  "public addresses only; a local stack started with KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 also takes http:// and loopback addresses.";
const BEDROCK_BASE_URL_HELP =
  "Leave empty: Amazon Bedrock is called at its regional address with the service's own role. Only a local stack " +
  "started with KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 takes one, for a stand-in such as http://127.0.0.1:8766.";
// A base URL is sent for these providers (bedrock's only matters on a local stack).
const WITH_BASE_URL = ["custom", "bedrock"];

function initialValues(store) {
  const values = {
    name: "",
    llm_provider: "none", llm_model: "", llm_base_url: "",
    embed_provider: "none", embed_model: "", embed_base_url: "",
    rerank_provider: "none", rerank_model: "", rerank_base_url: "", rerank_candidates: "50",
    dimensions: "1536",
    aws_region: "",
    redact_pii: true,
    redact_card_digit_runs: true,
    custom_types: [],
    ...steeringValues(store),
  };
  for (const [name, fallback] of SETTINGS) values[name] = String(fallback);
  if (!store) return values;
  for (const field of ["llm_provider", "embed_provider", "rerank_provider"]) values[field] = store[field];
  for (const field of ["llm_model", "llm_base_url", "embed_model", "embed_base_url", "rerank_model", "rerank_base_url"]) {
    values[field] = store[field] || "";
  }
  values.rerank_candidates = String(store.rerank_candidates);
  values.dimensions = String(store.dimensions);
  values.aws_region = store.aws_region || "";
  for (const [name] of SETTINGS) values[name] = String(store[name]);
  values.redact_pii = store.redact_pii;
  values.redact_card_digit_runs = store.redact_card_digit_runs;
  values.custom_types = store.custom_types.map(typeValues);
  values.name = store.name;
  return values;
}

// Keys: "keep" (send nothing), "set" (send the typed key), "remove" (send null).
function keyField(kind) {
  return `${kind}_api_key`;
}

/** The PUT body: on create every setting given; on change only what differs from `store`. */
function bodyOf(values, keys, store) {
  const body = {};
  const text = (v) => (v.trim() === "" ? null : v.trim());
  const number = (v) => (v.trim() === "" ? null : Number(v));
  const wanted = {
    llm_provider: values.llm_provider,
    llm_model: text(values.llm_model),
    llm_base_url: WITH_BASE_URL.includes(values.llm_provider) ? text(values.llm_base_url) : null,
    embed_provider: values.embed_provider,
    embed_model: text(values.embed_model),
    embed_base_url: WITH_BASE_URL.includes(values.embed_provider) ? text(values.embed_base_url) : null,
    rerank_provider: values.rerank_provider,
    rerank_model: text(values.rerank_model),
    rerank_base_url: WITH_BASE_URL.includes(values.rerank_provider) ? text(values.rerank_base_url) : null,
    // Hidden without a reranker: what the store has (or the default) is left as it is.
    rerank_candidates: values.rerank_provider === "none" ? (store ? store.rerank_candidates : 50) : number(values.rerank_candidates),
    dimensions: number(values.dimensions),
    aws_region: text(values.aws_region),
    redact_pii: values.redact_pii,
    redact_card_digit_runs: values.redact_card_digit_runs,
    ...steeringBody(values),
  };
  if (values.llm_provider === "none") wanted.llm_model = null;
  if (values.embed_provider === "none") wanted.embed_model = null;
  if (values.rerank_provider === "none" || values.rerank_provider === "llm") wanted.rerank_model = null;
  for (const [name] of SETTINGS) wanted[name] = number(values[name]);
  // The steering settings compared in the form's shape (a type without examples is the same
  // whether the store says null or nothing).
  const steered = store ? steeringOfStore(store) : {};
  for (const [field, value] of Object.entries(wanted)) {
    const before = store ? (field in steered ? steered[field] : store[field]) : undefined;
    const same = store && JSON.stringify(before ?? null) === JSON.stringify(value);
    if (store ? !same : value !== null) body[field] = value;
  }
  if (!store) {
    // On create, leave the defaults to the API unless they were changed.
    for (const [name, fallback] of SETTINGS) if (body[name] === fallback) delete body[name];
    if (body.llm_provider === "none") delete body.llm_provider;
    if (body.embed_provider === "none") delete body.embed_provider;
    if (body.rerank_provider === "none") delete body.rerank_provider;
    if (body.rerank_candidates === 50) delete body.rerank_candidates;
    if (body.redact_pii === true) delete body.redact_pii;
    if (body.redact_card_digit_runs === true) delete body.redact_card_digit_runs;
    for (const list of ["custom_types", "extraction_examples", "profile_fields"]) {
      if (body[list] && body[list].length === 0) delete body[list];
    }
    if (body.dimensions === 1536) delete body.dimensions;
  }
  for (const kind of ["llm", "embed", "rerank"]) {
    const key = keys[kind];
    if (key.mode === "set") body[keyField(kind)] = key.value;
    if (key.mode === "remove") body[keyField(kind)] = null;
  }
  return body;
}

function Field({ name, label, help, problems, children }) {
  return html`<div class=${`field${problems[name] ? " invalid" : ""}`}>
    <label for=${`f-${name}`}>${label}</label>
    ${children}
    ${help && html`<span class="help" id=${`h-${name}`}>${help}</span>`}
    <${FieldProblems} id=${`p-${name}`} problems=${problems[name]} />
  </div>`;
}

function describedBy(name, problems, help = true) {
  return [help ? `h-${name}` : "", problems[name] ? `p-${name}` : ""].filter(Boolean).join(" ") || undefined;
}

// Whether the form's provider or base URL for `kind` differs from the store's: the API then
// drops the stored key unless a new one is sent (a key is never sent to another server).
function movesKey(kind, values, store) {
  if (!store) return false;
  const provider = values[`${kind}_provider`];
  const url = WITH_BASE_URL.includes(provider) ? values[`${kind}_base_url`].trim() || null : null;
  return provider !== store[`${kind}_provider`] || url !== (store[`${kind}_base_url`] ?? null);
}

function KeyControl({ kind, stored, dropped, keyless, state, setState, problems }) {
  const name = keyField(kind);
  const status = stored
    ? "A key is stored (it is never shown)."
    : dropped
      ? "The stored key is dropped with this change of provider or base URL (a key is never sent to another server)" +
        (keyless ? "." : ": set the key for the new one.")
      : "No key is stored.";
  return html`<div class=${`field key-field${problems[name] ? " invalid" : ""}`}>
    <span class="label" id=${`l-${name}`}>${KIND[kind].key}</span>
    <span class="help" data-key-status=${stored ? "present" : "absent"}>${status}</span>
    ${state.mode === "set"
      ? html`<div class="inline">
          <label class="visually-hidden" for=${`f-${name}`}>New ${KIND[kind].newKey} API key</label>
          <input id=${`f-${name}`} name=${name} type="password" autocomplete="off" spellcheck="false"
            value=${state.value} onInput=${(e) => setState({ mode: "set", value: e.currentTarget.value })}
            aria-describedby=${problems[name] ? `p-${name}` : undefined} aria-invalid=${problems[name] ? "true" : undefined} />
          <button type="button" onClick=${() => setState({ mode: "keep", value: "" })}>Keep ${stored ? "the stored key" : "no key"}</button>
        </div>`
      : html`<div class="inline">
          <button type="button" onClick=${() => setState({ mode: "set", value: "" })}>${stored ? "Replace key" : "Set key"}</button>
          ${stored && state.mode !== "remove" &&
          html`<button type="button" onClick=${() => setState({ mode: "remove", value: "" })}>Remove key</button>`}
          ${state.mode === "remove" &&
          html`<span class="muted">The stored key will be removed.</span>
            <button type="button" onClick=${() => setState({ mode: "keep", value: "" })}>Keep it</button>`}
        </div>`}
    <${FieldProblems} id=${`p-${name}`} problems=${problems[name]} />
  </div>`;
}

export function StoreForm({ instance, store, onSaved }) {
  const [values, setValues] = useState(() => initialValues(store));
  const [keys, setKeys] = useState({
    llm: { mode: "keep", value: "" }, embed: { mode: "keep", value: "" }, rerank: { mode: "keep", value: "" },
  });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [nothing, setNothing] = useState(false);
  const problems = problemsByField(error);
  const held = heldFields(error);
  const creating = !store;
  const set = (name) => (event) => {
    const target = event.currentTarget;
    const next = { ...values, [name]: target.type === "checkbox" ? target.checked : target.value };
    if (name.endsWith("_provider")) {
      // Another provider starts from its own model and address (the store's, when it is the
      // store's provider again), never the previous provider's: "gpt-4o-mini" is no rerank model.
      const kind = name.slice(0, -"_provider".length);
      const own = store && store[name] === target.value;
      next[`${kind}_model`] = own ? store[`${kind}_model`] || "" : "";
      next[`${kind}_base_url`] = own ? store[`${kind}_base_url`] || "" : "";
    }
    setValues(next);
  };
  const input = (name, attrs = {}) => html`<input id=${`f-${name}`} name=${name} value=${values[name]}
    onInput=${set(name)} aria-invalid=${problems[name] ? "true" : undefined}
    aria-describedby=${describedBy(name, problems, attrs.help !== false)} ...${attrs} />`;
  const select = (name, options) => html`<select id=${`f-${name}`} name=${name} value=${values[name]}
    onChange=${set(name)} aria-invalid=${problems[name] ? "true" : undefined} aria-describedby=${describedBy(name, problems)}>
    ${options.map((o) => html`<option value=${o}>${o}</option>`)}
  </select>`;

  const submit = async (event) => {
    event.preventDefault();
    const name = creating ? values.name.trim() : store.name;
    const body = bodyOf(values, keys, store);
    setError(null);
    setNothing(false);
    if (!creating && Object.keys(body).length === 0) {
      setNothing(true);
      return;
    }
    if (creating && !name) {
      setError({ status: 0, code: "name_required", message: "Give the store a name.", details: [{ field: "name", problem: "required: letters, digits, '_', '-' and '.', 1 to 64" }] });
      return;
    }
    setBusy(true);
    try {
      const saved = await api("PUT", storePath(instance, name), { body });
      onSaved(saved, creating);
    } catch (failure) {
      if (failure.status !== 401) {
        // A name the path pattern refuses is a 422 about path.store: show it by the name field.
        failure.details = placed(failure.details).map((d) => (String(d.field).startsWith("path.store") ? { ...d, field: "name" } : d));
        // Profile fields that actors hold: said in the console's words (FormErrors shows the
        // API's message beside them).
        const kept = heldFields(failure);
        if (kept) failure.said = heldSaid(kept);
        setError(failure);
      }
    } finally {
      setBusy(false);
    }
  };

  const types = values.custom_types;
  const setType = (index, field) => (event) => {
    const next = types.map((t, i) => (i === index ? { ...t, [field]: event.currentTarget.value } : t));
    setValues({ ...values, custom_types: next });
  };

  const providerBlock = (kind, providers) => {
    const provider = values[`${kind}_provider`];
    const hasKey = Boolean(store && store[`has_${kind}_api_key`]);
    const moved = movesKey(kind, values, store);
    return html`<fieldset>
      <legend>${KIND[kind].legend}</legend>
      <${Field} name=${`${kind}_provider`} label="Provider" help=${KIND[kind].help} problems=${problems}>
        ${select(`${kind}_provider`, providers)}
      <//>
      ${provider !== "none" && provider !== "llm" && html`
        <${Field} name=${`${kind}_model`} label="Model" help="The provider's model name." problems=${problems}>
          ${input(`${kind}_model`, { autocomplete: "off", spellcheck: "false" })}
        <//>`}
      ${WITH_BASE_URL.includes(provider) && html`
        <${Field} name=${`${kind}_base_url`} label="Base URL"
          help=${provider === "bedrock" ? BEDROCK_BASE_URL_HELP : kind === "rerank" ? RERANK_BASE_URL_HELP : BASE_URL_HELP} problems=${problems}>
          ${input(`${kind}_base_url`, { type: "url", autocomplete: "off", spellcheck: "false" })}
        <//>`}
      ${(!KEYLESS.includes(provider) || hasKey) && html`
        <${KeyControl} kind=${kind} stored=${hasKey && !moved} dropped=${hasKey && moved} keyless=${KEYLESS.includes(provider)}
          state=${keys[kind]} setState=${(s) => setKeys({ ...keys, [kind]: s })} problems=${problems} />`}
      ${kind === "embed" && html`
        <${Field} name="dimensions" label="Dimensions" help="Length of every vector (1 to 8192). Changes only while the store holds no memories." problems=${problems}>
          ${input("dimensions", { type: "number", min: 1, max: 8192, step: 1, inputmode: "numeric" })}
        <//>`}
      ${kind === "rerank" && provider !== "none" && html`
        <${Field} name="rerank_candidates" label="Candidates" help="How many fused candidates a search or recall asks the reranker to order (1 to 200); the best limit of its order are returned. Default 50." problems=${problems}>
          ${input("rerank_candidates", { type: "number", min: 1, max: 200, step: 1, inputmode: "numeric" })}
        <//>`}
    </fieldset>`;
  };

  return html`<form class="store-form" onSubmit=${submit} novalidate>
    <${FormErrors} error=${error} />
    ${creating && html`
      <${Field} name="name" label="Store name" help="Letters, digits, '_', '-' and '.', 1 to 64 characters. It cannot be changed later." problems=${problems}>
        ${input("name", { autocomplete: "off", spellcheck: "false", required: true })}
      <//>`}
    ${providerBlock("llm", LLM_PROVIDERS)}
    ${providerBlock("embed", EMBED_PROVIDERS)}
    ${providerBlock("rerank", RERANK_PROVIDERS)}
    ${(["llm", "embed", "rerank"].some((kind) => values[`${kind}_provider`] === "bedrock") || (store && store.aws_region)) && html`
      <${Field} name="aws_region" label="AWS region" help="Where the bedrock providers are called, such as us-east-1. Amazon Bedrock takes no API key: the service's own role signs its calls." problems=${problems}>
        ${input("aws_region", { autocomplete: "off", spellcheck: "false" })}
      <//>`}
    <fieldset>
      <legend>Settings</legend>
      ${SETTINGS.map(([name, fallback, help, min, max, step]) => html`
        <${Field} name=${name} label=${LABELS[name]} help=${html`${help} Default ${fallback}. <code>${name}</code> in the API.`} problems=${problems}>
          ${input(name, { type: "number", min, max, step, inputmode: step === 1 ? "numeric" : "decimal" })}
        <//>`)}
      <div class=${`field checkbox${problems.redact_pii ? " invalid" : ""}`}>
        <input type="checkbox" id="f-redact_pii" name="redact_pii" checked=${values.redact_pii} onChange=${set("redact_pii")}
          aria-describedby=${describedBy("redact_pii", problems)} />
        <label for="f-redact_pii">${LABELS.redact_pii}</label>
        <span class="help" id="h-redact_pii">Replace emails, phone and card numbers, US social security numbers and IP addresses before keeping a memory. Default on. <code>redact_pii</code> in the API.</span>
        <${FieldProblems} id="p-redact_pii" problems=${problems.redact_pii} />
      </div>
      <div class=${`field checkbox${problems.redact_card_digit_runs ? " invalid" : ""}`}>
        <input type="checkbox" id="f-redact_card_digit_runs" name="redact_card_digit_runs"
          checked=${values.redact_card_digit_runs} onChange=${set("redact_card_digit_runs")}
          aria-describedby=${describedBy("redact_card_digit_runs", problems)} />
        <label for="f-redact_card_digit_runs">${LABELS.redact_card_digit_runs}</label>
        <span class="help" id="h-redact_card_digit_runs">With personal data redacted, also treat a run of 13 to 19 digits that passes the Luhn check as a card number (off: only grouped card numbers). Default on. <code>redact_card_digit_runs</code> in the API.</span>
        <${FieldProblems} id="p-redact_card_digit_runs" problems=${problems.redact_card_digit_runs} />
      </div>
    </fieldset>
    <fieldset>
      <legend>${LABELS.custom_types} (up to three; <code>custom_types</code> in the API)</legend>
      <${FieldProblems} id="p-custom_types" problems=${problems.custom_types} />
      ${types.length === 0 && html`<p class="muted">Only the built-in types, semantic and episodic.</p>`}
      ${types.map((type, index) => {
        const base = `custom_types.${index}`;
        return html`<div class="type-row" key=${index}>
          <div class=${`field${problems[`${base}.name`] ? " invalid" : ""}`}>
            <label for=${`f-${base}.name`}>Type ${index + 1} name</label>
            <input id=${`f-${base}.name`} value=${type.name} onInput=${setType(index, "name")} autocomplete="off" spellcheck="false"
              aria-invalid=${problems[`${base}.name`] ? "true" : undefined} aria-describedby=${problems[`${base}.name`] ? `p-${base}.name` : undefined} />
            <${FieldProblems} id=${`p-${base}.name`} problems=${problems[`${base}.name`]} />
          </div>
          <div class=${`field${problems[`${base}.description`] ? " invalid" : ""}`}>
            <label for=${`f-${base}.description`}>Type ${index + 1} description</label>
            <input id=${`f-${base}.description`} value=${type.description} onInput=${setType(index, "description")}
              aria-invalid=${problems[`${base}.description`] ? "true" : undefined} aria-describedby=${problems[`${base}.description`] ? `p-${base}.description` : undefined} />
            <${FieldProblems} id=${`p-${base}.description`} problems=${problems[`${base}.description`]} />
          </div>
          <${TypeExamplesField} index=${index} value=${type.examples} onInput=${(text) => setValues({ ...values, custom_types: types.map((t, i) => (i === index ? { ...t, examples: text } : t)) })} problems=${problems} />
          <${FieldProblems} id=${`p-${base}`} problems=${problems[base]} />
          <button type="button" onClick=${() => setValues({ ...values, custom_types: types.filter((_, i) => i !== index) })}>Remove type ${index + 1}</button>
        </div>`;
      })}
      ${types.length < 3 && html`<button type="button" onClick=${() => setValues({ ...values, custom_types: [...types, { name: "", description: "", examples: "" }] })}>Add a custom type</button>`}
    </fieldset>
    <fieldset class="steering">
      <legend>What extraction keeps</legend>
      <${InstructionsField} value=${values.extraction_instructions} problems=${problems}
        onInput=${(text) => setValues({ ...values, extraction_instructions: text })} />
    </fieldset>
    <${ExamplesEditor} examples=${values.extraction_examples} problems=${problems}
      types=${["semantic", "episodic", ...types.map((t) => t.name.trim()).filter(Boolean)]}
      onChange=${(list) => setValues({ ...values, extraction_examples: list })} />
    <${ProfileFieldsEditor} fields=${values.profile_fields} problems=${problems} held=${held}
      storeFields=${store ? store.profile_fields : []} onChange=${(list) => setValues({ ...values, profile_fields: list })} />
    ${nothing && html`<p class="notice" role="status">Nothing changed: there is nothing to save.</p>`}
    <div class="actions">
      <a class="button" href=${creating ? "#/agent-memory" : storeHref(instance, store.name)}>Cancel</a>
      <button type="submit" class="primary" disabled=${busy}>${busy ? "Saving…" : creating ? "Create store" : "Save settings"}</button>
    </div>
  </form>`;
}
