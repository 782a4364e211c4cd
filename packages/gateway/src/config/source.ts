import { closeSync, fstatSync, openSync, readSync } from 'node:fs'
import {
  type Alias,
  Composer,
  type Document,
  isAlias,
  isMap,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  type Node,
  Parser,
  visit,
  YAMLParseError,
} from 'yaml'
import { deepCollection, deepValue, MAX_POLICY_DEPTH } from './depth.js'
import { substituteEnv } from './env.js'
import type { Issue, Path } from './issues.js'
import { isTextField } from './secret.js'
import { isTypedField } from './typed-fields.js'

/**
 * Where a policy comes from: the text of one YAML file, parsed with positions so that every
 * problem found later (by path) can be reported with its file, line and column.
 */
export interface PolicySource {
  readonly file: string
  readonly text: string
  /** The document as plain data, `${ENV}` substituted; undefined when it could not be parsed. */
  readonly value: unknown
  /** Problems found while reading: YAML syntax, undefined environment variables. */
  readonly issues: readonly Issue[]
  /** Fills in `file`, `line` and `column` of an issue found by path. */
  place(issue: Issue): Issue
}

type Env = Readonly<Record<string, string | undefined>>

/**
 * The largest policy file read, in bytes (1 MiB). A real policy is a few KB; parsing with
 * positions holds tens of KB per rule line, so a file of tens of MB would exhaust the heap.
 */
export const MAX_POLICY_BYTES = 1024 * 1024

/**
 * Reads and parses a policy file (`input`, a path or an open descriptor such as 0 for standard
 * input, is read; `file` names it). Never throws for a bad file: an unreadable file, one above
 * `MAX_POLICY_BYTES`, a YAML error or an undefined `${VAR}` is an issue.
 *
 * @example
 * const source = readPolicySource('edgelimit.yaml')
 * if (source.issues.length > 0) console.error(source.issues.map(formatIssue).join('\n'))
 */
export function readPolicySource(
  file: string,
  env: Env = process.env,
  input: string | number = file,
): PolicySource {
  let text: string
  try {
    text = readBounded(input)
  } catch (error) {
    const message =
      error instanceof TooLarge
        ? error.message
        : `cannot read the file (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`
    const issue: Issue = { path: [], code: 'ERR_FILE', message, file, line: 0 }
    return { file, text: '', value: undefined, issues: [issue], place: (i) => ({ ...i, file }) }
  }
  return parsePolicyText(text, file, env)
}

class TooLarge extends Error {}

/** The file's text; a file above the bound is refused by its size, a stream once past it. */
function readBounded(input: string | number): string {
  const bound = `at most ${MAX_POLICY_BYTES} (1 MiB)`
  const fd = typeof input === 'number' ? input : openSync(input, 'r')
  try {
    const stats = fstatSync(fd)
    if (stats.isFile() && stats.size > MAX_POLICY_BYTES)
      throw new TooLarge(`file too large: ${stats.size} bytes, ${bound}`)
    const buffer = Buffer.allocUnsafe(MAX_POLICY_BYTES + 1)
    let length = 0
    while (length < buffer.length) {
      const n = readSync(fd, buffer, length, buffer.length - length, null)
      if (n === 0) break
      length += n
    }
    if (length > MAX_POLICY_BYTES)
      throw new TooLarge(`file too large: more than ${MAX_POLICY_BYTES} bytes, ${bound}`)
    return buffer.toString('utf8', 0, length)
  } finally {
    if (typeof input !== 'number') closeSync(fd)
  }
}

/** Parses policy text (see `readPolicySource`); `file` names it in issues. */
export function parsePolicyText(text: string, file: string, env: Env = process.env): PolicySource {
  const lineCounter = new LineCounter()
  const at = (offset: number) => {
    const { line, col } = lineCounter.linePos(offset)
    return { line, column: col }
  }
  // `parseDocument`'s two steps, so that the nesting is measured between them: the composer
  // recurses once per level, and past a few hundred it ran out of stack at a place that depended on
  // the caller's ("YAML syntax: Maximum call stack size exceeded").
  const tokens = [...new Parser(lineCounter.addNewLine).parse(text)]
  const deep = deepCollection(tokens)
  if (deep !== undefined) {
    const issue: Issue = { path: [], code: 'ERR_YAML', message: tooDeep(), file, ...at(deep.offset) }
    return { file, text, value: undefined, issues: [issue], place: (i) => ({ ...i, file }) }
  }
  const doc = firstDocument(tokens, text.length)
  const place = (issue: Issue): Issue => ({ ...issue, file, ...at(offsetOf(doc, issue.path, issue.at)) })
  /** The source of a document that cannot be read as a policy: one ERR_YAML issue, at `offset`. */
  const unreadable = (message: string, offset: number): PolicySource => ({
    file,
    text,
    value: undefined,
    issues: [{ path: [], code: 'ERR_YAML', message, file, ...at(offset) }],
    place,
  })
  if (doc.errors.length > 0) {
    const issues = doc.errors.map(
      (e): Issue => ({
        path: [],
        code: 'ERR_YAML',
        // The parser's own words for this one name its API (`YAML.parseAllDocuments()`).
        message:
          e.code === 'MULTIPLE_DOCS'
            ? `YAML: the file holds more than one document (${text.startsWith('---', e.pos[0]) ? '`---`' : 'the second, after `...`,'} at line ${at(e.pos[0]).line}); a policy is one document`
            : `YAML syntax: ${e.message.split('\n')[0]}`,
        file,
        ...at(e.pos[0]),
      }),
    )
    return { file, text, value: undefined, issues, place }
  }
  const cycle = cyclicAlias(doc)
  if (cycle !== undefined) {
    return unreadable(
      `YAML: the alias *${cycle.source} is inside the node it refers to (a cycle)`,
      rangeStart(cycle) ?? 0,
    )
  }
  const tagged = foreignTag(doc, text)
  if (tagged !== undefined) {
    return unreadable(
      `YAML: the tag ${tagged.tag} is not part of a policy, which is plain YAML: mappings, lists, strings, numbers, booleans and null`,
      tagged.offset,
    )
  }
  // A core tag on a value it does not fit (`!!float 5`, `!!bool yes`, `!!map [1]`): the parser
  // warns and drops the tag, so the value would be read as if untagged (`yes` a string).
  const unfit = doc.warnings.find((w) => w.code === 'TAG_RESOLVE_FAILED')
  if (unfit !== undefined) {
    const tag = /tag:yaml\.org,2002:(\w+)/.exec(unfit.message)?.[1]
    return unreadable(
      `YAML: the tag${tag === undefined ? '' : ` !!${tag}`} cannot be read on this value (the parser would drop it): write the value without it`,
      unfit.pos[0],
    )
  }
  let raw: unknown
  try {
    raw = doc.toJS({ maxAliasCount: 100 })
  } catch (error) {
    // An alias to an anchor not yet set, or an alias bomb: the parser accepts both; turning the
    // document into values does not.
    const message = error instanceof Error ? error.message : String(error)
    return unreadable(`YAML: ${message}`, badAlias(doc))
  }
  // Aliases share their anchor's value: a chain of them nests the value deeper than the text.
  const deepPath = deepValue(raw)
  if (deepPath !== undefined) {
    const alias = aliasOn(doc, deepPath)
    return unreadable(
      tooDeep(alias === undefined ? '' : ` once the alias *${alias.source} is expanded`),
      rangeStart(alias) ?? offsetOf(doc, deepPath, undefined),
    )
  }
  const substituted = substituteEnv(
    raw,
    env,
    (path) => isTypedField(path) || (!isTextField(path) && isPlainScalar(doc, path)),
  )
  return { file, text, value: substituted.value, issues: substituted.issues.map(place), place }
}

function tooDeep(how = ''): string {
  return `YAML: the policy nests lists and mappings deeper than ${MAX_POLICY_DEPTH} levels${how} (a policy needs a handful)`
}

/** The document, as `parseDocument` composes it: a second one is an error of the first. */
function firstDocument(tokens: Parameters<Composer['compose']>[0], end: number): Document.Parsed {
  const composer = new Composer({ uniqueKeys: true, merge: true })
  let doc: Document.Parsed | undefined
  for (const next of composer.compose(tokens, true, end)) {
    if (doc === undefined) doc = next
    else {
      doc.errors.push(
        new YAMLParseError([next.range[0], next.range[1]], 'MULTIPLE_DOCS', 'more than one document'),
      )
      break
    }
  }
  return doc as Document.Parsed
}

/** The first alias on the way to `path` (the one whose expansion leads there), if any. */
function aliasOn(doc: Document, path: Path): Alias | undefined {
  let node: unknown = doc.contents
  for (const segment of path) {
    if (isAlias(node)) return node
    if (isMap(node))
      node = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(segment))?.value
    else if (isSeq(node) && typeof segment === 'number') node = node.items[segment]
    else return undefined
  }
  return isAlias(node) ? node : undefined
}

/**
 * The first alias inside the node its anchor names (`rules: &a [*a]`): the parser takes it, and
 * `toJS` builds a value that contains itself, which every later walk would follow for ever.
 */
function cyclicAlias(doc: Document): Alias | undefined {
  let found: Alias | undefined
  visit(doc, {
    Alias(_, node, path) {
      const target = node.resolve(doc)
      if (target === undefined || !path.includes(target)) return undefined
      found = node
      return visit.BREAK
    },
  })
  return found
}

/** The tags of YAML's core schema: what they build is a plain value, as without them. */
const CORE_TAGS = new Set(
  ['str', 'int', 'float', 'bool', 'null', 'map', 'seq'].map((t) => `tag:yaml.org,2002:${t}`),
)

/**
 * The first explicit tag outside the core schema, as written, and where it starts: the parser
 * builds a Uint8Array (`!!binary`), a Set, a Date, a Map, or for a tag it does not know (`!env`) a
 * string with a warning — values that validation would misread (a binary's bytes as fields).
 */
function foreignTag(doc: Document, text: string): { tag: string; offset: number } | undefined {
  let found: { tag: string; offset: number } | undefined
  visit(doc, {
    Node(_, node) {
      if (node.tag === undefined || CORE_TAGS.has(node.tag)) return undefined
      // The node's range starts after its tag: the tag starts at the last `!` (`!!`) before it.
      let offset = text.lastIndexOf('!', rangeStart(node) ?? 0)
      if (text[offset - 1] === '!') offset--
      found = { tag: node.tag.replace(/^tag:yaml\.org,2002:/, '!!'), offset: Math.max(0, offset) }
      return visit.BREAK
    },
  })
  return found
}

/** Where the first alias without an anchor before it is (else the document's start). */
function badAlias(doc: Document): number {
  let offset = 0
  visit(doc, {
    Alias(_, node) {
      if (node.resolve(doc) !== undefined) return undefined
      offset = rangeStart(node) ?? 0
      return visit.BREAK
    },
  })
  return offset
}

function isPlainScalar(doc: Document, path: Path): boolean {
  const node = nodeAt(doc, path)
  return isScalar(node) && node.type === 'PLAIN'
}

function resolve(doc: Document, node: unknown): unknown {
  return isAlias(node) ? node.resolve(doc) : node
}

function nodeAt(doc: Document, path: Path): unknown {
  let node: unknown = doc.contents
  for (const segment of path) {
    node = resolve(doc, node)
    if (isMap(node))
      node = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(segment))?.value
    else if (isSeq(node) && typeof segment === 'number') node = node.items[segment]
    else return undefined
  }
  return resolve(doc, node)
}

/**
 * The offset of the node at `path`, or of its deepest existing ancestor: a missing field is
 * reported at the map that should hold it. `at: 'key'` points at the map key instead.
 */
function offsetOf(doc: Document, path: Path, at: Issue['at']): number {
  let node: unknown = doc.contents
  let offset = rangeStart(node) ?? 0
  for (const [i, segment] of path.entries()) {
    node = resolve(doc, node)
    let next: unknown
    if (isMap(node)) {
      const pair = node.items.find(
        (p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(segment),
      )
      if (pair === undefined) return offset
      if (at === 'key' && i === path.length - 1) return rangeStart(pair.key) ?? offset
      next = pair.value ?? pair.key
    } else if (isSeq(node) && typeof segment === 'number') {
      next = node.items[segment]
    }
    if (next === undefined || next === null) return offset
    node = next
    offset = rangeStart(node) ?? offset
  }
  return offset
}

function rangeStart(node: unknown): number | undefined {
  return (node as Node | undefined)?.range?.[0]
}
