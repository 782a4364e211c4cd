/** Real Chromium (Debian's `chromium`) for browser tests, driven by playwright-core. */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import path from 'node:path'
import { type Browser, chromium } from 'playwright-core'

/** `$CHROMIUM_PATH`, else `which chromium`, else Debian's path. */
function locate(): string {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH
  try {
    const found = execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim()
    if (found !== '') return found
  } catch {}
  return '/usr/bin/chromium'
}

export const CHROMIUM = locate()
export const CHROMIUM_AVAILABLE = existsSync(CHROMIUM)
if (!CHROMIUM_AVAILABLE && process.env.CI === 'true')
  throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`)

/** Where screenshots and the reports under test go (the repository's `test-results/`). */
export const RESULTS = path.resolve(__dirname, '../../../../test-results')

/** Launches headless Chromium with no network beyond what a page asks for. */
export async function launchChromium(): Promise<Browser> {
  mkdirSync(RESULTS, { recursive: true })
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
}
