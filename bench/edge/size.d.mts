// Types of size.mjs, for the bundle-budget test.
export declare const ENTRIES: Record<string, string>
export declare const BUDGETS: { app: number; durableObjectStore: number; appCeiling: number }
export interface Measured {
  name: string
  minBytes: number
  gzipBytes: number
  nodeisms: Record<string, number>
  timers: number
  /** Each source file's minified bytes in the bundle and its pro-rata share of the gzipped size. */
  contributors: { file: string; minBytes: number; gzipShare: number }[]
}
export declare function nodeisms(code: string): Record<string, number>
export declare function measureBundles(): Promise<Measured[]>
export declare function budgetLines(measured: Measured[]): [label: string, bytes: number, budget: number][]
