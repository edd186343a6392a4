// The CommonJS build (tsconfig.cjs.json, in dist/cjs/) is CommonJS to Node and to TypeScript
// because the nearest package.json says so: this writes it after tsc.
import { writeFileSync } from "node:fs";

writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');
