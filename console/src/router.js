// Hash routing: the page is always /console, and `#/...` says which view it shows, mirroring
// the API's paths (`#/instances/local/agent-memory/notes/sessions/chat-1`). The URL never holds
// the API key: only ids and list positions.

import { useEffect, useState } from "preact/hooks";

/** `{ parts: [decoded segments], query: URLSearchParams }` of the current hash. */
export function parseHash(hash = location.hash) {
  const text = hash.replace(/^#/, "");
  const [route, search = ""] = text.split("?", 2);
  const parts = route
    .split("/")
    .filter((part) => part !== "")
    .map((part) => {
      try {
        return decodeURIComponent(part);
      } catch (error) {
        return part;
      }
    });
  return { parts, query: new URLSearchParams(search) };
}

/** `#/a/b?x=1` from segments (encoded) and query values (empty ones left out). */
export function href(parts, query = {}) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
  }
  const search = params.toString();
  return "#/" + parts.map((p) => encodeURIComponent(String(p))).join("/") + (search ? `?${search}` : "");
}

export function storeHref(instance, store, ...rest) {
  const last = rest.length && typeof rest[rest.length - 1] === "object" ? rest.pop() : {};
  return href(["instances", instance, "agent-memory", store, ...rest], last);
}

export function navigate(target) {
  if (location.hash !== target) location.hash = target;
}

/** The parsed hash, updated on every navigation. */
export function useRoute() {
  const [route, setRoute] = useState(parseHash());
  useEffect(() => {
    const changed = () => setRoute(parseHash());
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  return route;
}
