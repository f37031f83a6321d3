"""`Model`: a picklable, immutable handle on a Lua nn module (or criterion).

A Model holds bytes and sources only: the module's .t7 bytes, and the Lua source (with the
user's files) that defines its custom classes. Each thread's runtime builds the module from
them on first use and keeps it on the runtime (luabridge.runtime.Bridge), so a Model crosses
to other threads and processes (pickle, Ray) and runs there as it ran here.

The per-runtime cache is keyed by content, not by object: equal Models (one model unpickled
twice) share one built module per runtime. Each content has one token object while a Model of
it lives; the cache holds modules weakly by token, plus the RECENT last used tokens strongly
(a Ray task unpickling the same model batch after batch builds it once), so it never holds
more than those for Models that are gone.
"""
from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections import deque
from typing import Any, Mapping

import numpy as np

from ..core.dtypes import DTYPES
from ..core.errors import LuaError
from ..core.interop import to_numpy
from ..core.proxy import LuaObject, lua_kind, unwrap
from ..core.runtime import Bridge, bridge
from ..core.runtime import luajit21 as lupa
from ..t7.format import FORMATS, HEAD_BYTES, describe
from ..t7.load import read_t7
from .tree import Entry, collect

RECENT = 2   # built modules each runtime keeps for Models that are gone
# from_lua's and from_module's bytes are this process's own serialization of a module the caller's
# code built, so the Lua functions they may hold are loaded as that code's (files refuse them).
OWN_BYTES = {"functions": "load"}
_SOURCE_CHUNK = "=(model source)"
_tokens: weakref.WeakValueDictionary[str, _Token] = weakref.WeakValueDictionary()
_tokens_lock = threading.Lock()


class _Token:
    """The one object standing for a Model content while a Model of it lives."""

    __slots__ = ("digest", "__weakref__")

    def __init__(self, digest: str) -> None:
        self.digest = digest


class _Built:
    """A module built in one runtime, with the numpy dtype its floating inputs take (None for a
    criterion, which takes its inputs as they come)."""

    __slots__ = ("module", "dtype")

    def __init__(self, module: Any, dtype: np.dtype | None) -> None:
        self.module, self.dtype = module, dtype


class ModelCache:
    """The Models built in one runtime (an attribute of its Bridge)."""

    def __init__(self) -> None:
        self.built: weakref.WeakKeyDictionary[_Token, _Built] = weakref.WeakKeyDictionary()
        self.recent: deque[_Token] = deque(maxlen=RECENT)


def _cache(b: Bridge) -> ModelCache:
    cache = b.model_cache
    if not isinstance(cache, ModelCache):
        cache = b.model_cache = ModelCache()
    return cache


class Model:
    """An nn module (or criterion) as bytes and sources: ``Model.from_t7(path)``,
    ``Model.from_lua(source)``, ``Model.from_module(proxy)``. ``predict`` runs it (numpy in and
    out) in the calling thread's runtime; ``state`` / ``with_state`` move its weights; it pickles
    as its bytes."""

    __slots__ = ("_t7", "_format", "_options", "_source", "_files", "_token")

    def __init__(self, t7: bytes, format: str = "binary", options: Mapping[str, str] | None = None,
                 source: str | None = None, files: Mapping[str, str] | None = None) -> None:
        """Prefer the from_* constructors. t7: the module's bytes in `format`; options: torch.load's
        (unknownClasses, functions); source: Lua run, with files loadable by name, when the bytes
        name a class this runtime lacks (the source defines it, by code or by require/dofile)."""
        if not isinstance(t7, bytes):
            raise TypeError(f"Model: t7 must be bytes, got {type(t7).__name__}")
        if format not in FORMATS:
            raise ValueError(f"Model: unknown .t7 format {format!r} (one of {', '.join(FORMATS)})")
        self._t7, self._format = t7, format
        self._options = tuple(sorted((options or {}).items()))
        self._source = source
        self._files = tuple(sorted(_checked_files(files).items()))
        self._token: _Token | None = None

    # -- making Models -------------------------------------------------------------------------

    @classmethod
    def from_t7(cls, path_or_bytes: str | os.PathLike | bytes, format: str = "binary", *,
                source: str | None = None, files: Mapping[str, str] | None = None,
                **options: str) -> Model:
        """The module a .t7 file (a path, read now) or its bytes hold; it is loaded on first
        use. options as luabridge.load's: Lua functions in the file are refused unless
        ``functions='load'`` (trusted files only: loading runs their code) or ``'skip'``;
        source and files: Lua defining the custom classes the file names (see from_lua). Bytes
        that do not begin as a .t7 file in `format` (text, an empty file, a PyTorch .pt, ...) are
        refused here, with the .t7 reader's error (a LuaError saying what they look like)."""
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data, where = bytes(path_or_bytes), ""
        else:
            with open(path_or_bytes, "rb") as f:
                data = f.read()
            where = f"{os.fspath(path_or_bytes)}: "
        looks = format in FORMATS and describe(data[:HEAD_BYTES], format == "ascii")   # (else Model says)
        if looks:
            raise LuaError(f"Model.from_t7: {where}not a .t7 file: it looks like {looks}")
        return cls(data, format, options, source, files)

    from_bytes = from_t7

    @classmethod
    def from_lua(cls, source: str, entry: str | None = None, files: Mapping[str, str] | None = None) -> Model:
        """The module that Lua source builds: the chunk source (then entry, if given, as code in
        the same chunk, such as "return model") must return it; nn is required first. files
        ({"MyLayer.lua": code}) are loadable by require('MyLayer') and dofile('MyLayer.lua')
        while the source runs. The source runs now, once, and its module's weights are kept:
        other runtimes load those bytes (running the source only to define custom classes)."""
        chunk = source if entry is None else f"{source}\n{entry}"
        b = bridge()
        module = _run_source(b, chunk, _checked_files(files))
        _check_held(b, module, "Model.from_lua: the source returned",
                    " (end it with `return model`, or pass entry='return model')")
        _evaluate(b, module)
        t7 = b.call(b.module("luabridge.model.handle").serialize, module)
        model = cls(_lua_bytes(t7), options=OWN_BYTES, source=chunk, files=files)
        model._keep(b, module)
        return model

    @classmethod
    def from_module(cls, module: LuaObject | Any, *, source: str | None = None,
                    files: Mapping[str, str] | None = None) -> Model:
        """A Model of a Lua module (a proxy, or lupa's table) as it is now, serialised with
        torch.serialize (the module itself is left as it is). source and files as for from_t7."""
        if lupa.lua_type(module) == "table":
            module = LuaObject(module)
        if not isinstance(module, LuaObject):
            raise TypeError(f"Model.from_module expects a Lua nn module (a proxy), got {type(module).__name__}")
        b = bridge()
        b.check_owned(module._lua)
        _check_held(b, module._lua, "Model.from_module expects a Lua nn module or criterion, got")
        t7 = b.call(b.lua.globals().torch.serialize, module._lua, "binary")
        return cls(_lua_bytes(t7), options=OWN_BYTES, source=source, files=files)

    def with_state(self, state: Mapping[str, Any]) -> Model:
        """A new Model whose parameters and buffers are `state` (keys and shapes as `state()`
        gives, each of the module's dtype): KeyError, ValueError or TypeError naming the key."""
        b = bridge()
        module = _build(b, self)
        entries = {e.key: e for e in _entries(module)}
        missing, unexpected = sorted(entries.keys() - state.keys()), sorted(state.keys() - entries.keys())
        if missing or unexpected:
            raise KeyError(f"Model.with_state: missing keys {missing}, unexpected keys {unexpected}")
        for key, e in entries.items():
            target, value = to_numpy(e.tensor._lua), np.asarray(state[key])
            if value.shape != target.shape:
                raise ValueError(f"Model.with_state: {key} has shape {value.shape}, the module's {target.shape}")
            if value.dtype != target.dtype:
                raise TypeError(f"Model.with_state: {key} is {value.dtype}, the module's is {target.dtype} "
                                f"(convert it: .astype(np.{target.dtype}))")
            target[...] = value
        t7 = b.call(b.module("luabridge.model.handle").serialize, module)
        return Model(_lua_bytes(t7), "binary", dict(self._options), self._source, dict(self._files))

    # -- using them ----------------------------------------------------------------------------

    def module(self) -> LuaObject:
        """The module in the calling thread's runtime, built there on first use (in evaluate
        mode) and shared by equal Models: treat it as read-only (`build` gives one to change)."""
        return LuaObject(self._built(bridge()).module)

    def build(self) -> LuaObject:
        """A new module of this Model in the calling thread's runtime (evaluate mode), not cached."""
        return LuaObject(_build(bridge(), self))

    def predict(self, batch: Any) -> Any:
        """The module's forward of batch: a numpy array (floating ones converted to the module's
        type), or a tuple/list of them for a table input; returns a numpy array, or a tuple for
        a table output. Inputs are copied in (a module may write its input: nn.ReLU(true)) and
        outputs copied out (the module reuses its buffers on the next call)."""
        b = bridge()
        built = self._built(b)
        if built.dtype is None:
            if not isinstance(batch, tuple) or len(batch) != 2:
                raise TypeError(f"Model.predict: {b.lua.globals().torch.type(built.module)} is a criterion: "
                                "pass (input, target)")
            b.call(built.module.forward, built.module, *(_lua_input(x, None) for x in batch))
            return built.module.output   # the loss (forward may return more, as ClassNLL's weight)
        output = b.call(built.module.forward, built.module, _lua_input(batch, built.dtype))
        return _copied_out(output)

    def state(self) -> dict[str, np.ndarray]:
        """Copies of the parameters and buffers (running_mean, running_var), keyed as
        luabridge.torch.LuaModule's state_dict: "1.weight", "3.2.bias", "2.running_mean"."""
        return module_state(self._built(bridge()).module)

    def to_bytes(self) -> bytes:
        """The module's .t7 bytes (in the format it was given in; from_lua's are binary)."""
        return self._t7

    # -- identity, pickling --------------------------------------------------------------------

    def _digest(self) -> str:
        h = hashlib.sha256(self._t7)
        h.update(repr((self._format, self._options, self._source, self._files)).encode())
        return h.hexdigest()

    def _token_now(self) -> _Token:
        if self._token is None:
            digest = self._digest()
            with _tokens_lock:
                token = _tokens.get(digest)
                if token is None:
                    token = _tokens[digest] = _Token(digest)
            self._token = token
        return self._token

    def _built(self, b: Bridge) -> _Built:
        cache, token = _cache(b), self._token_now()
        built = cache.built.get(token)
        if built is None:
            built = self._keep(b, _build(b, self))
        if not cache.recent or cache.recent[-1] is not token:
            cache.recent.append(token)
        return built

    def _keep(self, b: Bridge, module: Any) -> _Built:
        """Caches module as this Model's in runtime b."""
        tensor_type = b.call(b.module("luabridge.model.handle").tensor_type, module)
        dtype = None if tensor_type is None else _numpy_dtype(str(tensor_type))
        built = _cache(b).built[self._token_now()] = _Built(module, dtype)
        return built

    def __reduce__(self) -> tuple:
        return (Model, (self._t7, self._format, dict(self._options), self._source, dict(self._files)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Model) and self._token_now() is other._token_now()

    def __hash__(self) -> int:
        return hash(self._token_now().digest)

    def __repr__(self) -> str:
        extra = f", source of {len(self._source)} chars" if self._source is not None else ""
        files = f", files {[name for name, _ in self._files]}" if self._files else ""
        return f"Model({len(self._t7)} bytes of {self._format} .t7{extra}{files})"

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "_token" and hasattr(self, name):
            raise AttributeError(f"Model is immutable: use with_state or a from_* constructor, not .{name} =")
        object.__setattr__(self, name, value)


# -- building ----------------------------------------------------------------------------------

def _checked_files(files: Mapping[str, str] | None) -> dict[str, str]:
    files = dict(files or {})
    for name, source in files.items():
        if not isinstance(name, str) or not isinstance(source, str):
            raise TypeError(f"Model: files maps file names to Lua source strings, got {name!r}: "
                            f"{type(source).__name__}")
    return files


def _run_source(b: Bridge, chunk: str, files: dict[str, str], keep_random: bool = False) -> Any:
    """What chunk returns, run after requiring nn, with files loadable by name; keep_random puts
    torch's random generator back as it was after."""
    helpers = b.module("luabridge.model.handle")
    b.module("nn")
    b.call(helpers.install, b.lua.table_from(files), keep_random)
    try:
        return b.call(b.load(chunk, _SOURCE_CHUNK))
    finally:
        b.call(helpers.uninstall)


def _build(b: Bridge, model: Model) -> Any:
    """model's module read once from its bytes in runtime b. The reader requires the packages of
    ours its classes need (nn, nngraph, ...); at a class none defines, the source is run, once
    (it defines the custom classes; torch's random state is left as it was)."""
    b.module("nn")
    ran: list[bool] = []

    def define_classes(_name: str) -> None:
        if not ran:
            ran.append(True)
            _run_source(b, model._source, dict(model._files), keep_random=True)

    module = read_t7(model._t7, model._format, dict(model._options),
                     None if model._source is None else define_classes)
    _check_held(b, module, "Model: the bytes hold")
    _evaluate(b, module)
    return module


def _check_held(b: Bridge, value: Any, what: str, hint: str = "") -> None:
    """TypeError saying `what` <type>, unless value is an nn module or criterion."""
    if b.module("luabridge.model.handle").kind(value) is None:
        raise TypeError(f"{what} {b.lua.globals().torch.type(value)}, not an nn module or criterion{hint}")


def _evaluate(b: Bridge, module: Any) -> None:
    if module.evaluate is not None:   # a criterion has no mode
        b.call(module.evaluate, module)


def module_state(module: Any) -> dict[str, np.ndarray]:
    """Copies of a Lua module's parameters and buffers (a Lua value or proxy), keyed as
    Model.state; none for a criterion."""
    return {e.key: np.array(to_numpy(e.tensor._lua)) for e in _entries(unwrap(module))}


def _entries(module: Any) -> list[Entry]:
    """The parameters and buffers of a module (a Lua value); none for a criterion."""
    return collect(LuaObject(module)) if module.parameters is not None else []


def _lua_bytes(value: Any) -> bytes:
    """A Lua string as Python bytes (the runtime decodes strings as text with surrogate escapes)."""
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def _numpy_dtype(tensor_type: str) -> np.dtype:
    """np.float32 for 'torch.FloatTensor' (also 'torch.CudaTensor' and the like: float32)."""
    name = tensor_type.removeprefix("torch.").removesuffix("Tensor").removeprefix("Cuda") or "Float"
    return DTYPES.get(name, np.dtype(np.float64))


def _lua_input(batch: Any, dtype: np.dtype | None) -> Any:
    """batch as a Lua value: arrays copied into tensors (floating ones of dtype, unless None),
    tuples and lists as tables."""
    if isinstance(batch, (tuple, list)):
        return unwrap([_lua_input(x, dtype) for x in batch])
    a = np.asarray(batch)
    if a.dtype.kind == "f" and dtype is not None:
        return unwrap(np.array(a, dtype=dtype))
    return unwrap(np.array(a))


def _copied_out(value: Any) -> Any:
    kind = lua_kind(value)
    if kind == "tensor":
        return np.array(to_numpy(value))
    if kind == "table":
        n = len(value)
        return tuple(_copied_out(value[i]) for i in range(1, n + 1))
    if lupa.lua_type(value) is not None:
        raise TypeError(f"Model.predict: the module returned a {kind} Lua value, not tensors")
    return value
