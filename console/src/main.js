// The console's entry point: sign-in, the page frame (header, 503 banner, main region) and the
// routes. Every view is a client of the public API (see api.js).

import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import "./console.css";
import { api, signedIn, signIn, signOut } from "./api.js";
import { subscribe, useTopic } from "./events.js";
import { href, navigate, useRoute } from "./router.js";
import { ActorPage } from "./pages/actors.js";
import { ConsolidationPage } from "./pages/consolidations.js";
import { KeyedPage } from "./pages/keyed.js";
import { KeysPage } from "./pages/keys.js";
import { MemoriesPage, MemoryPage, SearchPage } from "./pages/memories.js";
import { SessionPage, SessionsPage } from "./pages/sessions.js";
import { AllStores, CreateStore, EditStore, InstanceStores, StorePage } from "./pages/stores.js";
import { TryPage } from "./pages/try.js";
import { UsagePage } from "./pages/usage.js";
import { WebhooksPage } from "./pages/webhooks.js";
import { html, retryWaiting, Text } from "./ui.js";

function SignIn({ reason }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const input = useRef(null);
  useEffect(() => input.current && input.current.focus(), []);
  const submit = async (event) => {
    event.preventDefault();
    const given = key.trim();
    if (!given) {
      setError("Paste your API key: `make run` prints it, and keeps it in .local/api_key.");
      return;
    }
    setBusy(true);
    setError("");
    try {
      await api("GET", "/agent-memory", { key: given });
      signIn(given);
    } catch (failure) {
      setError(failure.status === 401 ? `That key was refused: ${failure.message}` : failure.message);
    } finally {
      setBusy(false);
    }
  };
  return html`<main id="main" class="sign-in">
    <h1>KiviDB agent memory</h1>
    <p class="lede">Sign in with an API key of your organization to look inside its stores.</p>
    ${reason && html`<div class="notice warning" role="alert"><p><strong>You were signed out.</strong> <${Text} value=${reason} /></p></div>`}
    <form onSubmit=${submit} novalidate>
      <div class=${`field${error ? " invalid" : ""}`}>
        <label for="api-key">API key</label>
        <input id="api-key" ref=${input} type="password" name="api-key" autocomplete="off" spellcheck="false"
          value=${key} onInput=${(e) => setKey(e.currentTarget.value)}
          aria-invalid=${error ? "true" : undefined} aria-describedby=${error ? "api-key-problem key-help" : "key-help"} />
        <span class="help" id="key-help">Kept for this browser tab only (session storage), sent as <code>Authorization: Bearer …</code>, never put in a URL.</span>
        ${error && html`<span class="problem" id="api-key-problem" role="alert"><${Text} value=${error} /></span>`}
      </div>
      <div class="actions"><button type="submit" class="primary" disabled=${busy}>${busy ? "Signing in…" : "Sign in"}</button></div>
    </form>
  </main>`;
}

/** The 503 banner: the API's message and a countdown from Retry-After; loads that failed are
 * run again when it ends (or on "Retry now"). */
function Banner() {
  const failure = useTopic("unavailable", null);
  const [left, setLeft] = useState(0);
  const [shown, setShown] = useState(null);
  useEffect(() => {
    if (!failure) return undefined;
    setShown(failure);
    setLeft(failure.retryAfter);
    return undefined;
  }, [failure]);
  useEffect(() => {
    if (!shown) return undefined;
    if (left <= 0) {
      setShown(null);
      retryWaiting();
      return undefined;
    }
    const timer = setTimeout(() => setLeft(left - 1), 1000);
    return () => clearTimeout(timer);
  }, [shown, left]);
  if (!shown) return null;
  return html`<div class="banner" role="alert">
    <p><strong>The service is unavailable for a moment.</strong> <${Text} value=${shown.message} />
      <span class="muted"> (503, <code>${shown.code}</code>)</span></p>
    <p>Retrying in <span class="countdown">${left}</span> s.
      <button type="button" onClick=${() => setLeft(0)}>Retry now</button></p>
  </div>`;
}

function NotFoundPage() {
  return html`<section>
    <h1 tabindex="-1">No such page</h1>
    <p>The console has no page at this address. <a href="#/agent-memory">See every store</a>.</p>
  </section>`;
}

function view({ parts, query }) {
  const [first, instance, third, store, section, id, ...rest] = parts;
  if (parts.length === 0 || (first === "agent-memory" && parts.length === 1)) return html`<${AllStores} />`;
  if (first === "keys" && parts.length === 1) return html`<${KeysPage} />`;
  if (first !== "instances" || !instance) return html`<${NotFoundPage} />`;
  if (third === "create" && parts.length === 3) return html`<${CreateStore} instance=${instance} />`;
  if (third !== "agent-memory") return html`<${NotFoundPage} />`;
  if (!store) return html`<${InstanceStores} instance=${instance} />`;
  const common = { instance, store, query, key: `${instance}/${store}/${section || ""}/${id || ""}` };
  if (rest.length) return html`<${NotFoundPage} />`;
  if (!section) return html`<${StorePage} ...${common} />`;
  if (section === "settings" && !id) return html`<${EditStore} ...${common} />`;
  if (section === "sessions") return id ? html`<${SessionPage} ...${common} session=${id} />` : html`<${SessionsPage} ...${common} />`;
  if (section === "memories") return id ? html`<${MemoryPage} ...${common} memory=${id} />` : html`<${MemoriesPage} ...${common} />`;
  if (section === "actors" && id) return html`<${ActorPage} ...${common} actor=${id} />`;
  if (section === "consolidations" && id) return html`<${ConsolidationPage} ...${common} consolidation=${id} />`;
  if (section === "search" && !id) return html`<${SearchPage} ...${common} />`;
  if (section === "keyed" && !id) return html`<${KeyedPage} ...${common} />`;
  if (section === "try" && !id) return html`<${TryPage} ...${common} />`;
  if (section === "usage" && !id) return html`<${UsagePage} ...${common} />`;
  if (section === "webhooks" && !id) return html`<${WebhooksPage} ...${common} />`;
  return html`<${NotFoundPage} />`;
}

function Console() {
  const route = useRoute();
  const main = useRef(null);
  const first = useRef(true);
  useEffect(() => {
    // A new page: move focus to its heading, as a full page load would put it at the top.
    if (first.current) {
      first.current = false;
      return;
    }
    const heading = main.current && main.current.querySelector("h1");
    if (heading) heading.focus();
    else if (main.current) main.current.focus();
  }, [route]);
  return html`
    <a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); main.current.focus(); }}>Skip to content</a>
    <header class="top">
      <a class="brand" href="#/agent-memory">KiviDB <span>agent memory</span></a>
      <nav aria-label="Console"><a href="#/agent-memory">Stores</a> <a href="#/keys">API keys</a></nav>
      <button type="button" class="sign-out" onClick=${() => signOut()}>Sign out</button>
    </header>
    <${Banner} />
    <main id="main" ref=${main} tabindex="-1">${view(route)}</main>`;
}

function App() {
  const [auth, setAuth] = useState({ signedIn: signedIn(), reason: "" });
  useEffect(() => subscribe("auth", setAuth), []);
  useEffect(() => {
    document.title = auth.signedIn ? "KiviDB agent memory" : "Sign in · KiviDB agent memory";
  }, [auth.signedIn]);
  return auth.signedIn ? html`<${Console} />` : html`<${SignIn} reason=${auth.reason} />`;
}

if (!location.hash) navigate(href(["agent-memory"]));
render(html`<${App} />`, document.getElementById("app"));
