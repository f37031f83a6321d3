"""The pure-Python .t7 reader (`read`): binary and ascii sources of the format's primitives, and
an object reader without Python recursion, checking sizes and counts against the bytes left
before anything is allocated. The format's rules come from `format` (lua/torch/t7format.lua),
as File.lua's do."""
from __future__ import annotations

import io
import itertools
import math
import os
import re
import struct
from types import GeneratorType
from typing import Any, BinaryIO, Iterator, Optional, Union

import numpy as np

from .format import (BOOLEAN, CLASS_NAME, FORMATS, FUNCTION, HEAD_BYTES, LEGACY_RECUR_FUNCTION, MAX_DEPTH, MAX_DIMS,
                     MAX_INDEX, MAX_TOKEN, NIL, NUMBER, RECUR_FUNCTION, STORAGE_CLASSES, STRING, TABLE,
                     TENSOR_CLASSES, TORCH, VERSION_PREFIX, bytecode_kind, describe)
from .values import FIELDS, HEADER, KEY, UPVALUES, Key, LuaFunction, T7Error, TorchObject, lua_number, path_of

_INT = struct.Struct("<i")
_DOUBLE = struct.Struct("<d")
_VERSION = re.compile(re.escape(VERSION_PREFIX) + rb"(.*)\Z", re.S)
_SPACE = re.compile(rb"\s*")
_CHUNK = 1 << 20  # ascii numbers are parsed this many bytes at a time
_WINDOW = 1 << 16  # binary files are read ahead this many bytes at a time for small items
_TOKEN = re.compile(rb"\S+")
_NOT_IN_NUMBERS = re.compile(rb"[\x00_]")
_INT_TOKEN = re.compile(rb"[+-]?[0-9]+\Z")
_FLOAT_TOKEN = re.compile(rb"[+-]?([0-9]+\.?[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?"
                          rb"|inf(inity)?|nan)\Z", re.I)
_LONG = struct.Struct("<q")


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


def _text(raw: bytes) -> Union[str, bytes]:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


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
        self.labels: list[Any] = []  # per open container: the key (or Mark) being read
        self.versions: dict[bytes, Union[int, float]] = {}  # b"V 1" -> 1

    def where(self) -> str:
        return path_of(self.labels)

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
                labels.append(FIELDS)
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
                return lua_number(_DOUBLE.unpack_from(src.buf, at + 4)[0])
            src.at = at + 4
        else:
            code = src.int("a type code")
        if code == NUMBER:
            return lua_number(src.double("a number"))
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
            labels[-1] = KEY
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
        value = LuaFunction(kind, n) if self.functions == "mark" else None
        if index is not None:
            self.memo[index] = value
        self.labels[-1] = UPVALUES
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
        if not CLASS_NAME.match(raw):
            raise _Bad(f"bad class name {raw[:60]!r}", self.src.pos)
        return raw.decode("ascii")

    def _instance(self, index: int, name: str, version: Union[int, float]):
        obj: Any = {"__typename": name, "__version": version} if self.table_mode else TorchObject(name, version)
        self.memo[index] = obj
        if name == "nn.GPU":  # nn.GPU writes a header table ({type, device}) before its fields
            self.labels[-1] = HEADER
            header = self._object()
            if type(header) is GeneratorType:
                yield header
            self.labels[-1] = FIELDS
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
            labels[-1] = KEY if is_hash else i + 1
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
    return lua_number(value) if math.isfinite(value) else None


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
