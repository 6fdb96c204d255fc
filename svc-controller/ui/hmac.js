/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104) in plain JavaScript.
 *
 * The web UI signs requests with these instead of WebCrypto, because crypto.subtle
 * exists only in secure contexts (https:// or localhost) and the UI must also work when
 * served over plain http:// to another address. Checked against the FIPS 180-4 and
 * RFC 4231 vectors by tests/browser/hmac.test.cjs (node --test) and in the browser test.
 *
 * Exposes SvcHmac = { sha256, sha256Hex, hmacSha256, hmacSha256Hex, utf8, toHex } as a
 * global in the browser, and as module.exports under Node.
 */
(function (root) {
  "use strict";

  var K = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);

  /** UTF-8 bytes of a string (TextEncoder works in insecure contexts too). */
  function utf8(text) {
    return new TextEncoder().encode(String(text));
  }

  /** Lower-case hex of bytes. */
  function toHex(bytes) {
    var out = "";
    for (var i = 0; i < bytes.length; i++) {
      out += (bytes[i] < 16 ? "0" : "") + bytes[i].toString(16);
    }
    return out;
  }

  function asBytes(data) {
    if (typeof data === "string") return utf8(data);
    if (data instanceof Uint8Array) return data;
    if (data instanceof ArrayBuffer) return new Uint8Array(data);
    throw new TypeError("expected a string, Uint8Array or ArrayBuffer");
  }

  /** SHA-256 digest (32 bytes) of a string (UTF-8) or bytes. */
  function sha256(data) {
    var msg = asBytes(data);
    var bitLenHi = Math.floor(msg.length / 0x20000000);
    var bitLenLo = (msg.length * 8) >>> 0;
    // Padding: 0x80, zeros, then the 64-bit big-endian bit length.
    var padded = new Uint8Array(((msg.length + 9 + 63) >> 6) << 6);
    padded.set(msg);
    padded[msg.length] = 0x80;
    var view = new DataView(padded.buffer);
    view.setUint32(padded.length - 8, bitLenHi, false);
    view.setUint32(padded.length - 4, bitLenLo, false);

    var h0 = 0x6a09e667, h1 = 0xbb67ae85, h2 = 0x3c6ef372, h3 = 0xa54ff53a;
    var h4 = 0x510e527f, h5 = 0x9b05688c, h6 = 0x1f83d9ab, h7 = 0x5be0cd19;
    var w = new Uint32Array(64);
    for (var off = 0; off < padded.length; off += 64) {
      for (var t = 0; t < 16; t++) w[t] = view.getUint32(off + t * 4, false);
      for (t = 16; t < 64; t++) {
        var x = w[t - 15], y = w[t - 2];
        var s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
        var s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
        w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
      }
      var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7;
      for (t = 0; t < 64; t++) {
        var S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
        var ch = (e & f) ^ (~e & g);
        var t1 = (h + S1 + ch + K[t] + w[t]) | 0;
        var S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
        var maj = (a & b) ^ (a & c) ^ (b & c);
        var t2 = (S0 + maj) | 0;
        h = g; g = f; f = e; e = (d + t1) | 0;
        d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      h0 = (h0 + a) | 0; h1 = (h1 + b) | 0; h2 = (h2 + c) | 0; h3 = (h3 + d) | 0;
      h4 = (h4 + e) | 0; h5 = (h5 + f) | 0; h6 = (h6 + g) | 0; h7 = (h7 + h) | 0;
    }
    var out = new Uint8Array(32);
    var outView = new DataView(out.buffer);
    [h0, h1, h2, h3, h4, h5, h6, h7].forEach(function (v, i) {
      outView.setUint32(i * 4, v >>> 0, false);
    });
    return out;
  }

  /** HMAC-SHA-256 (32 bytes) of `message` keyed with `key` (strings are UTF-8). */
  function hmacSha256(key, message) {
    var k = asBytes(key);
    if (k.length > 64) k = sha256(k);
    var block = new Uint8Array(64);
    block.set(k);
    var msg = asBytes(message);
    var inner = new Uint8Array(64 + msg.length);
    var outer = new Uint8Array(64 + 32);
    for (var i = 0; i < 64; i++) {
      inner[i] = block[i] ^ 0x36;
      outer[i] = block[i] ^ 0x5c;
    }
    inner.set(msg, 64);
    outer.set(sha256(inner), 64);
    return sha256(outer);
  }

  var api = {
    sha256: sha256,
    sha256Hex: function (data) { return toHex(sha256(data)); },
    hmacSha256: hmacSha256,
    hmacSha256Hex: function (key, message) { return toHex(hmacSha256(key, message)); },
    utf8: utf8,
    toHex: toHex,
  };
  if (typeof module === "object" && module.exports) {
    module.exports = api;
  } else {
    root.SvcHmac = api;
  }
})(typeof self !== "undefined" ? self : this);
