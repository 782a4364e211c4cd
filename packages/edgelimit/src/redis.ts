export type { ScriptClient } from './stores/redis/clients.js'
export { type RedisStoreOptions, redisStore } from './stores/redis/store.js'
