// Build the console: one minified ES module and one stylesheet with content-hashed names, the
// page that loads them, and the icon, into functions/console/static/ (what ConsoleFunction
// serves). Run by `make console` (npm run build); nothing here fetches anything.

import { build } from "esbuild";
import { mkdir, readdir, rm, writeFile, copyFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "functions", "console", "static");

await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });

const result = await build({
  entryPoints: { app: join(here, "src", "main.js") },
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  outdir: out,
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  metafile: true,
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});

const outputs = Object.keys(result.metafile.outputs).map((file) => basename(file));
const script = outputs.find((file) => file.endsWith(".js"));
const style = outputs.find((file) => file.endsWith(".css"));
if (!script || !style) throw new Error(`expected one .js and one .css, got ${outputs.join(", ")}`);

// Relative links: the page is served at <base>/console, so "console/x" is <base>/console/x.
const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>KiviDB agent memory</title>
<link rel="icon" href="console/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="console/${style}">
<script type="module" src="console/${script}"></script>
</head>
<body>
<div id="app"><noscript>The KiviDB agent memory console needs JavaScript.</noscript></div>
</body>
</html>
`;
await writeFile(join(out, "index.html"), page);
await copyFile(join(here, "src", "favicon.svg"), join(out, "favicon.svg"));

const files = (await readdir(out)).sort();
console.log(`console: built ${files.join(", ")} in ${out}`);
