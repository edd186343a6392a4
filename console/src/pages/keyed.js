// Keyed memories: the namespaces a store holds (POST .../keyed-memories/namespaces), one level at
// a time, and the keyed memories under a namespace (POST .../keyed-memories/search), each with
// its value, times and a way to forget it (DELETE .../keyed-memories?namespace=&key=).
//
// The namespace shown travels in the page's address as `ns`, its labels joined by "." (labels
// never hold one), as the API's GET and DELETE take it.

import { useState } from "preact/hooks";
import { api, storePath } from "../api.js";
import { storeHref } from "../router.js";
import { MissingPage, StoreHeader } from "./stores.js";
import {
  ConfirmDialog, Empty, ErrorState, html, Json, Loading, missingOf, Notice, plural, said, settled, Text, Time,
  useLoad,
} from "../ui.js";

const PAGE = 20;
const keyedCount = (count) => plural(count, "keyed memory", "keyed memories");

function labelsOf(query) {
  const text = query.get("ns") || "";
  return text ? text.split(".") : [];
}

function link(instance, store, labels, offset = 0) {
  return storeHref(instance, store, "keyed", { ns: labels.join("."), offset: offset || "" });
}

function Trail({ instance, store, labels }) {
  return html`<nav class="breadcrumbs namespace-trail" aria-label="Namespace">
    <a href=${link(instance, store, [])}>All namespaces</a>
    ${labels.map((label, i) => html`${" › "}<a href=${link(instance, store, labels.slice(0, i + 1))}
      aria-current=${i === labels.length - 1 ? "location" : undefined}><${Text} value=${label} max=${60} /></a>`)}
  </nav>`;
}

function Item({ item, onForget }) {
  return html`<article class="keyed-item" aria-label=${`Key ${item.key}`}>
    <h3><code><${Text} value=${item.key} max=${120} /></code>
      <span class="muted"> in ${item.namespace.map((l, i) => html`${i ? " › " : ""}<${Text} value=${l} max=${40} />`)}</span></h3>
    <${Json} value=${item.value} label=${`Value of ${item.key}`} />
    <p class="muted">Kept <${Time} value=${item.created_at} />, changed <${Time} value=${item.updated_at} />, expires <${Time} value=${item.expires_at} />.</p>
    <button type="button" class="danger" onClick=${() => onForget(item)}>Forget…</button>
  </article>`;
}

export function KeyedPage({ instance, store, query }) {
  const labels = labelsOf(query);
  const offset = Math.max(0, Number(query.get("offset") || 0) | 0);
  const [forgetting, setForgetting] = useState(null);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState(null);
  const listed = useLoad(async () => {
    const [children, found] = await settled([
      api("POST", storePath(instance, store, "keyed-memories", "namespaces"), {
        body: { prefix: labels.length ? labels : undefined, max_depth: labels.length + 1, limit: 1000 },
      }),
      api("POST", storePath(instance, store, "keyed-memories", "search"), {
        body: { namespace_prefix: labels, limit: PAGE, offset },
      }),
    ]);
    return { children: children.namespaces.filter((ns) => ns.length > labels.length), items: found.items, next: found.next_offset };
  }, [instance, store, labels.join("."), offset]);
  const forget = async () => {
    const item = forgetting;
    setBusy(true);
    try {
      await api("DELETE", storePath(instance, store, "keyed-memories"), { query: { namespace: item.namespace.join("."), key: item.key } });
      setNotice({ text: `Forgot key ${item.key}.` });
      setForgetting(null);
      listed.reload();
    } catch (failure) {
      setForgetting(null);
      setNotice({ kind: "error", text: `Not forgotten: ${said(failure)}` });
    } finally {
      setBusy(false);
    }
  };
  const missing = missingOf(listed.error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;
  const data = listed.data;
  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="keyed" title="Keyed memories" />
    <p class="lede">Values an application keeps under a namespace and key of its own (LangGraph's store, <code>PUT …/keyed-memories</code>), newest first.</p>
    <${Trail} instance=${instance} store=${store} labels=${labels} />
    <${Notice} notice=${notice} />
    ${listed.loading && !data && html`<${Loading} what="keyed memories" />`}
    <${ErrorState} error=${listed.error} retry=${listed.reload} what="the keyed memories" />
    ${data && data.children.length > 0 && html`<section aria-labelledby="namespaces-title">
      <h2 id="namespaces-title">${labels.length ? "Namespaces inside" : "Namespaces"}</h2>
      <ul class="namespaces">
        ${data.children.map((ns) => html`<li key=${ns.join(".")}><a href=${link(instance, store, ns)}><${Text} value=${ns[ns.length - 1]} max=${80} /></a></li>`)}
      </ul>
    </section>`}
    ${data && data.items.length === 0 && offset === 0 && html`<${Empty} title=${labels.length ? "Nothing is kept under this namespace." : "No keyed memories yet."}>
      <p>Keep one with <code>PUT …/keyed-memories</code>, or through <code>KiviDBStore</code> in a LangGraph graph.</p>
    <//>`}
    ${data && data.items.length > 0 && html`<section aria-labelledby="items-title">
      <h2 id="items-title">${keyedCount(data.items.length)}${offset ? ` from ${offset + 1}` : ""}</h2>
      ${data.items.map((item) => html`<${Item} key=${item.namespace.join(".") + "/" + item.key} item=${item} onForget=${setForgetting} />`)}
    </section>`}
    ${data && (offset > 0 || data.next != null) && html`<nav class="pager" aria-label="Keyed memories pages">
      ${offset > 0 ? html`<a class="button" href=${link(instance, store, labels, Math.max(0, offset - PAGE))}>← Previous</a>` : html`<span class="button disabled" aria-disabled="true">← Previous</span>`}
      ${data.next != null ? html`<a class="button" href=${link(instance, store, labels, data.next)}>Next →</a>` : html`<span class="button disabled" aria-disabled="true">Next →</span>`}
    </nav>`}
    <${ConfirmDialog} open=${forgetting !== null} title=${forgetting ? html`Forget key <${Text} value=${forgetting.key} />?` : ""}
      action="Forget" busy=${busy} onConfirm=${forget} onClose=${() => setForgetting(null)}>
      <p>The value under this key is removed for good.</p>
    <//>
  </section>`;
}
