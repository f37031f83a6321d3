"""The Python values of .t7 objects that both the reader and the writer handle: `TorchObject`
(an instance of a Torch class), `Key` (a key Python cannot hash), `LuaFunction` (a function read
as a marker), `T7Error`; how numbers read (`lua_number`) and where an object sits (`path_of`)."""
from __future__ import annotations

import itertools
import math
import re
from typing import Any, Optional, Union

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


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
    bytecode", ...) and its `size` in bytes (None when not told); the bytecode is neither kept
    nor loaded."""

    __slots__ = ("kind", "size")

    def __init__(self, kind: str, size: Optional[int] = None) -> None:
        self.kind = kind
        self.size = size

    def __repr__(self) -> str:
        size = "" if self.size is None else f", {self.size:,} bytes"
        return f"<Lua function ({self.kind}{size}), not loaded>"


class Key:
    """A dict key standing for a value Python cannot hash (a table or tensor used as a Lua key).

    Hashed and compared by identity; `value` is the table (dict/list) or array."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Key(<{type(self.value).__name__} at {id(self.value):#x}>)"


def lua_number(x: float) -> Union[int, float]:
    if x.is_integer() and not (x == 0 and math.copysign(1.0, x) < 0):
        return int(x)
    return x


def _label(key: Any) -> str:
    """How a key shows in a path: .name, [3], ['a b']."""
    if isinstance(key, str):
        return f".{key}" if _IDENTIFIER.match(key) else f"[{key!r}]"
    if isinstance(key, (int, float)):
        return f"[{key}]"
    return f"[<{type(key).__name__}>]"


class Mark(str):
    """A path label that is not a key: a position inside an object."""


KEY, FIELDS, UPVALUES, HEADER = Mark("{key}"), Mark(""), Mark("(upvalues)"), Mark("(header)")


def path_of(labels: list[Any]) -> str:
    """<?>.modules[3].fn, or 'a key of <?>.x' (torch7 names the root <?>); long paths keep their
    two ends. A label is the key whose value is being read, or a Mark."""
    is_key = bool(labels) and labels[-1] is KEY
    parts = [label if type(label) is Mark else _label(label) for label in (labels[:-1] if is_key else labels)]
    parts = [part for part in parts if part]
    if len(parts) > 24:
        parts = [*parts[:8], f"...({len(parts) - 16} more levels)...", *parts[-8:]]
    path = "<?>" + "".join(parts)
    return f"a key of {path}" if is_key else path
