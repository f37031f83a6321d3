"""Session: variables kept by name across runs, and a cache of executors."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from .device import CPU, Device, device_for
from .executor import Executor, lua_sizes
from .symbol import Entry, Node, Symbol


@dataclass
class VarState:
    name: str
    array: Any = None                   # the buffer (numpy or device array, shared with `tensor`)
    tensor: Any = None                  # the Lua tensor over it
    generation: int = 0                 # bumped when reallocated (executors then rebuild)

    @property
    def initialised(self) -> bool:
        return self.array is not None


class VariableStore:
    """The session's variables by name."""

    def __init__(self, device: Device = CPU) -> None:
        self._vars: dict[str, VarState] = {}
        self.device = device
        self.generation = 0   # bumped whenever any variable is (re)allocated

    def get(self, name: str) -> Optional[VarState]:
        return self._vars.get(name)

    def __getitem__(self, name: str) -> VarState:
        return self._vars[name]

    def __contains__(self, name: str) -> bool:
        st = self._vars.get(name)
        return st is not None and st.initialised

    def names(self) -> list[str]:
        return [k for k, v in self._vars.items() if v.initialised]

    def signature(self, name: str) -> Optional[tuple]:
        st = self._vars.get(name)
        return None if st is None or not st.initialised else (st.array.shape, st.array.dtype.str, st.generation)

    def ensure_initialised(self, node: Node) -> None:
        """A variable about to be read: initialised from its initial value (a lua_module's own
        parameters) if it has one, else an error naming it."""
        if node.name in self:
            return
        from .api import initial_value
        value = initial_value(node)
        if value is None:
            raise ValueError(f"variable {node.name!r} is read before it was initialised "
                             "(run its initializer or assign it first)")
        self.set(node.name, value)

    def allocate(self, name: str, shape: tuple, dtype: str) -> VarState:
        """The variable with this shape and type (a new zeroed buffer when they change)."""
        st = self._vars.setdefault(name, VarState(name))
        if st.initialised and st.array.shape == tuple(shape) and st.array.dtype == np.dtype(dtype):
            return st
        flat = self.device.zeros(lua_sizes(tuple(shape)), dtype)
        st.array, st.tensor = flat.reshape(shape), self.device.share(flat)
        st.generation += 1
        self.generation += 1
        return st

    def set(self, name: str, value: Any) -> None:
        value = np.asarray(value)
        if value.dtype.kind != "f":
            value = value.astype(np.float32)
        st = self.allocate(name, value.shape, value.dtype.name)
        self.device.upload(st.array, value)


Fetch = Union[Symbol, list, tuple]


class Session:
    """Runs graphs: `run(fetches, feed_dict)` returns numpy arrays (a list for a list of
    fetches; None for a group). config: "cpu" (default), "cpu fusion", "gpu", "gpu fusion"
    ("fusion": elementwise groups run as one generated kernel each)."""

    def __init__(self, config: str = "cpu", cache_size: int = 8, poison: bool = False) -> None:
        self.config = config
        self.device = device_for(config)
        self.cache_size = cache_size
        self.poison = poison  # test mode: freed buffers are filled with NaN
        self._states = VariableStore(self.device)
        self._cache: OrderedDict[tuple, tuple[list[Entry], Executor]] = OrderedDict()
        self.stats = {"hits": 0, "misses": 0, "stale": 0}

    # ---- running ----
    def run(self, fetches: Fetch, feed_dict: Optional[dict] = None) -> Any:
        symbols, single = _fetch_list(fetches)
        entries = [e for s in symbols for e in s.outputs]
        executor = self._executor(entries)
        feed = _feed_nodes(feed_dict or {})
        results = executor.run(feed)
        if single:
            return results[0] if len(results) == 1 else results
        out, k = [], 0
        for s in symbols:
            n = len(s.outputs)
            out.append(results[k] if n == 1 else results[k:k + n])
            k += n
        return out

    def _executor(self, entries: list[Entry]) -> Executor:
        key = tuple((id(e.node), e.index) for e in entries)
        cached = self._cache.get(key)
        if cached is not None:
            old, executor = cached
            if all(a.node is b.node and a.version == b.version for a, b in zip(old, entries)):
                self._cache.move_to_end(key)
                self.stats["hits"] += 1
                return executor
            self.stats["stale"] += 1
            del self._cache[key]
        self.stats["misses"] += 1
        executor = Executor(self, entries, poison=self.poison)
        self._cache[key] = (list(entries), executor)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return executor

    # ---- variables ----
    def assign(self, var: Union[str, Symbol], value: Any) -> None:
        """Writes a variable (allocating it, or reallocating on a new shape or type)."""
        self._states.set(_var_name(var), value)

    def variable(self, var: Union[str, Symbol]) -> np.ndarray:
        """A copy of a variable's value."""
        name = _var_name(var)
        st = self._states.get(name)
        if st is None or not st.initialised:
            raise KeyError(f"variable {name!r} is not initialised in this session")
        return np.array(self.device.to_host(st.array))

    @property
    def variables(self) -> dict[str, np.ndarray]:
        return {k: self.variable(k) for k in self._states.names()}

    def executor_for(self, fetches: Fetch) -> Executor:
        """The (cached) executor of these fetches, e.g. to read its memory plan."""
        symbols, _ = _fetch_list(fetches)
        return self._executor([e for s in symbols for e in s.outputs])

    def close(self) -> None:
        self._cache.clear()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _fetch_list(fetches: Fetch) -> tuple[list[Symbol], bool]:
    if isinstance(fetches, Symbol):
        return [fetches], True
    if isinstance(fetches, (list, tuple)):
        for f in fetches:
            if not isinstance(f, Symbol):
                raise TypeError(f"Session.run: fetches must be symbols, got {type(f).__name__}")
        return list(fetches), False
    raise TypeError(f"Session.run: fetches must be a symbol or a list of symbols, got {type(fetches).__name__}")


def _feed_nodes(feed_dict: dict) -> dict[Node, np.ndarray]:
    out = {}
    for k, v in feed_dict.items():
        if not isinstance(k, Symbol) or len(k.outputs) != 1:
            raise TypeError("feed_dict keys must be single-output symbols (placeholders)")
        out[k.outputs[0].node] = v
    return out


def _var_name(var: Union[str, Symbol]) -> str:
    if isinstance(var, str):
        return var
    if isinstance(var, Symbol) and len(var.outputs) == 1 and var.outputs[0].node.op is None:
        return var.outputs[0].node.name
    raise TypeError("expected a variable symbol or name")
