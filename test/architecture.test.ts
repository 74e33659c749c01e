/**
 * The layers of src/ point one way (docs/architecture.md): every import of every file is read
 * (type-only imports, `export … from`, `import()` and `import('…').T` included), and the test
 * fails on an import cycle, naming its files, and on an import that points up a layer.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import ts from 'typescript';

const test = suite('architecture');
const SRC = resolve(new URL('../src', import.meta.url).pathname);

/** Every .ts file under `dir` (declaration files included: they may import too). */
function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sourceFiles(p));
    else if (name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** The module specifiers a file names: static imports and re-exports, `import()` calls, and `import('…')` types. */
export function specifiersOf(file: string, text = readFileSync(file, 'utf8')): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      out.push(node.moduleReference.expression.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteralLike(node.arguments[0])) {
      out.push(node.arguments[0].text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      out.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** The file a relative specifier names (`./x.js` is `./x.ts`; a folder is its index.ts); null for a package. */
function resolveSpecifier(from: string, spec: string, files: ReadonlySet<string>): string | null {
  if (!spec.startsWith('.')) return null;
  const base = resolve(dirname(from), spec);
  const candidates = [base, base.replace(/\.js$/, '.ts'), base.replace(/\.js$/, '.d.ts'), `${base}.ts`, join(base, 'index.ts')];
  for (const c of candidates) if (files.has(c)) return c;
  throw new Error(`${relative(SRC, from)} imports '${spec}', which names no file of src/`);
}

/** The import graph of src/: file → the files of src/ it imports. */
export function importGraph(root = SRC): Map<string, string[]> {
  const files = sourceFiles(root);
  const set = new Set(files);
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const deps = specifiersOf(f)
      .map((s) => resolveSpecifier(f, s, set))
      .filter((d): d is string => d !== null);
    graph.set(f, [...new Set(deps)]);
  }
  return graph;
}

/** The strongly connected components with more than one file (or a file importing itself): each is a cycle. */
export function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  // Tarjan's algorithm, iterative (no recursion depth to worry about).
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work: Array<{ v: string; i: number }> = [{ v: start, i: 0 }];
    index.set(start, next);
    low.set(start, next++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const deps = graph.get(top.v) ?? [];
      if (top.i < deps.length) {
        const w = deps[top.i++]!;
        if (!index.has(w)) {
          index.set(w, next);
          low.set(w, next++);
          stack.push(w);
          onStack.add(w);
          work.push({ v: w, i: 0 });
        } else if (onStack.has(w)) {
          low.set(top.v, Math.min(low.get(top.v)!, index.get(w)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]!.v;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.v)!));
      }
      if (low.get(top.v) === index.get(top.v)) {
        const scc: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          scc.push(w);
        } while (w !== top.v);
        if (scc.length > 1 || (graph.get(top.v) ?? []).includes(top.v)) out.push(scc.sort());
      }
    }
  }
  return out;
}

/** One closed path through a component, to show how its files import one another. */
function pathThrough(graph: ReadonlyMap<string, readonly string[]>, scc: readonly string[]): string[] {
  const members = new Set(scc);
  const start = scc[0]!;
  // Breadth-first from start's imports back to start, inside the component.
  const prev = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!members.has(w) || prev.has(w)) continue;
      prev.set(w, v);
      if (w === start) {
        const path = [start];
        for (let at = prev.get(start)!; at !== start; at = prev.get(at)!) path.unshift(at);
        path.unshift(start);
        return path;
      }
      queue.push(w);
    }
  }
  return [start];
}

/** The top folder of src/ a file is in ('' for a file at src/ itself). */
const layerOf = (file: string): string => {
  const rel = relative(SRC, file).split('/');
  return rel.length > 1 ? rel[0]! : '';
};

const SERVER = ['app', 'http', 'ws', 'services', 'actors', 'cluster', 'store', 'integrations'];

/**
 * Layers that may not import the layers listed: the lower layers know nothing of the transports
 * or of the composition root, nothing but the root imports the root, and the agent SDK is only
 * the domain's protocol (it runs in other processes).
 */
const FORBIDDEN: Record<string, readonly string[]> = {
  http: ['app'],
  ws: ['app'],
  services: ['http', 'ws', 'app'],
  actors: ['http', 'ws', 'app', 'services'],
  // Cluster mode's parts (bus, membership, shards, fence, claims) sit on the store, below the services.
  cluster: ['http', 'ws', 'app', 'services', 'actors', 'integrations'],
  domain: ['http', 'ws', 'app', 'services', 'actors', 'cluster', 'store', 'integrations'],
  store: ['http', 'ws', 'app', 'services', 'actors', 'cluster', 'integrations'],
  integrations: ['http', 'ws', 'app', 'services', 'actors'],
  agent: SERVER,
};

/** Imports that point up a layer, as "from → to" lines. */
export function upwardImports(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const out: string[] = [];
  for (const [from, deps] of graph) {
    const banned = FORBIDDEN[layerOf(from)];
    if (!banned) continue;
    for (const to of deps) if (banned.includes(layerOf(to))) out.push(`${relative(SRC, from)} → ${relative(SRC, to)}`);
  }
  return out.sort();
}

const rel = (files: readonly string[]) => files.map((f) => relative(SRC, f));

test('src/ has no import cycle', () => {
  const graph = importGraph();
  const found = cycles(graph);
  const described = found.map((scc) => `${scc.length} files: ${rel(scc).join(', ')}\n    e.g. ${rel(pathThrough(graph, scc)).join(' → ')}`);
  assert.is(found.length, 0, `import cycles:\n  ${described.join('\n  ')}`);
});

test('services, actors, cluster, domain, store and integrations import nothing from http, ws or app; domain and store import no cluster, service or actor; domain no store or integration; only the root imports the root', () => {
  const up = upwardImports(importGraph());
  assert.is(up.length, 0, `imports against the layers:\n  ${up.join('\n  ')}`);
});

test('the reader finds every kind of import (type-only, re-export, dynamic, import type), so the checks above cannot pass by missing one', () => {
  const text = [
    "import { a } from './a.js';",
    "import type { B } from './b.js';",
    "export { c } from './c.js';",
    "export type * from './d.js';",
    "const e = await import('./e.js');",
    "let f: import('./f.js').F;",
    "import g = require('./g.js');",
    "import 'node:fs';",
  ].join('\n');
  assert.equal(specifiersOf('x.ts', text).sort(), ['./a.js', './b.js', './c.js', './d.js', './e.js', './f.js', './g.js', 'node:fs']);
});

test('the cycle finder finds a cycle of three and a file importing itself, and nothing in a chain', () => {
  const g = new Map<string, string[]>([
    ['a', ['b']],
    ['b', ['c']],
    ['c', ['a', 'd']],
    ['d', ['e']],
    ['e', []],
    ['s', ['s']],
  ]);
  assert.equal(
    cycles(g).map((c) => c.join(',')).sort(),
    ['a,b,c', 's'],
  );
});

test.run();
