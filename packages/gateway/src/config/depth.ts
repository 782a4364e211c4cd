import { CST } from 'yaml'
import type { Path } from './issues.js'

/**
 * The deepest nesting of lists and mappings a policy may have (the document's own mapping is level
 * 1). A real policy needs a handful (`rules[0].match.headers` is 4); the YAML composer and every
 * walk of the value recurse once per level, and a few hundred levels exhaust the call stack.
 */
export const MAX_POLICY_DEPTH = 64

/**
 * The first collection (in document order) nested deeper than `MAX_POLICY_DEPTH`, read from the
 * parser's tokens before the composer recurses into them. Iterative: the token tree is as deep as
 * the text nests.
 *
 * @example const deep = deepCollection([...new Parser().parse('a: [[[1]]]')])
 */
export function deepCollection(tokens: readonly CST.Token[]): CST.Token | undefined {
  const stack: [CST.Token, number][] = []
  const push = (token: CST.Token | null | undefined, level: number) => {
    if (token !== null && token !== undefined) stack.push([token, level])
  }
  for (const token of [...tokens].reverse()) push(token, 1)
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [token, level] = top
    if (token.type === 'document') push(token.value, level)
    else if (CST.isCollection(token)) {
      if (level > MAX_POLICY_DEPTH) return token
      // Reversed, so that the stack pops them in document order, each key before its value.
      for (const item of [...token.items].reverse()) {
        push(item.value, level + 1)
        push(item.key, level + 1)
      }
    }
  }
  return undefined
}

/**
 * The path to the first value nested deeper than `MAX_POLICY_DEPTH` in a document's value, its
 * aliases expanded (an alias shares its anchor's value, so nesting the text keeps shallow can
 * multiply through a chain of them). Iterative, and each shared value is walked again only when
 * reached at a deeper level.
 */
export function deepValue(value: unknown): Path | undefined {
  type Entry = { value: unknown; level: number; parent?: Entry; key?: string | number }
  const deepest = new Map<object, number>()
  const stack: Entry[] = [{ value, level: 1 }]
  for (let e = stack.pop(); e !== undefined; e = stack.pop()) {
    const v = e.value
    if (typeof v !== 'object' || v === null) continue
    if (e.level > MAX_POLICY_DEPTH) {
      const path: (string | number)[] = []
      for (let at: Entry | undefined = e; at?.key !== undefined; at = at.parent) path.unshift(at.key)
      return path
    }
    if ((deepest.get(v) ?? 0) >= e.level) continue
    deepest.set(v, e.level)
    const children: [string | number, unknown][] = Array.isArray(v) ? [...v.entries()] : Object.entries(v)
    for (const [key, child] of children.reverse())
      stack.push({ value: child, level: e.level + 1, parent: e, key })
  }
  return undefined
}
