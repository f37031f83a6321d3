"""Torch7 `.t7` files in pure Python: `read` and `write`, no Lua involved.

    from luabridge import t7
    model = t7.read("model.t7")            # TorchObject('nn.Sequential', ...)
    w = model.modules[0].weight            # numpy array, a view of its storage
    t7.write("copy.t7", model)             # binary; also 'ascii', 'b32', 'b64'

Values read: nil -> None; numbers -> int when integral (-0.0 stays float), else float;
strings -> str (utf-8) or bytes when not utf-8; tables -> list when their keys are exactly 1..n
(n >= 1; list[0] holds key 1), else dict (keys that Python cannot hash, such as tables and
tensors, are wrapped in `Key`); pairs whose value is nil are dropped, as in Lua; tensors ->
numpy arrays that are views of their storage's array (so tensors sharing a storage share
memory); a storage -> a 1-D numpy array; `torch.Cuda*` tensors -> arrays of the matching dtype;
tds.Hash -> dict, tds.Vec -> list; any other class -> `TorchObject`. Lua functions are refused
by default (functions='skip' reads them as None, functions='mark' as a `LuaFunction` marker; no
code is ever loaded or run). The limits, type codes and class-name rule are
the Lua reader's, from lua/torch/t7format.lua (see `t7format`). Every problem is a `T7Error` naming what,
the byte offset and where in the object it sits; sizes and counts are checked against the
bytes left before anything is allocated, and nesting is bounded (MAX_DEPTH).

Values written: None, bool, int, float, str, bytes, dict, list/tuple (keys 1..n), numpy arrays
and scalars, TorchObject, Key. Arrays that are views of one base array are written as tensors
sharing one storage (offset and strides kept); every object is written once and referenced after.
A path is replaced only once the whole object is written (see `replacing`): a failed write
leaves the old file, or none.
"""
from __future__ import annotations

import contextlib
import io
import itertools
import math
import os
import re
import stat
import struct
from types import GeneratorType
from typing import Any, BinaryIO, Iterator, Optional, Union

import numpy as np

from .dtypes import CUDA_NAMES, DTYPES
from .t7format import CLASS_NAME as _CLASS_NAME
from .t7format import HEAD_BYTES, MAX_DEPTH, MAX_DIMS, MAX_INDEX, MAX_TOKEN, TYPES, bytecode_kind, describe

__all__ = ["read", "write", "replacing", "T7Error", "TorchObject", "Key", "LuaFunction", "MAX_DEPTH",
           "TENSOR_CLASSES", "STORAGE_CLASSES"]

NIL, NUMBER, STRING, TABLE, TORCH, BOOLEAN, FUNCTION, LEGACY_RECUR_FUNCTION, RECUR_FUNCTION = (TYPES[name] for name in (
    "NIL", "NUMBER", "STRING", "TABLE", "TORCH", "BOOLEAN", "FUNCTION", "LEGACY_RECUR_FUNCTION", "RECUR_FUNCTION"))

# element type name -> its dtype in a .t7 file (little-endian)
_ELEMENTS = {name: dtype.newbyteorder("<") for name, dtype in DTYPES.items()}


def _class_names(kind: str) -> dict[str, np.dtype]:
    """torch.<T>Tensor / torch.Cuda<T>Tensor (cutorch's float type is plain torch.CudaTensor)."""
    names = {}
    for name, dtype in _ELEMENTS.items():
        names[f"torch.{name}{kind}"] = dtype
        names[f"torch.{CUDA_NAMES[name]}{kind}"] = dtype
    return names


TENSOR_CLASSES = _class_names("Tensor")
STORAGE_CLASSES = _class_names("Storage")
_CPU_NAME = {dtype: name for name, dtype in _ELEMENTS.items()}
# dtypes written after a conversion (a copy): the nearest Torch7 type that holds every value
_WIDEN = {np.dtype(np.bool_): np.dtype("u1"), np.dtype(np.uint16): np.dtype("<i4"),
          np.dtype(np.uint32): np.dtype("<i8")}

_INT = struct.Struct("<i")
_LONG = struct.Struct("<q")
_DOUBLE = struct.Struct("<d")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_VERSION = re.compile(rb"V (.*)\Z", re.S)
_SPACE = re.compile(rb"\s*")
_CHUNK = 1 << 20  # ascii numbers are parsed this many bytes at a time
_WINDOW = 1 << 16  # binary files are read ahead this many bytes at a time for small items
_TOKEN = re.compile(rb"\S+")
_NOT_IN_NUMBERS = re.compile(rb"[\x00_]")
_INT_TOKEN = re.compile(rb"[+-]?[0-9]+\Z")
_FLOAT_TOKEN = re.compile(rb"[+-]?([0-9]+\.?[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?"
                          rb"|inf(inity)?|nan)\Z", re.I)


class T7Error(ValueError):
    """A .t7 file (or value to write) that cannot be read (written)."""


class TorchObject:
    """An instance of a Torch class: `typename` ('nn.Linear'), `version` and its `fields` dict.

    Fields are reached as attributes (obj.weight) or items (obj['weight']); `typename`,
    `version` and `fields` themselves are attributes of the object, not fields.
    """

    def __init__(self, typename: str, version: Union[int, float] = 0, fields: Optional[dict] = None) -> None:
        object.__setattr__(self, "typename", typename)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "fields", {} if fields is None else fields)

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__.get("fields")
        if fields is None or name.startswith("__") or name not in fields:
            raise AttributeError(f"{self.__dict__.get('typename', 'TorchObject')} object has no field {name!r}")
        return fields[name]

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("typename", "version", "fields"):
            object.__setattr__(self, name, value)
        else:
            self.fields[name] = value

    def __getitem__(self, key: Any) -> Any:
        return self.fields[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.fields[key] = value

    def __contains__(self, key: Any) -> bool:
        return key in self.fields

    def get(self, key: Any, default: Any = None) -> Any:
        return self.fields.get(key, default)

    def keys(self):
        return self.fields.keys()

    def items(self):
        return self.fields.items()

    def __dir__(self):
        return [*super().__dir__(), *(k for k in self.fields if isinstance(k, str))]

    def __repr__(self) -> str:
        names = ", ".join(str(k) for k in itertools.islice(self.fields, 12))
        more = ", ..." if len(self.fields) > 12 else ""
        return f"TorchObject({self.typename!r}, version={self.version}, fields=[{names}{more}])"


class LuaFunction:
    """A Lua function read with functions='mark': what its bytecode is (`kind`: "LuaJIT 2.1
    bytecode", ...); the bytecode is neither kept nor loaded."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"<Lua function ({self.kind}), not loaded>"


class Key:
    """A dict key standing for a value Python cannot hash (a table or tensor used as a Lua key).

    Hashed and compared by identity; `value` is the table (dict/list) or array."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Key(<{type(self.value).__name__} at {id(self.value):#x}>)"


class _Bad(Exception):
    """Internal: what went wrong and the byte offset; the reader adds where in the object."""

    def __init__(self, message: str, pos: int, located: bool = False) -> None:
        super().__init__(message)
        self.pos = pos
        self.located = located  # the message already says where


# ---------------------------------------------------------------------------------------------
# reading: sources (binary and ascii encodings of the same primitives)

class _Source:
    """Where the reader's primitives come from; `pos` is the offset of the next byte."""

    pos: int
    size: int
    head: bytes  # the first bytes (what a file that is not a .t7 looks like)

    def left(self) -> int:
        return self.size - self.pos

    def check(self, n: int, width: int, what: str) -> None:
        """n items of at least `width` bytes each must fit in what is left."""
        if n < 0:
            raise _Bad(f"negative {what} {n}", self.pos)
        if n * width > self.left():
            raise _Bad(f"{what} {n} needs at least {n * width} bytes, {self.left()} left", self.pos)


class _Binary(_Source):
    """The binary encoding: little-endian int32, long (8 bytes, or 4 for 'b32'), double, raw.

    Small items are decoded from a window of the file read ahead (_WINDOW bytes at a time);
    a large storage is read straight into its array (one readinto)."""

    min_object = 4  # bytes: the smallest object is its type code

    def __init__(self, f: BinaryIO, size: int, long_size: int) -> None:
        self.f = f
        self.start = f.tell()  # the file offset of buf[0]
        self.size = size
        self.buf = b""
        self.at = 0            # the next byte in buf
        self.long_struct = _LONG if long_size == 8 else _INT
        self.long_dtype = np.dtype("<i8" if long_size == 8 else "<i4")

    @property
    def pos(self) -> int:
        return self.start + self.at

    def _fill(self, n: int, what: str) -> None:
        """Makes n bytes available at buf[at:]."""
        rest = self.buf[self.at:]
        self.start += self.at
        self.buf = rest + self.f.read(max(n - len(rest), _WINDOW))
        self.at = 0
        if len(self.buf) < n:
            raise _Bad(f"file ends while reading {what} ({n} bytes needed, {len(self.buf)} left)", self.pos)

    def int(self, what: str) -> int:
        at = self.at
        if at + 4 > len(self.buf):
            self._fill(4, what)
            at = 0
        self.at = at + 4
        return _INT.unpack_from(self.buf, at)[0]

    def long(self, what: str) -> int:
        return self._unpack(self.long_struct, what)

    def double(self, what: str) -> float:
        return self._unpack(_DOUBLE, what)

    def _unpack(self, unpacker: struct.Struct, what: str) -> Any:
        at = self.at
        if at + unpacker.size > len(self.buf):
            self._fill(unpacker.size, what)
            at = 0
        self.at = at + unpacker.size
        return unpacker.unpack_from(self.buf, at)[0]

    def chars(self, n: int, what: str) -> bytes:
        if self.at + n > len(self.buf):
            self._fill(n, what)
        self.at += n
        return self.buf[self.at - n:self.at]

    def longs(self, n: int, what: str) -> list[int]:
        return np.frombuffer(self.chars(n * self.long_dtype.itemsize, what), self.long_dtype).tolist()

    def array(self, dtype: np.dtype, n: int, what: str) -> np.ndarray:
        """n elements: what the window holds, the rest in one bulk read (Long elements are 4 bytes
        in 'b32' files)."""
        file_dtype = self.long_dtype if dtype == np.dtype("<i8") else dtype
        self.check(n, file_dtype.itemsize, what)
        out = np.empty(n, file_dtype)
        raw = memoryview(out).cast("B")
        head = min(len(raw), len(self.buf) - self.at)
        raw[:head] = self.buf[self.at:self.at + head]
        self.at += head
        if head < len(raw):
            got = head + _read_into(self.f, raw[head:])
            self.start, self.buf, self.at = self.start + self.at + got - head, b"", 0
            if got != len(raw):
                raise _Bad(f"file ends while reading {what} ({len(raw)} bytes needed, {got} read)", self.pos)
        return out if file_dtype == dtype else out.astype(dtype)


def _read_into(f: BinaryIO, view: memoryview) -> int:
    """Fills view from f (readinto when f has it); the number of bytes read."""
    readinto = getattr(f, "readinto", None)
    if readinto is None:
        data = f.read(len(view))
        view[:len(data)] = data
        return len(data)
    got = 0
    while got < len(view):
        n = readinto(view[got:])
        if not n:
            break
        got += n
    return got


class _Ascii(_Source):
    """The ascii encoding: whitespace-separated numbers ("%d", "%.17g"), a newline ending each
    write; chars raw, then a newline."""

    min_object = 2  # "0\n"
    buf, at = b"", 0  # (an empty window: the reader's binary fast path never applies)

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.size = len(data)

    def _end_of_write(self) -> None:
        if self.data[self.pos:self.pos + 1] == b"\n":
            self.pos += 1

    def _token(self, what: str) -> bytes:
        start = _SPACE.match(self.data, self.pos).end()
        m = _TOKEN.match(self.data, start)
        if m is None:
            raise _Bad(f"file ends while reading {what}", start)
        if m.end() - start > MAX_TOKEN:
            raise _Bad(f"{what}: a number longer than {MAX_TOKEN} characters", start)
        self.pos = m.end()
        return m.group()

    def _tokens(self, n: int, what: str) -> Iterator[list[bytes]]:
        """n tokens, in lists of those found in about _CHUNK bytes (bounded memory)."""
        data = self.data
        while n:
            pos = _SPACE.match(data, self.pos).end()
            if pos >= len(data):
                raise _Bad(f"file ends while reading {what} ({n} values short)", pos)
            end = min(pos + _CHUNK, len(data))
            cut = _TOKEN.match(data, end)  # do not split a token
            end = cut.end() if cut else end
            parts = data[pos:end].split()
            if len(parts) > n:
                parts = []
                for m in itertools.islice(_TOKEN.finditer(data, pos, end), n):
                    parts.append(m.group())
                    end = m.end()
            if _NOT_IN_NUMBERS.search(data, pos, end):  # (numpy's parsers take "1_0" and "1\0")
                raise _Bad(f"{what}: not a list of numbers", pos)
            if parts and max(map(len, parts)) > MAX_TOKEN:
                raise _Bad(f"{what}: a number longer than {MAX_TOKEN} characters", pos)
            self.pos = end
            n -= len(parts)
            yield parts

    def _integer(self, token: bytes, bits: int, what: str) -> int:
        if not _INT_TOKEN.match(token):
            raise _Bad(f"{what}: {token[:40]!r} is not an integer", self.pos)
        value = int(token)
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise _Bad(f"{what}: {value} does not fit in {bits} bits", self.pos)
        return value

    def int(self, what: str) -> int:
        value = self._integer(self._token(what), 32, what)
        self._end_of_write()
        return value

    def long(self, what: str) -> int:
        value = self._integer(self._token(what), 64, what)
        self._end_of_write()
        return value

    def double(self, what: str) -> float:
        token = self._token(what)
        if not _FLOAT_TOKEN.match(token):
            raise _Bad(f"{what}: {token[:40]!r} is not a number", self.pos)
        self._end_of_write()
        return float(token)

    def chars(self, n: int, what: str) -> bytes:
        if n > self.left():
            raise _Bad(f"file ends while reading {what} ({n} bytes needed, {self.left()} left)", self.pos)
        data = self.data[self.pos:self.pos + n]
        self.pos += n
        if n:
            self._end_of_write()
        return data

    def longs(self, n: int, what: str) -> list[int]:
        self.check(n, 1, what)
        values = [self._integer(t, 64, what) for part in self._tokens(n, what) for t in part]
        if n:
            self._end_of_write()
        return values

    def array(self, dtype: np.dtype, n: int, what: str) -> np.ndarray:
        self.check(n, 1, what)
        if dtype.itemsize == 1:
            return np.frombuffer(self.chars(n, what), dtype).copy()
        try:
            parts = [np.array(tokens, dtype=bytes).astype(np.float64 if dtype.kind == "f" else dtype)
                     for tokens in self._tokens(n, what)]
        except (ValueError, OverflowError) as e:
            raise _Bad(f"{what}: not a list of {dtype} numbers ({e})", self.pos) from None
        if n:
            self._end_of_write()
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.empty(0, dtype)


# ---------------------------------------------------------------------------------------------
# reading: objects

_PENDING = object()  # holds a tensor's index while its storage is read (which may not take it)
# the kind of object a type code stands for (a reference's code must be its object's)
_KIND = {TABLE: TABLE, TORCH: TORCH, LEGACY_RECUR_FUNCTION: RECUR_FUNCTION, RECUR_FUNCTION: RECUR_FUNCTION}


def _number(x: float) -> Union[int, float]:
    if x.is_integer() and not (x == 0 and math.copysign(1.0, x) < 0):
        return int(x)
    return x


def _text(raw: bytes) -> Union[str, bytes]:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _label(key: Any) -> str:
    """How a key shows in a path: .name, [3], ['a b']."""
    if isinstance(key, str):
        return f".{key}" if _IDENTIFIER.match(key) else f"[{key!r}]"
    if isinstance(key, (int, float)):
        return f"[{key}]"
    return f"[<{type(key).__name__}>]"


class _Mark(str):
    """A path label that is not a key: a position inside an object."""


_KEY, _FIELDS, _UPVALUES, _HEADER = _Mark("{key}"), _Mark(""), _Mark("(upvalues)"), _Mark("(header)")


def _where(labels: list[Any]) -> str:
    """<?>.modules[3].fn, or 'a key of <?>.x' (torch7 names the root <?>); long paths keep their
    two ends. A label is the key whose value is being read, or a _Mark."""
    is_key = bool(labels) and labels[-1] is _KEY
    parts = [label if type(label) is _Mark else _label(label) for label in (labels[:-1] if is_key else labels)]
    parts = [part for part in parts if part]
    if len(parts) > 24:
        parts = [*parts[:8], f"...({len(parts) - 16} more levels)...", *parts[-8:]]
    path = "<?>" + "".join(parts)
    return f"a key of {path}" if is_key else path


def _hashable(key: Any) -> Any:
    return Key(key) if isinstance(key, (dict, list, np.ndarray)) else key


class _Reader:
    def __init__(self, src: _Source, unknown_classes: str, functions: str) -> None:
        self.src = src
        self.table_mode = unknown_classes == "table"
        self.refuse_classes = unknown_classes == "error"
        self.functions = functions
        self.memo: dict[int, Any] = {}
        self.count = 0                                  # objects read
        self.kinds: dict[int, int] = {}                 # index -> its object's kind (_KIND)
        self.storage_dtype: dict[int, np.dtype] = {}   # index -> dtype of the storages read
        self.open_tables: set[int] = set()
        self.early: set[int] = set()                    # tables referred to while being read
        self.replaced: dict[int, tuple[dict, list]] = {}
        self.labels: list[Any] = []  # per open container: the key (or _Mark) being read
        self.versions: dict[bytes, Union[int, float]] = {}  # b"V 1" -> 1

    def where(self) -> str:
        return _where(self.labels)

    def run(self) -> Any:
        try:
            root = self._walk()
        except _Bad as e:
            looks = describe(self.src.head, isinstance(self.src, _Ascii))
            if looks:
                raise T7Error(f"t7.read: not a .t7 file: it looks like {looks}") from None
            where = "" if e.located else f" (in {self.where()})"
            raise T7Error(f"t7.read: {e} at byte {e.pos}{where}") from None
        if self.replaced:
            root = self._fix_placeholders(root)
        return root

    def _walk(self) -> Any:
        """Depth-first without Python recursion. An object holding others is read by a generator,
        which reads plain values itself, yields each container it meets (another generator) to be
        run here, and gets its value back; it keeps labels[-1] at the key it is reading."""
        stack: list[GeneratorType] = []
        labels = self.labels
        value = self._object()
        while True:
            if type(value) is GeneratorType:
                if len(stack) >= MAX_DEPTH:
                    raise _Bad(f"objects nested deeper than {MAX_DEPTH} levels", self.src.pos)
                stack.append(value)
                labels.append(_FIELDS)
                value = None
            elif not stack:
                return value
            try:
                value = stack[-1].send(value)
            except StopIteration as done:
                stack.pop()
                labels.pop()
                value = done.value

    def _object(self) -> Any:
        src = self.src
        at = src.at
        if at + 12 <= len(src.buf):  # (binary, inline: the code and a number or an index)
            code = _INT.unpack_from(src.buf, at)[0]
            if code == NUMBER:
                src.at = at + 12
                return _number(_DOUBLE.unpack_from(src.buf, at + 4)[0])
            src.at = at + 4
        else:
            code = src.int("a type code")
        if code == NUMBER:
            return _number(src.double("a number"))
        if code == STRING:
            return _text(self._string("a string"))
        if code == NIL:
            return None
        if code == BOOLEAN:
            return src.int("a boolean") == 1
        if code in (TABLE, TORCH, LEGACY_RECUR_FUNCTION, RECUR_FUNCTION):
            index = src.int("an object index")
            if index in self.memo:
                return self._reference(index, code)
            self._new(index, code)
            if code == TABLE:
                return self._table(index)
            if code == TORCH:
                return self._torch(index)
            return self._function(index)
        if code == FUNCTION:
            return self._function(None)
        raise _Bad(f"unknown type code {code}", src.pos - 4)

    def _string(self, what: str) -> bytes:
        n = self.src.int("a string length")
        self.src.check(n, 1, "string length")
        return self.src.chars(n, what)

    def _key(self, key: Any) -> Any:
        """A table key other than a str or int: never nil or NaN (as in Lua); hashable."""
        if key is None or (isinstance(key, float) and math.isnan(key)):
            raise _Bad(f"table key is {'nil' if key is None else 'NaN'}", self.src.pos)
        return _hashable(key)

    def _new(self, index: int, code: int) -> None:
        """Writers number objects in the order they write them: a new one takes the next number."""
        if index != self.count + 1:
            raise _Bad(f"bad reference {index}: no object with that index has been read "
                       f"(next new object: {self.count + 1})", self.src.pos)
        self.count = index
        self.kinds[index] = _KIND[code]

    def _reference(self, index: int, code: int) -> Any:
        if self.kinds[index] != _KIND[code]:
            raise _Bad(f"bad reference {index}: type code {code}, but that object has type code "
                       f"{self.kinds[index]}", self.src.pos)
        value = self.memo[index]
        if index in self.open_tables:
            self.early.add(index)
        return value

    def _table(self, index: int):
        d: dict = {}
        self.memo[index] = d
        self.open_tables.add(index)
        n = self.src.int("a table size")
        self.src.check(n, 2 * self.src.min_object, "table size")
        read, labels = self._object, self.labels
        for _ in range(n):
            labels[-1] = _KEY
            key = read()
            if type(key) is GeneratorType:
                key = yield key
            labels[-1] = key
            value = read()
            if type(value) is GeneratorType:
                value = yield value
            if value is not None:
                d[key if type(key) is str or type(key) is int else self._key(key)] = value
            else:
                self._key(key)  # (a nil or NaN key is refused, also with a nil value, as in Lua)
        self.open_tables.discard(index)
        n = len(d)
        if n == 0 or not all(type(k) is int and 0 < k <= n for k in d):
            return d
        items = [d[i] for i in range(1, n + 1)]
        self.memo[index] = items
        if index in self.early:
            self.replaced[id(d)] = (d, items)
        return items

    def _function(self, index: Optional[int]):
        src = self.src
        start = src.pos
        n = src.int("the size of a function's bytecode")
        src.check(n, 1, "function bytecode size")
        head = src.chars(n, "function bytecode")[:5]  # (whole: ascii ends a string after its bytes)
        kind, loadable = bytecode_kind(head)
        if self.functions == "error":
            how = ("or, for a trusted file, luabridge.load(path, functions='load') runs it in Lua" if loadable
                   else "this runtime (LuaJIT 2.1, GC64) cannot load it anyway")
            raise _Bad(f"{self.where()} is a Lua function ({kind}): luabridge.t7 does not run code from files; "
                       f"pass functions='skip' to read it as None, or rebuild the function in code after loading; "
                       f"{how}", start, located=True)
        value = LuaFunction(kind) if self.functions == "mark" else None
        if index is not None:
            self.memo[index] = value
        self.labels[-1] = _UPVALUES
        upvalues = self._object()
        if type(upvalues) is GeneratorType:
            yield upvalues
        return value

    def _class_header(self) -> tuple[str, Union[int, float]]:
        """A torch object's class name and version."""
        version_text = self._string("a class version")
        version = self.versions.get(version_text)
        if version is None:
            match = _VERSION.match(version_text)
            version = _parse_number(match.group(1)) if match else None
            if version is None:  # files from before versioning: the class name, version 0
                return self._class_name(version_text), 0
            self.versions[version_text] = version
        return self._class_name(self._string("a class name")), version

    def _torch(self, index: int) -> Any:
        name, version = self._class_header()
        if name in TENSOR_CLASSES:
            self.memo[index] = _PENDING
            self.memo[index] = value = self._tensor(TENSOR_CLASSES[name])
            return value
        if name in STORAGE_CLASSES:
            self.memo[index] = value = self._storage(STORAGE_CLASSES[name])
            self.storage_dtype[index] = value.dtype
            return value
        if name == "tds.Hash":
            return self._tds(index, {})
        if name == "tds.Vec":
            return self._tds(index, [])
        if self.refuse_classes:
            raise _Bad(f"unknown Torch class <{name}>", self.src.pos)
        return self._instance(index, name, version)

    def _class_name(self, raw: bytes) -> str:
        if not _CLASS_NAME.match(raw):
            raise _Bad(f"bad class name {raw[:60]!r}", self.src.pos)
        return raw.decode("ascii")

    def _instance(self, index: int, name: str, version: Union[int, float]):
        obj: Any = {"__typename": name, "__version": version} if self.table_mode else TorchObject(name, version)
        self.memo[index] = obj
        if name == "nn.GPU":  # nn.GPU writes a header table ({type, device}) before its fields
            self.labels[-1] = _HEADER
            header = self._object()
            if type(header) is GeneratorType:
                yield header
            self.labels[-1] = _FIELDS
        fields = self._object()
        if type(fields) is GeneratorType:
            fields = yield fields
        if isinstance(fields, list):
            fields = dict(enumerate(fields, 1))
        elif not isinstance(fields, dict):
            raise _Bad(f"the fields of a {name} are not a table but {type(fields).__name__}", self.src.pos)
        if self.table_mode:
            obj.update({k: v for k, v in fields.items() if k not in ("__typename", "__version")})
        else:
            obj.fields = fields
        return obj

    def _tds(self, index: int, container: Union[dict, list]):
        self.memo[index] = container
        n = self.src.long("a tds size")
        is_hash = isinstance(container, dict)
        self.src.check(n, (2 if is_hash else 1) * self.src.min_object, "tds size")
        read, labels = self._object, self.labels
        for i in range(n):
            labels[-1] = _KEY if is_hash else i + 1
            key = read()
            if type(key) is GeneratorType:
                key = yield key
            if not is_hash:
                container.append(key)
                continue
            labels[-1] = key
            value = read()
            if type(value) is GeneratorType:
                value = yield value
            key = self._key(key)
            if value is not None:
                container[key] = value
        return container

    def _storage(self, dtype: np.dtype) -> np.ndarray:
        n = self.src.long("a storage size")
        return self.src.array(dtype, n, "storage size")

    def _tensor(self, dtype: np.dtype) -> np.ndarray:
        src = self.src
        ndim = src.int("a tensor's dimension count")
        if not 0 <= ndim <= MAX_DIMS:
            raise _Bad(f"tensor dimension count {ndim} (0..{MAX_DIMS} expected)", src.pos)
        src.check(2 * ndim, 1, "tensor size and stride count")
        sizes = src.longs(ndim, "tensor sizes")
        strides = src.longs(ndim, "tensor strides")
        offset = src.long("a tensor offset") - 1
        storage = self._tensor_storage(dtype)
        return self._view(storage, dtype, sizes, strides, offset)

    def _tensor_storage(self, dtype: np.dtype) -> Optional[np.ndarray]:
        """A tensor's storage: nil, a storage read before, or a new storage of its element type."""
        src = self.src
        code = src.int("a tensor's storage type code")
        if code == NIL:
            return None
        if code != TORCH:
            raise _Bad(f"a tensor's storage has type code {code}", src.pos - 4)
        index = src.int("an object index")
        if index in self.memo:
            # (not `!=` alone: numpy takes None for float64)
            if self.storage_dtype.get(index, "none") != dtype:
                raise _Bad(f"a {dtype} tensor refers to object #{index}, not a {dtype} storage", src.pos)
            return self.memo[index]
        self._new(index, TORCH)
        name, _ = self._class_header()
        if STORAGE_CLASSES.get(name, "none") != dtype:
            raise _Bad(f"a {dtype} tensor's storage is a {name}, not a {dtype} storage", src.pos)
        self.memo[index] = value = self._storage(dtype)
        self.storage_dtype[index] = dtype
        return value

    def _view(self, storage: Optional[np.ndarray], dtype: np.dtype, sizes: list[int], strides: list[int],
              offset: int) -> np.ndarray:
        pos = self.src.pos
        # the bounds of the Lua reader (serialization.lua): sizes, strides, offset, element count
        if not all(0 <= n <= MAX_INDEX for n in sizes) or not all(abs(s) <= MAX_INDEX for s in strides):
            raise _Bad(f"bad tensor sizes {sizes} or strides {strides} (at most {MAX_INDEX} each)", pos)
        if not 0 <= offset < MAX_INDEX:
            raise _Bad(f"bad tensor storage offset {offset + 1}", pos)
        numel = math.prod(sizes)
        if numel > MAX_INDEX:
            raise _Bad(f"tensor of sizes {sizes} has too many elements", pos)
        if not sizes:
            return storage[:0] if storage is not None else np.empty(0, dtype)
        # Negative strides are allowed (luabridge writes numpy's reversed views that way) as long as
        # every element reached stays inside the storage, as the Lua reader checks.
        if numel == 0:
            try:
                return np.empty(sizes, dtype) if storage is None else storage[:0].reshape(sizes)
            except ValueError as e:
                raise _Bad(f"empty tensor of sizes {sizes}: {e}", pos) from None
        if storage is None:
            raise _Bad(f"a tensor of {numel} elements has no storage", pos)
        first = offset + sum((n - 1) * s for n, s in zip(sizes, strides) if s < 0)
        last = offset + sum((n - 1) * s for n, s in zip(sizes, strides) if s > 0)
        if first < 0 or last >= len(storage):
            raise _Bad(f"tensor (sizes {sizes}, strides {strides}, offset {offset + 1}) reaches element "
                       f"{(first if first < 0 else last) + 1} of a storage of {len(storage)}", pos)
        if numel * dtype.itemsize >= 1 << 62:
            raise _Bad(f"tensor of {numel} elements is too large", pos)
        item = dtype.itemsize
        try:
            return np.ndarray(tuple(sizes), dtype, buffer=storage, offset=offset * item,
                              strides=tuple(s * item for s in strides))
        except (ValueError, OverflowError) as e:
            raise _Bad(f"tensor (sizes {sizes}, strides {strides}) is not a view numpy can make: {e}", pos) from None

    def _fix_placeholders(self, root: Any) -> Any:
        """Tables found to be lists once read, but referred to (cyclically) while being read,
        were handed out as dicts: swap those references for the lists."""
        swap = {k: lst for k, (_, lst) in self.replaced.items()}

        def fix_dict(d: dict) -> None:
            for k, v in list(d.items()):
                if isinstance(k, Key) and id(k.value) in swap:
                    k.value = swap[id(k.value)]
                if id(v) in swap:
                    d[k] = swap[id(v)]

        for obj in list(self.memo.values()):
            if isinstance(obj, dict):
                fix_dict(obj)
            elif isinstance(obj, list):
                obj[:] = [swap.get(id(v), v) for v in obj]
            elif isinstance(obj, TorchObject):
                fix_dict(obj.fields)
        return swap.get(id(root), root)


def _parse_number(text: bytes) -> Union[int, float, None]:
    """A class version: a finite number written as the ascii format writes them (as File.lua reads it)."""
    if not _FLOAT_TOKEN.match(text):
        return None
    value = float(text)
    return _number(value) if math.isfinite(value) else None


def _open_source(f: BinaryIO, fmt: str) -> _Source:
    if fmt == "ascii":
        src: _Source = _Ascii(f.read())
        src.head = src.data[:HEAD_BYTES]
        return src
    if not (hasattr(f, "seek") and f.seekable()):
        f = io.BytesIO(f.read())
    start = f.tell()
    head = f.read(HEAD_BYTES)
    size = f.seek(0, io.SEEK_END)
    f.seek(start)
    src = _Binary(f, size, 4 if fmt == "b32" else 8)
    src.head = head
    return src


FORMATS = ("binary", "ascii", "b32", "b64")


def read(source: Union[str, os.PathLike, BinaryIO], format: str = "binary", *, unknownClasses: str = "object",
         functions: str = "error") -> Any:
    """Read one object from a .t7 file (a path or a binary file object).

    format: 'binary' (long = 8 bytes), 'b32' (long = 4 bytes, as torch.save's 'b32'), 'b64', 'ascii'.
    unknownClasses: 'object' (default: a TorchObject), 'table' (a dict with '__typename' and
    '__version' added to the fields) or 'error' (only tensors, storages and tds classes allowed).
    functions: 'error' (default: T7Error naming where the function sits), 'skip' (read as None)
    or 'mark' (read as a `LuaFunction`, which says what bytecode it is; nothing is loaded).
    A file that is not a .t7 file (in this format) raises a T7Error saying what it looks like.
    """
    if format not in FORMATS:
        raise ValueError(f"t7.read: format must be one of {FORMATS}, not {format!r}")
    if unknownClasses not in ("object", "table", "error"):
        raise ValueError(f"t7.read: unknownClasses must be 'object', 'table' or 'error', not {unknownClasses!r}")
    if functions not in ("error", "skip", "mark"):
        raise ValueError(f"t7.read: functions must be 'error', 'skip' or 'mark', not {functions!r}")
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return _Reader(_open_source(f, format), unknownClasses, functions).run()
    return _Reader(_open_source(source, format), unknownClasses, functions).run()


# ---------------------------------------------------------------------------------------------
# writing

class _Fresh:
    """A table written as a new object every time (an object's fields, as torch7 does)."""

    __slots__ = ("table",)

    def __init__(self, table: dict) -> None:
        self.table = table


class _Sink:
    """Encodes primitives into a buffer, flushed to the file before large array writes."""

    def __init__(self, f: BinaryIO, ascii: bool, long_size: int) -> None:
        self.f = f
        self.ascii = ascii
        self.long_size = long_size
        self.buf = bytearray()

    def flush(self) -> None:
        if self.buf:
            self.f.write(self.buf)
            self.buf = bytearray()

    def int(self, v: int) -> None:
        if not -(1 << 31) <= v < (1 << 31):
            raise T7Error(f"t7.write: {v} does not fit in a 32-bit int")
        self.buf += b"%d\n" % v if self.ascii else _INT.pack(v)

    def longs(self, values: list[int]) -> None:
        bits = 8 * self.long_size
        for v in values:
            if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
                raise T7Error(f"t7.write: {v} does not fit in a {bits}-bit long")
        if self.ascii:
            self.buf += b" ".join(b"%d" % v for v in values) + (b"\n" if values else b"")
        else:
            self.buf += struct.pack(f"<{len(values)}{'q' if self.long_size == 8 else 'i'}", *values)

    def double(self, v: float) -> None:
        self.buf += b"%.17g\n" % v if self.ascii else _DOUBLE.pack(v)

    def chars(self, data: bytes) -> None:
        self.buf += data
        if self.ascii and data:
            self.buf += b"\n"

    def string(self, data: bytes) -> None:
        self.int(len(data))
        self.chars(data)

    def array(self, a: np.ndarray) -> None:
        """A storage's elements: a contiguous 1-D array of a Torch7 element type."""
        if a.dtype == np.dtype("<i8") and self.long_size == 4:
            if a.size and (a.min() < -(1 << 31) or a.max() >= (1 << 31)):
                raise T7Error("t7.write: a LongStorage value does not fit in the 4-byte longs of 'b32'")
            a = a.astype("<i4")
        if not self.ascii:
            self.flush()
            self.f.write(memoryview(a).cast("B"))
        elif a.dtype.itemsize == 1:
            self.chars(a.tobytes())
        elif a.size:
            spec = b"%d" if a.dtype.kind in "iu" else b"%.9g" if a.dtype.itemsize <= 4 else b"%.17g"
            self.buf += b" ".join(spec % v for v in a.tolist()) + b"\n"


def _root(a: np.ndarray) -> np.ndarray:
    """The array whose memory `a` views: follow .base through arrays (and as_strided's holder)."""
    while True:
        base = a.base
        if isinstance(base, np.ndarray):
            a = base
        elif base is not None and isinstance(getattr(base, "base", None), np.ndarray):
            a = base.base
        else:
            return a


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def view_of_root(a: np.ndarray) -> Optional[tuple[np.ndarray, int, list[int]]]:
    """(root, offset, strides), offset and strides in elements, when a is a clean view of the
    memory of its root array (same dtype, a contiguous root, element-aligned offset and
    non-negative strides), so that a tensor over the root's storage can show it; else None."""
    root = _root(a)
    item = a.dtype.itemsize
    offset = _address(a) - _address(root)
    clean = (root.dtype == a.dtype and (root.flags.c_contiguous or root.flags.f_contiguous)
             and offset >= 0 and offset % item == 0 and all(s >= 0 and s % item == 0 for s in a.strides))
    return (root, offset // item, [s // item for s in a.strides]) if clean else None


def flat_of_root(root: np.ndarray) -> np.ndarray:
    """The 1-D view, in memory order, of a contiguous (C or Fortran order) array."""
    return root.reshape(-1) if root.flags.c_contiguous else root.T.reshape(-1)


class _Writer:
    def __init__(self, sink: _Sink) -> None:
        self.sink = sink
        self.index: dict[int, int] = {}   # id(object) -> its reference number
        self.keep: list[Any] = []         # keeps every indexed object (and copies) alive: ids stay unique
        self.count = 0
        self.flats: dict[int, np.ndarray] = {}  # id(root array) -> its 1-D storage view
        self.labels: list[Any] = []

    def where(self) -> str:
        return _where(self.labels)

    def run(self, root: Any) -> None:
        stack: list[Iterator] = [iter(((_FIELDS, root),))]
        labels = self.labels
        labels.append(_FIELDS)
        while stack:
            try:
                labels[-1], child = next(stack[-1])
            except StopIteration:
                stack.pop()
                labels.pop()
                continue
            children = self._object(child)
            if children is not None:
                if len(stack) > MAX_DEPTH:
                    raise T7Error(f"t7.write: objects nested deeper than {MAX_DEPTH} levels (at {self.where()})")
                stack.append(children)
                labels.append(_FIELDS)
        self.sink.flush()

    def _new_index(self, obj: Any) -> Optional[int]:
        """Writes the reference number; None when the object was written before (so done)."""
        known = self.index.get(id(obj))
        if known is not None:
            self.sink.int(known)
            return None
        self.count += 1
        self.index[id(obj)] = self.count
        self.keep.append(obj)
        self.sink.int(self.count)
        return self.count

    def _object(self, v: Any) -> Optional[Iterator]:
        sink = self.sink
        if v is None:
            sink.int(NIL)
        elif isinstance(v, (bool, np.bool_)):
            sink.int(BOOLEAN)
            sink.int(1 if v else 0)
        elif isinstance(v, (int, np.integer)):
            sink.int(NUMBER)
            sink.double(self._exact(int(v)))
        elif isinstance(v, (float, np.floating)):
            sink.int(NUMBER)
            sink.double(float(v))
        elif isinstance(v, str):
            sink.int(STRING)
            sink.string(v.encode("utf-8"))
        elif isinstance(v, (bytes, bytearray, memoryview)):
            sink.int(STRING)
            sink.string(bytes(v))
        elif isinstance(v, Key):
            return self._object(v.value)
        elif isinstance(v, np.ndarray):
            self._tensor(v)
        elif isinstance(v, (dict, list, tuple, _Fresh)):
            return self._table(v)
        elif isinstance(v, TorchObject):
            return self._instance(v)
        else:
            raise T7Error(f"t7.write: cannot write a {type(v).__name__} (at {self.where()})")
        return None

    def _exact(self, v: int) -> float:
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if f != v:
            raise T7Error(f"t7.write: the int {v} is not exactly a Lua number (a double) (at {self.where()})")
        return f

    def _table(self, v: Union[dict, list, tuple, _Fresh]) -> Optional[Iterator]:
        self.sink.int(TABLE)
        if isinstance(v, _Fresh):
            self.count += 1
            self.sink.int(self.count)
            v = v.table
        elif self._new_index(v) is None:
            return None
        pairs = v.items() if isinstance(v, dict) else enumerate(v, 1)
        items = [(k, x) for k, x in pairs if x is not None]
        for k, _ in items:
            if k is None or not isinstance(k, (str, bytes, int, float, np.integer, np.floating, Key, TorchObject)):
                raise T7Error(f"t7.write: cannot write a table key of type {type(k).__name__} (at {self.where()})")
        self.sink.int(len(items))
        return itertools.chain.from_iterable(((_KEY, k), (k, x)) for k, x in items)

    def _class(self, name: str, version: Union[int, float]) -> None:
        self.sink.string(b"V %s" % str(_number(float(version))).encode())
        self.sink.string(name.encode("ascii"))

    def _instance(self, obj: TorchObject) -> Optional[Iterator]:
        name = obj.typename
        if name in TENSOR_CLASSES or name in STORAGE_CLASSES or name.startswith("tds."):
            raise T7Error(f"t7.write: a TorchObject of class {name} cannot be written: use a numpy array, "
                          f"dict or list (at {self.where()})")
        if not isinstance(name, str) or not _CLASS_NAME.match(name.encode("ascii", "replace")):
            raise T7Error(f"t7.write: bad class name {name!r} (at {self.where()})")
        self.sink.int(TORCH)
        if self._new_index(obj) is None:
            return None
        self._class(name, obj.version)
        parts = [(_FIELDS, _Fresh(obj.fields))]
        if name == "nn.GPU":
            parts.insert(0, (_HEADER, _Fresh({1: obj.fields.get("_type"), 2: obj.fields.get("device")})))
        return iter(parts)

    def _tensor(self, a: np.ndarray) -> None:
        sink = self.sink
        sink.int(TORCH)
        if self._new_index(a) is None:
            return
        a = self._writable(a)
        storage, offset, strides = self._storage_view(a)
        name = _CPU_NAME[a.dtype]
        self._class(f"torch.{name}Tensor", 1)
        shape = list(a.shape) if a.ndim else [1]
        sink.int(len(shape))
        sink.longs(shape)
        sink.longs(strides if a.ndim else [1])
        sink.longs([offset + 1])
        if storage is None:
            sink.int(NIL)
            return
        sink.int(TORCH)
        if self._new_index(storage) is None:
            return
        self._class(f"torch.{name}Storage", 1)
        sink.longs([storage.size])
        sink.array(storage)

    def _writable(self, a: np.ndarray) -> np.ndarray:
        """a, or a copy in the nearest Torch7 element type (little-endian)."""
        dtype = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        dtype = _WIDEN.get(dtype, dtype)
        if dtype not in _CPU_NAME:
            raise T7Error(f"t7.write: arrays of dtype {a.dtype} have no Torch7 tensor type (at {self.where()})")
        if dtype != a.dtype:
            a = a.astype(dtype)
            self.keep.append(a)
        return a

    def _storage_view(self, a: np.ndarray) -> tuple[Optional[np.ndarray], int, list[int]]:
        """(storage, offset, strides) in elements: the storage is a 1-D view of the memory of
        a's root array when a is a clean view of it, else of a contiguous copy; None when empty."""
        if a.size == 0:
            return None, 0, [1] * a.ndim
        layout = view_of_root(a)
        if layout is None:
            a = np.ascontiguousarray(a)
            layout = a, 0, [s // a.dtype.itemsize for s in a.strides]
        root, offset, strides = layout
        return self._flat(root), offset, strides

    def _flat(self, root: np.ndarray) -> np.ndarray:
        """One 1-D array per root, so that every view of a root shares one storage index."""
        flat = self.flats.get(id(root))
        if flat is None:
            flat = flat_of_root(root)
            self.flats[id(root)] = flat
            self.keep.append(root)
        return flat


def write(target: Union[str, os.PathLike, BinaryIO], obj: Any, format: str = "binary") -> None:
    """Write obj as a .t7 file (a path or a binary file object), as torch.save would.

    format: 'binary' / 'b64' (long = 8 bytes), 'b32' (long = 4 bytes) or 'ascii'."""
    if format not in FORMATS:
        raise ValueError(f"t7.write: format must be one of {FORMATS}, not {format!r}")
    if isinstance(target, (str, os.PathLike)):
        with replacing(target) as f:
            _write(f, obj, format)
    else:
        _write(target, obj, format)


_temporary_names = itertools.count()   # numbers this process's temporary files apart


@contextlib.contextmanager
def replacing(path: Union[str, os.PathLike]) -> Iterator[BinaryIO]:
    """A binary file to write that replaces `path` only once the block has succeeded: a temporary
    file in path's folder, renamed over path (one atomic step) and given the old file's
    permissions, so that a failure leaves the old file (or none) and no temporary file, never a
    truncated one. A link or a file that is not a regular one (a device, a pipe) is written in
    place. Errors name `path`, not the temporary file."""
    path = os.fspath(path)
    try:
        old: Optional[os.stat_result] = os.lstat(path)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        with open(path, "wb") as f:
            yield f
        return
    folder, base = os.path.split(path)
    temp = os.path.join(folder, f".{base}.{os.getpid()}-{next(_temporary_names)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        if old is not None:
            os.chmod(temp, stat.S_IMODE(old.st_mode))
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _write(f: BinaryIO, obj: Any, fmt: str) -> None:
    _Writer(_Sink(f, fmt == "ascii", 4 if fmt == "b32" else 8)).run(obj)
