// Consolidation (docs/consolidation.md): an actor's runs on its page (GET .../consolidations?
// actor_id=, POST .../actors/{actor}/consolidate), one run with each step's memories before and
// after (GET .../consolidations/{id}), and applying, discarding or reverting it (POST
// .../consolidations/{id}/apply | discard | revert), each confirmed by a dialog that names the
// memories that change.

import { useState } from "preact/hooks";
import { api, storePath } from "../api.js";
import { storeHref } from "../router.js";
import { MissingPage, StoreHeader } from "./stores.js";
import {
  ActorId, ConfirmDialog, ErrorState, html, Id, Loading, missingOf, Notice, plural, said, StatusBadge, Text, Time,
  useLoad,
} from "../ui.js";

const RUNS_SHOWN = 10;
const ACTIONS = { merge: "Merge", update: "Update", drop: "Drop" };

/** "2 steps planned, 1 applied …" from a run's counts, naming only what is not zero. */
function countsText(counts) {
  const parts = [
    [counts.examined, "memory examined", "memories examined"],
    [counts.planned, "step planned", "steps planned"],
    [counts.applied, "applied"],
    [counts.conflicts, "conflict"],
    [counts.merged, "memory merged", "memories merged"],
    [counts.updated, "updated"],
    [counts.dropped, "dropped"],
  ];
  const ignored = counts.ignored_unknown_ids + counts.ignored_merge_of_one + counts.ignored_too_long + counts.ignored_invalid;
  const text = parts
    .filter(([n], i) => n > 0 || i === 0)
    .map(([n, one, many]) => (many ? plural(n, one, many) : `${n} ${one}`));
  if (ignored) text.push(`${plural(ignored, "step")} of the model's plan ignored`);
  return text.join(", ");
}

const memoryHref = (instance, store, id) => storeHref(instance, store, "memories", id);

/** A step's memory, linked to its page when it exists (a planned step's result does not yet). */
function Quote({ memory, instance, store, kept = true }) {
  const text = html`“<${Text} value=${memory.text} max=${300} />”`;
  return kept ? html`<a href=${memoryHref(instance, store, memory.id)} class="step-memory">${text}</a>` : text;
}

/** An actor's runs, newest first, and a button that asks for one (on the actor's page). */
export function ActorConsolidations({ instance, store, actor, canConsolidate }) {
  const runs = useLoad(
    () => api("GET", storePath(instance, store, "consolidations"), { query: { actor_id: actor, limit: RUNS_SHOWN } }),
    [instance, store, actor],
  );
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState(null);
  const start = async () => {
    setBusy(true);
    setNotice(null);
    try {
      const queued = await api("POST", storePath(instance, store, "actors", actor, "consolidate"));
      setNotice({ text: `Consolidation ${queued.consolidation_id} is ${queued.status}; it is listed below ("Refresh" shows how it went).` });
      runs.reload();
    } catch (failure) {
      if (failure.status !== 401) setNotice({ kind: "error", text: `Not started: ${said(failure)}` });
    } finally {
      setBusy(false);
    }
  };
  const list = runs.data ? runs.data.consolidations : null;
  return html`<section aria-labelledby="consolidations-title" data-consolidations>
    <h2 id="consolidations-title">Consolidation</h2>
    <p class="muted">A run reads the actor's memories in related sets and asks the store's language model which to merge, correct or retire. Every replaced memory stays readable in its chain, and a run can be reverted.</p>
    <${Notice} notice=${notice} />
    ${runs.loading && !list && html`<${Loading} what="consolidations" />`}
    <${ErrorState} error=${runs.error} retry=${runs.reload} what="the consolidations" />
    ${list && list.length === 0 && html`<p class="muted">No consolidation of this actor yet.</p>`}
    ${list && list.length > 0 && html`<table class="list consolidations">
      <caption class="visually-hidden">The actor's consolidations, newest first</caption>
      <thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Asked</th><th scope="col">Mode</th><th scope="col">What it did</th></tr></thead>
      <tbody>
        ${list.map((run) => html`<tr key=${run.consolidation_id} data-run=${run.consolidation_id}>
          <th scope="row"><a href=${storeHref(instance, store, "consolidations", run.consolidation_id)}><${Id} value=${run.consolidation_id} copy=${false} /></a></th>
          <td><${StatusBadge} status=${run.status} /></td>
          <td><${Time} value=${run.created_at} /> (${run.trigger === "automatic" ? "automatic" : "on request"})</td>
          <td>${run.mode === "review" ? "review" : "apply"}</td>
          <td>${countsText(run.counts)}</td>
        </tr>`)}
      </tbody>
    </table>`}
    <div class="actions">
      <button type="button" onClick=${() => runs.reload()}>Refresh</button>
      ${canConsolidate
        ? html`<button type="button" class="primary" disabled=${busy} onClick=${start}>${busy ? "Starting…" : "Consolidate now"}</button>`
        : html`<span class="muted">This store has no language model, so it cannot consolidate.</span>`}
    </div>
  </section>`;
}

function Step({ step, instance, store }) {
  return html`<li class="step" data-step=${step.index}>
    <p><strong>${ACTIONS[step.action] || step.action}</strong> <${StatusBadge} status=${step.status} />
      ${step.reason && html` <span class="muted">— <${Text} value=${step.reason} /></span>`}</p>
    <div class="step-sides">
      <div data-before>
        <h4>Before</h4>
        <ul>${step.before.map((m) => html`<li key=${m.id}><${Quote} memory=${m} instance=${instance} store=${store} /></li>`)}</ul>
      </div>
      <div data-after>
        <h4>After</h4>
        ${step.after
          ? html`<p><${Quote} memory=${step.after} instance=${instance} store=${store} kept=${["applied", "reverted"].includes(step.status)} /></p>`
          : html`<p class="muted">Retired, no successor.</p>`}
      </div>
    </div>
    ${step.conflict && html`<p class="conflict" role="note">Not applied: <${Text} value=${step.conflict} /></p>`}
  </li>`;
}

/** What a decision changes, memory by memory: the dialog's body. */
function Changes({ run, verb }) {
  const steps = run.steps.filter((s) => (verb === "revert" ? s.status === "applied" : s.status === "planned"));
  if (verb === "discard") {
    return html`<p>The plan's ${plural(steps.length, "step")} ${steps.length === 1 ? "is" : "are"} dropped: no memory changes.</p>`;
  }
  const line = (s) => {
    const before = s.before.map((m, i) => html`${i ? ", " : ""}“<${Text} value=${m.text} max=${120} />”`);
    const after = s.after ? html`“<${Text} value=${s.after.text} max=${120} />”` : null;
    if (verb === "revert") {
      return after
        ? html`<li key=${s.index}>${after} is retired; ${before} ${s.before.length === 1 ? "becomes" : "become"} current again</li>`
        : html`<li key=${s.index}>${before} becomes current again</li>`;
    }
    if (s.action === "drop") return html`<li key=${s.index}>${before} is retired</li>`;
    return html`<li key=${s.index}>${before} ${s.before.length === 1 ? "is" : "are"} replaced by ${after}</li>`;
  };
  return html`<p>${verb === "revert" ? "These changes are undone:" : "These changes are made:"}</p>
    <ul class="changes">${steps.map(line)}</ul>
    <p class="muted">${verb === "revert"
      ? "Nothing is deleted: the run's results stay readable in their chains."
      : "Nothing is deleted: each replaced memory stays readable in its chain. A step whose memories changed since the plan is left out and reported."}</p>`;
}

export function ConsolidationPage({ instance, store, consolidation }) {
  const loaded = useLoad(() => api("GET", storePath(instance, store, "consolidations", consolidation)), [instance, store, consolidation]);
  const [deciding, setDeciding] = useState(null);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState(null);
  const run = loaded.data;
  const decide = async () => {
    const verb = deciding;
    setBusy(true);
    try {
      const after = await api("POST", storePath(instance, store, "consolidations", consolidation, verb));
      setDeciding(null);
      const conflicts = after.steps.filter((s) => s.status === "conflict").length;
      const done = { apply: "applied", discard: "discarded", revert: "reverted" }[verb];
      setNotice({ text: `The consolidation was ${done}${conflicts ? `; ${plural(conflicts, "step")} did not hold and ${conflicts === 1 ? "was" : "were"} left out` : ""}.` });
      loaded.reload();
    } catch (failure) {
      setDeciding(null);
      if (failure.status !== 401) setNotice({ kind: "error", text: `Not ${verb === "apply" ? "applied" : verb === "discard" ? "discarded" : "reverted"}: ${said(failure)}` });
      loaded.reload();
    } finally {
      setBusy(false);
    }
  };
  const missing = missingOf(loaded.error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  const titles = { apply: "Apply this consolidation?", discard: "Discard this consolidation?", revert: "Revert this consolidation?" };
  const actions = { apply: "Apply", discard: "Discard", revert: "Revert" };
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="actors" title="Consolidation" />
    <${Notice} notice=${notice} />
    ${loaded.loading && !run && html`<${Loading} what="the consolidation" />`}
    <${ErrorState} error=${loaded.error} retry=${loaded.reload} what="the consolidation" />
    ${run && html`
      <dl class="facts">
        <dt>Id</dt><dd><code><${Id} value=${run.consolidation_id} label="consolidation id" /></code></dd>
        <dt>Actor</dt><dd><${ActorId} instance=${instance} store=${store} actor=${run.actor_id} /></dd>
        <dt>Status</dt><dd><${StatusBadge} status=${run.status} />${run.last_error ? html` <${Text} value=${run.last_error} />` : ""}</dd>
        <dt>Asked</dt><dd><${Time} value=${run.created_at} /> (${run.trigger === "automatic" ? "automatic" : "on request"}, ${run.mode === "review" ? "kept for review" : "applied at once"})</dd>
        ${run.finished_at && html`<dt>Finished</dt><dd><${Time} value=${run.finished_at} /></dd>`}
        <dt>What it did</dt><dd>${countsText(run.counts)}</dd>
        <dt>Model</dt><dd>${plural(run.model_calls, "call")}, ${run.input_tokens.toLocaleString("en")} prompt and ${run.output_tokens.toLocaleString("en")} answer tokens (budget ${run.budget_tokens.toLocaleString("en")} a call)</dd>
      </dl>
      <h2>Steps</h2>
      ${run.steps.length === 0
        ? html`<p class="muted">${["queued", "running"].includes(run.status) ? "Not planned yet." : "The plan changes nothing: no memories stated the same fact, and none was stale."}</p>`
        : html`<ol class="steps">${run.steps.map((s) => html`<${Step} key=${s.index} step=${s} instance=${instance} store=${store} />`)}</ol>`}
      <div class="actions">
        <button type="button" onClick=${() => loaded.reload()}>Refresh</button>
        ${run.status === "proposed" && html`
          <button type="button" class="primary" onClick=${() => setDeciding("apply")}>Apply…</button>
          <button type="button" onClick=${() => setDeciding("discard")}>Discard…</button>`}
        ${run.status === "applied" && run.counts.applied > 0 && html`<button type="button" class="danger" onClick=${() => setDeciding("revert")}>Revert…</button>`}
      </div>
      <${ConfirmDialog} open=${deciding !== null} title=${titles[deciding] || ""} action=${actions[deciding] || ""} busy=${busy}
        onConfirm=${decide} onClose=${() => setDeciding(null)}>
        ${deciding && html`<${Changes} run=${run} verb=${deciding} />`}
      <//>`}
  </section>`;
}
