// Bundled into the CLI (only `version` is read): no file to find at run time.
import gatewayPackage from '../package.json' with { type: 'json' }

/** This edgelimit's version (the gateway package's, which the library shares). */
export const VERSION: string = gatewayPackage.version
