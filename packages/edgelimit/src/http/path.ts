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
 * matches more paths than any one of these servers would, never fewer.
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
  let route = `/${segments.filter(Boolean).join('/')}`
  // …the rest (UTF-8, `%25`) once the dot segments are gone, as a WHATWG server then Hono read it.
  try {
    route = decodeURI(route)
  } catch {}
  return route.toLowerCase()
}

/**
 * A route glob compiled for `routePath` forms: `*` is one segment, `**` any number of them, and
 * a final `/**` also matches the path without it (`/api/**` covers `/api`). The glob is put in
 * route form itself (`/Login/` is `/login`, `/caf%C3%A9` is `/café`).
 *
 * @example pathGlob('/api/**').test(routePath('/API/v1/')) // true
 */
export function pathGlob(glob: string): RegExp {
  const body = routePath(glob)
    .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
    .replace(/\/\*\*$|\*\*?/g, (star) => (star === '*' ? '[^/]*' : star === '**' ? '.*' : '(/.*)?'))
  return new RegExp(`^${body}$`)
}
