// Hot reload of the policy file: which changes are seen, when the new file is read, and what is
// reported. Real gateways on real files in a temporary directory; waits are bounded polls on the
// policy in force and the log lines.
import {
  appendFileSync,
  closeSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { join } from 'node:path'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type Gateway, startGateway } from '../src/server/gateway.js'
import { type LogLine, tempDir } from './support/gateway.js'
import { type Origin, startOrigin } from './support/origin.js'

let origin: Origin
beforeAll(async () => {
  origin = await startOrigin()
})
afterAll(async () => {
  await origin?.close()
})

/** A policy whose one rule is named `name`: the name in force tells which text is. */
const policy = (name: string) =>
  `rules: [{ name: ${name}, match: { path: /x }, algorithm: fixed-window, limit: 5, window: 1h }]\n`

interface Watched {
  readonly gateway: Gateway
  readonly logs: LogLine[]
  /** The rule names in force. */
  rules(): string[]
  /** Polls `test` every 10 ms for up to `ms`: whether it came to hold. */
  until(test: () => boolean, ms?: number): Promise<boolean>
  /** Waits (up to `ms`) for the rule names in force to be `names`. */
  inForce(names: string[], ms?: number): Promise<void>
}

async function watched(file: string, run: (w: Watched) => Promise<void>): Promise<void> {
  const logs: LogLine[] = []
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line)) })
  const gateway = await startGateway({ config: file, port: 0, adminPort: 0, upstream: origin.url, logger })
  const rules = () => gateway.config.rules.map((r) => r.name)
  const until = async (test: () => boolean, ms = 5_000) => {
    for (const end = performance.now() + ms; !test() && performance.now() < end; )
      await new Promise((r) => setTimeout(r, 10))
    return test()
  }
  const inForce = async (names: string[], ms?: number) => {
    await until(() => JSON.stringify(rules()) === JSON.stringify(names), ms)
    expect(rules()).toEqual(names)
  }
  try {
    await run({ gateway, logs, rules, until, inForce })
  } finally {
    await gateway.close()
  }
}

/** Replaces `file` atomically, as editors and deploy tools do: a new file renamed over it. */
function replace(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text)
  renameSync(`${file}.tmp`, file)
}

/** Points the symlink `link` at `target` atomically (`ln -s` + `mv -T`). */
function relink(target: string, link: string): void {
  symlinkSync(target, `${link}.tmp`)
  renameSync(`${link}.tmp`, link)
}

describe('symlinks on the path', () => {
  test('a symlinked folder on the path (Capistrano: current -> releases/N) moved to another release reloads', async () => {
    const dir = tempDir()
    for (const n of [1, 2]) {
      mkdirSync(join(dir, 'releases', `${n}`, 'config'), { recursive: true })
      writeFileSync(join(dir, 'releases', `${n}`, 'config', 'p.yaml'), policy(`release${n}`))
    }
    symlinkSync(join('releases', '1'), join(dir, 'current'))
    await watched(join(dir, 'current', 'config', 'p.yaml'), async (w) => {
      relink(join('releases', '2'), join(dir, 'current'))
      await w.inForce(['release2'])
      // Edits in the new release count too; the old one (kept) no longer does.
      replace(join(dir, 'releases', '2', 'config', 'p.yaml'), policy('edited'))
      await w.inForce(['edited'])
      replace(join(dir, 'releases', '1', 'config', 'p.yaml'), policy('old'))
      relink(join('releases', '2'), join(dir, 'current')) // an event that changes nothing
      expect(await w.until(() => w.rules()[0] !== 'edited', 1_500)).toBe(false)
    })
  })

  test('two levels of links (a link to a ConfigMap-style mount): a ..data swap that keeps the old version reloads', async () => {
    const dir = tempDir()
    const cm = join(dir, 'cm')
    mkdirSync(join(cm, '..t1'), { recursive: true })
    mkdirSync(join(dir, 'etc'))
    writeFileSync(join(cm, '..t1', 'p.yaml'), policy('t1'))
    symlinkSync('..t1', join(cm, '..data'))
    symlinkSync(join('..data', 'p.yaml'), join(cm, 'p.yaml'))
    symlinkSync(join(cm, 'p.yaml'), join(dir, 'etc', 'p.yaml'))
    await watched(join(dir, 'etc', 'p.yaml'), async (w) => {
      for (const version of ['t2', 't3']) {
        mkdirSync(join(cm, `..${version}`))
        writeFileSync(join(cm, `..${version}`, 'p.yaml'), policy(version))
        relink(`..${version}`, join(cm, '..data'))
        await w.inForce([version])
      }
    })
  })
})

describe('a busy folder', () => {
  test('a file written every 20 ms next to the policy (its log) does not hold a reload back', async () => {
    const dir = tempDir()
    const file = join(dir, 'p.yaml')
    writeFileSync(file, policy('before'))
    await watched(file, async (w) => {
      const log = setInterval(() => appendFileSync(join(dir, 'gateway.log'), 'a line\n'), 20)
      try {
        await new Promise((r) => setTimeout(r, 200))
        replace(file, policy('after'))
        // Within the 1 s bound, while the log is still being written.
        await w.inForce(['after'], 3_000)
      } finally {
        clearInterval(log)
      }
    })
  })
  test('events for the policy itself every 20 ms (its times set again) delay a reload by 1 s at most', async () => {
    const dir = tempDir()
    const file = join(dir, 'p.yaml')
    writeFileSync(file, policy('before'))
    await watched(file, async (w) => {
      replace(file, policy('after'))
      const { atime, mtime } = statSync(file)
      const touch = setInterval(() => utimesSync(file, atime, mtime), 20)
      try {
        await w.inForce(['after'], 3_000)
      } finally {
        clearInterval(touch)
      }
    })
  })
})

describe('the folder replaced', () => {
  test('deleted and created again (rm -rf conf && mkdir conf): reloads, and edits after that still do', async () => {
    const dir = tempDir()
    const conf = join(dir, 'conf')
    mkdirSync(conf)
    writeFileSync(join(conf, 'p.yaml'), policy('v1'))
    await watched(join(conf, 'p.yaml'), async (w) => {
      rmSync(conf, { recursive: true })
      mkdirSync(conf)
      writeFileSync(join(conf, 'p.yaml'), policy('v2'))
      await w.inForce(['v2'])
      replace(join(conf, 'p.yaml'), policy('v3'))
      await w.inForce(['v3'])
      expect(w.logs.filter((l) => l.msg.startsWith('watching the policy file again'))).toHaveLength(1)
    })
  })

  test('a new folder renamed into place, the old one kept (mv conf.new conf): reloads, and edits after that still do', async () => {
    const dir = tempDir()
    const conf = join(dir, 'conf')
    mkdirSync(conf)
    writeFileSync(join(conf, 'p.yaml'), policy('v1'))
    await watched(join(conf, 'p.yaml'), async (w) => {
      mkdirSync(`${conf}.new`)
      writeFileSync(join(`${conf}.new`, 'p.yaml'), policy('v2'))
      renameSync(conf, `${conf}.old`)
      renameSync(`${conf}.new`, conf)
      await w.inForce(['v2'])
      replace(join(conf, 'p.yaml'), policy('v3'))
      await w.inForce(['v3'])
      expect(w.logs.filter((l) => l.msg.startsWith('watching the policy file again'))).toHaveLength(1)
      // An explicit reload (SIGHUP, the admin API) watches the folder anew too.
      expect(await w.gateway.reload('SIGHUP')).toMatchObject({ ok: true })
      replace(join(conf, 'p.yaml'), policy('v4'))
      await w.inForce(['v4'])
    })
  })
})

describe('a file being written', () => {
  test('written in place with a pause mid-way: only the whole file is put in force, no rule dropped meanwhile', async () => {
    const dir = tempDir()
    const file = join(dir, 'p.yaml')
    const rule = (name: string) =>
      `  - { name: ${name}, match: { path: /${name} }, algorithm: fixed-window, limit: 5, window: 1h }\n`
    writeFileSync(file, `rules:\n${rule('stable')}`)
    await watched(file, async (w) => {
      // Truncated, then its first half (a valid policy without `stable`), a pause, the rest.
      const fd = openSync(file, 'w')
      try {
        writeSync(fd, `rules:\n${rule('r1')}`)
        await new Promise((r) => setTimeout(r, 300))
        writeSync(fd, rule('stable'))
      } finally {
        closeSync(fd)
      }
      await w.inForce(['r1', 'stable'])
      const reloads = w.logs.filter((l) => l.msg === 'policy reloaded')
      expect(reloads).toEqual([expect.objectContaining({ rules: ['r1', 'stable'], limitersKept: 1 })])
    })
  })
})

describe('a file that cannot be read', () => {
  const failures = async (w: Watched) => {
    const text = await (await fetch(`http://127.0.0.1:${w.gateway.adminPort}/metrics`)).text()
    return Number(/edgelimit_config_reloads_total\{result="failure"\} (\d+)/.exec(text)?.[1] ?? 0)
  }
  const rejections = (w: Watched) => w.logs.filter((l) => l.msg.startsWith('policy rejected'))
  const lastReloadSuccessful = async (w: Watched) => {
    const text = await (await fetch(`http://127.0.0.1:${w.gateway.adminPort}/metrics`)).text()
    return Number(/^edgelimit_config_last_reload_successful (\S+)$/m.exec(text)?.[1])
  }

  test('deleted, then a folder in its place: each reported once and counted as a failed reload; the policy stays until the file is back', async () => {
    const dir = tempDir()
    const file = join(dir, 'p.yaml')
    writeFileSync(file, policy('v1'))
    await watched(file, async (w) => {
      rmSync(file)
      expect(await w.until(() => rejections(w).length === 1)).toBe(true)
      expect(rejections(w)[0]).toMatchObject({
        reason: 'file changed',
        issues: [expect.stringContaining('cannot read the file (ENOENT) [ERR_FILE]')],
      })
      expect(await failures(w)).toBe(1)
      mkdirSync(file)
      expect(await w.until(() => rejections(w).length === 2)).toBe(true)
      expect(rejections(w)[1]).toMatchObject({ issues: [expect.stringContaining('(EISDIR)')] })
      // The same error again (another event, the folder touched) is not reported again.
      writeFileSync(join(file, 'x'), '')
      expect(await w.until(() => rejections(w).length > 2, 1_500)).toBe(false)
      expect(w.rules()).toEqual(['v1'])
      rmSync(file, { recursive: true })
      writeFileSync(file, policy('v2'))
      await w.inForce(['v2'])
      expect(await failures(w)).toBe(2)
    })
  })

  test('an invalid edit undone (the text in force again): no reload, but a line says the rejection is over', async () => {
    const dir = tempDir()
    const file = join(dir, 'p.yaml')
    writeFileSync(file, policy('v1'))
    await watched(file, async (w) => {
      writeFileSync(file, 'rules: [{ name: v1, algoritm: x }]\n')
      expect(await w.until(() => rejections(w).length === 1)).toBe(true)
      const back = (l: LogLine) => l.msg.startsWith('policy file is the text in force again')
      expect(w.logs.some(back)).toBe(false)
      expect(await lastReloadSuccessful(w)).toBe(0)
      writeFileSync(file, policy('v1'))
      expect(await w.until(() => w.logs.some(back))).toBe(true)
      // The file is the policy in force again: nothing is wrong any more.
      expect(await lastReloadSuccessful(w)).toBe(1)
      expect(w.logs.find(back)).toMatchObject({
        level: 30,
        reason: 'file changed',
        generation: 1,
        msg: 'policy file is the text in force again; generation 1 stays in force',
      })
      expect(w.logs.some((l) => l.msg === 'policy reloaded')).toBe(false)
      expect(w.rules()).toEqual(['v1'])
    })
  })

  test('deleted and written again a moment later (a replace that is not a rename): not reported', async () => {
    const dir = tempDir()
    const file = join(dir, 'p.yaml')
    writeFileSync(file, policy('v1'))
    await watched(file, async (w) => {
      rmSync(file)
      await new Promise((r) => setTimeout(r, 150))
      writeFileSync(file, policy('v2'))
      await w.inForce(['v2'])
      expect(rejections(w)).toEqual([])
      expect(await failures(w)).toBe(0)
    })
  })
})
