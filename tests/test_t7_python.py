"""luabridge.t7: the pure-Python .t7 reader/writer (no Lua), `luabridge info`, and files
exchanged with the Lua torch.save/torch.load."""
from __future__ import annotations

import io
import math
import random
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from luabridge import t7
from luabridge.th import cli
from luabridge.t7 import Key, T7Error, TorchObject
from helpers import T7_FIXTURES as FIXTURES, needs_t7_fixtures as needs_fixtures


DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float32", "float64", "float16"]
FORMATS = ["binary", "ascii", "b32", "b64"]


def fixture(name: str, **options):
    return t7.read(FIXTURES / name, **options)


def roundtrip(obj, fmt: str = "binary"):
    buf = io.BytesIO()
    t7.write(buf, obj, fmt)
    buf.seek(0)
    return t7.read(buf, fmt)


def encoded(obj, fmt: str = "binary") -> bytes:
    buf = io.BytesIO()
    t7.write(buf, obj, fmt)
    return buf.getvalue()


def values(dtype: str, shape, rng) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


# ---------------------------------------------------------------------------------------------
# the real Torch7 files (contents from the fixtures' README)

@needs_fixtures
class TestFixtures:
    def test_custom_class(self):
        obj = fixture("custom_class.t7")
        assert isinstance(obj, TorchObject)
        assert (obj.typename, obj.version, obj.fields) == ("Blah", 1, {})

    def test_doubletensor(self):
        a = fixture("doubletensor.t7")
        assert a.dtype == np.float64 and a.shape == (2, 3)
        np.testing.assert_array_equal(a, [[1, 2, 3], [4, 5, 6.9]])
        assert a.base is not None and a.base.shape == (6,)  # a view of its storage

    def test_floattensor(self):
        a = fixture("floattensor.t7")
        assert a.dtype == np.float32 and a.shape == (2, 3, 4)
        assert math.isclose(a.astype(np.float64).sum(), 12.97241666913, rel_tol=1e-7)

    @pytest.mark.parametrize("name", ["function.t7", "function_upvals.t7"])
    def test_functions_refused_then_skipped(self, name):
        with pytest.raises(T7Error, match=r"<\?> is a Lua function \(LuaJIT 2\.0 bytecode\).*functions='skip'"):
            fixture(name)
        assert fixture(name, functions="skip") is None

    def test_gmodule(self):
        g = fixture("gmodule_with_linear_identity.t7")
        assert g.typename == "nn.gModule" and g.nInputs == 2
        assert [m.typename for m in g.modules] == ["nn.Identity", "nn.Identity", "nn.Linear", "nn.CAddTable"]
        linear = g.modules[2]
        assert linear.weight.shape == (2, 1) and linear.bias.shape == (2,)
        assert linear.gradWeight.shape == (2, 1)
        # the graph nodes hold the very module objects of g.modules (references kept)
        in_graph = [n.data["module"] for n in g.forwardnodes if "module" in n.data]
        assert any(m is linear for m in in_graph)
        assert all(n.typename == "nngraph.Node" for n in g.forwardnodes)

    def test_plain_tables(self):
        items = ["hello", "world", "third item", 123]
        assert fixture("hello=123.t7") == {"hello": 123}
        assert fixture("list_table.t7") == items
        assert fixture("map_table1.t7") == {0: "zero", **dict(enumerate(items, 1))}
        assert fixture("map_table2.t7") == {"a": "non number key", **dict(enumerate(items, 1))}
        assert type(fixture("hello=123.t7")["hello"]) is int

    def test_nngraph_node(self):
        node = fixture("nngraph_node.t7")
        assert node.typename == "nngraph.Node"
        assert node.data["annotations"]["hello"] == 123
        assert node.id == 0 and node.children == {} and node.visited is False

    def test_recursive_class(self):
        obj = fixture("recursive_class.t7")
        assert obj.typename == "A" and obj.a is obj and list(obj.keys()) == ["a"]

    def test_recursive_kv_table(self):
        t = fixture("recursive_kv_table.t7")
        ((key, value),) = t.items()
        assert isinstance(key, Key) and key.value is t and value is t

    def test_tds(self):
        assert fixture("tds_hash.t7") == {1: 2, 2: 3, 10: 11}
        assert fixture("tds_vec.t7") == [123, 456]

    def test_unknown_classes_option(self):
        as_table = fixture("custom_class.t7", unknownClasses="table")
        assert as_table == {"__typename": "Blah", "__version": 1}
        with pytest.raises(T7Error, match="unknown Torch class <Blah>"):
            fixture("custom_class.t7", unknownClasses="error")
        np.testing.assert_array_equal(fixture("doubletensor.t7", unknownClasses="error")[1], [4, 5, 6.9])

    def test_same_as_torchfile(self):
        torchfile = pytest.importorskip("torchfile")
        for name in ("doubletensor.t7", "floattensor.t7"):
            np.testing.assert_array_equal(fixture(name), torchfile.load(str(FIXTURES / name)))
        g = torchfile.load(str(FIXTURES / "gmodule_with_linear_identity.t7"))
        ours = fixture("gmodule_with_linear_identity.t7")
        np.testing.assert_array_equal(ours.modules[2].weight, g[b"modules"][2][b"weight"])

    def test_rewritten_fixtures_read_back_the_same(self, tmp_path):
        g = fixture("gmodule_with_linear_identity.t7")
        t7.write(tmp_path / "g.t7", g)
        again = t7.read(tmp_path / "g.t7")
        assert [m.typename for m in again.modules] == [m.typename for m in g.modules]
        np.testing.assert_array_equal(again.modules[2].weight, g.modules[2].weight)
        t = roundtrip(fixture("recursive_kv_table.t7"))
        ((key, value),) = t.items()
        assert key.value is t and value is t


# ---------------------------------------------------------------------------------------------
# write -> read

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_every_type_and_format(dtype, fmt, rng):
    a = values(dtype, (3, 5, 4), rng)
    if fmt == "b32" and dtype == "int64":  # 'b32' longs are 4 bytes
        a = values("int32", (3, 5, 4), rng).astype(dtype)
    views = {"full": a, "transposed": a.transpose(2, 0, 1), "strided": a[1:, ::2, 1::2], "row": a[2, 3],
             "empty": a[:, :0], "scalar": a[0, 0, 0, ...], "expanded": np.broadcast_to(a[0, :1, :], (6, 4))}
    back = roundtrip(views, fmt)
    for name, v in views.items():
        got = back[name]
        assert got.dtype == np.dtype(dtype), name
        np.testing.assert_array_equal(got, np.reshape(v, got.shape), err_msg=name)
        assert got.shape == (v.shape or (1,)), name
    assert back["expanded"].strides[0] == 0  # a stride-0 view stays one
    shared = [back[k] for k in ("full", "transposed", "strided", "row", "expanded")]
    assert all(np.shares_memory(back["full"], v) for v in shared[1:])


def test_shared_storage_written_once_and_kept_shared():
    base = np.arange(1000, dtype=np.float32)
    obj = {"a": base.reshape(10, 100), "b": base[500:].reshape(25, 20).T, "c": base[::7]}
    data = encoded(obj)
    assert data.count(b"torch.FloatStorage") == 1
    assert len(data) < base.nbytes + 600
    back = roundtrip(obj)
    back["a"][7, 0] = -1.0
    assert back["b"][0, 10] == -1.0 and back["c"][100] == -1.0


def test_same_array_written_once_and_read_as_one_object():
    a = np.ones((2, 2))
    back = roundtrip({"x": a, "y": a, "z": [a]})
    assert back["x"] is back["y"] is back["z"][0]
    assert encoded({"x": a, "y": a}).count(b"torch.DoubleTensor") == 1


def test_cycles():
    d: dict = {"name": "d"}
    d["self"] = d
    lst: list = [1, 2]
    lst.append(lst)
    obj = TorchObject("nn.Sequential", 1, {"modules": []})
    obj.modules.append(obj)
    back = roundtrip({"d": d, "l": lst, "o": obj})
    assert back["d"]["self"] is back["d"]
    assert isinstance(back["l"], list) and back["l"][2] is back["l"] and back["l"][:2] == [1, 2]
    assert back["o"].modules[0] is back["o"]
    for fmt in ("ascii", "b32"):
        again = roundtrip(lst, fmt)
        assert again[2] is again


def test_scalars_strings_and_keys():
    obj = {"int": 7, "big": 2**53, "float": 2.5, "neg0": -0.0, "inf": math.inf, "t": True, "f": False,
           "utf8": "héllo ✓", "bytes": b"\xff\x00x", "empty": "", 3: "three", 1.5: "x",
           "np": np.float32(0.25), "npint": np.int16(-3), "nested": {"list": [1, [2, [3]]], "tuple": (1, 2)},
           "holes": [1, None, 3]}
    for fmt in FORMATS:
        back = roundtrip(obj, fmt)
        assert back["int"] == 7 and type(back["int"]) is int and back["big"] == 2**53
        assert back["float"] == 2.5 and back["inf"] == math.inf
        assert math.copysign(1, back["neg0"]) == -1 and type(back["neg0"]) is float
        assert back["t"] is True and back["f"] is False
        assert back["utf8"] == "héllo ✓" and back["bytes"] == b"\xff\x00x" and back["empty"] == ""
        assert back[3] == "three" and back[1.5] == "x"
        assert back["np"] == 0.25 and back["npint"] == -3
        assert back["nested"] == {"list": [1, [2, [3]]], "tuple": [1, 2]}
        assert back["holes"] == {1: 1, 3: 3}  # nil is not a Lua value: the hole stays a hole
    assert math.isnan(roundtrip(math.nan)) and math.isnan(roundtrip(math.nan, "ascii"))


def test_torch_objects():
    linear = TorchObject("nn.Linear", 1, {"weight": np.ones((2, 3), np.float32), "bias": np.zeros(2, np.float32)})
    seq = TorchObject("nn.Sequential", 1, {"modules": [linear, TorchObject("nn.ReLU", 1, {"inplace": False})]})
    back = roundtrip(seq)
    assert back.typename == "nn.Sequential" and back.version == 1
    assert back.modules[0]["weight"].shape == (2, 3) and back.modules[1].inplace is False
    gpu = roundtrip(TorchObject("nn.GPU", 1, {"_type": "torch.FloatTensor", "device": 2, "modules": [linear]}))
    assert gpu.device == 2 and gpu.modules[0].typename == "nn.Linear"
    with pytest.raises(AttributeError, match="no field 'nope'"):
        back.nope


def test_ascii_matches_torch7_bytes():
    """torch.save(..., 'ascii') of {1.5, 'ab', true, torch.DoubleTensor({1, 2})}, per THDiskFile.c."""
    expected = (b"3\n1\n4\n"                          # table #1 of 4 pairs
                b"1\n1\n1\n1.5\n"                     # [1] = 1.5
                b"1\n2\n2\n2\nab\n"                   # [2] = 'ab'
                b"1\n3\n5\n1\n"                       # [3] = true
                b"1\n4\n4\n2\n3\nV 1\n18\ntorch.DoubleTensor\n1\n2\n1\n1\n"
                b"4\n3\n3\nV 1\n19\ntorch.DoubleStorage\n2\n1 2\n")
    assert encoded([1.5, "ab", True, np.array([1.0, 2.0])], "ascii") == expected
    back = t7.read(io.BytesIO(expected), "ascii")
    assert back[:3] == [1.5, "ab", True] and back[3].tolist() == [1.0, 2.0]


def test_ascii_large_storages_parse_in_chunks(rng):
    a = rng.standard_normal(300_000)  # about 6 MB of text: several 1 MB chunks
    obj = [a.astype(np.float32), a, (a * 1e6).astype(np.int64), "after"]
    back = roundtrip(obj, "ascii")
    for want, got in zip(obj[:3], back[:3]):
        np.testing.assert_array_equal(got, want)
    assert back[3] == "after"


def test_b32_longs_are_four_bytes():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    long8, long4 = encoded(a, "binary"), encoded(a, "b32")
    # sizes, strides, offset and the storage size, then the 6 elements: 4 bytes saved on each
    assert len(long8) - len(long4) == 4 * (2 + 2 + 1 + 1 + 6)
    np.testing.assert_array_equal(t7.read(io.BytesIO(long4), "b32"), a)
    with pytest.raises(T7Error):
        t7.read(io.BytesIO(long4), "binary")
    with pytest.raises(T7Error, match="does not fit"):
        encoded(np.array([2**40]), "b32")


def test_unwritable_values(tmp_path):
    with pytest.raises(T7Error, match="cannot write a set"):
        t7.write(tmp_path / "bad.t7", [1, {2}])
    assert not (tmp_path / "bad.t7").exists()
    with pytest.raises(T7Error, match=r"cannot write a set \(at <\?>\.a\[2\]\)"):
        encoded({"a": [1, {1, 2}]})
    with pytest.raises(T7Error, match="not exactly a Lua number"):
        encoded(2**53 + 1)
    with pytest.raises(T7Error, match="dtype complex128"):
        encoded(np.zeros(2, complex))
    with pytest.raises(T7Error, match="use a numpy array"):
        encoded(TorchObject("torch.FloatTensor"))


def test_bulk_storage_read(tmp_path):
    """A 16 MB storage round-trips (its speed is measured in bench/t7_io.py, not here)."""
    a = np.random.default_rng(0).standard_normal(4_000_000).astype(np.float32)
    t7.write(tmp_path / "big.t7", a)
    np.testing.assert_array_equal(t7.read(tmp_path / "big.t7"), a)


# ---------------------------------------------------------------------------------------------
# hostile input: a T7Error, quickly, for everything

def i32(*v: int) -> bytes:
    return struct.pack(f"<{len(v)}i", *v)


def i64(*v: int) -> bytes:
    return struct.pack(f"<{len(v)}q", *v)


def s(b: bytes) -> bytes:
    return i32(len(b)) + b


def header(index: int, name: bytes) -> bytes:
    return i32(4, index) + s(b"V 1") + s(name)


def float_tensor(sizes, strides, offset, storage: bytes) -> bytes:
    return header(1, b"torch.FloatTensor") + i32(len(sizes)) + i64(*sizes) + i64(*strides) + i64(offset) + storage


def float_storage(n: int, index: int = 2, data: bool = True) -> bytes:
    return header(index, b"torch.FloatStorage") + i64(n) + (b"\0" * 4 * n if data else b"")


def assert_refused(data: bytes, match: str = "", fmt: str = "binary") -> None:
    """The reader refuses the file before allocating or looping over what its header claims
    (a claimed 2^40 elements would exhaust memory or hang; no timing bound, which load would break)."""
    with pytest.raises(T7Error, match=match):
        t7.read(io.BytesIO(data), fmt)


def sample_file() -> bytes:
    rng = np.random.default_rng(5)
    base = rng.standard_normal((4, 5)).astype(np.float32)
    module = TorchObject("nn.Linear", 1, {"weight": base, "bias": base[0], "name": "l"})
    obj = {"m": module, "ints": values("int64", (3,), rng), "half": np.float16([1, 2]), "s": "x", "n": 2.5,
           "list": [True, "a", {"k": module}]}
    return encoded(obj)


@needs_fixtures
@pytest.mark.parametrize("name", ["doubletensor.t7", "tds_hash.t7", "recursive_class.t7", "nngraph_node.t7",
                                  "gmodule_with_linear_identity.t7"])
def test_every_truncation_fails(name):
    data = (FIXTURES / name).read_bytes()
    step = 1 if len(data) < 2000 else 13
    for n in range(0, len(data), step):
        with pytest.raises(T7Error):
            t7.read(io.BytesIO(data[:n]), functions="skip")


def test_every_truncation_of_written_files_fails():
    data = sample_file()
    for n in range(len(data)):
        with pytest.raises(T7Error):
            t7.read(io.BytesIO(data[:n]))
    text = encoded([np.arange(5.0), {"a": np.int32([1, 2])}, "end"], "ascii")
    for n in range(len(text) - 1):  # (only the final newline is optional)
        with pytest.raises(T7Error):
            t7.read(io.BytesIO(text[:n]), "ascii")


@pytest.mark.parametrize("data,match", [
    (i32(3, 1, 2**31 - 1), "table size 2147483647 needs at least"),
    (i32(3, 1, -5), "negative table size"),
    (i32(2, 2**31 - 1), "string length 2147483647 needs"),
    (i32(2, -1), "negative string length"),
    (float_storage(2**62, index=1, data=False), "storage size 4611686018427387904 needs"),
    (header(1, b"torch.FloatStorage") + i64(-3), "negative storage size"),
    (header(1, b"tds.Vec") + i64(2**40), "tds size"),
    (header(1, b"torch.FloatTensor") + i32(10**6), "dimension count 1000000"),
    (header(1, b"torch.FloatTensor") + i32(-1), "dimension count -1"),
    (float_tensor([10], [1], 1, float_storage(2)), r"reaches element 10 of a storage of 2"),
    (float_tensor([2], [1], 2, float_storage(2)), r"reaches element 3 of a storage of 2"),
    (float_tensor([2], [-1], 1, float_storage(2)), r"reaches element 0 of a storage of 2"),
    (float_tensor([-2], [1], 1, float_storage(2)), "bad tensor sizes"),
    (float_tensor([2], [1], 0, float_storage(2)), "bad tensor storage offset 0"),
    (float_tensor([2**40, 2**40], [0, 0], 1, float_storage(1)), "too many elements"),
    (float_tensor([0], [2**60], 1, float_storage(1)), "bad tensor sizes .* or strides"),
    (float_tensor([3], [1], 1, i32(0)), "tensor of 3 elements has no storage"),
    (float_tensor([1], [1], 1, i32(3, 2, 0)), "storage has type code 3"),
    (float_tensor([1], [1], 1, i32(4, 1)), r"refers to object #1, not a float32 storage"),
    (float_tensor([1], [1], 1, header(2, b"torch.DoubleStorage") + i64(1) + b"\0" * 8), "is a torch.DoubleStorage"),
    (i32(9), "unknown type code 9 at byte 0"),
    (i32(4, 1) + s(b"V 1") + s(b"bad name\n"), "bad class name"),
    (i32(4, 1) + s(b"V 1") + s(b"x" * 2000), "bad class name"),
    (i32(3, 1, 1, 0, 1) + struct.pack("<d", 0), "table key is nil"),
    (header(1, b"nn.Linear") + i32(1) + struct.pack("<d", 3.0), "fields of a nn.Linear are not a table"),
    (i32(6, 2**31 - 1), "function bytecode size"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_hostile(data, match):
    assert_refused(data, match)


@pytest.mark.parametrize("prefix,dtype", [("Cuda", "float32"), ("CudaDouble", "float64"), ("CudaHalf", "float16"),
                                          ("CudaLong", "int64"), ("CudaByte", "uint8")])
def test_cuda_tensors_read_as_arrays(prefix, dtype):
    values_ = np.arange(6).astype(dtype)
    storage = header(2, f"torch.{prefix}Storage".encode()) + i64(6) + values_.tobytes()
    data = header(1, f"torch.{prefix}Tensor".encode()) + i32(2) + i64(2, 3) + i64(3, 1) + i64(1) + storage
    got = t7.read(io.BytesIO(data))
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, values_.reshape(2, 3))


def test_error_names_the_byte_and_the_path():
    data = encoded({"modules": [1, {"fn": "x"}]})
    bad = data.replace(b"\x02\x00\x00\x00\x01\x00\x00\x00x", b"\x02\x00\x00\x00\x10\x00\x00\x00x")
    with pytest.raises(T7Error, match=r"t7\.read: .* at byte \d+ \(in <\?>\.modules\[2\]\.fn\)"):
        t7.read(io.BytesIO(bad))
    fn = i32(3, 1, 1) + i32(2) + s(b"fn") + i32(8, 2) + s(b"\x1bLJ\x01rest")
    with pytest.raises(T7Error, match=r"<\?>\.fn is a Lua function \(LuaJIT 2\.0 bytecode\)"):
        t7.read(io.BytesIO(fn))


def test_references():
    # a tensor whose storage is the tensor itself
    assert_refused(float_tensor([1], [1], 1, i32(4, 1)), "not a float32 storage")
    # objects are numbered as written: an index that is neither known nor the next is refused
    assert_refused(i32(3, 1, 1) + i32(1) + struct.pack("<d", 1) + i32(3, 7),
                      r"bad reference 7: no object with that index has been read \(next new object: 2\)")
    # a function (skipped) can be referred to again: it reads as None both times
    fn = i32(8, 2) + s(b"\x1bLJ\x01") + i32(3, 3, 0)
    data = i32(3, 1, 2) + i32(1) + struct.pack("<d", 1) + fn + i32(1) + struct.pack("<d", 2) + i32(8, 2)
    assert t7.read(io.BytesIO(data), functions="skip") == {}


def test_deep_nesting():
    def nested(depth: int) -> bytes:
        return b"".join(i32(3, i + 1, 1, 1) + struct.pack("<d", 1) for i in range(depth)) + i32(0)

    deep = t7.read(io.BytesIO(nested(4000)))
    for _ in range(3999):
        deep = deep[0]
    assert deep == {}
    assert_refused(nested(5000), r"nested deeper than 4096 levels .*\.\.\.\(\d+ more levels\)\.\.\.")
    assert_refused(nested(200000), "nested deeper than 4096")
    lst: list = []
    inner = lst
    for _ in range(5000):
        inner.append([])
        inner = inner[0]
    with pytest.raises(T7Error, match="deeper than 4096"):
        encoded(lst)


def test_ascii_hostile():
    assert_refused(b"1\nabc\n", "not a number", "ascii")
    assert_refused(b"3\n1\n99999999999\n", "does not fit in 32 bits", "ascii")
    assert_refused(b"2\n1000\nab\n", "string length 1000", "ascii")
    assert_refused(b"4\n1\n3\nV 1\n18\ntorch.FloatStorage\n5\n1 2 x 4 5\n", "not a list of float32", "ascii")


def test_random_mutations_raise_only_t7error():
    seeds = [sample_file(), encoded([np.arange(6).reshape(2, 3), "x", {"y": [1, 2]}])]
    if FIXTURES.is_dir():
        seeds.append((FIXTURES / "gmodule_with_linear_identity.t7").read_bytes())
    rnd = random.Random(7)
    for i in range(1500):
        data = bytearray(seeds[i % len(seeds)])
        for _ in range(rnd.randint(1, 4)):
            j = rnd.randrange(len(data))
            data[j] = rnd.choice([0, 1, 0xFF, 0x7F, rnd.randrange(256)])
        try:
            t7.read(io.BytesIO(bytes(data)), functions="skip")
        except T7Error:
            pass


# ---------------------------------------------------------------------------------------------
# luabridge info

def model() -> TorchObject:
    rng = np.random.default_rng(3)

    def module(name: str, **tensors) -> TorchObject:
        fields = {"output": np.zeros(0, np.float32), "gradInput": np.zeros(0, np.float32), "train": True}
        return TorchObject(name, 1, {**fields, **tensors})

    conv = module("nn.SpatialConvolution", weight=rng.standard_normal((8, 3, 3, 3), np.float32),
                  bias=np.zeros(8, np.float32), gradWeight=np.zeros((8, 3, 3, 3), np.float32), kW=3)
    bn = module("nn.SpatialBatchNormalization", weight=np.ones(8, np.float32), bias=np.zeros(8, np.float32),
                running_mean=np.zeros(8, np.float32), running_var=np.ones(8, np.float32))
    inner = module("nn.Sequential", modules=[conv, bn, module("nn.ReLU")])
    linear = module("nn.Linear", weight=np.zeros((10, 8), np.float32), bias=np.zeros(10, np.float32))
    return module("nn.Sequential", modules=[inner, module("nn.View"), linear])


def test_info_model_tree(tmp_path, capsys):
    t7.write(tmp_path / "m.t7", {"model": model(), "epoch": 3})
    assert cli.main(["info", str(tmp_path / "m.t7")]) == 0
    out = capsys.readouterr().out
    lines = [line.strip() for line in out.splitlines()]
    assert "model: nn.Sequential" in lines and "epoch: 3" in lines
    assert "(1) nn.Sequential" in lines and "(1) nn.SpatialConvolution" in lines
    assert lines[lines.index("(1) nn.SpatialConvolution") + 1].split() == ["weight", "float32", "8x3x3x3"]
    assert ["running_mean", "float32", "8"] in [line.split() for line in lines]
    assert not any(line.startswith(("gradWeight", "output")) for line in lines)
    params = 8 * 27 + 8 + 8 + 8 + 80 + 10
    assert f"parameters: {params:,} + 16 in buffers (running_*) in 8 tensors (float32)" in lines


@needs_fixtures
def test_info_entry_point_on_fixture():
    r = subprocess.run([sys.executable, "-m", "luabridge", "info", str(FIXTURES / "gmodule_with_linear_identity.t7")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [line.strip() for line in r.stdout.splitlines()]
    assert lines[1:6] == ["nn.gModule", "(1) nn.Identity", "(2) nn.Identity", "(3) nn.Linear", "weight  float64  2x1"]
    assert lines[-1] == "parameters: 4 in 2 tensors (float64)"


def test_info_bad_file(tmp_path, capsys):
    (tmp_path / "bad.t7").write_bytes(b"\x03\x00\x00")
    assert cli.main(["info", str(tmp_path / "bad.t7")]) == 1
    assert "luabridge info: t7.read: file ends" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# files exchanged with the Lua side (torch.save / torch.load)

def lua_has_serialization(lua) -> bool:
    return bool(lua.eval("torch.save ~= nil and torch.load ~= nil"))


@pytest.fixture
def torchlua(lua):
    if not lua_has_serialization(lua):
        pytest.skip("torch.save/torch.load not there yet")
    return lua


@pytest.mark.parametrize("fmt", ["binary", "ascii"])
def test_python_written_files_load_in_lua(torchlua, tmp_path, fmt, rng):
    arrays = {dt: values(dt, (3, 4), rng) for dt in DTYPES}
    base = rng.standard_normal((4, 6)).astype(np.float32)
    obj = {"arrays": arrays, "a": base, "b": base.T, "c": base[1:, ::2], "list": [1, 2.5, "x", True]}
    obj["self"] = obj
    path = str(tmp_path / "py.t7")
    t7.write(path, obj, fmt)
    o = torchlua.eval("torch.load")(path, fmt)
    check = torchlua.eval("""function(o)
      local p = function(t) return torch.pointer(t:storage()) end
      return o.self == o, p(o.a) == p(o.b), p(o.a) == p(o.c), o.list[1], o.list[2], o.list[3], o.list[4]
    end""")
    assert check(o) == (True, True, True, 1, 2.5, "x", True)
    for dt, a in arrays.items():
        np.testing.assert_array_equal(torchlua.to_numpy(o.arrays[dt]), a, err_msg=dt)
    for name in "abc":
        np.testing.assert_array_equal(torchlua.to_numpy(o[name]), obj[name])


@pytest.mark.parametrize("fmt", ["binary", "ascii"])
def test_lua_written_files_read_in_python(torchlua, tmp_path, fmt):
    path = str(tmp_path / "lua.t7")
    torchlua.eval("""function(path, fmt)
      local types = {'Byte', 'Char', 'Short', 'Int', 'Long', 'Float', 'Double', 'Half'}
      local o = {types = {}}
      for i, name in ipairs(types) do
        o.types[name] = torch[name .. 'Tensor'](2, 3):copy(torch.range(1, 6):view(2, 3):mul(i))
      end
      local base = torch.DoubleTensor(4, 5):copy(torch.range(1, 20))
      o.base, o.t, o.n = base, base:t(), base:narrow(2, 2, 3)
      o.self = o
      o.list = {1.5, 'two', false}
      torch.save(path, o, fmt)
    end""")(path, fmt)
    o = t7.read(path, fmt)
    dtypes = dict(zip(["Byte", "Char", "Short", "Int", "Long", "Float", "Double", "Half"], DTYPES))
    for i, (name, dt) in enumerate(dtypes.items(), 1):
        assert o["types"][name].dtype == np.dtype(dt)
        np.testing.assert_array_equal(o["types"][name], (np.arange(1, 7) * i).reshape(2, 3).astype(dt))
    base = np.arange(1, 21, dtype=np.float64).reshape(4, 5)
    np.testing.assert_array_equal(o["t"], base.T)
    np.testing.assert_array_equal(o["n"], base[:, 1:4])
    assert np.shares_memory(o["base"], o["t"]) and np.shares_memory(o["base"], o["n"])
    assert o["self"] is o and o["list"] == [1.5, "two", False]


@pytest.mark.parametrize("fmt", ["binary", "ascii"])
def test_same_bytes_as_lua(torchlua, tmp_path, fmt):
    """A list (its pairs come in key order in Lua too) encodes to the same bytes both ways."""
    path = str(tmp_path / "lua.t7")
    torchlua.eval("""function(path, fmt)
      local t = torch.FloatTensor(2, 3):copy(torch.range(1, 6)):mul(0.1)
      torch.save(path, {1.25, 'text', true, t, t:t(), {7, 8}}, fmt)
    end""")(path, fmt)
    t = (np.arange(1, 7, dtype=np.float32).reshape(2, 3) * np.float32(0.1)).astype(np.float32)
    ours = encoded([1.25, "text", True, t, t.T, [7, 8]], fmt)
    assert ours == Path(path).read_bytes()


def test_binary_bytes_follow_torch7s_layout():
    """t7.write's binary output against bytes built here from torch7's layout (File.lua,
    generic/Tensor.c, generic/Storage.c): a transposed view refers back to its storage."""
    t = np.arange(1, 7, dtype=np.float32).reshape(2, 3)

    def string(b: bytes) -> bytes:
        return struct.pack("<ii", 2, len(b)) + b

    def head(index: int, cls: bytes) -> bytes:
        return struct.pack("<iii", 4, index, 3) + b"V 1" + struct.pack("<i", len(cls)) + cls

    number = lambda v: struct.pack("<id", 1, v)   # noqa: E731
    tensor = (head(2, b"torch.FloatTensor") + struct.pack("<i5q", 2, 2, 3, 3, 1, 1)
              + head(3, b"torch.FloatStorage") + struct.pack("<q6f", 6, *t.ravel()))
    view = head(4, b"torch.FloatTensor") + struct.pack("<i5q", 2, 3, 2, 1, 3, 1) + struct.pack("<ii", 4, 3)
    values = [number(1.25), string(b"text"), struct.pack("<ii", 5, 1), tensor, view]
    expected = struct.pack("<iii", 3, 1, 5) + b"".join(number(k + 1) + v for k, v in enumerate(values))
    assert encoded([1.25, "text", True, t, t.T]) == expected


def test_lua_model_through_python_and_back(torchlua, tmp_path):
    """A Lua nn model, read and rewritten by luabridge.t7, loads in Lua and computes the same."""
    first, second = str(tmp_path / "lua.t7"), str(tmp_path / "py.t7")
    make = torchlua.eval("""function(path)
      require 'nn'
      torch.manualSeed(1)
      local model = nn.Sequential():add(nn.Linear(5, 4)):add(nn.Tanh()):add(nn.Linear(4, 3))
      torch.save(path, model)
      return model:forward(torch.range(1, 5):div(5)):clone()
    end""")
    want = torchlua.to_numpy(make(first))
    model = t7.read(first)
    assert [m.typename for m in model.modules] == ["nn.Linear", "nn.Tanh", "nn.Linear"]
    assert model.modules[0].weight.shape == (4, 5) and model.modules[0].weight.dtype == np.float64
    t7.write(second, model)
    run = torchlua.eval("function(path) return torch.load(path):forward(torch.range(1, 5):div(5)) end")
    np.testing.assert_array_equal(torchlua.to_numpy(run(second)), want)
    x = np.arange(1, 6) / 5
    h = np.tanh(model.modules[0].weight @ x + model.modules[0].bias)
    np.testing.assert_allclose(model.modules[2].weight @ h + model.modules[2].bias, want, rtol=1e-12)


def test_negative_strides_read_as_reversed_views():
    # numpy's reversed views reach Lua with negative strides, and torch.save keeps them.
    data = float_tensor([3], [-1], 3, float_storage(3))
    stored = np.frombuffer(data[-12:], "<f4")
    got = t7.read(io.BytesIO(data))
    assert got.strides == (-4,) and np.array_equal(got, stored[::-1])
    reversed_view = np.arange(5.0)[::-1]
    assert np.array_equal(roundtrip(reversed_view), np.arange(5.0)[::-1])


def test_both_readers_refuse_the_same_class_names_and_ranks(tmp_path):
    import luabridge
    luabridge.require("torch")
    de = luabridge.eval("""function(s)
      return (pcall(torch.deserialize, s, 'binary', {unknownClasses = 'table'})) end""")

    def py_ok(data: bytes) -> bool:
        try:
            t7.read(io.BytesIO(data), unknownClasses="table")
            return True
        except T7Error:
            return False

    for name, good in [(b"x" * 256, True), (b"x" * 257, False), (b"nn.Lin ear", False), (b"nn.Linear$", False)]:
        data = i32(4, 1) + s(b"V 1") + s(name) + i32(3, 2, 0)
        assert py_ok(data) is good and de(data) is good, name
    deep = float_tensor([1] * 65, [1] * 65, 1, float_storage(1))
    assert not py_ok(deep) and not de(deep)
