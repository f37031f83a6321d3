"""HDF5 files for the Lua `hdf5` package (deepmind/torch-hdf5's API): h5py reads and writes, straight
into and out of the memory of Lua tensors. Each runtime keeps its open files by number; h5py is
imported on first use, and `require 'hdf5'` asks missing() first.

Errors come back as (nil, message): the Lua side raises them with torch-hdf5's wording."""
from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.memory import lua_list

if TYPE_CHECKING:
    from ..core.runtime import Bridge

# what each tensor type is written as (torch-hdf5's file types: little-endian, sized)
WRITTEN_AS = {"Byte": "<u1", "Char": "<i1", "Short": "<i2", "Int": "<i4", "Long": "<i8", "Float": "<f4", "Double": "<f8"}
# what a stored number reads back as: torch-hdf5 goes by class and size only, so any 1-byte
# integer reads as a ByteTensor
READ_AS = {("i", 1): "Byte", ("u", 1): "Byte", ("i", 2): "Short", ("u", 2): "Short", ("i", 4): "Int",
           ("u", 4): "Int", ("i", 8): "Long", ("u", 8): "Long", ("f", 4): "Float", ("f", 8): "Double"}
_CLASS = {"i": "INTEGER", "u": "INTEGER", "f": "FLOAT", "S": "STRING", "U": "STRING", "O": "VLEN", "V": "COMPOUND",
          "b": "INTEGER", "c": "FLOAT"}


def missing() -> str | None:
    """None when h5py imports, else what to install."""
    try:
        import h5py  # noqa: F401
    except ImportError:
        return "hdf5: h5py is not installed; install the extra: pip install 'luabridge[hdf5]'"
    return None


def torch_type(dtype: np.dtype) -> tuple[str | None, str]:
    """The tensor type a stored dtype reads as, or None and why not."""
    found = READ_AS.get((dtype.kind, dtype.itemsize))
    if found:
        return found, ""
    kind = _CLASS.get(dtype.kind, dtype.kind)
    if kind in ("INTEGER", "FLOAT"):
        return None, f"Cannot support reading {kind.lower()} data with size = {dtype.itemsize} bytes"
    return None, f"Reading data of class {kind} is unsupported"


def callbacks(bridge: "Bridge") -> dict[str, Any]:
    buffers = bridge.buffers
    lua = bridge.lua
    opened: dict[int, Any] = {}
    numbers = itertools.count(1)

    def handle(number: int) -> Any:
        f = opened.get(number)
        if f is None:
            raise ValueError(f"hdf5: file {number} is closed")
        return f

    def hdf5_open(filename: str, mode: str) -> Any:
        import h5py
        try:
            f = h5py.File(filename, {"r": "r", "r+": "r+", "w": "w", "w-": "w-"}[mode])
        except (OSError, ValueError) as e:
            return None, f"hdf5.open: cannot open {filename} (mode '{mode}'): {e}"
        number = next(numbers)
        opened[number] = f
        return number

    def hdf5_close(number: int) -> None:
        f = opened.pop(number, None)
        if f is not None:
            f.close()

    def hdf5_kind(number: int, path: str) -> Any:
        """'group', 'dataset' or nil for a path; the names in a group, sorted."""
        import h5py
        f = handle(number)
        node = f.get(path) if path else f
        if node is None:
            return None
        if isinstance(node, h5py.Group):
            return "group", lua.table_from(sorted(node.keys()))
        if isinstance(node, h5py.Dataset):
            return "dataset", None
        return "other", None

    def hdf5_info(number: int, path: str) -> Any:
        """The tensor type (or nil and why) and the sizes of a dataset."""
        ds = handle(number)[path]
        kind, why = torch_type(ds.dtype)
        return kind or None, why, lua.table_from(list(ds.shape))

    def hdf5_read(number: int, path: str, tensor: Any, starts: Any, counts: Any) -> None:
        """Fills `tensor` (contiguous, of the selection's sizes) from the dataset; starts/counts: 0-based."""
        ds = handle(number)[path]
        out = buffers.tensor_view(tensor)
        if ds.shape == ():
            out[...] = ds[()]
            return
        selection = tuple(slice(s, s + c) for s, c in zip(lua_list(starts), lua_list(counts)))
        out[...] = ds[selection]

    def hdf5_write(number: int, path: str, tensor: Any, chunks: Any, deflate: Any, append: bool) -> Any:
        f = handle(number)
        data = np.ascontiguousarray(buffers.tensor_view(tensor))
        dtype = WRITTEN_AS[tensor._dt.name]
        if append and path in f:
            ds = f[path]
            if ds.ndim != data.ndim or ds.shape[1:] != data.shape[1:]:
                return None, (f"cannot append data of size {'x'.join(map(str, data.shape))} to '{path}' "
                              f"of size {'x'.join(map(str, ds.shape))}")
            if ds.maxshape[0] is not None and ds.maxshape[0] < ds.shape[0] + data.shape[0]:
                return None, f"cannot append to '{path}': it was not written chunked (DataSetOptions:setChunked)"
            old = ds.shape[0]
            ds.resize(old + data.shape[0], axis=0)
            ds[old:] = data
            return True
        if path in f:
            del f[path]
        chunk = tuple(lua_list(chunks)) if chunks is not None else None
        options: dict[str, Any] = {}
        if chunk:
            options.update(chunks=chunk, maxshape=(None, *data.shape[1:]))
        if deflate is not None:
            options.update(compression="gzip", compression_opts=int(deflate))
        f.create_dataset(path, data=data, dtype=dtype, **options)
        return True

    def hdf5_exists_dir(filename: str) -> bool:
        return os.path.isdir(os.path.dirname(os.path.abspath(filename)) or ".")

    def hdf5_version() -> Any:
        """The HDF5 library's version under h5py, as torch-hdf5's hdf5.version gave libhdf5's."""
        import h5py
        return lua.table_from(list(h5py.version.hdf5_version_tuple[:3]))

    return {"hdf5_missing": missing, "hdf5_version": hdf5_version, "hdf5_open": hdf5_open, "hdf5_close": hdf5_close, "hdf5_kind": hdf5_kind,
            "hdf5_info": hdf5_info, "hdf5_read": hdf5_read, "hdf5_write": hdf5_write,
            "hdf5_exists_dir": hdf5_exists_dir}
