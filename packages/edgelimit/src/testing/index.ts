export { type ManualClock, manualClock } from './manual-clock.js'
export { type ConformanceOptions, storeConformance } from './store-conformance.js'
