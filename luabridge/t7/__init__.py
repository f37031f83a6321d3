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
the Lua reader's, from lua/torch/t7format.lua (see `format`). Every problem is a `T7Error` naming what,
the byte offset and where in the object it sits; sizes and counts are checked against the
bytes left before anything is allocated, and nesting is bounded (MAX_DEPTH).

Values written: None, bool, int, float, str, bytes, dict, list/tuple (keys 1..n), numpy arrays
and scalars, TorchObject, Key. Arrays that are views of one base array are written as tensors
sharing one storage (offset and strides kept); every object is written once and referenced after.
A path is replaced only once the whole object is written (see `replacing`): a failed write
leaves the old file, or none.

The package, in the order data flows: `format` (the spec both readers share, parsed from
lua/torch/t7format.lua), `values` (TorchObject, Key, LuaFunction, T7Error), `reader`, `writer`,
and `load` (luabridge.load / save / read_t7: the Lua reader and writer, File.lua, from Python).
"""

from .format import FORMATS, MAX_DEPTH, STORAGE_CLASSES, TENSOR_CLASSES
from .reader import read
from .values import Key, LuaFunction, T7Error, TorchObject
from .writer import flat_of_root, replacing, view_of_root, write

__all__ = ["read", "write", "replacing", "T7Error", "TorchObject", "Key", "LuaFunction", "MAX_DEPTH",
           "TENSOR_CLASSES", "STORAGE_CLASSES"]
