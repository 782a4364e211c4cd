/**
 * Request paths as routes see them. A limit on `/login` must also hold for `//login`, `/LOGIN`,
 * `/login/`, `/%6Cogin`, `/x/../login` and `/x\..\login`: some server reads each of these as
 * `/login`. See docs/decisions/0009-canonical-paths.md.
 */

/**
 * The form routes match a path in. It folds every spelling that a JavaScript server reads as the
 * same path: `\` is `/` and `.` / `..` segments are resolved as WHATWG URL parsing does (ASCII
 * escapes decoded first, so `%2e%2e` is `..`), escapes are decoded once as `decodeURI` does
 * (`%6C` → `l`, `%C3%A9` → `é`; `%2F` and `%3B` stay escaped) as Hono routes, empty segments
 * (`//`, a trailing `/`) are dropped and case is ignored (Express routes ignore it). A route form
 * matches more paths than any one of these servers would, never fewer. `;` is kept: Fastify's
 * adapter cuts it off first (its `useSemicolonDelimiter`).
 *
 * @example routePath('/Admin/../%6Cogin/') // '/login'
 */
export function routePath(path: string): string {
  if (!/[A-Z%\\]|\/[/.]|.\/$/.test(path)) return path
  const segments: string[] = []
  // ASCII escapes first, one by one (`%2e%2e` is `..` whatever else the path holds)…
  for (const segment of path.replace(/%(?!25)[0-7][\dA-Fa-f]/g, decodeURI).split(/[/\\]/)) {
    if (segment === '..') segments.pop()
    else if (segment !== '.') segments.push(segment)
  }
  // …the rest (UTF-8, `%25`) once the dot segments are gone, as a WHATWG server then Hono read it:
  // each run of escapes on its own, as Hono decodes them, so that an invalid run (`%FF`) leaves the
  // others decoded (`/caf%C3%A9/%FF` is `/café/%ff`, which Hono routes as `/café/%FF`).
  return `/${segments.filter(Boolean).join('/')}`
    .replace(/(%[\dA-Fa-f][\dA-Fa-f])+/g, (run) => {
      try {
        return decodeURI(run)
      } catch {
        return run
      }
    })
    .toLowerCase()
}

/**
 * A route glob compiled for `routePath` forms: `*` is one segment, a `**` segment zero or more of
 * them, anywhere, as a globstar is in gitignore and minimatch (`/api/**` covers `/api`; a `**`
 * segment between `/files` and `/raw` covers `/files/raw`); a `**` inside a segment is any run of
 * characters, `/` included. A final `/*` also matches the path without it (`/api/*` covers
 * `/api/`, which Fastify and Hono route to it, and whose route form is `/api`). The glob is put in
 * route form itself (`/Login/` is `/login`, `/caf%C3%A9` is `/café`). A path is read in linear
 * time whatever the glob: a RegExp where its stars cannot compete for the same characters, else a
 * one-pass run over the glob's positions (a RegExp of several `.*` backtracks for seconds on a
 * hostile 16 KB path).
 *
 * @example pathGlob('/api/**').test(routePath('/API/v1/')) // true
 */
export function pathGlob(glob: string): { test(path: string): boolean } {
  const route = routePath(glob)
  // A `/**` segment, a final `/*`, `**`, `*` or one character (a UTF-16 unit, as `path[i]` reads it).
  const tokens = route.match(/\/\*\*(?=\/|$)|\/\*$|\*\*?|./gs) ?? []
  // Stars compete when a `**` (not the final `/**`) has another star after it, or two runs of
  // stars share a segment; otherwise the RegExp cannot backtrack far.
  if (!/\*\*.*\*|\*[^/*]+\*/.test(route.replace(/\/\*\*$/, ''))) {
    // `s`: a decoded line terminator is a character like any other (`/api/%0A` is under `/api/**`).
    return RegExp(
      `^${tokens.map((t) => (t === '*' ? '[^/]*' : t === '**' ? '.*' : t === '/**' ? '(/.*)?' : t === '/*' ? '(/[^/]*)?' : t.replace(/[.+?^${}()|[\]\\]/, '\\$&'))).join('')}$`,
      's',
    )
  }
  return {
    test(path) {
      // The glob positions reachable after the `i` characters read so far; `j + 0.5`: past the
      // `/` of the `/**` or `/*` at `j`, which goes on as a `**` or a `*`.
      let at = new Set([0])
      for (let i = 0; at.size > 0 && i <= path.length; i++) {
        const c = path[i]
        const next = new Set<number>()
        for (const j of at) {
          const t = j % 1 ? (tokens[j - 0.5] as string).slice(1) : tokens[j]
          // A star may match nothing (the Set visits what is added while it is iterated); -~j
          // is the position after j's token, j + 0.5 included.
          if (t?.endsWith('*')) at.add(-~j)
          if (c === undefined && j === tokens.length) return true
          if (t === '**' || (t === '*' && c !== '/')) next.add(j)
          // One character, or the `/` of a `/**` or `/*` (`t` is undefined only past the glob's
          // end, and the path's end has returned there).
          else if (t?.[0] === c) next.add((t as string)[1] ? j + 0.5 : j + 1)
        }
        at = next
      }
      return false
    },
  }
}
