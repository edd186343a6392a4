// Shared pieces: the template tag, data loading, and the designed loading / empty / error
// states, times, text from the API, paging and confirmation dialogs.
//
// Text from the API is always rendered as text nodes (Preact never sets innerHTML for a
// string child), inside <bdi> so that bidirectional controls in a name or a message cannot
// reorder the text around it.

import { h } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import htm from "htm";
import { storeHref } from "./router.js";

export const html = htm.bind(h);

/**
 * The count and its noun: "1 session", "2 sessions", "0 memories", "1,000 messages" (`many` for
 * irregular plurals; English, where only exactly 1 is singular). Every count the console shows
 * goes through here; `{ word: true }` gives the noun alone (for a count styled apart).
 */
export function plural(count, one, many = `${one}s`, { word = false } = {}) {
  const noun = count === 1 ? one : many;
  return word ? noun : `${count.toLocaleString("en")} ${noun}`;
}

// A notice for the next page: an action that leaves its page (a store deleted, a session or a
// memory forgotten, a store created or saved) says what it did on the page it leads to. Taken
// once, by the first page that mounts after it; a reload does not show it again.
let flashed = null;

/** Show `text` (a result, role=status) on the next page that calls useFlash. */
export function flash(text) {
  flashed = { text };
}

/** The notice left by flash() for this page (or null), taken when the page mounts. */
export function useFlash() {
  const [notice] = useState(() => {
    const taken = flashed;
    flashed = null;
    return taken;
  });
  return notice;
}

/** Whether a failed call says the address names no database (`instance_not_found`) or no store
 * (`store_not_found`): the page shows MissingPage (pages/stores.js) instead of itself. */
export function isMissing(error) {
  return Boolean(error) && (error.code === "instance_not_found" || error.code === "store_not_found");
}

/** The first of `errors` that isMissing, or null. */
export function missingOf(...errors) {
  return errors.find(isMissing) || null;
}

/**
 * The answers of several calls made at once (as Promise.all), waiting for every one: when some
 * fail, the one that says the database or store is missing is thrown, else the first failure
 * (so a page under a made-up database says so, whatever its other call answered).
 */
export async function settled(calls) {
  const answers = await Promise.allSettled(calls);
  const failures = answers.filter((a) => a.status === "rejected").map((a) => a.reason);
  if (failures.length) throw missingOf(...failures) || failures[0];
  return answers.map((a) => a.value);
}

/**
 * What to tell a person about a failed call: UI wording for the answers whose API message
 * speaks of API calls (a missing store's "create it with PUT first"; a page may put its own in
 * `error.said`, as the store form does for profile fields that actors hold), else the API's
 * message.
 */
export function said(error) {
  if (error && error.said) return error.said;
  if (error && error.code === "store_not_found") return "This store does not exist. Create it from the stores page.";
  return error ? error.message : "";
}

/**
 * Run `load` (an async function) now and whenever `deps` change. Returns
 * `{ data, error, loading, reload }`; a 503 is retried by the banner (see Banner).
 */
export function useLoad(load, deps) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const generation = useRef(0);
  const run = useCallback(() => {
    const mine = ++generation.current;
    setState((old) => ({ data: old.data, error: null, loading: true }));
    load().then(
      (data) => mine === generation.current && setState({ data, error: null, loading: false }),
      (error) => mine === generation.current && setState({ data: null, error, loading: false }),
    );
  }, deps);
  useEffect(run, [run]);
  useEffect(() => {
    if (state.error && state.error.status === 503) retryWhenBack(run);
  }, [state.error]);
  return { ...state, reload: run };
}

// Loads that failed with 503, run again when the banner's countdown ends (or "Retry now").
const waiting = new Set();
export function retryWhenBack(run) {
  waiting.add(run);
}
export function retryWaiting() {
  const runs = [...waiting];
  waiting.clear();
  for (const run of runs) run();
}

export function Loading({ what }) {
  return html`<p class="state loading" role="status" aria-live="polite">
    <span class="spinner" aria-hidden="true"></span> Loading ${what}…
  </p>`;
}

export function ErrorState({ error, retry, what }) {
  if (!error) return null;
  return html`<div class="state error" role="alert">
    <p><strong>Could not load ${what}.</strong> ${" "}<${Text} value=${said(error)} /></p>
    <p class="muted">Status ${error.status || "none"}, <code>${error.code}</code>${said(error) !== error.message
      ? html`: <${Text} value=${error.message} />` : ""}${error.status === 503
      ? " — retrying when the service is back (see the banner above)."
      : ""}</p>
    ${retry && html`<button type="button" onClick=${retry}>Try again</button>`}
  </div>`;
}

export function Empty({ title, children }) {
  return html`<div class="state empty">
    <p><strong>${title}</strong></p>
    ${children}
  </div>`;
}

/** A result or failure of an action, announced to screen readers. */
export function Notice({ notice }) {
  if (!notice) return null;
  const kind = notice.kind || "ok";
  return html`<div class=${`notice ${kind}`} role=${kind === "error" ? "alert" : "status"}>
    <${Text} value=${notice.text} />
  </div>`;
}

const pad = (n) => String(n).padStart(2, "0");

/** A time as `YYYY-MM-DD HH:MM:SS UTC` (the API's clock), or a dash. */
export function Time({ value }) {
  if (!value) return html`<span class="muted">—</span>`;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return html`<${Text} value=${value} />`;
  const shown =
    `${date.getUTCFullYear()}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())} ` +
    `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())} UTC`;
  return html`<time datetime=${value}>${shown}</time>`;
}

/** Text from the API, isolated for bidi, optionally cut to `max` characters. */
export function Text({ value, max }) {
  if (value === null || value === undefined) return html`<span class="muted">—</span>`;
  let text = String(value);
  const cut = max && text.length > max;
  if (cut) text = Array.from(text).slice(0, max).join("");
  return html`<bdi class="api-text">${text}${cut ? "…" : ""}</bdi>`;
}

export function Json({ value, label }) {
  return html`<pre class="json" tabindex="0" aria-label=${label}>${JSON.stringify(value, null, 2)}</pre>`;
}

export function StatusBadge({ status }) {
  return html`<span class=${`badge badge-${status}`}>${status}</span>`;
}

/** Previous / next links for offset paging; `next` is the API's next_offset. */
export function Pager({ offset, next, limit, link, label }) {
  if (!offset && next === null) return null;
  const previous = Math.max(0, offset - limit);
  return html`<nav class="pager" aria-label=${label}>
    ${offset > 0
      ? html`<a class="button" href=${link(previous)}>← Previous</a>`
      : html`<span class="button disabled" aria-disabled="true">← Previous</span>`}
    <span class="muted">Showing from ${offset + 1}</span>
    ${next !== null
      ? html`<a class="button" href=${link(next)}>Next →</a>`
      : html`<span class="button disabled" aria-disabled="true">Next →</span>`}
  </nav>`;
}

/**
 * A modal confirmation (<dialog>): `title`, what it removes (`children`), and, when
 * `typeToConfirm` is given, a field that must hold exactly that text before the action runs.
 */
export function ConfirmDialog({ open, title, children, action, typeToConfirm, onConfirm, onClose, busy }) {
  const ref = useRef(null);
  const [typed, setTyped] = useState("");
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) {
      setTyped("");
      dialog.showModal();
    }
    if (!open && dialog.open) dialog.close();
  }, [open]);
  const ready = !typeToConfirm || typed === typeToConfirm;
  const submit = (event) => {
    event.preventDefault();
    if (ready && !busy) onConfirm();
  };
  return html`<dialog ref=${ref} class="confirm" aria-labelledby="confirm-title" onClose=${onClose}>
    <form onSubmit=${submit}>
      <h2 id="confirm-title">${title}</h2>
      ${children}
      ${typeToConfirm !== undefined &&
      html`<label class="field">
        <span>Type <strong><${Text} value=${typeToConfirm} /></strong> to confirm</span>
        <input
          name="confirm-text"
          autocomplete="off"
          spellcheck="false"
          value=${typed}
          onInput=${(e) => setTyped(e.currentTarget.value)}
        />
      </label>`}
      <div class="actions">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="danger" disabled=${!ready || busy}>${action}</button>
      </div>
    </form>
  </dialog>`;
}

/** `{field: [problems]}` from an ApiError's `details`. */
export function problemsByField(error) {
  const found = {};
  for (const detail of (error && error.details) || []) {
    const field = String(detail.field || "body");
    (found[field] = found[field] || []).push(String(detail.problem || "invalid"));
  }
  return found;
}

/** The problems the API named for `field`, under the control (aria-describedby `id`). */
export function FieldProblems({ id, problems }) {
  if (!problems || !problems.length) return null;
  return html`<span class="problem" id=${id}>${problems.map(
    (p) => html`<span class="problem-line"><${Text} value=${p} /></span>`,
  )}</span>`;
}

/** The API's own validation answer above a form: its message and every detail (unless the page
 * put the answer in its own words, `error.said`, which then says what the details say). */
export function FormErrors({ error }) {
  if (!error) return null;
  return html`<div class="notice error" role="alert">
    <p><strong><${Text} value=${said(error)} /></strong> <span class="muted">(${error.status}, <code>${error.code}</code>${said(error) !== error.message
      ? html`: <${Text} value=${error.message} />` : ""})</span></p>
    ${error.details.length > 0 && !error.said &&
    html`<ul>
      ${error.details.map(
        (d) => html`<li><code><${Text} value=${d.field} /></code>: <${Text} value=${d.problem} /></li>`,
      )}
    </ul>`}
  </div>`;
}

// Where an id may wrap: after one of the separators ids are made of (session and actor ids take
// letters, digits and `. _ : @ -`), never inside the run of characters between two of them.
const ID_PARTS = /[^.:_@/-]*[.:_@/-]*/g;

/**
 * An id (a session's, an actor's, a memory's): it wraps only after a separator (`locomo:` /
 * `conv-26`, never `locomo:con` / `v-26`), one longer than `max` characters is cut with "…",
 * the whole id shows on hover (title), and a button copies it. `label` names it for the button
 * ("actor", "session id"). With `href`, the id is a link there (the button stays outside it).
 */
export function Id({ value, max = 80, label = "id", copy = true, href }) {
  if (value === null || value === undefined || value === "") return html`<span class="muted">—</span>`;
  const text = String(value);
  const chars = Array.from(text);
  const shown = chars.length > max ? `${chars.slice(0, max).join("")}…` : text;
  const parts = shown.match(ID_PARTS).filter(Boolean);
  const id = html`<bdi class="id-text">${parts.map(
    (part, i) => html`${i ? html`<wbr />` : ""}<span class="id-part">${part}</span>`,
  )}</bdi>`;
  return html`<span class="id" title=${text}>${href ? html`<a href=${href}>${id}</a>` : id}${copy && html`<${CopyButton} value=${text} label=${label} />`}</span>`;
}

/** An actor's id, linked to the actor's page (its profile, memories and sessions). */
export function ActorId({ instance, store, actor, max, copy = true }) {
  return html`<${Id} value=${actor} max=${max} copy=${copy} label="actor" href=${actor ? storeHref(instance, store, "actors", actor) : undefined} />`;
}

/** A small button that copies `value` to the clipboard and says so ("Copied"). */
export function CopyButton({ value, label }) {
  const [state, setState] = useState("");
  const copy = async (event) => {
    event.preventDefault();
    event.stopPropagation();
    try {
      await navigator.clipboard.writeText(value);
      setState("Copied");
    } catch (failure) {
      setState("Copy failed");
    }
    setTimeout(() => setState(""), 1500);
  };
  return html`<button type="button" class="copy" onClick=${copy} aria-label=${`Copy the ${label} ${value}`} title=${`Copy the ${label}`}>${state || "Copy"}</button>`;
}

/** A length of time in words: "30 seconds", "an hour", "90 minutes", "a day", "30 days". */
export function duration(seconds) {
  const units = [[86400, "day"], [3600, "hour"], [60, "minute"], [1, "second"]];
  for (const [size, unit] of units) {
    if (seconds >= size && seconds % size === 0) {
      const count = seconds / size;
      return count === 1 ? `${unit === "hour" ? "an" : "a"} ${unit}` : plural(count, unit);
    }
  }
  return plural(seconds, "second");
}
