// tests/kubernetes — validates each document of a manifest against the
// Kubernetes schema of the kubernetes-models package (types, enums,
// required fields) and, since that schema lets unknown keys through (a
// misspelt `subdomian` passes), refuses every key that the type's
// definition in the package's TypeScript declarations does not have.
// usage: node validate.mjs MODULES_DIR MANIFEST...
// Prints one line a document; exits 1 when any is refused.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modulesDir, ...manifests] = process.argv.slice(2);
const require = createRequire(path.join(modulesDir, "x.js"));
const yaml = require("js-yaml");
const models = path.join(modulesDir, "kubernetes-models");

// The declaration file of kind `kind` in group/version `apiVersion`.
function declarationOf(apiVersion, kind) {
  return path.join(models, apiVersion, kind + ".d.ts"); // "batch/v1", "v1"
}

// The properties of the interface a .d.ts file exports first: name -> type
// text, and where each imported type is declared. null: a type alias
// (a Quantity, say), checked by the schema alone.
const parsed = new Map();
function parse(file) {
  if (parsed.has(file)) return parsed.get(file);
  const text = fs.readFileSync(file, "utf8");
  const imports = {};
  for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
    const from = m[2].startsWith(".")
      ? path.resolve(path.dirname(file), m[2])
      : path.join(modulesDir, m[2]);
    imports[m[1]] = from + ".d.ts";
  }
  const body = text.match(/export interface \w+(?: extends [\w, ]+)? \{\n([\s\S]*?)\n\}/);
  let props = null;
  if (body) {
    props = {};
    // A map's type spans lines ("{" then "[key: string]: string;"): its
    // first line is enough to know the key.
    for (const m of body[1].matchAll(/^ {4}"([^"]+)"\??: (.+?);?$/gm)) props[m[1]] = m[2];
  }
  const result = { props, imports };
  parsed.set(file, result);
  return result;
}

// Every key of `value` not in its type's declaration, under `where`.
function unknownKeys(value, file, where, out) {
  if (!value || typeof value !== "object" || Array.isArray(value)) return;
  const { props, imports } = parse(file);
  if (!props) return;
  for (const [key, v] of Object.entries(value)) {
    const type = props[key];
    if (type === undefined) {
      out.push(`${where}.${key}: no such field`);
      continue;
    }
    const one = type.match(/^(I\w+)$/);
    const many = type.match(/^Array<(I\w+)>$/);
    if (one && imports[one[1]]) unknownKeys(v, imports[one[1]], `${where}.${key}`, out);
    if (many && imports[many[1]] && Array.isArray(v))
      v.forEach((e, i) => unknownKeys(e, imports[many[1]], `${where}.${key}[${i}]`, out));
  }
}

let failed = false;
for (const manifest of manifests) {
  const docs = yaml.loadAll(fs.readFileSync(manifest, "utf8")).filter((d) => d);
  docs.forEach((doc, i) => {
    const name = `${path.basename(manifest)}[${i}] ${doc.kind}/${doc.metadata?.name}`;
    const problems = [];
    const decl = declarationOf(doc.apiVersion ?? "", doc.kind ?? "");
    if (!fs.existsSync(decl)) {
      problems.push(`no kind ${doc.kind} in ${doc.apiVersion}`);
    } else {
      const js = decl.replace(/\.d\.ts$/, ".js");
      const Model = require(js)[doc.kind];
      try {
        new Model(doc).validate();
      } catch (e) {
        problems.push(String(e.message ?? e).split("\n").join("; "));
      }
      unknownKeys(doc, decl, doc.kind, problems);
    }
    failed ||= problems.length > 0;
    console.log(problems.length ? `refused ${name}: ${problems.join("; ")}` : `valid ${name}`);
  });
}
process.exit(failed ? 1 : 0);
