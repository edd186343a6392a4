// An actor's page: its profile (GET .../actors/{actor}/profile) with where each value came from,
// a field's history (GET .../profile/history?field=), changing and clearing a field (PATCH
// .../profile), its memories (GET .../memories?actor_id=), its consolidations (pages/consolidations.js),
// its sessions (GET .../sessions, whose every entry names its actor) and forgetting it (DELETE
// .../actors/{actor}/memories).

import { useEffect, useRef, useState } from "preact/hooks";
import { api, storePath } from "../api.js";
import { storeHref } from "../router.js";
import { PROFILE_TYPES } from "../steering.js";
import { ActorConsolidations } from "./consolidations.js";
import { MemoryRows } from "./memories.js";
import { MissingPage, StoreHeader } from "./stores.js";
import {
  ConfirmDialog, Empty, ErrorState, FieldProblems, FormErrors, html, Id, Loading, missingOf, Notice, plural,
  problemsByField, said, settled, StatusBadge, Text, Time, useLoad,
} from "../ui.js";

const memoryCount = (count) => plural(count, "memory", "memories");
const fieldCount = (count) => plural(count, "profile field");
// The actor's newest memories shown here; the memories page pages through the rest.
const MEMORIES_SHOWN = 10;
// Sessions are listed by the API without a filter by actor: the page reads this many pages of
// the newest sessions (100 each) and keeps the actor's.
const SESSION_PAGES = 5;
const SESSION_PAGE = 100;

/** A profile value as a person reads it: a list item by item, a boolean as yes or no. */
export function ProfileValue({ value }) {
  if (value === null || value === undefined) return html`<span class="muted">not known</span>`;
  if (Array.isArray(value)) {
    if (value.length === 0) return html`<span class="muted">an empty list</span>`;
    return html`<ul class="profile-list">${value.map((item) => html`<li><${Text} value=${item} /></li>`)}</ul>`;
  }
  if (typeof value === "boolean") return value ? "yes" : "no";
  return html`<${Text} value=${String(value)} />`;
}

/** Who set a value: extraction of a session (linked) and the messages it read, or a caller. */
export function ProfileSource({ source, instance, store }) {
  if (source.by === "caller") return html`a caller, through the API`;
  if (source.by !== "extraction") return html`<${Text} value=${source.by} />`;
  const { first_seq: first, last_seq: last } = source;
  const messages = first === null || first === undefined
    ? ""
    : first === last ? `, message #${first}` : `, messages #${first} to #${last}`;
  return html`extraction of session ${source.session_id
    ? html`<a href=${storeHref(instance, store, "sessions", source.session_id)}><${Id} value=${source.session_id} copy=${false} /></a>`
    : html`<span class="muted">(gone)</span>`}${messages}`;
}

// A value as the edit form holds it (text), and the JSON sent for the form's text: a list one
// item per line, a number or a boolean as such when it reads as one; anything else is sent as
// typed, for the API to refuse in its own words (422 naming fields.<name>).
function toInput(value, type) {
  if (value === null || value === undefined) return "";
  if (type === "list") return (Array.isArray(value) ? value : [value]).join("\n");
  return String(value);
}

function fromInput(text, type) {
  if (type === "list") return text.split("\n").map((line) => line.trim()).filter(Boolean);
  if (type === "number") return text.trim() !== "" && Number.isFinite(Number(text)) ? Number(text) : text;
  if (type === "boolean") return text === "true" ? true : text === "false" ? false : text;
  return text.trim();
}

function EditField({ instance, store, actor, field, entry, onSaved, onCancel }) {
  const [text, setText] = useState(() => toInput(entry ? entry.value : null, field.type));
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const first = useRef(null);
  useEffect(() => first.current && first.current.focus(), []);
  const name = `fields.${field.name}`;
  const problems = problemsByField(error)[name];
  const ready = field.type === "list" ? fromInput(text, "list").length > 0 : text.trim() !== "";
  const submit = async (event) => {
    event.preventDefault();
    if (!ready || busy) return;
    setBusy(true);
    setError(null);
    try {
      const body = { fields: { [field.name]: fromInput(text, field.type) } };
      await api("PATCH", storePath(instance, store, "actors", actor, "profile"), { body });
      onSaved(`The field ${field.name} was set.`);
    } catch (failure) {
      if (failure.status !== 401) setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const described = ["edit-help", problems ? "edit-problem" : ""].filter(Boolean).join(" ");
  const aria = { "aria-invalid": problems ? "true" : undefined, "aria-describedby": described };
  const help = {
    text: "Up to 1,000 characters.",
    list: "One item per line; up to 50 items of up to 1,000 characters each.",
    number: "A number, such as 41 or 1.75.",
    boolean: "Yes or no.",
    date: "A calendar date.",
  }[field.type];
  let control;
  if (field.type === "boolean") {
    control = html`<div class="inline" role="radiogroup" aria-labelledby="edit-label" ...${aria}>
      ${[["true", "Yes"], ["false", "No"]].map(([value, label], i) => html`<label class="radio">
        <input type="radio" name="edit-value" value=${value} checked=${text === value} ref=${i === 0 ? first : undefined}
          onChange=${() => setText(value)} /> ${label}</label>`)}
    </div>`;
  } else if (field.type === "list") {
    control = html`<textarea id="edit-value" ref=${first} rows="4" value=${text} onInput=${(e) => setText(e.currentTarget.value)} ...${aria}></textarea>`;
  } else {
    control = html`<input id="edit-value" ref=${first} value=${text} autocomplete="off"
      type=${field.type === "date" ? "date" : "text"} inputmode=${field.type === "number" ? "decimal" : undefined}
      onInput=${(e) => setText(e.currentTarget.value)} ...${aria} />`;
  }
  return html`<form class="profile-edit" onSubmit=${submit} novalidate aria-labelledby="edit-title">
    <h3 id="edit-title">${entry ? "Change" : "Set"} <code><${Text} value=${field.name} /></code></h3>
    <${FormErrors} error=${error && !problems ? error : null} />
    <div class=${`field${problems ? " invalid" : ""}`}>
      ${field.type === "boolean"
        ? html`<span class="label" id="edit-label">New value (${PROFILE_TYPES[field.type]})</span>`
        : html`<label for="edit-value" id="edit-label">New value (${PROFILE_TYPES[field.type]})</label>`}
      ${control}
      <span class="help" id="edit-help"><${Text} value=${field.description} /> ${help} The value it replaces stays in the field's history.</span>
      <${FieldProblems} id="edit-problem" problems=${problems} />
    </div>
    <div class="actions">
      <button type="button" onClick=${onCancel}>Cancel</button>
      <button type="submit" class="primary" disabled=${!ready || busy}>${busy ? "Saving…" : `Save ${field.name}`}</button>
    </div>
  </form>`;
}

function History({ instance, store, actor, field, close }) {
  const heading = useRef(null);
  useEffect(() => {
    // Opening the history is a change of address, after which the console moves focus to the
    // page's heading; the history asked for then takes it (and is scrolled to).
    const timer = setTimeout(() => heading.current && heading.current.focus(), 0);
    return () => clearTimeout(timer);
  }, [field.name]);
  const loaded = useLoad(
    () => api("GET", storePath(instance, store, "actors", actor, "profile", "history"), { query: { field: field.name } }),
    [instance, store, actor, field.name],
  );
  const versions = loaded.data ? loaded.data.versions : null;
  return html`<section class="profile-history" aria-labelledby="history-title">
    <h3 id="history-title" tabindex="-1" ref=${heading}>History of <code><${Text} value=${field.name} /></code></h3>
    ${loaded.loading && !versions && html`<${Loading} what="the history" />`}
    <${ErrorState} error=${loaded.error} retry=${loaded.reload} what="the history" />
    ${versions && versions.length === 0 && html`<p class="muted">No value was ever set.</p>`}
    ${versions && versions.length > 0 && html`
      <p class="muted">${plural(versions.length, "version")}, newest first (the store keeps the last 50).</p>
      <ol class="versions">
        ${versions.map((v) => html`<li>
          <div>${v.value === null ? html`<span class="muted">cleared</span>` : html`<${ProfileValue} value=${v.value} />`}</div>
          <p class="muted">${v.value === null ? "Cleared" : "Set"} <${Time} value=${v.updated_at} />, by <${ProfileSource} source=${v.source} instance=${instance} store=${store} /></p>
        </li>`)}
      </ol>`}
    <p><a class="button" href=${close}>Hide the history</a></p>
  </section>`;
}

function ProfileTable({ instance, store, actor, fields, profile, onEdit, onClear, historyOf }) {
  return html`<table class="list profile">
    <caption class="visually-hidden">The actor's profile, in the store's order of fields</caption>
    <thead><tr><th scope="col">Field</th><th scope="col">Value</th><th scope="col">Last set</th><th scope="col">Set by</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
    <tbody>
      ${fields.map((field) => {
        const entry = profile[field.name];
        return html`<tr key=${field.name} data-field=${field.name}>
          <th scope="row"><code><${Text} value=${field.name} /></code><br /><span class="muted"><${Text} value=${field.description} /> (${PROFILE_TYPES[field.type]})</span></th>
          <td class="value"><${ProfileValue} value=${entry ? entry.value : null} /></td>
          <td>${entry ? html`<${Time} value=${entry.updated_at} />` : html`<span class="muted">—</span>`}</td>
          <td>${entry ? html`<${ProfileSource} source=${entry.source} instance=${instance} store=${store} />` : html`<span class="muted">—</span>`}</td>
          <td class="row-actions">
            <button type="button" class="small" onClick=${() => onEdit(field.name)} aria-label=${`${entry ? "Change" : "Set"} ${field.name}`}>${entry ? "Change" : "Set"}</button>
            <a class="button small" href=${historyOf(field.name)} aria-label=${`History of ${field.name}`}>History</a>
            ${entry && html`<button type="button" class="small" onClick=${() => onClear(field.name)} aria-label=${`Clear ${field.name}…`}>Clear…</button>`}
          </td>
        </tr>`;
      })}
    </tbody>
  </table>`;
}

/** "its one memory and its profile (2 profile fields, and every field's history)", naming only
 * what there is. */
function whatGoes(memories, fields) {
  const parts = [];
  if (memories > 0) parts.push(memories === 1 ? "its one memory" : `its ${memoryCount(memories)}`);
  if (fields > 0) parts.push(`its profile (${fieldCount(fields)}, and every field's history)`);
  return parts.join(" and ");
}

async function actorSessions(instance, store, actor) {
  const sessions = [];
  let offset = 0;
  let read = 0;
  for (let page = 0; page < SESSION_PAGES; page += 1) {
    const answer = await api("GET", storePath(instance, store, "sessions"), { query: { offset, limit: SESSION_PAGE } });
    read += answer.sessions.length;
    sessions.push(...answer.sessions.filter((s) => s.actor_id === actor));
    if (answer.next_offset === null || answer.next_offset === undefined) return { sessions, read, all: true };
    offset = answer.next_offset;
  }
  return { sessions, read, all: false };
}

function Sessions({ instance, store, found }) {
  const { sessions, read, all } = found;
  const looked = all ? "" : ` Only the store's ${read.toLocaleString("en")} most recent sessions were looked through.`;
  if (sessions.length === 0) return html`<p class="muted">No live session of this actor.${looked}</p>`;
  return html`<p class="muted">${plural(sessions.length, "session")}, most recent first.${looked}</p>
    <table class="list">
      <caption class="visually-hidden">The actor's sessions, most recent first</caption>
      <thead><tr><th scope="col">Session</th><th scope="col" class="num">Messages</th><th scope="col">Started</th><th scope="col">Last event</th><th scope="col">Extraction</th></tr></thead>
      <tbody>
        ${sessions.map((s) => html`<tr key=${s.session_id}>
          <th scope="row"><a href=${storeHref(instance, store, "sessions", s.session_id)}><${Id} value=${s.session_id} max=${60} copy=${false} /></a></th>
          <td class="num">${s.message_count}</td>
          <td><${Time} value=${s.created_at} /></td>
          <td><${Time} value=${s.last_event_at} /></td>
          <td><${StatusBadge} status=${s.extraction.status} /></td>
        </tr>`)}
      </tbody>
    </table>`;
}

export function ActorPage({ instance, store, actor, query }) {
  const main = useLoad(
    () => settled([api("GET", storePath(instance, store)), api("GET", storePath(instance, store, "actors", actor, "profile"))]),
    [instance, store, actor],
  );
  const memories = useLoad(
    () => api("GET", storePath(instance, store, "memories"), { query: { actor_id: actor, limit: MEMORIES_SHOWN } }),
    [instance, store, actor],
  );
  const sessions = useLoad(() => actorSessions(instance, store, actor), [instance, store, actor]);
  const [editing, setEditing] = useState(null);
  const [clearing, setClearing] = useState(null);
  const [forgetting, setForgetting] = useState(false);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState(null);
  const [config, view] = main.data || [];
  const profile = view ? view.fields : {};
  const fields = config ? config.profile_fields : [];
  const known = Object.keys(profile).length;
  const memoryTotal = memories.data ? memories.data.total : null;
  const historyField = fields.find((f) => f.name === query.get("history")) || null;
  const here = (extra = {}) => storeHref(instance, store, "actors", actor, extra);
  const reloadAll = () => {
    main.reload();
    memories.reload();
    sessions.reload();
  };
  const saved = (text) => {
    setEditing(null);
    setNotice({ text });
    main.reload();
  };
  const clear = async () => {
    const name = clearing;
    setBusy(true);
    try {
      await api("PATCH", storePath(instance, store, "actors", actor, "profile"), { body: { fields: { [name]: null } } });
      setClearing(null);
      saved(`The field ${name} was cleared; its history keeps the value it had.`);
    } catch (failure) {
      setClearing(null);
      setNotice({ kind: "error", text: `Not cleared: ${said(failure)}` });
    } finally {
      setBusy(false);
    }
  };
  const forget = async () => {
    setBusy(true);
    try {
      const answer = await api("DELETE", storePath(instance, store, "actors", actor, "memories"));
      setForgetting(false);
      setNotice({ text: `Forgot ${memoryCount(answer.deleted)} and ${fieldCount(answer.profile_fields_deleted)} of actor ${answer.actor_id}.` });
      reloadAll();
    } catch (failure) {
      setForgetting(false);
      setNotice({ kind: "error", text: `Not forgotten: ${said(failure)}` });
    } finally {
      setBusy(false);
    }
  };
  const missing = missingOf(main.error, memories.error, sessions.error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  const editedField = fields.find((f) => f.name === editing);
  const clearedEntry = clearing ? profile[clearing] : null;
  const names = Object.keys(profile);
  const sessionCount = sessions.data ? sessions.data.sessions.length : null;
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="actors" title=${html`Actor <${Text} value=${actor} />`} />
    <p class="lede">What the store keeps about one actor (a user): its profile, its memories and its sessions.</p>
    <dl class="facts"><dt>Actor</dt><dd><${Id} value=${actor} label="actor" /></dd></dl>
    <${Notice} notice=${notice} />
    <h2>Profile</h2>
    ${main.loading && !view && html`<${Loading} what="the profile" />`}
    <${ErrorState} error=${main.error} retry=${main.reload} what="the profile" />
    ${view && fields.length === 0 && html`<${Empty} title="This store declares no profile fields.">
      <p>A profile holds one value per field the store declares (a name, a city, preferences), filled by extraction and read by recall without a search. Declare fields in the <a href=${storeHref(instance, store, "settings")}>settings</a>.</p>
    <//>`}
    ${view && fields.length > 0 && html`
      <p class="muted">${known === 0
        ? "Nothing is known yet: extraction fills fields from this actor's conversations, and you can set them here."
        : `${known} of ${plural(fields.length, "field")} known. Recall puts them first in every context.`}</p>
      <${ProfileTable} instance=${instance} store=${store} actor=${actor} fields=${fields} profile=${profile}
        onEdit=${(name) => { setNotice(null); setEditing(name); }} onClear=${setClearing} historyOf=${(name) => here({ history: name })} />
      ${editedField && html`<${EditField} key=${editedField.name} instance=${instance} store=${store} actor=${actor} field=${editedField}
        entry=${profile[editedField.name]} onSaved=${saved} onCancel=${() => setEditing(null)} />`}
      ${historyField && html`<${History} key=${`${historyField.name}/${view && profile[historyField.name] ? profile[historyField.name].updated_at : ""}`}
        instance=${instance} store=${store} actor=${actor} field=${historyField} close=${here()} />`}`}
    <h2>Memories</h2>
    ${memories.loading && !memories.data && html`<${Loading} what="memories" />`}
    <${ErrorState} error=${memories.error} retry=${memories.reload} what="the memories" />
    ${memories.data && memories.data.total === 0 && html`<p class="muted">No memories of this actor.</p>`}
    ${memories.data && memories.data.total > 0 && html`
      <p class="muted memories-count">${memoryCount(memoryTotal)}, newest first${memoryTotal > memories.data.memories.length
        ? html`; the newest ${memories.data.memories.length} here, <a href=${storeHref(instance, store, "memories", { actor_id: actor })}>every one on the memories page</a>` : ""}.</p>
      <${MemoryRows} memories=${memories.data.memories} instance=${instance} store=${store} actorColumn=${false} />`}
    ${config && html`<${ActorConsolidations} instance=${instance} store=${store} actor=${actor} canConsolidate=${config.llm_provider !== "none"} />`}
    <h2>Sessions</h2>
    ${sessions.loading && !sessions.data && html`<${Loading} what="sessions" />`}
    ${sessions.error && sessions.error.status === 403
      ? html`<p class="muted" data-sessions-forbidden>This key cannot list the store's sessions: a key limited to actors reads only its actors' data, and sessions are listed for the whole store. Open one by its id from <a href=${storeHref(instance, store, "try")}>Try it</a> or its address.</p>`
      : html`<${ErrorState} error=${sessions.error} retry=${sessions.reload} what="the sessions" />`}
    ${sessions.data && html`<${Sessions} instance=${instance} store=${store} found=${sessions.data} />`}
    ${view && memories.data && html`<section class="danger-zone" aria-labelledby="forget-title">
      <h2 id="forget-title">Forget this actor</h2>
      ${known === 0 && memoryTotal === 0
        ? html`<p>The store keeps no memory and no profile of this actor: there is nothing to forget.${sessionCount ? " Its sessions are forgotten from their own pages." : ""}</p>`
        : html`<p>Removes ${whatGoes(memoryTotal, known)}, at once and for good (data protection requests). Its sessions stay; forget them from their pages.</p>
          <button type="button" class="danger" onClick=${() => setForgetting(true)}>Forget actor…</button>`}
    </section>`}
    <${ConfirmDialog} open=${clearing !== null} title=${html`Clear <code><${Text} value=${clearing || ""} /></code>?`}
      action=${`Clear ${clearing || ""}`} busy=${busy} onConfirm=${clear} onClose=${() => setClearing(null)}>
      <p>The value ${clearedEntry && html`<strong><${ProfileValue} value=${clearedEntry.value} /></strong>`} leaves actor <strong><${Text} value=${actor} /></strong>'s profile; the field's history keeps it.</p>
    <//>
    <${ConfirmDialog} open=${forgetting} title=${html`Forget actor <${Text} value=${actor} />?`}
      action="Forget actor" busy=${busy} onConfirm=${forget} onClose=${() => setForgetting(false)}>
      <p>These are removed for good:</p>
      <ul>
        <li>${memoryTotal === 1 ? "its one memory" : `all ${memoryCount(memoryTotal || 0)}`}</li>
        <li>its profile: ${names.length === 0 ? "no field holds a value" : html`${fieldCount(names.length)} (${names.map((n, i) => html`${i ? ", " : ""}<code><${Text} value=${n} /></code>`)}) and their history`}</li>
      </ul>
      <p>${sessionCount
        ? `Its ${plural(sessionCount, "session")} stay${sessionCount === 1 ? "s" : ""}, and ${sessionCount === 1 ? "its" : "their"} unread and new messages are still extracted: forget ${sessionCount === 1 ? "it" : "them"} from ${sessionCount === 1 ? "its page" : "their pages"} to stop that.`
        : "Its sessions, if any, stay."}</p>
    <//>
  </section>`;
}
