// @ts-check
/**
 * SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104) in plain JavaScript.
 *
 * The web UI signs requests with these instead of WebCrypto, because crypto.subtle
 * exists only in secure contexts (https:// or localhost) and the UI must also work when
 * served over plain http:// to another address. Checked against the FIPS 180-4 and
 * RFC 4231 vectors by tests/browser/hmac.test.mjs (node --test) and in the browser test.
 *
 * An ES module without imports, so that Node can load it as it is.
 */

/** @typedef {string | Uint8Array | ArrayBuffer} Data */

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/** The initial hash value, H(0). */
const H0 = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/**
 * UTF-8 bytes of a string (TextEncoder works in insecure contexts too).
 * @param {unknown} text
 * @returns {Uint8Array}
 */
export function utf8(text) {
  return new TextEncoder().encode(String(text));
}

/**
 * Lower-case hex of bytes.
 * @param {Uint8Array} bytes
 * @returns {string}
 */
export function toHex(bytes) {
  let out = "";
  for (const byte of bytes) out += (byte < 16 ? "0" : "") + byte.toString(16);
  return out;
}

/**
 * @param {Data} data
 * @returns {Uint8Array}
 */
function asBytes(data) {
  if (typeof data === "string") return utf8(data);
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  throw new TypeError("expected a string, Uint8Array or ArrayBuffer");
}

/**
 * The message padded to whole 64-byte blocks: 0x80, zeros, then the 64-bit big-endian
 * bit length.
 * @param {Uint8Array} msg
 * @returns {DataView}
 */
function padded(msg) {
  const bytes = new Uint8Array(((msg.length + 9 + 63) >> 6) << 6);
  bytes.set(msg);
  bytes[msg.length] = 0x80;
  const view = new DataView(bytes.buffer);
  view.setUint32(bytes.length - 8, Math.floor(msg.length / 0x20000000), false);
  view.setUint32(bytes.length - 4, (msg.length * 8) >>> 0, false);
  return view;
}

/**
 * The message schedule W(0..63) of the block at `off`.
 * @param {DataView} view
 * @param {number} off
 * @param {Uint32Array} w
 */
function schedule(view, off, w) {
  for (let t = 0; t < 16; t++) w[t] = view.getUint32(off + t * 4, false);
  for (let t = 16; t < 64; t++) {
    const x = w[t - 15];
    const y = w[t - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
  }
}

/**
 * One block's 64 rounds, added into the hash value `hv`.
 * @param {number[]} hv
 * @param {Uint32Array} w
 */
function compress(hv, w) {
  let [a, b, c, d, e, f, g, h] = hv;
  for (let t = 0; t < 64; t++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (h + S1 + ch + K[t] + w[t]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & b) ^ (a & c) ^ (b & c);
    const t2 = (S0 + maj) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0;
    d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  [a, b, c, d, e, f, g, h].forEach((v, i) => { hv[i] = (hv[i] + v) | 0; });
}

/**
 * SHA-256 digest (32 bytes) of a string (UTF-8) or bytes.
 * @param {Data} data
 * @returns {Uint8Array}
 */
export function sha256(data) {
  const view = padded(asBytes(data));
  const hv = H0.slice();
  const w = new Uint32Array(64);
  for (let off = 0; off < view.byteLength; off += 64) {
    schedule(view, off, w);
    compress(hv, w);
  }
  const out = new Uint8Array(32);
  const outView = new DataView(out.buffer);
  hv.forEach((v, i) => outView.setUint32(i * 4, v >>> 0, false));
  return out;
}

/**
 * HMAC-SHA-256 (32 bytes) of `message` keyed with `key` (strings are UTF-8).
 * @param {Data} key
 * @param {Data} message
 * @returns {Uint8Array}
 */
export function hmacSha256(key, message) {
  let k = asBytes(key);
  if (k.length > 64) k = sha256(k);
  const block = new Uint8Array(64);
  block.set(k);
  const msg = asBytes(message);
  const inner = new Uint8Array(64 + msg.length);
  const outer = new Uint8Array(64 + 32);
  for (let i = 0; i < 64; i++) {
    inner[i] = block[i] ^ 0x36;
    outer[i] = block[i] ^ 0x5c;
  }
  inner.set(msg, 64);
  outer.set(sha256(inner), 64);
  return sha256(outer);
}

/**
 * Hex of the SHA-256 digest.
 * @param {Data} data
 * @returns {string}
 */
export function sha256Hex(data) {
  return toHex(sha256(data));
}

/**
 * Hex of the HMAC-SHA-256.
 * @param {Data} key
 * @param {Data} message
 * @returns {string}
 */
export function hmacSha256Hex(key, message) {
  return toHex(hmacSha256(key, message));
}
