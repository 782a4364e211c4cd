/** Types of far-window.mjs (see window.ts). */
export function farWindow(now?: number): '365d' | '366d'
