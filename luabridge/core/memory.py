"""CPU buffers owned by numpy and lent to Lua storages.

Each Lua storage holds a handle whose id keys an array here; the array stays alive until the
storage is collected on the Lua side (its finalizer queues the id, the next allocation releases
it). Numpy views handed out keep their base array alive by themselves, so whichever side lets go
first, the memory stays valid for the other.
"""
from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

import numpy as np

from .dtypes import DTYPES, TYPE_OF_DTYPE  # noqa: F401  (TYPE_OF_DTYPE: for importers)


def split_address(addr: int) -> tuple[int, int]:
    """An address as two 32-bit halves, each exact as a Lua double."""
    return addr >> 32, addr & 0xFFFFFFFF


def lua_list(table: Any) -> list:
    """A 1-based Lua array as a Python list."""
    return [table[i] for i in range(1, len(table) + 1)]


def _address(array: np.ndarray) -> int:
    """The data address of a writable array of at least one byte: a ctypes view of its buffer
    costs a quarter of array.ctypes.data, which builds a helper object on every call."""
    return ctypes.addressof(ctypes.c_char.from_buffer(array))


def _zero(array: np.ndarray) -> None:
    """Zeroes array with a C memset called through ctypes, which releases the GIL meanwhile."""
    ctypes.memset(_address(array), 0, array.nbytes)


class BufferRegistry:
    """The numpy arrays behind this runtime's Lua storages, by id."""

    # Released buffers of at least POOL_MIN bytes that nothing else references are kept (up to
    # POOL_MAX bytes in all) and handed out again: fresh large buffers cost page faults.
    POOL_MIN = 1 << 20
    POOL_MAX = 256 << 20

    def __init__(self) -> None:
        self._arrays: dict[int, np.ndarray] = {}
        self._owned: set[int] = set()  # ids allocated here (not user arrays shared in)
        self._pool: dict[tuple[np.dtype, int], list[np.ndarray]] = {}
        self._pool_bytes = 0
        self._next_id = 1

    def __len__(self) -> int:
        return len(self._arrays)

    def register(self, array: np.ndarray) -> int:
        buffer_id = self._next_id
        self._next_id += 1
        self._arrays[buffer_id] = array
        return buffer_id

    def alloc(self, n: int, type_name: str, zeroed: bool = True) -> tuple[int, int, int] | None:
        """A new buffer of n elements, zeroed unless the caller overwrites it all at once:
        (id, address high, address low), or None when memory ran out (numpy's MemoryError, or a
        size no address space holds). Anything else raised here, Ctrl-C's KeyboardInterrupt
        above all, reaches Lua as itself."""
        n = int(n)
        if n < 0:
            raise ValueError(f"storage size must be non-negative, got {n}")
        dtype = DTYPES[type_name]
        reusable = self._pool.get((dtype, n)) if n * dtype.itemsize >= self.POOL_MIN else None
        if reusable:
            array = reusable.pop()
            self._pool_bytes -= array.nbytes
            if zeroed:
                _zero(array)
        else:
            try:
                # np.empty for a buffer the caller overwrites: calloc would clear memory that
                # malloc hands back from its heap (a 10 MB batch sent between threads), GIL held
                array = (np.zeros if zeroed else np.empty)(n or 1, dtype=dtype)
            except (MemoryError, ValueError):   # ValueError: "array is too big"
                return None
        high, low = split_address(_address(array))
        buffer_id = self._next_id
        self._owned.add(buffer_id)
        # the last call is above: Python runs a pending signal handler (Ctrl-C) only at a call
        # or a loop, so from here to Lua's handle for it nothing can leave the buffer unowned
        self._next_id = buffer_id + 1
        self._arrays[buffer_id] = array
        return buffer_id, high, low

    def map_file(self, path: str, type_name: str, shared: bool, n: int) -> tuple[Any, ...]:
        """A buffer mapped from a file, as torch7's TYPEStorage(filename, shared, size): shared
        writes reach the file (created and grown to n elements when needed), otherwise the
        mapping is private copy-on-write and the file must hold n elements. n = 0 means the
        whole file. Returns (id, address high, address low, n), or (None, why) when the file
        cannot be mapped: Lua reports it without a pcall, which would also catch Ctrl-C."""
        try:
            array, n = _mapped(path, DTYPES[type_name], shared, int(n))
        except ValueError as e:   # _mapped's own words on the file's size
            return None, str(e)
        except OSError as e:      # the system's, named: "FileNotFoundError: [Errno 2] ..."
            return None, f"{type(e).__name__}: {e}"
        high, low = split_address(_address(array))
        buffer_id = self._next_id
        # as in alloc: no call from here to Lua's handle
        self._next_id = buffer_id + 1
        self._arrays[buffer_id] = array
        return buffer_id, high, low, n

    def release(self, ids: str, keep: bool = False) -> str | None:
        """Releases the buffers of the comma-separated ids; releasing one twice does nothing
        (Lua sends a batch again when Ctrl-C cut its release short). With keep, the buffers this
        registry allocated and nothing else references (no numpy view, no other runtime) stay
        registered instead, for the runtime to reuse by itself (lua/torch/core/memory.lua's
        memory.reuse; any size: reuse there costs no call): returns their ids, comma-separated,
        or None when none."""
        kept = []
        for part in ids.split(","):
            if part:
                if keep and self._reusable(int(part)):
                    kept.append(part)
                else:
                    self._release(int(part))
        return ",".join(kept) if kept else None

    def _reusable(self, buffer_id: int) -> bool:
        array = self._arrays.get(buffer_id)
        # three references: `array` here, the registry's and getrefcount's argument
        return array is not None and buffer_id in self._owned and sys.getrefcount(array) == 3

    def _release(self, buffer_id: int) -> None:
        array = self._arrays.pop(buffer_id, None)
        if array is not None and buffer_id in self._owned:
            self._owned.discard(buffer_id)
            # two references: `array` here and getrefcount's argument; a numpy view adds more
            if (array.nbytes >= self.POOL_MIN and sys.getrefcount(array) == 2
                    and self._pool_bytes + array.nbytes <= self.POOL_MAX):
                self._pool.setdefault((array.dtype, array.size), []).append(array)
                self._pool_bytes += array.nbytes

    def viewed(self, buffer_id: int) -> bool:
        """Whether anything besides this registry references buffer_id's array: a numpy view
        (each keeps its base array), a DLPack capsule, another runtime's registry. An unknown id
        counts as viewed."""
        array = self._arrays.get(int(buffer_id))
        # three references: `array` here, the registry's and getrefcount's argument
        return array is None or sys.getrefcount(array) > 3

    def array(self, buffer_id: int) -> np.ndarray:
        return self._arrays[int(buffer_id)]

    def view(self, buffer_id: int, type_name: str, offset: int, sizes, strides) -> np.ndarray:
        """A numpy view (elements, not bytes) of part of a buffer; it keeps the buffer alive."""
        base = self._arrays[int(buffer_id)]
        dtype = DTYPES[type_name]
        if base.dtype != dtype:
            base = base.view(dtype)
        item = dtype.itemsize
        return np.ndarray(
            tuple(int(s) for s in sizes),
            dtype=dtype,
            buffer=base,
            offset=int(offset) * item,
            strides=tuple(int(s) * item for s in strides),
        )

    def storage_view(self, st: Any, type_name: str, offset: int, sizes, strides,
                     escape: bool = True) -> np.ndarray:
        """A view of elements of a Lua storage (a view storage sits at _baseoff into its root's
        buffer). With escape (the default) the storage's buffer is marked viewed
        (lua/torch/core/versions.lua): the view may write it where Lua cannot see, so no plan
        keeps anything derived from its elements while a view lives (BufferRegistry.viewed).
        escape=False is for a caller that drops the view before returning to Lua, and whose
        Lua side bumps the storage's write version when the view was written."""
        if escape:
            mark_escaped(st)
        return self.view(st._id, type_name, offset + st._baseoff, sizes, strides)

    def tensor_view(self, t: Any, escape: bool = True) -> np.ndarray:
        """A numpy view of a CPU Lua tensor (sharing memory; it keeps the buffer alive); escape
        as storage_view's."""
        sizes = lua_list(t._sz)
        if not t._st:
            return np.empty(sizes or (0,), dtype=DTYPES[t._dt.name])
        return self.storage_view(t._st, t._dt.name, t._off, sizes, lua_list(t._str), escape)


def mark_escaped(st: Any) -> None:
    """Marks the buffer of Lua storage st (its root storage: a view storage's _base) viewed from
    Python: written where Lua cannot see while a view lives (lua/torch/core/versions.lua,
    through Storage._viewed)."""
    st._viewed(st)


def _mapped(path: str, dtype: np.dtype, shared: bool, n: int) -> tuple[np.ndarray, int]:
    """The array mapping path for BufferRegistry.map_file, and its element count."""
    if shared:
        with open(path, "ab"):  # create it, as O_CREAT
            pass
        if n > 0 and os.path.getsize(path) < n * dtype.itemsize:
            os.truncate(path, n * dtype.itemsize)
    file_bytes = os.path.getsize(path)
    if n <= 0:
        n = file_bytes // dtype.itemsize
    elif file_bytes < n * dtype.itemsize:
        raise ValueError(f"file <{path}> size is smaller than the required mapping size "
                         f"<{n * dtype.itemsize}>")
    if n == 0:  # an empty file cannot be mapped: an empty storage
        return np.zeros(1, dtype=dtype), 0
    return np.memmap(path, dtype=dtype, mode="r+" if shared else "c", shape=(n,)), n
