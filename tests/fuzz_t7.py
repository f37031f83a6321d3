"""Fuzzes both .t7 readers with mutated files: Lua's torch.deserialize and luabridge.t7.read.

    python tests/fuzz_t7.py --cases 100000 [--seed S] [--jobs N] [--failures DIR] [--strict]
    python tests/fuzz_t7.py --seed S --case I [--minimize]      (one case, here, verbosely)
    python tests/fuzz_t7.py --file F.t7 [--format ascii] [--minimize]   (a saved or any file)

Seeds: the real Torch7 files in ../shared/fixtures/t7/, files our torch.serialize writes (tensors
and storages of every type, non-contiguous and shared ones, tables with references and cycles,
nn models; binary, ascii and b32), files luabridge.t7.write writes, and hand-made binary files
(deep nesting, huge counts, zero strides, references). Each case applies one to four mutations
(bit flips; overwrites with interesting integers and doubles, NaN payloads included; ascii number
tokens replaced; truncation, insertion, deletion, block duplication, splicing with another seed;
class names swapped for others, one class's data read as another's; object indices changed into
references) and feeds the result to both readers.

A case must load or raise the reader's own error: a LuaError whose message is valid UTF-8 (else
luabridge.load raises UnicodeDecodeError), a t7.T7Error. What loaded is walked: every tensor
must lie inside its storage and read as numbers. Failures: any other exception, an unsound
tensor, an allocation over --memory-mb (the workers' address space is capped) or RSS growth,
a case over 2 s, a crash or hang, and the two readers disagreeing (one loads, the other
rejects) on what their shared format decides (see `disagreement`). Lua runtime errors wrapped in the reader's LuaError ("attempt
to index", "bad argument") are counted as unclear messages, by pattern, and fail with --strict.
Cases run in child processes, in chunks, so that a crash or hang names its case; each failing
case is saved (.t7 + .json) with how to replay it. A case is a function of (seed, case number)
and the seed files only: runs are deterministic by seed.
"""
from __future__ import annotations

import argparse
import functools
import io
import json
import os
import pickle
import random
import re
import resource
import selectors
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

from luabridge.t7.writer import _root as t7_root
from pathlib import Path
from typing import Any, Callable

import fuzz_progress  # beside this file (on the path: this file's folder, or tests/ under pytest)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures" / "t7"
CASE_SECONDS = 2.0  # a reader taking longer on one case fails it
FORMATS = ("binary", "ascii", "b32")

# ----------------------------------------------------------------------------------- seeds


@dataclass(frozen=True)
class Seed:
    name: str
    format: str
    data: bytes


def fixture_seeds() -> list[Seed]:
    return [Seed(p.name, "binary", p.read_bytes()) for p in sorted(FIXTURES.glob("*.t7"))]


# Objects our torch.serialize writes: each expression is Lua returning the object.
WRITTEN = {
    "tensors": """(function()
        local t = {}
        for _, name in ipairs({'Byte', 'Char', 'Short', 'Int', 'Long', 'Float', 'Double', 'Half'}) do
          t[name] = torch[name .. 'Tensor'](2, 3):copy(torch.Tensor(2, 3):random(0, 100))
          t[name .. 'Storage'] = t[name]:storage()
        end
        return t
      end)()""",
    "double_transposed": "torch.randn(3, 4):t()",
    "float_narrowed": "torch.FloatTensor(5, 4):uniform():narrow(1, 2, 3)",
    "long_expanded": "torch.LongTensor({1, 2, 3}):view(3, 1):expand(3, 4)",
    "empty_tensors": "{torch.Tensor(), torch.FloatTensor(0), torch.ByteTensor(2, 0)}",
    "shared_storage": """(function()
        local a = torch.randn(4, 4)
        return {a = a, row = a[2], col = a:select(2, 3), same = a}
      end)()""",
    "cycle": "(function() local t = {x = 1, name = 'cycle'} t.self = t t[t] = true return t end)()",
    "scalars": "{1, -2.5, 1/0, -1/0, 2^53, true, false, 'a\\0b\\255', [0] = 'zero', [1.5] = 'half'}",
    "nested": "{{{{{{{{1}}}}}}}, {a = {b = {c = 'd'}}}}",
    "linear": "nn.Linear(3, 2)",
    "mlp": "nn.Sequential():add(nn.Linear(4, 8)):add(nn.Tanh()):add(nn.Linear(8, 2)):add(nn.LogSoftMax())",
    "convnet": """nn.Sequential():add(nn.SpatialConvolution(1, 2, 3, 3)):add(nn.ReLU())
        :add(nn.SpatialMaxPooling(2, 2)):add(nn.SpatialBatchNormalization(2)):add(nn.View(-1))""",
    "containers": "nn.ConcatTable():add(nn.Identity()):add(nn.Sequential():add(nn.Dropout(0.3)))",
    "gmodule": """(function()
        require 'nngraph'
        local x = nn.Identity()()
        local h = nn.Tanh()(nn.Linear(3, 4)(x))
        return nn.gModule({x}, {nn.CAddTable()({h, nn.Linear(3, 4)(x)})})
      end)()""",
    "weightnorm": "nn.WeightNorm(nn.Linear(3, 2))",
    "lookup_batchnorm": "nn.Sequential():add(nn.LookupTable(5, 3)):add(nn.BatchNormalization(3))",
    "closures": """(function()
        local n, t = 0, {}
        t.inc = function() n = n + 1 return n end
        t.get = function() return n, t end
        return {t, t.get, torch.ones(2)}
      end)()""",
}
WRITTEN_FORMATS = {"tensors": FORMATS, "shared_storage": FORMATS, "mlp": FORMATS, "scalars": FORMATS,
                   "cycle": ("binary", "ascii")}


def written_seeds() -> list[Seed]:
    """Files our Lua torch.serialize writes (needs the Lua reader/writer)."""
    import luabridge

    luabridge.require("nn")
    luabridge.require("torch").manualSeed(1)
    # as bytes: a ByteTensor over the string (lupa would decode a string returned as UTF-8)
    serialize = luabridge.eval("function(obj, format) "
                               "return torch.ByteTensor(torch.ByteStorage():string(torch.serialize(obj, format))) end")
    seeds = []
    for name, code in WRITTEN.items():
        obj = luabridge.execute("return " + code)
        for fmt in WRITTEN_FORMATS.get(name, ("binary", "ascii")):
            data = luabridge.to_numpy(serialize(obj, fmt)).tobytes()
            seeds.append(Seed(f"{name}.{fmt}", fmt, data))
    return seeds


def _i32(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}i", *values)


def _i64(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}q", *values)


def _str(s: bytes) -> bytes:
    return _i32(len(s)) + s


def _number(x: float) -> bytes:
    return _i32(1) + struct.pack("<d", x)


def _nested(depth: int) -> bytes:
    """{{{...{1}...}}}: depth tables, each holding the next at key 1."""
    return b"".join(_i32(3, level + 1, 1) + _number(1) for level in range(depth)) + _number(1)


def _tensor(index: int, sizes: list[int], strides: list[int], offset: int, n: int) -> bytes:
    head = _i32(4, index) + _str(b"V 1") + _str(b"torch.FloatTensor")
    dims = _i32(len(sizes)) + _i64(*sizes) + _i64(*strides) + _i64(offset)
    storage = _i32(4, index + 1) + _str(b"V 1") + _str(b"torch.FloatStorage") + _i64(n) + b"\0\0\x80\x3f" * n
    return head + dims + storage


def crafted_seeds() -> list[Seed]:
    """Hand-made binary files at the edges: deep nesting, zero strides, references, counts."""
    two_refs = _i32(3, 1, 2) + _number(1) + _tensor(2, [2, 3], [3, 1], 1, 6) + _number(2) + _i32(4, 2)
    seeds = {
        "nested_100": _nested(100),
        "nested_4095": _nested(4095),
        "nested_5000": _nested(5000),
        "zero_stride": _tensor(1, [1 << 40, 3], [0, 1], 1, 3),
        "tensor_refs": two_refs,
        "self_ref": _i32(3, 1, 1) + _i32(3, 1) + _i32(3, 1),
        "huge_count": _i32(3, 1, 0x7fffffff) + _number(1),
        "huge_string": _i32(2, 0x7fffffff) + b"x" * 16,
        "legacy_class": _i32(4, 1) + _str(b"torch.DoubleStorage") + _i64(2) + struct.pack("<2d", 1.5, 2.5),
        "unknown_class": _i32(4, 1) + _str(b"V 1") + _str(b"nope.Thing") + _i32(3, 2, 0),
    }
    ascii = {  # the same in ascii: one number a line
        "ascii_nested_5000": b"".join(b"3\n%d\n1\n1\n1\n" % (level + 1) for level in range(5000)) + b"1\n1\n",
        "ascii_huge_count": b"3\n1\n2147483647\n1\n1\n1\n1\n",
        "ascii_huge_storage": b"4\n1\n3\nV 1\n18\ntorch.FloatStorage\n4611686018427387904\n1 2 3\n",
    }
    return [Seed(name, "binary", data) for name, data in seeds.items()] + \
        [Seed(name, "ascii", data) for name, data in ascii.items()]


def python_written_seeds() -> list[Seed]:
    """Files luabridge.t7.write writes: arrays of several dtypes, views of one array, a list."""
    import numpy as np

    from luabridge import t7

    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    obj = {"f": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.arange(4), "u8": np.arange(3, dtype=np.uint8),
           "base": base, "column": base[:, 1], "list": [1, "two", 3.5, True]}
    seeds = []
    for fmt in ("binary", "ascii"):
        buf = io.BytesIO()
        t7.write(buf, obj, format=fmt)
        seeds.append(Seed(f"py_arrays.{fmt}", fmt, buf.getvalue()))
    return seeds


def save_corpus(corpus: list[Seed], path: Path) -> None:
    path.write_bytes(pickle.dumps([(c.name, c.format, c.data) for c in corpus]))


def load_corpus(path: Path) -> list[Seed]:
    return [Seed(*fields) for fields in pickle.loads(path.read_bytes())]


def build_corpus() -> list[Seed]:
    """All the seeds. Files our Lua writer writes differ from one process to the next (LuaJIT 2.1
    hashes strings with a random seed, so tables' pairs order varies): a run saves the corpus it
    used beside its failures, and --corpus replays cases with that one."""
    corpus = fixture_seeds() + crafted_seeds()
    for extra in (written_seeds, python_written_seeds):
        try:
            corpus += extra()
        except Exception as e:  # noqa: BLE001 - the other seeds still fuzz
            print(f"fuzz_t7: skipping {extra.__name__}: {type(e).__name__}: {str(e).splitlines()[0]}",
                  file=sys.stderr)
    return corpus


# ------------------------------------------------------------------------------- mutations

INTERESTING = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 255, 256, 4095, 4096, 4097, 65535, 65536,
               -1, -2, -128, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**53, 2**62, 2**63 - 1,
               -2**31, -2**63, 0xFFD3384B, 0xFFFA670960000000]  # the last two: float / double NaN payloads
DOUBLES = [0.0, -0.0, 0.5, -1.0, 1e308, float("inf"), float("-inf"), float("nan"), 2.0**63, 1e-320]
TOKENS = [b"0", b"-1", b"2147483647", b"2147483648", b"-2147483649", b"9223372036854775807",
          b"99999999999999999999999", b"1e999", b"nan", b"-inf", b"1.5", b"", b"x", b"4097"]
NUMBER = re.compile(rb"-?[0-9][0-9.e+-]*")


def _pos(rng: random.Random, data: bytearray) -> int:
    return rng.randrange(len(data) + 1)


def flip_bits(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    if not data:
        return "flip (empty)"
    spots = [rng.randrange(len(data) * 8) for _ in range(rng.randint(1, 4))]
    for bit in spots:
        data[bit // 8] ^= 1 << (bit % 8)
    return f"flip bits {spots}"


def _int_bytes(value: int, width: int) -> bytes:
    """value as a little-endian int of width bytes (wrapped modulo 2^(8 width))."""
    return (value % (1 << 8 * width)).to_bytes(width, "little")


def overwrite_int(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    value, width = rng.choice(INTERESTING), rng.choice((4, 4, 8))
    at = rng.randrange(max(1, len(data) - width + 1))
    data[at:at + width] = _int_bytes(value, width)
    return f"int{width * 8} {value} at {at}"


def overwrite_double(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    value = rng.choice(DOUBLES)
    at = rng.randrange(max(1, len(data) - 7))
    data[at:at + 8] = struct.pack("<d", value)
    return f"double {value} at {at}"


def replace_token(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    """An ascii number replaced by an interesting one (on binary data: an int overwrite)."""
    tokens = list(NUMBER.finditer(data)) if seed.format == "ascii" else []
    if not tokens:
        return overwrite_int(rng, data, seed, corpus)
    token, text = rng.choice(tokens), rng.choice(TOKENS)
    old = token.group().decode("latin-1")  # before the change: the match reads data
    data[token.start():token.end()] = text
    return f"token {old!r} at {token.start()} -> {text.decode()!r}"


def truncate(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    end = rng.randrange(len(data) + 1) if rng.random() < 0.5 else max(0, len(data) - rng.randint(1, 16))
    del data[end:]
    return f"truncate to {end}"


def insert(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    at = _pos(rng, data)
    if rng.random() < 0.5:
        raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    else:
        raw = _int_bytes(rng.choice(INTERESTING), rng.choice((4, 8)))
    data[at:at] = raw
    return f"insert {raw.hex()} at {at}"


def delete(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    at = rng.randrange(max(1, len(data)))
    n = rng.randint(1, 16)
    del data[at:at + n]
    return f"delete {n} at {at}"


def duplicate(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    if not data:
        return "duplicate (empty)"
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.randint(1, 256))
    at, times = _pos(rng, data), rng.choice((1, 1, 2, 8))
    data[at:at] = bytes(data[a:b]) * times
    return f"duplicate [{a}:{b}] x{times} at {at}"


def splice(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    other = rng.choice([s for s in corpus if s.format == seed.format] or corpus)
    cut, tail = _pos(rng, data), rng.randrange(len(other.data) + 1)
    data[cut:] = other.data[tail:]
    return f"splice at {cut} with {other.name}[{tail}:]"


# Class names a retyped object takes: every storage and tensor type, nn classes with read-time
# upgrades, containers, the cudnn / cunn / tds / nngraph names real checkpoints hold.
CLASSES = [f"torch.{t}{k}" for t in ("Byte", "Char", "Short", "Int", "Long", "Float", "Double", "Half", "Cuda",
                                      "CudaDouble", "CudaLong") for k in ("Tensor", "Storage")] + [
    "nn." + c for c in ("Linear", "Sequential", "ConcatTable", "Concat", "BatchNormalization",
                        "SpatialBatchNormalization", "SpatialConvolution", "SpatialConvolutionMM",
                        "SpatialFullConvolution", "TemporalConvolution", "SpatialMaxPooling",
                        "SpatialAveragePooling", "SpatialCrossMapLRN", "LookupTable", "Threshold", "ReLU",
                        "Clamp", "Bottle", "WeightNorm", "View", "Dropout", "Identity", "gModule", "Module",
                        "Profile", "SpatialSubtractiveNormalization", "ParallelTable", "MapTable")] + [
    "cudnn.SpatialConvolution", "cudnn.BatchNormalization", "cudnn.ReLU", "cudnn.ClippedReLU", "tds.Hash",
    "tds.Vec", "nngraph.Node", "graph.Graph", "graph.Edge", "torch.Timer", "torch.Generator", "Blah"]
CLASS_NAME = re.compile(rb"[a-zA-Z]+\.[A-Z][A-Za-z]+|Blah")


def retype(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    """A class name (with its length) replaced by another: one class's data read as another's."""
    names = [m for m in CLASS_NAME.finditer(data) if _length_before(data, m, seed.format)]
    if not names:
        return flip_bits(rng, data, seed, corpus)
    m, new = rng.choice(names), rng.choice(CLASSES).encode()
    start, old = _length_before(data, m, seed.format), m.group().decode("latin-1")
    data[start:m.end()] = (_int_bytes(len(new), 4) if seed.format != "ascii" else b"%d\n" % len(new)) + new
    return f"class {old} at {m.start()} -> {new.decode()}"


def _length_before(data: bytearray, m: re.Match, fmt: str) -> int:
    """Where the length prefix of the string m starts (0 when m is not a whole written string)."""
    n = m.end() - m.start()
    if fmt == "ascii":
        prefix = b"%d\n" % n
        return m.start() - len(prefix) if data[:m.start()].endswith(b"\n" + prefix) else 0
    return m.start() - 4 if m.start() >= 4 and data[m.start() - 4:m.start()] == _int_bytes(n, 4) else 0


TYPE_CODE = re.compile(rb"(?=[\x03\x04]\x00\x00\x00....)", re.S)


def rereference(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    """An object's index (after type code 3 or 4, binary) changed: it becomes a reference to
    another object, perhaps one still being read, or a new object under an old index."""
    spots = [m.start() for m in TYPE_CODE.finditer(data) if 0 < _int32(data, m.start() + 4) < 100_000]
    if seed.format == "ascii" or not spots:
        return overwrite_int(rng, data, seed, corpus)
    at = rng.choice(spots) + 4
    old = _int32(data, at)
    new = rng.choice((rng.randint(1, old), old + 1, old - 1, rng.randint(1, 64)))
    data[at:at + 4] = _int_bytes(new, 4)
    return f"object index {old} at {at} -> {new}"


def _int32(data: bytearray, at: int) -> int:
    return int.from_bytes(data[at:at + 4], "little", signed=True)


ELEMENT_BYTES = {"Byte": 1, "Char": 1, "Short": 2, "Int": 4, "Long": 8, "Float": 4, "Double": 8, "Half": 2, "": 4}
CLASS_KIND = re.compile(r"torch\.(?:Cuda)?(Byte|Char|Short|Int|Long|Float|Double|Half|)(Tensor|Storage)")


class _Stop(Exception):
    """The layout walk meets what it does not follow (a function, a class's own format)."""


@functools.lru_cache(maxsize=None)
def layout(data: bytes, long_size: int) -> tuple[tuple[int, int, str], ...]:
    """(offset, width, role) of the numbers that steer reading a binary file (type codes,
    indices, counts, lengths, tensor sizes / strides / offsets, storage sizes) and of its
    doubles, as far as a walk of the torch7 layout gets."""
    found: list[tuple[int, int, str]] = []
    pos, seen = 0, set()

    def take(width: int, role: str) -> int:
        nonlocal pos
        if pos + width > len(data):
            raise _Stop
        found.append((pos, width, role))
        pos += width
        return int.from_bytes(data[pos - width:pos], "little", signed=True)

    def skip(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise _Stop
        pos += n
        return data[pos - n:pos]

    def string() -> bytes:
        return skip(take(4, "string length"))

    def torch_object() -> None:
        version = string()
        name = (string() if version.startswith(b"V ") else version).decode("latin-1")
        kind = CLASS_KIND.fullmatch(name)
        if not kind:
            return value()  # an nn class and the like: its fields table
        element = {"Long": long_size}.get(kind.group(1), ELEMENT_BYTES[kind.group(1)])
        if kind.group(2) == "Storage":
            skip(take(long_size, "storage size") * element)
            return
        dims = take(4, "dimension count")
        for role in ("size", "stride"):
            for _ in range(max(0, min(dims, 64))):
                take(long_size, role)
        take(long_size, "storage offset")
        value()

    def value() -> None:
        code = take(4, "type code")
        if code == 1:
            take(8, "number")
        elif code == 2:
            string()
        elif code == 5:
            take(4, "boolean")
        elif code in (3, 4):
            index = take(4, "object index")
            if index in seen:
                return
            seen.add(index)
            if code == 4:
                return torch_object()
            for _ in range(max(0, take(4, "table size"))):
                value()
                value()
        elif code != 0:
            raise _Stop

    try:
        value()
    except (_Stop, RecursionError, UnicodeDecodeError):
        pass
    return tuple(found)


def set_field(rng: random.Random, data: bytearray, seed: Seed, corpus: list[Seed]) -> str:
    """One number that steers reading (a count, size, stride, index, type code, length) set to
    an interesting value or one near its own."""
    spots = layout(seed.data, 4 if seed.format == "b32" else 8) if seed.format != "ascii" else ()
    if not spots:
        return replace_token(rng, data, seed, corpus)
    at, width, role = rng.choice(spots)
    if role == "number":
        value: Any = rng.choice(DOUBLES)
        data[at:at + 8] = struct.pack("<d", value)
    else:
        old = int.from_bytes(data[at:at + width], "little", signed=True)
        value = rng.choice((rng.choice(INTERESTING), old + 1, old - 1, 2 * old, -old, old + rng.randint(2, 64)))
        data[at:at + width] = _int_bytes(value, width)
    return f"{role} at {at} -> {value}"


MUTATORS: list[Callable[..., str]] = [  # repeated ones are drawn more often
    set_field, set_field, set_field, retype, retype, rereference, flip_bits, flip_bits, overwrite_int, overwrite_int,
    overwrite_int, overwrite_double, replace_token, replace_token, truncate, insert, delete, duplicate, splice]
OPTIONS = [{}, {"unknownClasses": "table", "functions": "skip"}]


@dataclass
class Case:
    number: int
    seed: Seed
    format: str
    options: dict
    data: bytes
    steps: list[str] = field(default_factory=list)


def make_case(corpus: list[Seed], seed: int, number: int) -> Case:
    """Case `number` of the run with this seed (independent of chunking and workers)."""
    rng = random.Random(f"t7fuzz:{seed}:{number}")
    base = rng.choices(corpus, [0.2 if len(s.data) > 50_000 else 1.0 for s in corpus])[0]  # big ones are slow
    data = bytearray(base.data)
    steps = [rng.choice(MUTATORS)(rng, data, base, corpus) for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4)))]
    fmt = base.format if rng.random() < 0.95 else rng.choice(FORMATS)
    return Case(number, base, fmt, rng.choice(OPTIONS), bytes(data), steps)


# --------------------------------------------------------------------------------- readers

# Lua runtime errors: a reader that meets one has not checked its input.
UNCHECKED = re.compile(r"attempt to |bad argument #|stack overflow|table index is (nil|NaN)"
                       r"|invalid key to 'next'|Traceback|cannot convert|no integer representation"
                       r"|loop in gettable|C stack|(?<![\w.])error in error handling")
# An allocation the memory cap refused: the reader tried to allocate before checking a size.
OUT_OF_MEMORY = re.compile(r"not enough memory|MemoryError|Unable to allocate")

# Reads a string with torch.deserialize (or a file with torch.load), then walks what it got:
# every tensor must lie inside its storage (sizes, strides and offset checked independently of
# the reader), and the ends of tensors and storages must read as numbers.
LUA_READER = r"""
require 'nn'
pcall(require, 'nngraph')
local function element_fault(storage, i)
  local v = storage[i]
  if type(v) ~= 'number' then
    return string.format('storage element %d reads as a %s, not a number (a NaN with payload?)', i, type(v))
  end
end
local function tensor_fault(t)
  local n = t:nDimension()
  local lo, hi, empty = t:storageOffset() - 1, t:storageOffset() - 1, false
  for d = 1, n do
    local size, stride = t:size(d), t:stride(d)
    if size < 0 then return 'negative size' end
    if size == 0 then empty = true end
    if stride < 0 then lo = lo + (size - 1) * stride else hi = hi + (size - 1) * stride end
  end
  if n == 0 or empty then return nil end
  local storage = t:storage()
  if not storage then return 'a non-empty tensor without a storage' end
  if lo < 0 or hi >= storage:size() then
    return string.format('tensor spans elements %d..%d of a storage of %d', lo + 1, hi + 1, storage:size())
  end
  return element_fault(storage, lo + 1) or element_fault(storage, hi + 1)  -- both ends readable
end
local function walk(root)
  local seen, stack, visited = {}, {root}, 0
  while #stack > 0 and visited < 100000 do
    local x = table.remove(stack)
    if (type(x) == 'table' or type(x) == 'userdata') and not seen[x] then
      seen[x] = true
      visited = visited + 1
      local fault
      if torch.isTensor(x) then
        fault = tensor_fault(x)
      elseif torch.isStorage(x) and x:size() > 0 then
        fault = element_fault(x, 1) or element_fault(x, x:size())
      elseif type(x) == 'table' then
        for k, v in next, x do stack[#stack + 1] = k ; stack[#stack + 1] = v end
      end
      if fault then return fault end
    end
  end
end
-- the message as bytes (a ByteTensor): lupa would raise UnicodeDecodeError on a string that is not UTF-8
local function bytes(message)
  return torch.ByteTensor(torch.ByteStorage():string(tostring(message)))
end
return function(data, format, options, path)  -- a path: torch.load (DiskFile), else MemoryFile
  local ok, obj
  if path then ok, obj = pcall(torch.load, path, format, options)
  else ok, obj = pcall(torch.deserialize, data, format, options) end
  if not ok then return 'rejected', bytes(obj) end
  local walked, fault = pcall(walk, obj)
  if not walked then return 'invalid', 'walking the result: ' .. tostring(fault) end
  if fault then return 'invalid', fault end
  return 'loaded', ''
end
"""


def array_fault(a: Any) -> str | None:
    """Why a numpy array read from a file is unsound (outside its buffer), or None."""
    import numpy as np
    from numpy.lib.array_utils import byte_bounds

    if a.size == 0:
        return None
    low, high = byte_bounds(a)
    root_low, root_high = byte_bounds(t7_root(a))
    if low < root_low or high > root_high:
        return f"array {a.shape} strides {a.strides} spans [{low}, {high}) outside its buffer [{root_low}, {root_high})"
    _ = a.flat[0], a[tuple(s - 1 for s in a.shape)]  # both ends readable
    if a.size <= 100_000:
        np.asarray(a).sum()
    return None


def python_fault(root: Any, classes: set[str]) -> str | None:
    """Walks what t7.read returned: lists, dicts, objects with fields, arrays checked; the class
    names of the objects go into classes."""
    import numpy as np

    from luabridge import t7

    seen, stack, visited = set(), [root], 0
    while stack and visited < 100_000:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        visited += 1
        if isinstance(x, np.ndarray):
            fault = array_fault(x)
            if fault:
                return fault
        elif isinstance(x, dict):
            if isinstance(x.get("__typename"), str):  # an object read with unknownClasses='table'
                classes.add(x["__typename"])
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, t7.Key):
            stack.append(x.value)
        elif isinstance(x, t7.TorchObject):
            classes.add(x.typename)
            stack.extend(vars(x).values())
    return None


@dataclass
class Outcome:
    reader: str
    status: str  # loaded, rejected, unclear, or a failure: exception, undecodable, invalid, memory, slow
    message: str = ""
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status not in ("loaded", "rejected", "unclear")

    @property
    def code(self) -> str:
        """One letter: l(oaded), r(ejected), u(nclear error), f(ailed)."""
        return "f" if self.failed else self.status[0]


class Readers:
    """Both readers, in this process."""

    def __init__(self, which: str = "both", strict: bool = False, file: Path | None = None) -> None:
        """file: where cases read from a file are written (default: in a directory of our own)."""
        self.which, self.strict = which, strict
        self.lua_read = self.t7 = self.lua_knows = None
        self.classes: set[str] = set()  # the classes in what the Python reader last loaded
        if file is None:
            self.dir = tempfile.TemporaryDirectory(prefix="fuzz_t7_case_")  # removed with this object
            file = Path(self.dir.name) / "case.t7"
        self.file = file
        if which in ("both", "lua"):
            import luabridge

            self.lua_read = luabridge.execute(LUA_READER)
            # the reader's own class resolution, aliases included (cudnn.X is read as nn.X)
            self.lua_knows = luabridge.eval("function(name) return torch.File._resolveClass(name) ~= nil end")
        if which in ("both", "python"):
            from luabridge import t7

            self.t7 = t7

    def run(self, case: Case) -> list[Outcome]:
        """Both readers' outcomes; every 8th case is read from a file (torch.load, t7.read(path))."""
        path = None
        if case.number % 8 == 7:
            self.file.write_bytes(case.data)
            path = str(self.file)
        outcomes = []
        if self.lua_read is not None:
            outcomes.append(self.timed(self.lua, case, path))
        if self.t7 is not None:
            outcomes.append(self.timed(self.python, case, path))
        if len(outcomes) == 2:
            why = disagreement(case, *outcomes, self.classes, self.lua_knows)
            if why:
                outcomes.append(Outcome("lua+python", "disagree", why))
        return outcomes

    def timed(self, read: Callable[[Case, str | None], Outcome], case: Case, path: str | None) -> Outcome:
        start = time.perf_counter()
        outcome = read(case, path)
        outcome.seconds = time.perf_counter() - start
        if outcome.status == "unclear" and self.strict:
            outcome.status = "unchecked"
        if outcome.seconds > CASE_SECONDS and not outcome.failed:
            outcome.message = f"{outcome.status} after {outcome.seconds:.1f} s: {outcome.message}"
            outcome.status = "slow"
        return outcome

    def lua(self, case: Case, path: str | None) -> Outcome:
        import luabridge

        # functions refused unless skipped, as the Python reader does (memory files would load them)
        options = luabridge.unwrap({"functions": "error", **case.options})
        try:
            status, message = self.lua_read(case.data, case.format, options, path)
        except Exception as e:  # noqa: BLE001 - the harness itself failing is a failure too
            return Outcome("lua", "exception", f"{type(e).__name__}: {e}")
        status = str(status)
        if status != "rejected":
            return Outcome("lua", status, str(message))
        raw = luabridge.to_numpy(message).tobytes()
        try:
            text = raw.decode()
        except UnicodeDecodeError:  # luabridge.load would raise UnicodeDecodeError, not LuaError
            return Outcome("lua", "undecodable", f"message not UTF-8: {raw!r}")
        if OUT_OF_MEMORY.search(text):
            return Outcome("lua", "memory", text)
        return Outcome("lua", "unclear" if UNCHECKED.search(text) else "rejected", text)

    def python(self, case: Case, path: str | None) -> Outcome:
        try:
            obj = self.t7.read(path or io.BytesIO(case.data), format=case.format, **case.options)
        except self.t7.T7Error as e:
            return Outcome("python", "rejected", str(e))
        except MemoryError as e:
            return Outcome("python", "memory", f"MemoryError: {e}")
        except Exception as e:  # noqa: BLE001 - any other exception is what the fuzzer looks for
            return Outcome("python", "exception", f"{type(e).__name__}: {e}")
        self.classes = set()
        fault = python_fault(obj, self.classes)
        return Outcome("python", "invalid", fault) if fault else Outcome("python", "loaded")


# Classes one reader reads in a layout of its own (not a fields table) that the other does not
# know: Lua's read methods of these three, and the Python reader's nn.GPU (a header table first;
# our nn has no nn.GPU). A file naming one may rightly load in one reader only.
OWN_LAYOUT = (b"torch.Timer", b"torch.Generator", b"nn.DataParallelTable", b"nn.GPU")


def disagreement(case: Case, lua: Outcome, python: Outcome, classes: set[str],
                 lua_knows: Callable[[str], bool]) -> str | None:
    """Why the two readers' outcomes on a case contradict the one format they share, or None.
    They may rightly differ where Lua runs the read method of a class it has (nn's check their
    fields) and where, without unknownClasses='table', Lua refuses a class it lacks (the Python
    reader reads it as a TorchObject)."""
    lua_loaded, python_loaded = lua.status == "loaded", python.status == "loaded"
    if lua.failed or python.failed or lua_loaded == python_loaded or any(n in case.data for n in OWN_LAYOUT):
        return None
    if lua_loaded:
        return f"only lua loaded; python: {python.message}"
    if "unknown Torch class <" in lua.message and case.options.get("unknownClasses") != "table":
        return None
    if any(lua_knows(name) for name in classes):
        return None
    return f"only python loaded; lua: {lua.message}"


# ---------------------------------------------------------------------------------- worker


def _status_kib(field_name: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS, VmSize), or 0 where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _emit(line: str) -> None:
    os.write(1, (line + "\n").encode())


def worker(corpus_file: str, seed: int, first: int, last: int, which: str, memory_mb: int, strict: bool) -> None:
    """Runs cases first..last-1 and reports each on stdout: '<case> <l|r|u|f per reader>', after
    an 'F {json}' line for a failure or 'U {json}' for an unclear error. Memory is capped at
    memory_mb above the start."""
    corpus = load_corpus(Path(corpus_file))
    readers = Readers(which, strict, Path(corpus_file).parent / f"case-{first}.t7")  # the runner removes it
    base = corpus[0]
    readers.run(Case(-1, base, base.format, {}, base.data))  # warm up (an unmutated seed) before measuring memory
    rss0 = _status_kib("VmRSS")
    size = _status_kib("VmSize") * 1024
    if size:
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        limit = size + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    _emit("ready")
    grew, slowest, rejections = False, (0.0, -1), Counter()
    crash_at, hang_at, hog_at = (int(os.environ.get(f"FUZZ_T7_{what}_AT", -1)) for what in ("CRASH", "HANG", "HOG"))
    for number in range(first, last):
        if number == crash_at:  # the harness's own tests
            os.kill(os.getpid(), signal.SIGSEGV)
        if number == hang_at:
            time.sleep(3600)
        if number == hog_at:
            bytearray(2 * memory_mb * 2**20)  # beyond the cap: MemoryError
        case = make_case(corpus, seed, number)
        outcomes = readers.run(case)
        slowest = max(slowest, (sum(o.seconds for o in outcomes), number))
        for o in outcomes:
            if o.status == "rejected":
                rejections[o.reader + " " + _pattern(o.message)] += 1
            if o.failed or o.status == "unclear":
                _emit(("F " if o.failed else "U ") + json.dumps(
                    {"case": number, "reader": o.reader, "kind": o.status, "message": o.message[:2000]}))
        if number % 256 == 0 and not grew and _status_kib("VmRSS") - rss0 > memory_mb * 512:
            grew = True  # a leak: reported once, before the cap makes allocations fail
            _emit("F " + json.dumps({"case": number, "reader": which, "kind": "memory",
                                     "message": f"RSS grew by more than {memory_mb // 2} MiB "
                                                f"between cases {first} and {number}"}))
        _emit(f"{number} " + "".join(o.code for o in outcomes if o.reader in ("lua", "python")))
    _emit(f"M {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss} {slowest[0]} {slowest[1]}")
    _emit("R " + json.dumps(rejections))


# ---------------------------------------------------------------------------------- parent


@dataclass
class Summary:
    cases: int = 0
    seconds: float = 0.0
    jobs: int = 1
    counts: Counter = field(default_factory=Counter)  # (reader, l|r|u|f) -> n
    pairs: Counter = field(default_factory=Counter)  # 'lr' etc. (both readers) -> n
    failures: list = field(default_factory=list)
    unclear: dict = field(default_factory=dict)  # (reader, message pattern) -> [count, first case]
    peak_rss_kib: int = 0  # the largest peak RSS of a worker
    slowest: tuple = (0.0, -1)  # (seconds, case): the slowest case, both readers together
    rejections: Counter = field(default_factory=Counter)  # 'reader message pattern' -> n
    readers: tuple = ()

    def report(self) -> str:
        rate = self.cases / self.seconds if self.seconds else 0.0
        lines = [f"fuzz_t7: {self.cases} cases in {self.seconds:.1f} s ({rate:.0f} cases/s, {self.jobs} workers; "
                 f"peak worker RSS {self.peak_rss_kib / 1024:.0f} MiB, slowest case {self.slowest[0] * 1000:.0f} ms "
                 f"(#{self.slowest[1]}))"]
        for reader in self.readers:
            c = [self.counts[reader, k] for k in "lruf"]
            lines.append(f"  {reader:<7} loaded {c[0]:>7}  rejected {c[1]:>7} (unclear messages {c[2]})"
                         f"  failures {c[3]}")
        distinct = Counter(pattern.split(" ", 1)[0] for pattern in self.rejections)
        lines.append("  distinct rejection messages (numbers and places removed): "
                     + ", ".join(f"{reader} {distinct[reader]}" for reader in self.readers))
        if len(self.readers) == 2:
            p = self.pairs
            lines.append(f"  agreement: both loaded {p['ll']}, both rejected {p['rr']}, "
                         f"only lua loaded {p['lr'] + p['lu']}, only python loaded {p['rl'] + p['ul']}")
        if self.unclear:
            lines.append("  unclear rejections (Lua runtime errors inside the reader's LuaError), by pattern:")
            top = sorted(self.unclear.items(), key=lambda kv: -kv[1][0])[:12]
            lines += [f"    {n:>6} x {reader}: {pattern}  (e.g. case {case})" for (reader, pattern), (n, case) in top]
        lines.append(f"  failures: {len(self.failures)}")
        kinds = Counter((f["reader"], f["kind"], _pattern(f["message"])) for f in self.failures)
        lines += [f"    {n:>6} x {reader} {kind}: {pattern}" for (reader, kind, pattern), n in kinds.most_common(12)]
        return "\n".join(lines)


@dataclass
class Worker:
    proc: subprocess.Popen
    first: int
    last: int
    stderr: Path
    next: int = 0
    ready: bool = False
    since: float = field(default_factory=time.monotonic)
    buffer: bytes = b""
    killed: str = ""


@dataclass
class Settings:
    which: str = "both"  # the readers: both, lua or python
    jobs: int = 2  # worker processes at a time
    chunk: int = 2000  # cases per worker process
    fail_dir: Path | None = None  # where failing cases are saved
    memory_mb: int = 1024  # how much a worker may grow
    hang_s: float = 10.0  # silence before a worker is killed
    strict: bool = False  # unclear errors (Lua runtime errors in the reader) fail too
    keep: int = 10  # failures of one kind and message pattern printed and saved
    progress: bool = False  # say how far the run is on stderr (fuzz_progress)


class Runner:
    """Runs the cases of one seed in chunks, `jobs` child processes at a time."""

    def __init__(self, corpus: list[Seed], seed: int, settings: Settings) -> None:
        self.corpus, self.seed, self.settings = corpus, seed, settings
        readers = ("lua", "python") if settings.which == "both" else (settings.which,)
        self.summary = Summary(jobs=settings.jobs, readers=readers)
        self.kinds: dict = {}  # (reader, kind, message pattern) -> failures seen
        self.progress: fuzz_progress.FuzzProgress | None = None
        self.dir = tempfile.TemporaryDirectory(prefix="fuzz_t7_")  # removed with this object
        self.tmp = Path(self.dir.name)
        self.corpus_file = self.tmp / "corpus.pickle"
        save_corpus(corpus, self.corpus_file)
        if settings.fail_dir:  # for replays (--corpus): this run's seeds
            settings.fail_dir.mkdir(parents=True, exist_ok=True)
            save_corpus(corpus, settings.fail_dir / f"corpus-seed{seed}.pickle")

    def run(self, first: int, cases: int) -> Summary:
        start = time.monotonic()
        chunk = self.settings.chunk
        queue = [(a, min(a + chunk, first + cases)) for a in range(first, first + cases, chunk)]
        queue.reverse()
        selector = selectors.DefaultSelector()
        workers: dict[int, Worker] = {}
        if self.settings.progress:
            self.progress = fuzz_progress.FuzzProgress("fuzz_t7", cases)
        try:
            while queue or workers:
                while queue and len(workers) < self.settings.jobs:
                    w = self.start(*queue.pop())
                    workers[w.proc.stdout.fileno()] = w
                    selector.register(w.proc.stdout, selectors.EVENT_READ)
                for key, _ in selector.select(timeout=0.5):
                    w = workers[key.fd]
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        self.lines(w, data)
                        continue
                    selector.unregister(key.fileobj)
                    del workers[key.fd]
                    rest = self.finish(w)
                    if rest:
                        queue.append(rest)
                self.watch(workers.values())
                if self.progress is not None:
                    self.progress.update(self.summary.cases, len(self.summary.failures))
        finally:
            for w in workers.values():
                w.proc.kill()
            if self.progress is not None:
                self.progress.close()
        self.summary.seconds = time.monotonic() - start
        return self.summary

    def start(self, first: int, last: int) -> Worker:
        stderr = self.tmp / f"stderr-{first}.txt"
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(self.corpus_file),
                   "--seed", str(self.seed), "--first", str(first), "--last", str(last),
                   "--readers", self.settings.which, "--memory-mb", str(self.settings.memory_mb),
                   *(["--strict"] if self.settings.strict else [])]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr.open("wb"), cwd=ROOT)
        return Worker(proc, first, last, stderr, next=first)

    def lines(self, w: Worker, data: bytes) -> None:
        w.buffer += data
        *complete, w.buffer = w.buffer.split(b"\n")
        w.since = time.monotonic()
        for line in complete:
            text = line.decode("utf-8", "replace")
            if text == "ready":
                w.ready = True
            elif text.startswith("F "):
                self.failure(json.loads(text[2:]))
            elif text.startswith("M "):
                rss, seconds, number = text[2:].split()
                self.summary.peak_rss_kib = max(self.summary.peak_rss_kib, int(rss))
                self.summary.slowest = max(self.summary.slowest, (float(seconds), int(number)))
            elif text.startswith("R "):
                self.summary.rejections.update(json.loads(text[2:]))
            elif text.startswith("U "):
                info = json.loads(text[2:])
                key = (info["reader"], _pattern(info["message"]))
                self.summary.unclear.setdefault(key, [0, info["case"]])[0] += 1
            else:
                number, codes = text.split()
                w.next = int(number) + 1
                self.summary.cases += 1
                for reader, code in zip(self.summary.readers, codes):
                    self.summary.counts[reader, code] += 1
                if len(codes) == 2:
                    self.summary.pairs[codes] += 1

    def watch(self, workers: Any) -> None:
        """Kills a worker stuck on one case (or in starting) for too long."""
        now = time.monotonic()
        for w in workers:
            limit = self.settings.hang_s if w.ready else max(120.0, self.settings.hang_s)
            if not w.killed and now - w.since > limit:
                w.killed = f"hang: no result after {limit:.0f} s"
                w.proc.kill()

    def finish(self, w: Worker) -> tuple[int, int] | None:
        """After a worker's output ends: the rest of its chunk if it died on a case."""
        code = w.proc.wait()
        if w.next >= w.last and code == 0:
            return None
        if not w.ready and not w.killed:
            raise SystemExit(f"fuzz_t7: a worker failed to start:\n{w.stderr.read_text()[-3000:]}")
        tail = w.stderr.read_text(errors="replace").strip().splitlines()[-5:]
        kind = "hang" if w.killed else "crash"
        why = w.killed or f"the process died ({_exit_name(code)})"
        readers = self.culprits(w.next)
        self.failure({"case": w.next, "reader": "+".join(readers), "kind": kind, "message": why + (
            ": " + " | ".join(tail) if tail else "")})
        self.summary.cases += 1
        for reader in readers:
            self.summary.counts[reader, "f"] += 1
        return (w.next + 1, w.last) if w.next + 1 < w.last else None

    def culprits(self, number: int) -> list[str]:
        """The readers that die or hang on a case, each tried alone in a new process (all of
        them when it does not happen again)."""
        if len(self.summary.readers) == 1:
            return list(self.summary.readers)
        case = make_case(self.corpus, self.seed, number)
        path = self.tmp / "culprit.t7"
        path.write_bytes(case.data)
        path.with_suffix(".json").write_text(json.dumps({"format": case.format, "options": case.options}))
        found = []
        for reader in self.summary.readers:
            command = [sys.executable, str(Path(__file__).resolve()), "--file", str(path), "--readers", reader]
            try:
                run = subprocess.run(command, capture_output=True, timeout=self.settings.hang_s, cwd=ROOT)
                died = run.returncode < 0
            except subprocess.TimeoutExpired:
                died = True
            if died:
                found.append(reader)
        return found or list(self.summary.readers)

    def failure(self, info: dict) -> None:
        case = make_case(self.corpus, self.seed, info["case"])
        corpus = f"{self.settings.fail_dir}/corpus-seed{self.seed}.pickle"
        info.update(seed=self.seed, base=case.seed.name, format=case.format, options=case.options, steps=case.steps,
                    replay=f"python tests/fuzz_t7.py --corpus {corpus} --seed {self.seed} --case {info['case']}")
        self.summary.failures.append(info)
        kind = (info["reader"], info["kind"], _pattern(info["message"]))
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if self.kinds[kind] > self.settings.keep:
            return  # enough of this kind printed and saved
        if self.progress is not None:
            self.progress.close()   # (a progress line rewritten in place ends before the report)
        print(f"FAIL seed {self.seed} case {info['case']} [{info['reader']} {info['kind']}] "
              f"{info['message'][:300]}\n     from {case.seed.name} ({case.format}), {'; '.join(case.steps)}",
              flush=True)
        if self.settings.fail_dir:
            stem = self.settings.fail_dir / f"seed{self.seed}-case{info['case']}-{info['reader']}-{info['kind']}"
            stem.with_suffix(".t7").write_bytes(case.data)
            stem.with_suffix(".json").write_text(json.dumps(info, indent=1))


def _pattern(message: str) -> str:
    """An error message without its numbers, quoted bytes, place in the object and file, and
    chunk name: one pattern per check that rejected a case."""
    message = re.sub(r"\((at|in) (a key of )?<\?>.*|\"[^\"]*\"|b'[^']*'|b\"[^\"]*\"| at byte \d+", "", message)
    message = re.sub(r"^(message not UTF-8: b')?(\(execute\):\d+: )?(torch\.(load|deserialize): |t7\.read: )?", "",
                     message)
    message = re.sub(r"\b[A-Za-z]\w*\.[A-Z]\w*|\b(u?int|float)\d+\b", "X", message)  # class and dtype names
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", message).strip()[:160]


def _exit_name(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def replay(case: Case, which: str, strict: bool) -> bool:
    """Runs one case here and prints what each reader did; True when none failed."""
    print(f"case {case.number}: {case.seed.name} ({case.format}, {len(case.data)} bytes), "
          f"options {case.options}, {'; '.join(case.steps) or 'unmutated'}")
    outcomes = Readers(which, strict).run(case)
    for o in outcomes:
        print(f"  {o.reader:<7} {o.status:<9} {o.seconds * 1000:.1f} ms  {o.message[:1000]}")
    return not any(o.failed for o in outcomes)


def saved_case(path: Path, format: str) -> Case:
    """A file as a case; a failure's .t7 takes its format and options from the .json beside it."""
    data = path.read_bytes()
    info = json.loads(path.with_suffix(".json").read_text()) if path.with_suffix(".json").exists() else {}
    fmt = info.get("format", format)
    return Case(info.get("case", 0), Seed(path.name, fmt, data), fmt, info.get("options", {}), data)


def _signature(outcomes: list[Outcome]) -> set[tuple[str, str, str]]:
    """What failed and how (reader, kind, Lua source line or exception type), to keep while minimizing."""
    def where(message: str) -> str:
        place = re.search(r"[\w/]+\.lua:\d+", message)
        return place.group() if place else message.split(":")[0]

    return {(o.reader, o.status, where(o.message)) for o in outcomes if o.failed}


def minimize(case: Case, which: str, strict: bool) -> Case:
    """A smaller case failing the same way: blocks of bytes removed while the failure stays (in
    this process, so not for crashes)."""
    readers = Readers(which, strict)
    target = _signature(readers.run(case))
    if not target:
        raise SystemExit("minimize: the case does not fail")
    data, block = case.data, max(1, len(case.data) // 2)
    while block >= 1:
        at, shrunk = 0, False
        while at < len(data):
            trial = data[:at] + data[at + block:]
            if target <= _signature(readers.run(Case(case.number, case.seed, case.format, case.options, trial))):
                data, shrunk = trial, True
            else:
                at += block
        block = block if shrunk and block > 1 else block // 2
    return Case(case.number, case.seed, case.format, case.options, data, [f"minimized from {len(case.data)} bytes"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=100_000, help="how many cases (the dedicated run: 100,000)")
    p.add_argument("--seed", type=int, default=0, help="cases are a function of (seed, case number)")
    p.add_argument("--first", type=int, default=0, help="the first case number")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--chunk", type=int, default=2000, help="cases per worker process")
    p.add_argument("--readers", choices=("both", "lua", "python"), default="both")
    p.add_argument("--failures", type=Path, default=Path("fuzz_failures"),
                   help="where failing cases are saved (.t7 + .json)")
    p.add_argument("--keep", type=int, default=10, help="failures of one kind printed and saved")
    p.add_argument("--memory-mb", type=int, default=1024, help="memory a worker may grow by")
    p.add_argument("--hang-s", type=float, default=10.0, help="seconds before a silent worker is killed")
    p.add_argument("--strict", action="store_true",
                   help="unclear errors (Lua runtime errors such as 'attempt to index' inside the reader) fail")
    p.add_argument("--case", type=int, help="replay this case number in this process")
    p.add_argument("--corpus", type=Path, help="the seeds a run saved beside its failures (corpus-seedS.pickle)")
    p.add_argument("--file", type=Path, help="feed this file to the readers in this process "
                   "(a saved failure: with the format and options in its .json)")
    p.add_argument("--format", default="binary", choices=FORMATS, help="with --file")
    p.add_argument("--minimize", action="store_true", help="with --file or --case: shrink it, keeping the failure")
    fuzz_progress.add_option(p)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--last", type=int, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        worker(a.worker, a.seed, a.first, a.last, a.readers, a.memory_mb, a.strict)
        return 0
    corpus = [] if a.file else load_corpus(a.corpus) if a.corpus else build_corpus()
    if a.file or a.case is not None:
        case = saved_case(a.file, a.format) if a.file else make_case(corpus, a.seed, a.case)
        if a.minimize:
            case = minimize(case, a.readers, a.strict)
            print(f"minimized to {len(case.data)} bytes: {case.data.hex()}")
        return 0 if replay(case, a.readers, a.strict) else 1
    settings = Settings(a.readers, a.jobs, a.chunk, a.failures, a.memory_mb, a.hang_s, a.strict, a.keep,
                        fuzz_progress.wanted(a.progress))
    summary = Runner(corpus, a.seed, settings).run(a.first, a.cases)
    print(summary.report())
    if summary.failures:
        print(f"failing cases saved in {a.failures}/ (replay: python tests/fuzz_t7.py --file {a.failures}/NAME.t7, "
              f"or --corpus {a.failures}/corpus-seed{a.seed}.pickle --seed {a.seed} --case N)")
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
