"""MATLAB .mat files for the Lua `matio` package (soumith/matio-ffi.torch's API), read and written by
scipy.io: MAT 4 and 5 (v7, compressed or not). Tensors come back with MATLAB's sizes and its
column-major strides, as matio-ffi gave them; cells are Lua arrays in MATLAB's linear order,
structs tables (a 2-D struct array a table of rows of tables), characters a CharTensor or, with
matio.use_lua_strings, a string. scipy is imported on first use."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.interop import from_numpy, to_host

if TYPE_CHECKING:
    from ..core.runtime import Bridge

# stored class -> the dtype of the tensor it becomes (matio-ffi copied the bytes: unsigned
# integers keep their bits in the signed tensor of their size, logicals are bytes)
AS_TENSOR = {"i1": np.int8, "u1": np.uint8, "i2": np.int16, "u2": np.int16, "i4": np.int32, "u4": np.int32,
             "i8": np.int64, "u8": np.int64, "f4": np.float32, "f8": np.float64, "b1": np.uint8}
# each tensor type as MATLAB stores it
AS_MATLAB = {"Char": np.int8, "Byte": np.uint8, "Short": np.int16, "Int": np.int32, "Long": np.int64,
             "Float": np.float32, "Double": np.float64}


def missing() -> str | None:
    try:
        import scipy.io  # noqa: F401
    except ImportError:
        return "matio: scipy is not installed; install the extra: pip install 'luabridge[matio]'"
    return None


def callbacks(bridge: "Bridge") -> dict[str, Any]:
    lua = bridge.lua

    def lua_value(x: Any, strings: bool) -> Any:
        """A loaded MATLAB value as Lua values (None for what matio-ffi did not read)."""
        if isinstance(x, np.ndarray):
            if x.dtype.names:                      # a struct (array)
                if x.size == 1:
                    return lua.table_from({f: lua_value(x[f].flat[0], strings) for f in x.dtype.names})
                if x.ndim == 2:
                    return lua.table_from([lua.table_from([lua.table_from(
                        {f: lua_value(x[i, j][f], strings) for f in x.dtype.names}) for j in range(x.shape[1])])
                        for i in range(x.shape[0])])
                return None
            if x.dtype == object:                  # a cell array, in MATLAB's linear order
                return lua.table_from([lua_value(v, strings) for v in x.flatten(order="F")])
            if x.dtype.kind == "U":                # characters
                if strings:
                    return "".join(x.flatten(order="F").tolist()) if x.ndim < 2 else \
                        "\n".join("".join(row) for row in x.reshape(x.shape[0], -1))
                codes = np.asfortranarray(np.vectorize(ord, otypes=[np.int64])(x)).astype(np.int8)
                return from_numpy(codes)
            kind = f"{x.dtype.kind}{x.dtype.itemsize}"
            if kind not in AS_TENSOR:
                print(f"Unsupported type of tensor: {x.dtype}")
                return None
            target = np.dtype(AS_TENSOR[kind])
            data = np.asfortranarray(x)
            data = data.view(target) if data.dtype.itemsize == target.itemsize and data.dtype.kind in "iub" \
                else data.astype(target)
            return from_numpy(np.asfortranarray(data.copy(order="F")))
        if isinstance(x, str):
            return x
        return None

    def matio_load(filename: str, names: Any, strings: bool) -> Any:
        import scipy.io
        try:
            listed = [v[0] for v in scipy.io.whosmat(filename)]
        except (OSError, ValueError, NotImplementedError) as e:
            print(f"File could not be opened: {filename} ({e})")
            return None
        wanted = [names[i] for i in range(1, len(names) + 1)] if names is not None else listed
        if not wanted:
            print("No variables in this file")
            return None
        found = [n for n in wanted if n in listed]
        for n in wanted:
            if n not in listed:
                print(f"Could not find variable with name: {n} in file: {filename}")
        data = scipy.io.loadmat(filename, variable_names=found, mat_dtype=False, squeeze_me=False,
                                chars_as_strings=False) if found else {}
        out = {n: lua_value(data[n], strings) for n in found}
        return lua.table_from({k: v for k, v in out.items() if v is not None})

    def matio_save(filename: str, entries: Any, compress: bool) -> Any:
        """entries: a Lua array of {path (names), kind ('tensor', 'number', ...), value}."""
        import scipy.io
        variables: dict[str, Any] = {}
        for i in range(1, len(entries) + 1):
            entry = entries[i]
            path = [entry.path[k] for k in range(1, len(entry.path) + 1)]
            kind, value = entry.kind, entry.value
            if kind == "tensor":
                arr = np.asarray(to_host(value)).astype(AS_MATLAB[value._dt.name], copy=True)
                value = arr.reshape(-1, 1) if arr.ndim == 1 else arr
            elif kind == "number":
                value = np.array([[float(value)]])
            elif kind == "boolean":
                value = np.array([[bool(value)]])
            place = variables
            for name in path[:-1]:
                place = place.setdefault(name, {})
            place[path[-1]] = value
        try:
            scipy.io.savemat(filename, variables, do_compression=bool(compress), oned_as="column")
        except (OSError, ValueError) as e:
            return None, f"matio.save: cannot write {filename}: {e}"
        return True

    return {"matio_missing": missing, "matio_load": matio_load, "matio_save": matio_save}
