"""The .t7 format, one spec for both readers: lua/torch/t7format.lua (File.lua requires it; here
it is parsed without running Lua) and the element types of lua/torch/elementtypes.lua. Type
codes, limits, the class-name rule and version marker, the class names of tensors and storages,
the packages that define a file's classes, and what a file that is not a .t7 looks like
(`describe`, by the same rules as File.lua's)."""
from __future__ import annotations

import re
import struct
from typing import Optional

import numpy as np

from ..core.dtypes import CUDA_NAMES, DTYPES
from ..core.lua_table import parse
from ..core.paths import lua_dir

SPEC: dict = parse((lua_dir() / "torch" / "t7format.lua").read_text())
TYPES: dict[str, int] = SPEC["types"]
MAX_DEPTH: int = SPEC["maxDepth"]
MAX_DIMS: int = SPEC["maxDims"]
MAX_INDEX: int = SPEC["maxIndex"]
MAX_TOKEN: int = SPEC["maxToken"]
MAX_CLASS_NAME: int = SPEC["maxClassName"]
VERSION_PREFIX: bytes = SPEC["versionPrefix"].encode("ascii")  # b"V ": a class's version string is b"V 1"
CLASS_PACKAGES: dict[str, str] = SPEC["classPackages"]    # class name -> the package of ours defining it
PREFIX_PACKAGES: dict[str, str] = SPEC["prefixPackages"]  # class-name prefix ("nn") -> that package
CLASS_NAME = re.compile(rb"[A-Za-z0-9%s]{1,%d}\Z" % (re.escape(SPEC["classNamePunctuation"].encode()), MAX_CLASS_NAME))
_NOT_T7 = [(magic if isinstance(magic, bytes) else magic.encode("latin-1"), what) for magic, what in SPEC["notT7"]]
_LAST_CODE = max(TYPES.values())
HEAD_BYTES: int = SPEC["headBytes"]  # what describe looks at
FORMATS = ("binary", "ascii", "b32", "b64")

NIL, NUMBER, STRING, TABLE, TORCH, BOOLEAN, FUNCTION, LEGACY_RECUR_FUNCTION, RECUR_FUNCTION = (TYPES[name] for name in (
    "NIL", "NUMBER", "STRING", "TABLE", "TORCH", "BOOLEAN", "FUNCTION", "LEGACY_RECUR_FUNCTION", "RECUR_FUNCTION"))

# element type name -> its dtype in a .t7 file (little-endian)
ELEMENTS = {name: dtype.newbyteorder("<") for name, dtype in DTYPES.items()}


def _class_names(kind: str) -> dict[str, np.dtype]:
    """torch.<T>Tensor / torch.Cuda<T>Tensor (cutorch's float type is plain torch.CudaTensor)."""
    names = {}
    for name, dtype in ELEMENTS.items():
        names[f"torch.{name}{kind}"] = dtype
        names[f"torch.{CUDA_NAMES[name]}{kind}"] = dtype
    return names


TENSOR_CLASSES = _class_names("Tensor")
STORAGE_CLASSES = _class_names("Storage")

_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")
_ASCII_START = re.compile(rb"\s*[0-%d]\s" % _LAST_CODE)


def bytecode_kind(head: bytes) -> tuple[str, bool]:
    """What a function's bytecode is, and whether this runtime's LuaJIT (2.1, GC64, little-endian:
    the build lupa ships) can load it."""
    if head[:3] == b"\x1bLJ" and len(head) >= 5:
        name = SPEC["luajitVersions"].get(head[3], f"LuaJIT (bytecode version {head[3]})")
        if head[4] & SPEC["luajitFlagBigEndian"]:
            return f"big-endian {name} bytecode", False
        if head[3] == 2 and not head[4] & SPEC["luajitFlagGC64"]:
            return SPEC["luajitNoGC64"], False
        return f"{name} bytecode", head[3] == 2
    if head[:4] == b"\x1bLua" and len(head) >= 5:
        return f"Lua {head[4] >> 4}.{head[4] & 15} bytecode", False
    return "not bytecode", False


def describe(head: bytes, ascii: bool) -> Optional[str]:
    """What a file whose first bytes are head looks like when it is not a .t7 file in the given
    encoding; None when it starts as such a .t7 file does (or looks like nothing known)."""
    if not head:
        return "an empty file"
    if ascii and _ASCII_START.match(head):
        return None
    binary_start = len(head) >= 4 and 0 <= struct.unpack_from("<i", head)[0] <= _LAST_CODE
    if not ascii and binary_start:
        return None
    for magic, what in _NOT_T7:
        if head.startswith(magic):
            return what
    if not ascii and _ASCII_START.match(head):
        return "an ascii .t7 file (read it in the ascii format)"
    if ascii and binary_start:
        return "a binary .t7 file (read it in the binary format)"
    if not _CONTROL.search(head):
        line = head.split(b"\n", 1)[0][:40].decode("ascii", "replace").replace("\ufffd", "?")
        return f'text (it begins "{line}")'
    return None
