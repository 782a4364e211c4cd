// Every ```yaml block of docs/*.md, docs/adapters/*.md and docs/stores/*.md passes `edgelimit
// check` (checkFiles, what the command prints) and the published JSON Schema — and so does each
// commented-out alternative in it (`# store: …` under `store: …`), uncommented in place of the
// line it replaces, one at a time: readers uncomment them. A block is made a whole file: one
// starting with `- ` is a list of rules, and a file without `rules:` gets `rules: []`. The
// placeholders it names (`${REDIS_URL}`) are given values. The `check` output the page shows is
// compared with what `check` prints for the policy it describes (fixtures/docs-check/).
// The JavaScript and TypeScript blocks run in packages/edgelimit/test/docs-examples.test.ts.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { Ajv } from 'ajv'
import { describe, expect, test } from 'vitest'
import { parse } from 'yaml'
import { checkFiles } from '../src/check.js'
import { createMetrics } from '../src/server/metrics.js'
import { GATEWAY_ROOT, REPO_ROOT, tempDir, writePolicy } from './support/gateway.js'

const pages = ['docs', 'docs/adapters', 'docs/stores'].flatMap((dir) =>
  readdirSync(join(REPO_ROOT, dir))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `${dir}/${f}`),
)

/** The fenced blocks of a page in `lang`, with the line of their opening fence. */
function fenced(page: string, lang: string): { line: number; lines: string[] }[] {
  const lines = readFileSync(join(REPO_ROOT, page), 'utf8').split('\n')
  const blocks: { line: number; lines: string[] }[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[i] as string)
    if (!open) continue
    let j = i + 1
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j] as string)) j++
    const indent = (open[1] as string).length
    if (open[2] === lang)
      blocks.push({ line: i + 1, lines: lines.slice(i + 1, j).map((l) => l.slice(indent)) })
    i = j
  }
  return blocks
}

/** The block, then each `# key: …` line put in place of the `key: …` line it is an alternative to. */
function variants(lines: string[]): { name: string; lines: string[] }[] {
  const out = [{ name: 'as shown', lines }]
  lines.forEach((line, i) => {
    const alternative = /^(\s*)# ([A-Za-z][\w-]*:(?:\s.*)?)$/.exec(line)
    if (!alternative) return
    const [, indent, entry] = alternative as unknown as [string, string, string]
    const key = entry.slice(0, entry.indexOf(':') + 1)
    const active = lines.findIndex((l) => l.startsWith(`${indent}${key}`))
    if (active === -1) return
    const uncommented = lines
      .map((l, k) => (k === active ? `${indent}${entry}` : l))
      .filter((_, k) => k !== i)
    out.push({ name: `line ${i + 1} uncommented`, lines: uncommented })
  })
  return out
}

/** A whole policy file from a block. */
function policy(lines: string[]): string {
  const body = lines[0]?.startsWith('- ') ? ['rules:', ...lines.map((l) => `  ${l}`)] : lines
  if (!body.some((l) => /^rules:/.test(l))) body.push('rules: []')
  return `${body.join('\n')}\n`
}

/** A value for each `${NAME}` placeholder: a URL of the kind its name says. */
function env(text: string): Record<string, string> {
  const names = [...text.matchAll(/\$\{(\w+)\}/g)].map((m) => m[1] as string)
  return Object.fromEntries(
    names.map((n) => [
      n,
      /REDIS_URL$/.test(n)
        ? 'redis://10.0.0.5:6379'
        : /_URL$/.test(n)
          ? 'https://example.upstash.io'
          : 'docs-example',
    ]),
  )
}

const yamlBlocks = pages.flatMap((page) =>
  fenced(page, 'yaml').flatMap((block) =>
    variants(block.lines).map((v) => ({ where: `${page}:${block.line}`, ...v })),
  ),
)
const schema = JSON.parse(readFileSync(join(GATEWAY_ROOT, 'schema/edgelimit.schema.json'), 'utf8'))
const validate = new Ajv({ allErrors: true, strict: false }).compile(schema)

describe('the YAML in the docs is a valid policy', () => {
  test('finds the blocks and their alternatives', () => {
    expect(yamlBlocks.length).toBeGreaterThanOrEqual(6)
    expect(yamlBlocks.filter((b) => b.name !== 'as shown').length).toBeGreaterThanOrEqual(2)
  })

  test.each(yamlBlocks)('$where, $name', ({ where, lines }) => {
    const text = policy(lines)
    const file = writePolicy(tempDir(), text)
    const report = checkFiles([file], env(text))
    expect(report.lines.join('\n'), `${where}:\n${text}`).toMatch(/^✔ /)
    expect(validate(parse(text)), JSON.stringify(validate.errors)).toBe(true)
  })
})

describe('the `check` output docs/gateway.md shows', () => {
  test('is what check prints for the policy it describes (… stands for the rest of a line)', () => {
    const block = fenced('docs/gateway.md', 'text').find(
      (b) => b.lines[0] === '$ edgelimit check edgelimit.yaml',
    )
    expect(block, 'a block starting "$ edgelimit check edgelimit.yaml"').toBeDefined()
    const file = join(GATEWAY_ROOT, 'test/fixtures/docs-check/edgelimit.yaml')
    const printed = checkFiles([file]).lines.map((l) =>
      l.replaceAll(relative(process.cwd(), file), 'edgelimit.yaml'),
    )
    const shown = (block?.lines ?? []).slice(1).filter((l) => l !== '')
    expect(printed).toHaveLength(shown.length)
    shown.forEach((line, i) => {
      const pattern = line
        .split('…')
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')
      expect(printed[i]).toMatch(new RegExp(`^${pattern}$`))
    })
  })
})

/** The message of every `log.<level>(…)` call in the gateway's source (a template: up to its first `${`). */
function logMessages(): { message: string; where: string }[] {
  const src = join(GATEWAY_ROOT, 'src')
  const files = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter(
    (f) => f.endsWith('.ts') && !f.endsWith('.test.ts'),
  )
  const found: { message: string; where: string }[] = []
  for (const file of files) {
    const text = readFileSync(join(src, file), 'utf8')
    for (const call of text.matchAll(/\blog\.(?:trace|debug|info|warn|error|fatal)\(/g)) {
      // The call's arguments: up to the parenthesis that closes it.
      let depth = 1
      let end = (call.index as number) + call[0].length
      while (depth > 0 && end < text.length) {
        const c = text[end++]
        if (c === '(') depth++
        else if (c === ')') depth--
      }
      const args = text.slice((call.index as number) + call[0].length, end - 1)
      const last = /(['`])((?:(?!\1)[^\\]|\\.)*)\1\s*,?\s*$/.exec(args)
      expect(last, `${file}: a log call without a message: ${args.slice(0, 80)}`).not.toBeNull()
      const message = ((last as RegExpExecArray)[2] as string).split('${')[0] as string
      found.push({ message, where: `src/${file}:${text.slice(0, call.index).split('\n').length}` })
    }
  }
  return found
}

describe('the Logs section of docs/gateway.md', () => {
  test('names every line the gateway logs', () => {
    const page = readFileSync(join(REPO_ROOT, 'docs/gateway.md'), 'utf8')
    const start = page.indexOf('### Logs')
    const section = page.slice(start, page.indexOf('\n## ', start)).replace(/\s+/g, ' ')
    const messages = logMessages()
    expect(messages.length).toBeGreaterThan(20)
    const missing = messages.filter(({ message }) => !section.includes(message.trim()))
    expect(missing.map((m) => `${m.where}: ${m.message}`)).toEqual([])
  })
})

describe('the metrics table of docs/gateway.md', () => {
  test('names every metric the gateway registers, each with the labels it has', () => {
    // It gave edgelimit_config_generation a `result` label (a row shared with the reload counter).
    const lines = readFileSync(join(REPO_ROOT, 'docs/gateway.md'), 'utf8').split('\n')
    const from = lines.indexOf('### Metrics')
    expect(from, 'a "### Metrics" heading').toBeGreaterThan(0)
    const documented = new Map<string, string[]>()
    const start = lines.findIndex((l, i) => i > from && l.startsWith('|'))
    const end = lines.findIndex((l, i) => i > start && !l.startsWith('|'))
    for (const row of lines.slice(start + 2, end)) {
      const cells = row.split('|').slice(1, -1)
      const names = [...(cells[0] ?? '').matchAll(/`(edgelimit_\w+)`/g)].map((m) => m[1] as string)
      const labels = [...(cells[1] ?? '').matchAll(/`(\w+)`/g)].map((m) => m[1] as string)
      for (const name of names) documented.set(name, labels)
    }
    const registered = new Map(
      createMetrics()
        .registry.getMetricsAsArray()
        .filter((m) => !/^edgelimit_(process|nodejs)_/.test(m.name))
        .map((m) => [m.name, [...((m as unknown as { labelNames?: string[] }).labelNames ?? [])]]),
    )
    expect(Object.fromEntries(documented)).toEqual(Object.fromEntries(registered))
  })
})
