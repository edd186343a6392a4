// What a store tells its extraction, in the store form: the operator's instructions
// (`extraction_instructions`), example conversations with the memories each should give
// (`extraction_examples`), each custom type's examples, and the fields of an actor's profile
// (`profile_fields`). The API checks them (docs/routes.md); its 422 `details` are shown beside
// the control each names, and its 409 for a profile field that actors hold is put in words.

import { FieldProblems, html, plural, Text } from "./ui.js";

// The API's limits (stores.steering), told in the help and the counters.
export const MAX_INSTRUCTIONS = 2000;
const MAX_EXAMPLES = 5;
const MAX_EXAMPLE_MESSAGES = 6;
const MAX_EXAMPLE_MEMORIES = 5;
export const MAX_TYPE_EXAMPLES = 3;
const MAX_PROFILE_FIELDS = 20;
const ROLES = ["user", "assistant", "system", "tool"];

/** What a type of profile field holds, in words (the form's choices, the actor page's help). */
export const PROFILE_TYPES = {
  text: "a text",
  list: "a list of texts",
  number: "a number",
  boolean: "yes or no",
  date: "a date",
};

const lines = (text) => text.split("\n").map((line) => line.trim()).filter(Boolean);

/** The form's values of the steering settings, from a store (or the defaults). */
export function steeringValues(store) {
  return {
    extraction_instructions: (store && store.extraction_instructions) || "",
    extraction_examples: ((store && store.extraction_examples) || []).map((e) => ({
      messages: e.messages.map((m) => ({ role: m.role, content: m.content })),
      memories: e.memories.map((m) => ({ text: m.text, type: m.type })),
    })),
    profile_fields: ((store && store.profile_fields) || []).map((f) => ({ name: f.name, description: f.description, type: f.type })),
  };
}

/** A custom type as the form holds it: its examples as lines of one text. */
export function typeValues(type) {
  return { name: type.name, description: type.description, examples: (type.examples || []).join("\n") };
}

/** The settings as the API takes them, from the form's values (a type's examples only when it
 * has some; instructions null when empty, which clears them). */
export function steeringBody(values) {
  const instructions = values.extraction_instructions.trim();
  return {
    extraction_instructions: instructions === "" ? null : instructions,
    extraction_examples: values.extraction_examples.map((e) => ({
      messages: e.messages.map((m) => ({ role: m.role, content: m.content.trim() })),
      memories: e.memories.map((m) => ({ text: m.text.trim(), type: m.type })),
    })),
    profile_fields: values.profile_fields.map((f) => ({ name: f.name.trim(), description: f.description.trim(), type: f.type })),
    custom_types: values.custom_types.map((t) => {
      const examples = lines(t.examples);
      const type = { name: t.name.trim(), description: t.description.trim() };
      return examples.length ? { ...type, examples } : type;
    }),
  };
}

/** The store's settings in steeringBody's shape, to tell what a form changed. */
export function steeringOfStore(store) {
  return steeringBody({ ...steeringValues(store), custom_types: store.custom_types.map(typeValues) });
}

// A name the API's pattern refuses is told by the rule, in words, rather than by the pattern.
const NAME_RULES = [
  [/^profile_fields\.\d+\.name$/, "Use only letters, digits and . _ : @ -, up to 64 characters."],
  [/^custom_types\.\d+\.name$/, "Use lower-case letters, digits and '_', starting with a letter; 1 to 40 characters."],
];

/**
 * `details` with each problem placed and worded where the form shows it: the API names an
 * example memory's unknown type on the whole list ("example 0, memory 1: type 'x' is not one
 * of this store's types"), and the form shows it beside that memory's type; a name refused by
 * its pattern is told by the rule in words.
 */
export function placed(details) {
  return details.map((d) => {
    const field = String(d.field);
    const problem = String(d.problem);
    const found = field === "extraction_examples" && /^example (\d+), memory (\d+): (.*)$/s.exec(problem);
    if (found) return { field: `extraction_examples.${found[1]}.memories.${found[2]}.type`, problem: found[3] };
    const rule = /^(String should match pattern|must be )/.test(problem) && NAME_RULES.find(([at]) => at.test(field));
    return rule ? { field, problem: rule[1] } : d;
  });
}

/**
 * The profile fields a 409 says actors hold, `[{ name, count }]` (the API's details, "2 actors
 * hold a value of 'age'"), or null when the answer is not that one.
 */
export function heldFields(error) {
  if (!error || error.status !== 409) return null;
  const held = [];
  for (const d of error.details) {
    const found = d.field === "profile_fields" && /^(\d+) actors? holds? a value of '(.*)'$/.exec(String(d.problem));
    if (found) held.push({ name: found[2], count: Number(found[1]) });
  }
  return held.length ? held : null;
}

/** A 409 about held profile fields in the console's words (FormErrors shows the API's beside). */
export function heldSaid(held) {
  const named = held.map((h) => `${h.name} (${plural(h.count, "actor")})`).join(", ");
  return `Not saved: actors hold values of the profile fields this change removes: ${named}. ` +
    "Clear them on each actor's page first, or keep the fields.";
}

function Problems({ problems, id }) {
  return html`<${FieldProblems} id=${`p-${id}`} problems=${problems[id]} />`;
}

// aria attributes of a control whose problems are at `id` (and help at h-`id`, when given).
function aria(problems, id, help = false) {
  return {
    "aria-invalid": problems[id] ? "true" : undefined,
    "aria-describedby": [help ? `h-${id}` : "", problems[id] ? `p-${id}` : ""].filter(Boolean).join(" ") || undefined,
  };
}

function fieldClass(problems, id, extra = "") {
  return `field${extra}${problems[id] ? " invalid" : ""}`;
}

/** A control at `id` (its API path, f-`id` its element's id): its label, the control itself
 * (children), its help and the problems the API named for it. */
function Slot({ id, label, problems, cls = "", help, children }) {
  return html`<div class=${fieldClass(problems, id, cls)}>
    <label for=${`f-${id}`}>${label}</label>
    ${children}
    ${help && html`<span class="help" id=${`h-${id}`}>${help}</span>`}
    <${Problems} problems=${problems} id=${id} />
  </div>`;
}

/** The instructions: a text of at most MAX_INSTRUCTIONS characters, with its count. */
export function InstructionsField({ value, onInput, problems }) {
  const id = "extraction_instructions";
  const count = Array.from(value).length;
  const over = count > MAX_INSTRUCTIONS;
  return html`<div class=${fieldClass(problems, id)}>
    <label for=${`f-${id}`}>Instructions</label>
    <textarea id=${`f-${id}`} name=${id} rows="4" value=${value} onInput=${(e) => onInput(e.currentTarget.value)}
      ...${aria(problems, id, true)}></textarea>
    <span class="help" id=${`h-${id}`}>What extraction should keep and what it should leave, in your words ("Keep the user's
      infrastructure facts and preferences; never keep small talk"). Shown, quoted, to the model with every extraction. <span
      class=${over ? "error-text" : ""} data-count>${count.toLocaleString("en")} of ${MAX_INSTRUCTIONS.toLocaleString("en")} characters</span>.
      Empty: none. <code>${id}</code> in the API.</span>
    <${Problems} problems=${problems} id=${id} />
  </div>`;
}

/** A custom type's examples: one short text per line, up to MAX_TYPE_EXAMPLES. */
export function TypeExamplesField({ index, value, onInput, problems }) {
  const id = `custom_types.${index}.examples`;
  // Problems of one example (custom_types.0.examples.1) are shown here too.
  const own = Object.entries(problems).filter(([field]) => field.startsWith(`${id}.`))
    .flatMap(([field, list]) => list.map((p) => `Example ${Number(field.slice(id.length + 1)) + 1}: ${p}`));
  const list = [...(problems[id] || []), ...own];
  const all = list.length ? { [id]: list } : {};
  return html`<div class=${fieldClass(all, id)}>
    <label for=${`f-${id}`}>Type ${index + 1} examples</label>
    <textarea id=${`f-${id}`} rows="3" value=${value} onInput=${(e) => onInput(e.currentTarget.value)} ...${aria(all, id, true)}></textarea>
    <span class="help" id=${`h-${id}`}>Up to ${MAX_TYPE_EXAMPLES} short memories of this type, one per line (300 characters each), shown to extraction with its description.</span>
    <${FieldProblems} id=${`p-${id}`} problems=${all[id]} />
  </div>`;
}

/** The example conversations, each with the memories it should give (none: what not to keep). */
export function ExamplesEditor({ examples, types, onChange, problems }) {
  const change = (index, update) => onChange(examples.map((e, i) => (i === index ? { ...e, ...update } : e)));
  return html`<fieldset class="examples">
    <legend>Extraction examples (up to ${MAX_EXAMPLES}; <code>extraction_examples</code> in the API)</legend>
    <p class="help">A short conversation and the memories extraction should keep from it. An example with no memories teaches what not to keep.</p>
    <${Problems} problems=${problems} id="extraction_examples" />
    ${examples.length === 0 && html`<p class="muted">No examples: extraction has only the instructions and the types' descriptions.</p>`}
    ${examples.map((example, index) => {
      const base = `extraction_examples.${index}`;
      const setMessage = (at, update) => change(index, { messages: example.messages.map((m, i) => (i === at ? { ...m, ...update } : m)) });
      const setMemory = (at, update) => change(index, { memories: example.memories.map((m, i) => (i === at ? { ...m, ...update } : m)) });
      return html`<fieldset class="example" key=${index}>
        <legend>Example ${index + 1}</legend>
        <${Problems} problems=${problems} id=${base} />
        <h4>Conversation</h4>
        <${Problems} problems=${problems} id=${`${base}.messages`} />
        ${example.messages.map((message, at) => {
          const id = `${base}.messages.${at}`;
          return html`<div class="example-row" key=${at}>
            <${Slot} id=${`${id}.role`} label="Role" cls=" role" problems=${problems}>
              <select id=${`f-${id}.role`} value=${message.role} onChange=${(e) => setMessage(at, { role: e.currentTarget.value })} ...${aria(problems, `${id}.role`)}>
                ${ROLES.map((r) => html`<option value=${r}>${r}</option>`)}
              </select>
            <//>
            <${Slot} id=${`${id}.content`} label=${`Example ${index + 1}, message ${at + 1}`} cls=" grow" problems=${problems}>
              <textarea id=${`f-${id}.content`} rows="2" value=${message.content} onInput=${(e) => setMessage(at, { content: e.currentTarget.value })}
                ...${aria(problems, `${id}.content`)}></textarea>
            <//>
            <button type="button" class="small" onClick=${() => change(index, { messages: example.messages.filter((_, i) => i !== at) })}>Remove message ${at + 1}</button>
          </div>`;
        })}
        ${example.messages.length < MAX_EXAMPLE_MESSAGES && html`<button type="button" class="small"
          onClick=${() => change(index, { messages: [...example.messages, { role: example.messages.length % 2 ? "assistant" : "user", content: "" }] })}>Add a message to example ${index + 1}</button>`}
        <h4>Memories it should give</h4>
        <${Problems} problems=${problems} id=${`${base}.memories`} />
        ${example.memories.length === 0 && html`<p class="muted">None: this example teaches what not to keep.</p>`}
        ${example.memories.map((memory, at) => {
          const id = `${base}.memories.${at}`;
          const options = types.includes(memory.type) ? types : [...types, memory.type];
          return html`<div class="example-row" key=${at}>
            <${Slot} id=${`${id}.text`} label=${`Example ${index + 1}, memory ${at + 1}`} cls=" grow" problems=${problems}>
              <input id=${`f-${id}.text`} value=${memory.text} onInput=${(e) => setMemory(at, { text: e.currentTarget.value })} ...${aria(problems, `${id}.text`)} />
            <//>
            <${Slot} id=${`${id}.type`} label="Type" cls=" role" problems=${problems}>
              <select id=${`f-${id}.type`} value=${memory.type} onChange=${(e) => setMemory(at, { type: e.currentTarget.value })} ...${aria(problems, `${id}.type`)}>
                ${options.map((t) => html`<option value=${t}>${t}</option>`)}
              </select>
            <//>
            <button type="button" class="small" onClick=${() => change(index, { memories: example.memories.filter((_, i) => i !== at) })}>Remove memory ${at + 1}</button>
          </div>`;
        })}
        ${example.memories.length < MAX_EXAMPLE_MEMORIES && html`<button type="button" class="small"
          onClick=${() => change(index, { memories: [...example.memories, { text: "", type: "semantic" }] })}>Add a memory to example ${index + 1}</button>`}
        <div class="actions"><button type="button" onClick=${() => onChange(examples.filter((_, i) => i !== index))}>Remove example ${index + 1}</button></div>
      </fieldset>`;
    })}
    ${examples.length < MAX_EXAMPLES && html`<div class="actions"><button type="button"
      onClick=${() => onChange([...examples, { messages: [{ role: "user", content: "" }], memories: [] }])}>Add an example</button></div>`}
  </fieldset>`;
}

/**
 * The profile's fields: name, description and type each. A 409 for fields that actors hold
 * (`held`) is said here in words, with a button putting each such field back as the store has
 * it (`storeFields`).
 */
export function ProfileFieldsEditor({ fields, onChange, problems, held, storeFields }) {
  const change = (index, update) => onChange(fields.map((f, i) => (i === index ? { ...f, ...update } : f)));
  const putBack = (name) => {
    const kept = storeFields.find((f) => f.name === name);
    if (kept && !fields.some((f) => f.name === name)) onChange([...fields, { name: kept.name, description: kept.description, type: kept.type }]);
  };
  const removed = (held || []).filter((h) => !fields.some((f) => f.name === h.name.trim()));
  return html`<fieldset class="profile-fields">
    <legend>Profile fields (up to ${MAX_PROFILE_FIELDS}; <code>profile_fields</code> in the API)</legend>
    <p class="help">What every actor's profile holds, one value per field: extraction fills them from the same model call, recall puts them first in every context, and an actor's page shows and changes them.</p>
    ${held
      ? html`<div class="notice error held" id="p-profile_fields" role="alert">
          <p><strong>Actors hold values of ${held.length === 1 ? "this field" : "these fields"}:</strong></p>
          <ul>${held.map((h) => html`<li><code><${Text} value=${h.name} /></code>: ${plural(h.count, "actor")} ${h.count === 1 ? "holds" : "hold"} a value.</li>`)}</ul>
          <p>A field goes only once no actor holds a value of it: clear it on each actor's page first, or keep the field.</p>
          ${removed.length > 0 && html`<div class="actions">${removed.map((h) => html`<button type="button" onClick=${() => putBack(h.name)}>Keep ${h.name}</button>`)}</div>`}
        </div>`
      : html`<${Problems} problems=${problems} id="profile_fields" />`}
    ${fields.length === 0 && html`<p class="muted">No profile fields: actors have no profile.</p>`}
    ${fields.map((field, index) => {
      const base = `profile_fields.${index}`;
      return html`<div class="type-row profile-field" key=${index}>
        <div class="row">
          <${Slot} id=${`${base}.name`} label=${`Field ${index + 1} name`} problems=${problems} help="Letters, digits and . _ : @ -, up to 64 characters.">
            <input id=${`f-${base}.name`} value=${field.name} onInput=${(e) => change(index, { name: e.currentTarget.value })} autocomplete="off" spellcheck="false"
              ...${aria(problems, `${base}.name`, true)} />
          <//>
          <${Slot} id=${`${base}.type`} label=${`Field ${index + 1} holds`} problems=${problems}>
            <select id=${`f-${base}.type`} value=${field.type} onChange=${(e) => change(index, { type: e.currentTarget.value })} ...${aria(problems, `${base}.type`)}>
              ${Object.entries(PROFILE_TYPES).map(([value, words]) => html`<option value=${value}>${words}</option>`)}
            </select>
          <//>
        </div>
        <${Slot} id=${`${base}.description`} label=${`Field ${index + 1} description`} problems=${problems} help="What it holds, told to extraction (up to 500 characters).">
          <input id=${`f-${base}.description`} value=${field.description} onInput=${(e) => change(index, { description: e.currentTarget.value })}
            ...${aria(problems, `${base}.description`, true)} />
        <//>
        <${Problems} problems=${problems} id=${base} />
        <button type="button" onClick=${() => onChange(fields.filter((_, i) => i !== index))}>Remove field ${index + 1}</button>
      </div>`;
    })}
    ${fields.length < MAX_PROFILE_FIELDS && html`<div class="actions"><button type="button"
      onClick=${() => onChange([...fields, { name: "", description: "", type: "text" }])}>Add a profile field</button></div>`}
  </fieldset>`;
}
