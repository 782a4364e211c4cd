/** Lua scripts are bundled as text (tsup `loader`, vitest plugin). */
declare module '*.lua' {
  const text: string
  export default text
}
