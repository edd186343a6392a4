// A store's usage (GET .../usage): what it used on each of the last 30 days (UTC), as a bar chart
// of the measure chosen with the day-by-day table beside it (the table is what a screen reader
// reads; the chart is the picture of it), and what the store holds now.

import { useState } from "preact/hooks";
import { api, storePath } from "../api.js";
import { MissingPage, StoreHeader } from "./stores.js";
import { ErrorState, html, Loading, missingOf, useLoad } from "../ui.js";

const MEASURES = [
  ["requests", "Requests"],
  ["messages_added", "Messages added"],
  ["memories_added", "Memories added"],
  ["memories_superseded", "Memories superseded"],
  ["memories_deleted", "Memories deleted"],
  ["extraction_runs", "Extraction runs"],
  ["llm_input_tokens", "Model input tokens"],
  ["llm_output_tokens", "Model output tokens"],
  ["embedding_tokens", "Embedding tokens"],
  ["rerank_calls", "Rerank calls"],
  ["rerank_documents", "Documents reranked"],
  ["profile_updates", "Profile fields changed"],
];
const number = (n) => n.toLocaleString("en");

function Chart({ days, measure, label }) {
  const width = 720;
  const height = 180;
  const top = Math.max(1, ...days.map((d) => d[measure]));
  const slot = width / days.length;
  const total = days.reduce((sum, d) => sum + d[measure], 0);
  return html`<figure class="usage-chart">
    <svg viewBox=${`0 0 ${width} ${height + 20}`} role="img" aria-label=${`${label} per day: ${number(total)} in ${days.length} days, at most ${number(top)} in one day`}>
      <line x1="0" y1=${height} x2=${width} y2=${height} class="axis" />
      ${days.map((d, i) => {
        const bar = Math.round((d[measure] / top) * (height - 10));
        return html`<rect key=${d.date} x=${i * slot + 2} y=${height - bar} width=${Math.max(1, slot - 4)} height=${bar} class="bar">
          <title>${d.date}: ${number(d[measure])}</title>
        </rect>`;
      })}
      <text x="0" y=${height + 16} class="tick">${days[0].date}</text>
      <text x=${width} y=${height + 16} class="tick" text-anchor="end">${days[days.length - 1].date}</text>
    </svg>
    <figcaption>${label} per day (UTC), the last ${days.length} days: ${number(total)} in all.</figcaption>
  </figure>`;
}

function Holding({ now }) {
  return html`<ul class="counts" aria-label="Held now">
    <li><span class="count">${number(now.sessions)}</span> sessions</li>
    <li><span class="count">${number(now.messages)}</span> messages</li>
    <li><span class="count">${number(now.memories)}</span> memories</li>
    <li><span class="count">${number(Math.round(now.bytes / 1024))}</span> KiB in the database</li>
  </ul>`;
}

export function UsagePage({ instance, store }) {
  const [measure, setMeasure] = useState("requests");
  const loaded = useLoad(() => api("GET", storePath(instance, store, "usage")), [instance, store]);
  const missing = missingOf(loaded.error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  const data = loaded.data;
  const label = MEASURES.find(([m]) => m === measure)[1];
  const forbidden = loaded.error && loaded.error.status === 403;
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="usage" title="Usage" />
    <p class="lede">What this store used each day (UTC): requests, what was added, background runs and the model tokens the providers reported (docs/usage.md).</p>
    ${loaded.loading && !data && html`<${Loading} what="usage" />`}
    ${forbidden && html`<div class="state error" role="alert"><p><strong>This key cannot read the store's usage.</strong> A key limited to actors reads only its actors' data.</p></div>`}
    ${!forbidden && html`<${ErrorState} error=${loaded.error} retry=${loaded.reload} what="the usage" />`}
    ${data && html`
      <h2>Held now</h2>
      <${Holding} now=${data.now} />
      <h2>By day</h2>
      <div class="field inline">
        <label for="usage-measure">Show</label>
        <select id="usage-measure" value=${measure} onChange=${(e) => setMeasure(e.currentTarget.value)}>
          ${MEASURES.map(([m, l]) => html`<option value=${m}>${l}</option>`)}
        </select>
      </div>
      <${Chart} days=${data.days} measure=${measure} label=${label} />
      <details>
        <summary>The days as a table</summary>
        <table class="list usage-table">
          <caption class="visually-hidden">Usage by day, newest first</caption>
          <thead><tr><th scope="col">Day</th><th scope="col">Requests</th><th scope="col">Messages added</th><th scope="col">Memories added</th><th scope="col">Superseded</th><th scope="col">Deleted</th><th scope="col">Extraction runs</th><th scope="col">Model tokens (in / out)</th><th scope="col">Embedding tokens</th><th scope="col">Rerank calls (documents)</th><th scope="col">Profile changes</th></tr></thead>
          <tbody>
            ${[...data.days].reverse().map((d) => html`<tr key=${d.date}>
              <th scope="row">${d.date}</th><td>${number(d.requests)}</td><td>${number(d.messages_added)}</td>
              <td>${number(d.memories_added)}</td><td>${number(d.memories_superseded)}</td><td>${number(d.memories_deleted)}</td>
              <td>${number(d.extraction_runs)}</td><td>${number(d.llm_input_tokens)} / ${number(d.llm_output_tokens)}</td><td>${number(d.embedding_tokens)}</td>
              <td>${number(d.rerank_calls)} (${number(d.rerank_documents)})</td><td>${number(d.profile_updates)}</td>
            </tr>`)}
          </tbody>
        </table>
      </details>`}
  </section>`;
}
