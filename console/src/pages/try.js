// Try it: one turn of an agent, by hand. Recall for a session and an actor with the user's
// message (POST .../recall), shown exactly as an agent receives it (the actor's profile, the
// `context` string with its sections' order and how much of it the previous recall shared, and
// the JSON), then add the turn's messages (POST .../sessions/{session}/events) and see the
// session as it is now.

import { useState } from "preact/hooks";
import { api, storePath } from "../api.js";
import { storeHref } from "../router.js";
import { ProfileValue } from "./actors.js";
import { Messages } from "./sessions.js";
import { MissingPage, StoreHeader } from "./stores.js";
import {
  ActorId, ErrorState, FieldProblems, FormErrors, html, Json, Loading, missingOf, Notice, plural, problemsByField,
  Text, useLoad,
} from "../ui.js";

/** The headings of a context's sections, in order: its lines that start with "## " (text from
 * callers is quoted in a context, so none of it starts such a line). */
function sectionsOf(context) {
  return context.split("\n").filter((line) => line.startsWith("## ")).map((line) => line.slice(3));
}

/** How many characters (code points) `a` and `b` share from their start. */
function sharedStart(a, b) {
  const [x, y] = [Array.from(a), Array.from(b)];
  let n = 0;
  while (n < x.length && n < y.length && x[n] === y[n]) n += 1;
  return n;
}

/** The recall answer as the API gave it (without what the page keeps beside it). */
function answerOf(recall) {
  const { previous, ...answer } = recall;
  return answer;
}

function Profile({ profile, instance, store, actor }) {
  if (profile === null || profile === undefined) {
    return html`<p class="muted">None: recall had no actor, or this store declares no profile fields.</p>`;
  }
  const names = Object.keys(profile);
  return html`${names.length === 0
    ? html`<p class="muted">Nothing is known of this actor yet.</p>`
    : html`<dl class="facts profile-recalled">${names.map((name) => html`<dt><code><${Text} value=${name} /></code></dt><dd><${ProfileValue} value=${profile[name]} /></dd>`)}</dl>`}
    ${actor && html`<p class="muted">Where each value came from, and its history: the page of actor <${ActorId} instance=${instance} store=${store} actor=${actor} copy=${false} />.</p>`}`;
}

function Context({ recall, previous }) {
  const sections = sectionsOf(recall.context);
  const total = Array.from(recall.context).length;
  const same = previous === null ? null : sharedStart(previous, recall.context);
  const chars = Array.from(recall.context);
  return html`<div class="help" id="context-order">${sections.length > 0 && html`Its sections, in order: <ol class="sections">${sections.map((s) => html`<li>${s}</li>`)}</ol>. `}They run from what changes least to what changes most
    (the profile, the summary, the recent messages, then the memories chosen for this message), so that from one turn to the next the context
    starts the same and a provider's prompt cache can serve that start.</div>
    ${same !== null && html`<p class="same-start-said" role="status">The first ${plural(same, "character")} of ${total.toLocaleString("en")} (${
      total ? Math.floor((100 * same) / total) : 0}%) are the same as the previous recall's context of this session${same > 0 ? " (marked)" : ""}.</p>`}
    <pre class="context" tabindex="0" aria-label="Context string" aria-describedby="context-order">${same
      ? html`<span class="same-start">${chars.slice(0, same).join("")}</span>${chars.slice(same).join("")}`
      : recall.context}</pre>`;
}

export function TryPage({ instance, store, query }) {
  const config = useLoad(() => api("GET", storePath(instance, store)), [instance, store]);
  const recent = useLoad(() => api("GET", storePath(instance, store, "sessions"), { query: { limit: 20 } }), [instance, store]);
  const [form, setForm] = useState({
    session_id: query.get("session") || "",
    actor_id: query.get("actor") || "",
    message: "",
    reply: "",
    vector: "",
  });
  const [recall, setRecall] = useState(null);
  // The last recall's context and where it was asked (session and actor), to tell how much of
  // the next one's start it shares.
  const [last, setLast] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState(null);
  const [session, setSession] = useState(null);
  const problems = problemsByField(error);
  const set = (name) => (e) => setForm({ ...form, [name]: e.currentTarget.value });
  const embeds = config.data && config.data.embed_provider !== "none";

  const doRecall = async (event) => {
    event.preventDefault();
    setError(null);
    setNotice(null);
    const body = { session_id: form.session_id.trim() };
    if (form.actor_id.trim()) body.actor_id = form.actor_id.trim();
    if (form.message.trim()) body.query = form.message;
    if (form.vector.trim()) {
      try {
        body.query_vector = JSON.parse(form.vector);
      } catch (bad) {
        setError({ status: 0, code: "vector_invalid", message: "The vector is not JSON.", details: [{ field: "query_vector", problem: "write it as [0.1, 0.2, …]" }] });
        return;
      }
    }
    setBusy(true);
    try {
      const answer = await api("POST", storePath(instance, store, "recall"), { body });
      const asked = { session: body.session_id, actor: answer.actor_id };
      const same = last && last.session === asked.session && last.actor === asked.actor;
      setRecall({ ...answer, previous: same ? last.context : null });
      setLast({ ...asked, context: answer.context });
    } catch (failure) {
      if (failure.status !== 401) setError(failure);
      setRecall(null);
    } finally {
      setBusy(false);
    }
  };

  const addTurn = async () => {
    setError(null);
    const events = [{ role: "user", content: form.message }];
    if (form.reply.trim()) events.push({ role: "assistant", content: form.reply });
    const body = { events };
    if (form.actor_id.trim()) body.actor_id = form.actor_id.trim();
    const id = form.session_id.trim();
    setBusy(true);
    try {
      const added = await api("POST", storePath(instance, store, "sessions", id, "events"), { body });
      setNotice({ text: `Added ${plural(added.added, "message")}; the session now holds ${plural(added.message_count, "message")}.` });
      setSession(await api("GET", storePath(instance, store, "sessions", id), { query: { recent: 10 } }));
      setForm({ ...form, message: "", reply: "" });
      setRecall(null);
      recent.reload();
    } catch (failure) {
      if (failure.status !== 401) setError(failure);
    } finally {
      setBusy(false);
    }
  };

  const field = (name, label, control, help) => html`<div class=${`field${problems[name] ? " invalid" : ""}`}>
    <label for=${`t-${name}`}>${label}</label>
    ${control}
    ${help && html`<span class="help" id=${`th-${name}`}>${help}</span>`}
    <${FieldProblems} id=${`tp-${name}`} problems=${problems[name]} />
  </div>`;
  const aria = (name, help) => ({
    "aria-invalid": problems[name] ? "true" : undefined,
    "aria-describedby": [help ? `th-${name}` : "", problems[name] ? `tp-${name}` : ""].filter(Boolean).join(" ") || undefined,
  });
  // The message is the recall's query; body-level problems about `query` name it.
  if (problems.query) problems.message = problems.query;
  if (problems["events.0.content"]) problems.message = problems["events.0.content"];
  if (problems["events.1.content"]) problems.reply = problems["events.1.content"];
  const missing = missingOf(config.error, recent.error);
  if (missing) return html`<${MissingPage} instance=${instance} error=${missing} />`;

  return html`<section>
    <${StoreHeader} instance=${instance} store=${store} current="try" title="Try it" />
    <p class="lede">One turn of an agent: recall before the model call, then add the turn's messages.</p>
    ${config.loading && !config.data && html`<${Loading} what="the store" />`}
    <${ErrorState} error=${config.error} retry=${config.reload} what="the store" />
    <form class="try-form" onSubmit=${doRecall} novalidate aria-label="Recall">
      <${FormErrors} error=${error} />
      <div class="row">
        ${field("session_id", "Session", html`<input id="t-session_id" list="recent-sessions" value=${form.session_id} onInput=${set("session_id")}
          autocomplete="off" spellcheck="false" required ...${aria("session_id", true)} />`, "Pick a recent one or type a new id (letters, digits, . _ : @ -).")}
        ${field("actor_id", "Actor", html`<input id="t-actor_id" value=${form.actor_id} onInput=${set("actor_id")} autocomplete="off" spellcheck="false" ...${aria("actor_id", true)} />`,
          "Optional: the session's actor is used when empty.")}
      </div>
      <datalist id="recent-sessions">
        ${(recent.data ? recent.data.sessions : []).map((s) => html`<option value=${s.session_id}>${s.actor_id || ""}</option>`)}
      </datalist>
      ${field("message", "User message", html`<textarea id="t-message" rows="3" value=${form.message} onInput=${set("message")} ...${aria("message", true)}></textarea>`,
        "Recall searches the actor's memories with it (empty: the session's latest user message).")}
      ${config.data && !embeds && field("query_vector", `Query vector (optional JSON array of ${plural(config.data.dimensions, "number")})`,
        html`<textarea id="t-query_vector" rows="2" spellcheck="false" value=${form.vector} onInput=${set("vector")} ...${aria("query_vector", true)}></textarea>`,
        "This store has no embedding model: without a vector, memories are ranked by keyword.")}
      <div class="actions"><button type="submit" class="primary" disabled=${busy}>Recall</button></div>
    </form>
    <${Notice} notice=${notice} />
    ${recall && html`<section aria-labelledby="recall-title" class="recall">
      <h2 id="recall-title">What recall returns</h2>
      <h3>The actor's profile</h3>
      <${Profile} profile=${recall.profile} instance=${instance} store=${store} actor=${recall.actor_id} />
      <h3>The context string, as the agent receives it</h3>
      <${Context} recall=${recall} previous=${recall.previous} />
      <details>
        <summary>The JSON answer (${recall.profile ? `a profile of ${plural(Object.keys(recall.profile).length, "field")}, ` : ""}${plural(recall.messages.length, "message")}, ${plural(recall.memories.length, "memory", "memories")}${recall.summary ? ", a summary" : ""})</summary>
        <${Json} value=${answerOf(recall)} label="Recall answer" />
      </details>
      <h3>Then add the turn</h3>
      ${field("reply", "Assistant reply (optional)", html`<textarea id="t-reply" rows="3" value=${form.reply} onInput=${set("reply")} ...${aria("reply", true)}></textarea>`,
        "What your model answered; left empty, only the user message is added.")}
      <div class="actions">
        <button type="button" class="primary" onClick=${addTurn} disabled=${busy || !form.message.trim()}>Add the turn's messages</button>
      </div>
    </section>`}
    ${session && html`<section aria-labelledby="session-now" class="session-now">
      <h2 id="session-now">Session <a href=${storeHref(instance, store, "sessions", session.session_id)}><${Text} value=${session.session_id} /></a> now</h2>
      <p class="muted">${plural(session.message_count, "message")}${session.messages.length < session.message_count ? `; the newest ${session.messages.length.toLocaleString("en")} shown` : ""}. Extraction: ${session.extraction.status}, ${session.extraction.unread.toLocaleString("en")} unread.</p>
      <${Messages} messages=${session.messages} />
    </section>`}
  </section>`;
}
