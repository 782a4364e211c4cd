/** CRC-16/XMODEM (polynomial 0x1021), the checksum Redis Cluster hashes keys with. */
const TABLE = (() => {
  const table = new Uint16Array(256)
  for (let i = 0; i < 256; i++) {
    let c = i << 8
    for (let j = 0; j < 8; j++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff
    table[i] = c
  }
  return table
})()

const encoder = new TextEncoder()

/**
 * The Redis Cluster slot (0–16383) of `text`, hashed whole: pass a key's hash tag (the text
 * between its first `{` and the next `}`) when it has a non-empty one, else the whole key.
 *
 * @example keySlot('user:1') // the slot of every key tagged `{user:1}`
 */
export function keySlot(text: string): number {
  let crc = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c > 0x7f) return crcBytes(encoder.encode(text))
    crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ c) & 0xff] as number)
  }
  return crc & 16383
}

function crcBytes(bytes: Uint8Array): number {
  let crc = 0
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ b) & 0xff] as number)
  return crc & 16383
}
