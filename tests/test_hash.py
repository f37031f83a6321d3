"""require 'hash' (torch/hash, a Torch7 package, in Lua: lua/libhash.lua) against a Python
XXH64 written from the xxHash specification and FNV-1a started from the seed (as torch/hash's
fnv.c resets hval to the seed), plus xxHash's published vectors. Strings hash as their bytes,
numbers as the 8 bytes of the double, tensors as their elements' bytes in index order whatever
the strides; results are modulo 2^53 unless a mod is given.
"""
import struct

import numpy as np
import pytest

from helpers import T, lua_fn

M64 = (1 << 64) - 1
P1, P2, P3, P4, P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161,
                      9650029242287828579, 2870177450012600261)


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def rnd(acc, x):
    return (rotl((acc + x * P2) & M64, 31) * P1) & M64


def xxh64(data: bytes, seed: int = 0) -> int:
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = rnd(v[k], int.from_bytes(data[i + 8 * k:i + 8 * k + 8], "little"))
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
        for k in range(4):
            h = ((h ^ rnd(0, v[k])) * P1 + P4) & M64
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h ^= rnd(0, int.from_bytes(data[i:i + 8], "little"))
        h = (rotl(h, 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * P1) & M64
        h = (rotl(h, 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M64
        h = (rotl(h, 11) * P1) & M64
        i += 1
    h = ((h ^ (h >> 33)) * P2) & M64
    h = ((h ^ (h >> 29)) * P3) & M64
    return h ^ (h >> 32)


def fnv64(data: bytes, seed: int = 0) -> int:
    h = seed
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


@pytest.fixture(scope="module")
def h(lua):
    return lua_fn("function(...) return require('hash').hash(...) end")


def test_published_vectors():
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc") == 0x44BC2CF5AD770999


@pytest.mark.parametrize("s", ["", "a", "abc", "0123456789abcdef", "x" * 31, "x" * 32, "y" * 100, "torch7 hash test"])
@pytest.mark.parametrize("seed", [0, 1, 123456789])
def test_strings(h, s, seed):
    assert h(s, seed) == xxh64(s.encode(), seed) % 2**53
    assert h(s, "XXH64", seed) == xxh64(s.encode(), seed) % 2**53
    assert h(s, "FNV64", seed) == fnv64(s.encode(), seed) % 2**53


def test_numbers_and_mod(h):
    for x in (0.0, 1.5, -3.25, 1e300):
        data = struct.pack("<d", x)
        assert h(x) == xxh64(data) % 2**53
        assert h(x, 0, 1000) == xxh64(data) % 1000
        assert h(x, "FNV64", 7, 97) == fnv64(data, 7) % 97


@pytest.mark.parametrize("dtype,kind", [(np.float64, "torch.DoubleTensor"), (np.float32, "torch.FloatTensor"),
                                        (np.int64, "torch.LongTensor"), (np.int32, "torch.IntTensor"),
                                        (np.uint8, "torch.ByteTensor")])
def test_tensors_by_data_in_index_order(dtype, kind):
    a = (np.arange(24).reshape(4, 6) * 3 - 7).astype(np.float64)
    fn = lua_fn("function(x, kind) local t = x:type(kind) return require('hash').hash(t), require('hash').hash(t:t()) end")
    got, got_t = fn(T(a), kind)
    want = a.astype(dtype)
    assert got == xxh64(want.tobytes()) % 2**53
    assert got_t == xxh64(np.ascontiguousarray(want.T).tobytes()) % 2**53


def test_states():
    got = lua_fn("""function()
      local hash = require 'hash'
      local s = hash.XXH64(5)
      s:update('abc'):update('defgh')
      local d1, d2 = s:digest(), s:digest()
      local c = s:clone(); c:update('!')
      local f = hash.FNV64(); f:update(2.5)
      return d1, d2, c:digest(), s:digest(1000), s:hash('zz', 3), hash.hash('zz', s, 3), f:digest(), torch.type(s)
    end""")()
    d1, d2, dc, dm, hz, hz2, f, kind = got
    assert d1 == d2 == xxh64(b"abcdefgh", 5) % 2**53
    assert dc == xxh64(b"abcdefgh!", 5) % 2**53
    assert dm == xxh64(b"abcdefgh", 5) % 1000
    assert hz == hz2 == xxh64(b"zz", 3) % 2**53
    assert f == fnv64(struct.pack("<d", 2.5)) % 2**53
    assert kind == "torch.Hash"


def test_errors(h):
    with pytest.raises(Exception, match="invalid hash type"):
        h("a", "MD5")
    with pytest.raises(Exception, match="string, number, or tensor"):
        h({})
    with pytest.raises(Exception, match="modulo should be positive"):
        lua_fn("function() return require('hash').XXH64():digest(0) end")()
