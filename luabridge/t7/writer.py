"""The pure-Python .t7 writer (`write`), as torch.save writes: every object written once and
referenced after, views of one array as tensors sharing one storage (`view_of_root`), and a path
replaced only once the whole object is written (`replacing`)."""
from __future__ import annotations

import contextlib
import itertools
import math
import os
import stat
import struct
from typing import Any, BinaryIO, Iterator, Optional, Union

import numpy as np

from .format import (BOOLEAN, CLASS_NAME, ELEMENTS, FORMATS, MAX_DEPTH, NIL, NUMBER, STORAGE_CLASSES, STRING, TABLE,
                     TENSOR_CLASSES, TORCH, VERSION_PREFIX)
from .values import FIELDS, HEADER, KEY, Key, T7Error, TorchObject, lua_number, path_of

_INT = struct.Struct("<i")
_DOUBLE = struct.Struct("<d")
_CPU_NAME = {dtype: name for name, dtype in ELEMENTS.items()}
# dtypes written after a conversion (a copy): the nearest Torch7 type that holds every value
_WIDEN = {np.dtype(np.bool_): np.dtype("u1"), np.dtype(np.uint16): np.dtype("<i4"),
          np.dtype(np.uint32): np.dtype("<i8")}

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
        return path_of(self.labels)

    def run(self, root: Any) -> None:
        stack: list[Iterator] = [iter(((FIELDS, root),))]
        labels = self.labels
        labels.append(FIELDS)
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
                labels.append(FIELDS)
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
        return itertools.chain.from_iterable(((KEY, k), (k, x)) for k, x in items)

    def _class(self, name: str, version: Union[int, float]) -> None:
        self.sink.string(VERSION_PREFIX + str(lua_number(float(version))).encode())
        self.sink.string(name.encode("ascii"))

    def _instance(self, obj: TorchObject) -> Optional[Iterator]:
        name = obj.typename
        if name in TENSOR_CLASSES or name in STORAGE_CLASSES or name.startswith("tds."):
            raise T7Error(f"t7.write: a TorchObject of class {name} cannot be written: use a numpy array, "
                          f"dict or list (at {self.where()})")
        if not isinstance(name, str) or not CLASS_NAME.match(name.encode("ascii", "replace")):
            raise T7Error(f"t7.write: bad class name {name!r} (at {self.where()})")
        self.sink.int(TORCH)
        if self._new_index(obj) is None:
            return None
        self._class(name, obj.version)
        parts = [(FIELDS, _Fresh(obj.fields))]
        if name == "nn.GPU":
            parts.insert(0, (HEADER, _Fresh({1: obj.fields.get("_type"), 2: obj.fields.get("device")})))
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
