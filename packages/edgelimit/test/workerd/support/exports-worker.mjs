// Imports `edgelimit/cloudflare` by package name, as a user's Worker does (the built dist through
// the package's `exports`), and reports what it exports.
import * as cloudflare from 'edgelimit/cloudflare'

export { EdgelimitDurableObject } from 'edgelimit/cloudflare'

export default {
  fetch() {
    return Response.json({
      names: Object.keys(cloudflare).sort(),
      identity: cloudflare.cloudflareIdentity,
      isClass: typeof cloudflare.EdgelimitDurableObject === 'function',
    })
  },
}
