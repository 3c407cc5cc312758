#!/usr/bin/env python3
"""Generate crypto/testdata/vectors.json, independently of the Go code.

Run once when a layout is published: python3 gen_vectors.py > vectors.json
Published vectors are never regenerated; the Go tests only compare against them.

XChaCha20-Poly1305 is built here from a pure-Python HChaCha20 (checked against
draft-irtf-cfrg-xchacha section 2.2.1) and the IETF ChaCha20-Poly1305 of the
`cryptography` package; Argon2id, HKDF and HMAC come from `cryptography` and the
standard library. The envelope and associated-data layouts are re-implemented
from the package documentation (crypto/doc.go).
"""
import hashlib
import hmac
import json
import struct
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MASK = 0xFFFFFFFF


def rotl(v, c):
    return ((v << c) & MASK) | (v >> (32 - c))


def quarter(s, a, b, c, d):
    s[a] = (s[a] + s[b]) & MASK; s[d] = rotl(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & MASK; s[b] = rotl(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b]) & MASK; s[d] = rotl(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & MASK; s[b] = rotl(s[b] ^ s[c], 7)


def hchacha20(key, nonce16):
    s = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    s += list(struct.unpack("<8I", key)) + list(struct.unpack("<4I", nonce16))
    for _ in range(10):
        quarter(s, 0, 4, 8, 12); quarter(s, 1, 5, 9, 13)
        quarter(s, 2, 6, 10, 14); quarter(s, 3, 7, 11, 15)
        quarter(s, 0, 5, 10, 15); quarter(s, 1, 6, 11, 12)
        quarter(s, 2, 7, 8, 13); quarter(s, 3, 4, 9, 14)
    return struct.pack("<8I", *(s[0:4] + s[12:16]))


# draft-irtf-cfrg-xchacha-03, section 2.2.1.
assert hchacha20(bytes(range(32)), bytes.fromhex("000000090000004a0000000031415927")) == bytes.fromhex(
    "82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc")


def xchacha_seal(key, nonce24, pt, ad):
    sub = hchacha20(key, nonce24[:16])
    return ChaCha20Poly1305(sub).encrypt(b"\0" * 4 + nonce24[16:], pt, ad)


def lp(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack(">Q", len(b)) + b


def seal(key, nonce, pt, ad):
    return b"\x01" + nonce + xchacha_seal(key, nonce, pt, b"\x01" + ad)


def key_ad(vault, key):
    return lp("noydb key") + lp(vault) + lp(key)


def seal_record(key, nonce, pt, vault, coll, rid, rev):
    ad = b"\x01" + lp("noydb record") + lp(vault) + lp(coll) + lp(rid) + struct.pack(">Q", rev)
    return b"\x01" + struct.pack(">Q", rev) + nonce + xchacha_seal(key, nonce, pt, ad)


def seal_record_gen(key, nonce, pt, vault, coll, rid, rev, gen):
    ad = b"\x02" + lp("noydb record") + lp(vault) + lp(coll) + lp(rid) + struct.pack(">Q", rev) + struct.pack(">Q", gen)
    return b"\x02" + struct.pack(">Q", rev) + struct.pack(">Q", gen) + nonce + xchacha_seal(key, nonce, pt, ad)


def seal_record_col(dk, nonce, pt, vault, coll, rid, rev, gen):
    ck = derive(dk, "noydb collection v1\x00" + coll)
    ad = b"\x03" + lp("noydb record") + lp(vault) + lp(coll) + lp(rid) + struct.pack(">Q", rev) + struct.pack(">Q", gen)
    return H(ck), b"\x03" + struct.pack(">Q", rev) + struct.pack(">Q", gen) + nonce + xchacha_seal(ck, nonce, pt, ad)


def mac(key, parts):
    m = hmac.new(key, digestmod=hashlib.sha256)
    for p in parts:
        m.update(lp(p))
    return m.digest()


def derive(key, label):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label.encode()).derive(key)


def argon2id(secret, salt, t, m, p):
    return Argon2id(salt=salt, length=32, iterations=t, lanes=p, memory_cost=m).derive(secret)


def header(salt, t, m, p):
    return b"NOYH\x01" + salt + struct.pack(">IIB", t, m, p)


H = bytes.hex
K1 = bytes(range(32))
K2 = bytes.fromhex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
N1 = bytes.fromhex("404142434445464748494a4b4c4d4e4f5051525354555657")
N2 = bytes(range(0xA0, 0xA0 + 24))
TEXT = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it."

out = {
    "comment": "Known-answer vectors for package crypto, made by gen_vectors.py. Never regenerate once published; add new entries instead. Byte strings are hex.",
    "seal": [],
    "seal_record": [],
    "seal_record_gen": [],
    "seal_record_col": [],
    "mac": [],
    "derive": [],
    "derive_user_key": [],
    "key_ad": [],
    "wrap_key": [],
    "header": [],
}
for name, k, n, pt, ad in [
    ("empty plaintext, empty ad", K1, N1, b"", b""),
    ("text, raw ad", K2, N1, TEXT, bytes.fromhex("50515253c0c1c2c3c4c5c6c7")),
    ("text, KeyAD", K1, N2, TEXT, key_ad("books", "_sequences/invoices")),
    ("binary 256 bytes", K2, N2, bytes(range(256)), b"ad"),
]:
    out["seal"].append({"name": name, "key": H(k), "nonce": H(n), "plaintext": H(pt), "ad": H(ad),
                        "envelope": H(seal(k, n, pt, ad))})

for name, k, n, pt, v, c, i, r in [
    ("empty plaintext, revision 0", K1, N1, b"", "", "", "", 0),
    ("invoice revision 1", K2, N1, b'{"number":"INV-0001","total":"42.00"}', "books", "invoices", "01HZX3", 1),
    ("max revision, unicode names", K1, N2, TEXT, "b\u00fccher", "re\u00e7us", "id/\u00e9\x00x", 2**64 - 1),
]:
    out["seal_record"].append({"name": name, "key": H(k), "nonce": H(n), "plaintext": H(pt), "vault": v,
                               "collection": c, "id": i, "revision": str(r),
                               "envelope": H(seal_record(k, n, pt, v, c, i, r))})

for name, k, n, pt, v, c, i, r, g in [
    ("empty plaintext, revision 1, generation 1", K1, N1, b"", "", "", "", 1, 1),
    ("invoice revision 7, generation 2", K2, N1, b'{"number":"INV-0001","total":"42.00"}', "books", "invoices", "01HZX3", 7, 2),
    ("max revision and generation, unicode names", K1, N2, TEXT, "b\u00fccher", "re\u00e7us", "id/\u00e9\x00x", 2**64 - 1, 2**64 - 1),
]:
    out["seal_record_gen"].append({"name": name, "key": H(k), "nonce": H(n), "plaintext": H(pt), "vault": v,
                                   "collection": c, "id": i, "revision": str(r), "generation": str(g),
                                   "envelope": H(seal_record_gen(k, n, pt, v, c, i, r, g))})

for name, k, n, pt, v, c, i, r, g in [
    ("empty plaintext, empty collection, revision 1, generation 2", K1, N1, b"", "", "", "", 1, 2),
    ("invoice revision 7, generation 3", K2, N1, b'{"number":"INV-0001","total":"42.00"}', "books", "invoices", "01HZX3", 7, 3),
    ("max revision and generation, unicode names", K1, N2, TEXT, "b\u00fccher", "re\u00e7us", "id/\u00e9\x00x", 2**64 - 1, 2**64 - 1),
]:
    ck, env = seal_record_col(k, n, pt, v, c, i, r, g)
    out["seal_record_col"].append({"name": name, "data_key": H(k), "collection_key": ck, "nonce": H(n), "plaintext": H(pt),
                                   "vault": v, "collection": c, "id": i, "revision": str(r), "generation": str(g),
                                   "envelope": H(env)})

for name, k, parts in [
    ("no parts", K1, []),
    ("one empty part", K1, [b""]),
    ("ab,c", K1, [b"ab", b"c"]),
    ("a,bc", K1, [b"a", b"bc"]),
    ("abc", K1, [b"abc"]),
    ("200 bytes", K2, [bytes(range(200))]),
]:
    out["mac"].append({"name": name, "key": H(k), "parts": [H(p) for p in parts], "mac": H(mac(k, parts))})

for k, label in [(K1, ""), (K1, "noydb ledger v1"), (K2, "noydb ledger v1"), (K2, "noydb sequence v1")]:
    out["derive"].append({"key": H(k), "label": label, "subkey": H(derive(k, label))})

SALT1 = bytes(range(16))
SALT2 = bytes.fromhex("f0e1d2c3b4a5968778695a4b3c2d1e0f00112233")
for secret, salt, t, m, p in [
    (b"correct horse battery staple", SALT1, 1, 64, 1),
    (b"correct horse battery staple", SALT1, 2, 64, 1),
    (b"correct horse battery staple", SALT1, 1, 128, 2),
    (b"Correct horse battery staple", SALT1, 1, 64, 1),
    (b"", SALT2, 3, 256, 4),
]:
    out["derive_user_key"].append({"secret": H(secret), "salt": H(salt), "time": t, "memory_kib": m,
                                   "threads": p, "key": H(argon2id(secret, salt, t, m, p))})

for v, k in [("", ""), ("books", "_sequences/invoices"), ("books/x", "y"), ("books", "/x/y")]:
    out["key_ad"].append({"vault": v, "key": k, "ad": H(key_ad(v, k))})

for kek, dk, n, ad in [(K1, K2, N1, key_ad("books", "_keyring/alice")), (K2, K1, N2, b"")]:
    out["wrap_key"].append({"kek": H(kek), "key": H(dk), "ad": H(ad),
                            "wrapped": H(seal(kek, n, dk, lp("noydb wrapped key") + ad))})

for salt, t, m, p in [(SALT1, 3, 64 * 1024, 4), (bytes(range(0xF0, 0x100)), 1, 64, 1), (SALT1, 16, 4 * 1024 * 1024, 255)]:
    out["header"].append({"salt": H(salt), "time": t, "memory_kib": m, "threads": p, "bytes": H(header(salt, t, m, p))})

json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
sys.stdout.write("\n")
