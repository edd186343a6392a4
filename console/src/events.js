// A tiny publish/subscribe between the API module and the components (sign-in state, the 503
// banner), and a hook to follow one topic.

import { useEffect, useState } from "preact/hooks";

const listeners = new Map();

export function emit(topic, value) {
  for (const listener of listeners.get(topic) || []) listener(value);
}

export function subscribe(topic, listener) {
  if (!listeners.has(topic)) listeners.set(topic, new Set());
  listeners.get(topic).add(listener);
  return () => listeners.get(topic).delete(listener);
}

/** The latest value published on `topic` (starting with `initial`). */
export function useTopic(topic, initial) {
  const [value, setValue] = useState(initial);
  useEffect(() => subscribe(topic, setValue), [topic]);
  return value;
}
