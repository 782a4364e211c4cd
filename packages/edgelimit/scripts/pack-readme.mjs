// prepack: the repository's README for the package page. npm shows a package's README away from
// the repository (npmjs.com, unpkg, an editor's hover), where a relative link such as
// `[the gateway](docs/gateway.md)` leads nowhere: each becomes its text and the path it names in
// the repository, `the gateway, docs/gateway.md in the edgelimit repository`.
import { readFileSync, writeFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'

/**
 * The README with every relative Markdown link (not http(s):, mailto: or an in-page #anchor)
 * replaced by its text and the repository path it names.
 *
 * @example packReadme('See [the docs](docs/a.md#b).') // 'See the docs, `docs/a.md` in the edgelimit repository.'
 */
export function packReadme(markdown) {
  return markdown.replace(/(!?)\[([^\]\n]+)\]\(([^)\s]+)\)/g, (link, image, text, target) => {
    if (image !== '' || /^([a-z][a-z0-9+.-]*:|#)/i.test(target)) return link
    const path = target.replace(/^\.\//, '').replace(/#.*$/, '')
    if (text.replace(/`/g, '') === path) return `\`${path}\` in the edgelimit repository`
    return `${text}, \`${path}\` in the edgelimit repository`
  })
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [from, to] = process.argv.slice(2)
  writeFileSync(to, packReadme(readFileSync(from, 'utf8')))
}
