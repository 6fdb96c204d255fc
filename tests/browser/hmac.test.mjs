// Known-answer tests of the UI's own SHA-256 / HMAC-SHA-256 (svc-controller/ui/hmac.js):
// FIPS 180-4 example vectors (as published with the NIST examples) and RFC 4231 test
// cases 1 to 7. Run: node --test hmac.test.mjs (tests/tests/browser.rs runs it too).
//
// hmac.js is an ES module in a folder without a package.json, which Node before 20.19
// would load as CommonJS: it is imported from its text as a data: URL instead, always
// a module (it imports nothing, so no relative path needs resolving).

import test from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";

const source = fs.readFileSync(new URL("../../svc-controller/ui/hmac.js", import.meta.url));
const hmac = await import("data:text/javascript;base64," + source.toString("base64"));

const hex = (text) => Uint8Array.from(Buffer.from(text, "hex"));
const repeat = (byte, n) => new Uint8Array(n).fill(byte);

test("SHA-256: FIPS 180-4 vectors", () => {
  assert.equal(
    hmac.sha256Hex(""),
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
  );
  assert.equal(
    hmac.sha256Hex("abc"),
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
  assert.equal(
    hmac.sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
  );
  assert.equal(
    hmac.sha256Hex(
      "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
    ),
    "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
  );
  assert.equal(
    hmac.sha256Hex(repeat(0x61, 1000000)),
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
  );
});

test("SHA-256: every length around the padding boundaries agrees with node:crypto", () => {
  for (let n = 0; n <= 200; n++) {
    const data = Uint8Array.from({ length: n }, (_, i) => (i * 31 + n) & 0xff);
    const want = crypto.createHash("sha256").update(data).digest("hex");
    assert.equal(hmac.sha256Hex(data), want, `length ${n}`);
  }
});

test("HMAC-SHA-256: RFC 4231 test cases 1 to 7", () => {
  const cases = [
    [repeat(0x0b, 20), "Hi There",
      "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"],
    ["Jefe", "what do ya want for nothing?",
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"],
    [repeat(0xaa, 20), repeat(0xdd, 50),
      "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"],
    [hex("0102030405060708090a0b0c0d0e0f10111213141516171819"), repeat(0xcd, 50),
      "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"],
    [repeat(0xaa, 131), "Test Using Larger Than Block-Size Key - Hash Key First",
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"],
    [repeat(0xaa, 131),
      "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.",
      "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"],
  ];
  for (const [key, data, want] of cases) {
    assert.equal(hmac.hmacSha256Hex(key, data), want);
  }
  // Test case 5: output truncated to 128 bits.
  const truncated = hmac.hmacSha256Hex(repeat(0x0c, 20), "Test With Truncation").slice(0, 32);
  assert.equal(truncated, "a3b6167473100ee06e0c796c2955552b");
});

test("HMAC-SHA-256: the documented codehost check value and UTF-8 input", () => {
  assert.equal(
    hmac.hmacSha256Hex("It's a Secret to Everybody", "Hello, World!"),
    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
  );
  const key = "clé secrète ✓";
  const body = '{"msg":"héllo wörld 🚀"}';
  assert.equal(
    hmac.hmacSha256Hex(key, body),
    crypto.createHmac("sha256", Buffer.from(key, "utf8")).update(body, "utf8").digest("hex"),
  );
});
