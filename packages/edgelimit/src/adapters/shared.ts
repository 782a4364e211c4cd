/** Resolves after `ms` milliseconds: how adapters hold a shaped request (`HttpVerdict.delayMs`). */
export function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve()
}

/** The path of a request target (`/a/b?x=1` → `/a/b`); `/` when there is none. */
export function pathOf(target: string | undefined): string {
  if (target === undefined || target === '') return '/'
  const end = target.search(/[?#]/)
  return end === -1 ? target : target.slice(0, end)
}
