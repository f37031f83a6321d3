"""One LuaJIT runtime per thread, with luabridge's Lua tree on package.path."""
from __future__ import annotations

import codecs
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Callable

try:   # luabridge's own build of lupa's module over a LuaJIT with LUA52COMPAT (setup.py, lua52.py)
    from .. import _luajit21 as luajit21
except ImportError:   # built without it (no C compiler): the stock lupa, which lacks what LUA52COMPAT gives
    from lupa import luajit21

from .errors import FOREIGN_OBJECT, LuaError
from .memory import BufferRegistry
from .paths import lua_dir


# Lua strings are bytes. They cross to Python as UTF-8 text, with any byte that is not UTF-8 kept
# as a surrogate escape (as os.fsdecode does) so that reading never fails and the same bytes go
# back to Lua.
STRING_ENCODING = "luabridge-utf-8"


def _find_codec(name: str) -> codecs.CodecInfo | None:
    if name.replace("_", "-") != STRING_ENCODING:
        return None
    return codecs.CodecInfo(name=STRING_ENCODING,
                            encode=lambda s, errors="strict": codecs.utf_8_encode(s, "surrogateescape"),
                            decode=lambda b, errors="strict": codecs.utf_8_decode(b, "surrogateescape", True))


codecs.register(_find_codec)
_thread = threading.local()
_LUPA_FOREIGN = "cannot mix objects from different Lua runtimes"  # lupa's refusal
_extra_paths: list[str] = []
# What Lua calls back: each provider(bridge) -> {name: function}, registered at start-up by
# luabridge/providers/__init__.py (the backends, file, image and plot modules), under the names
# declared in luabridge/providers/callbacks.py (name -> purpose)
_callback_providers: list[Callable[["Bridge"], dict[str, Any]]] = []
_declared_callbacks: dict[str, str] = {}


class _ForeignObjectsNamed:
    """`with foreign_objects_named:` turns lupa's refusal of another runtime's object into the
    LuaError that says why. A class, not a generator: it wraps hot calls, and costs a fraction of
    contextlib's microseconds."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        if kind is luajit21.LuaError and _LUPA_FOREIGN in str(error):
            raise LuaError(FOREIGN_OBJECT) from None
        return False


foreign_objects_named = _ForeignObjectsNamed()


class Lua52CompatWarning(UserWarning):
    """The running LuaJIT was built without LUAJIT_ENABLE_LUA52COMPAT, unlike Torch7's."""


def _has_lua52compat() -> bool:
    """Whether lupa's LuaJIT was built with LUAJIT_ENABLE_LUA52COMPAT, as Torch7's was: only
    then does `#` of a table call its __len."""
    probe = luajit21.LuaRuntime()
    return bool(probe.eval("#setmetatable({}, {__len = function() return 7 end}) == 7"))


LUA52COMPAT: bool = _has_lua52compat()
# luabridge._luajit21 is built at install time (setup.py); without it the install lacked a C
# compiler or make: reinstalling from the sdist where they are builds it
LUA52COMPAT_FIX = ("reinstall luabridge where a C compiler and make are installed "
                   "(pip install --force-reinstall --no-deps --no-binary luabridge luabridge), "
                   "or in a checkout: python -m luabridge.lua52 build")


def lua52compat_message(has_flag: bool) -> str | None:
    """What a LuaJIT without LUA52COMPAT gets wrong in Torch7 code, and the command that fixes
    it; None when the flag is there."""
    if has_flag:
        return None
    return ("luabridge runs on a LuaJIT built without LUA52COMPAT (Torch7's had it): "
            "`#` of an nn container is 0, so `for i = 1, #model` loops run zero times; "
            "pairs/ipairs ignore __pairs/__ipairs; a call whose '(' opens a new line is a syntax "
            f"error. Fix: {LUA52COMPAT_FIX}")


_lua52_notice_taken = False


def take_lua52_notice() -> str | None:
    """lua52compat_message for this process, the first time only (the caller says it)."""
    global _lua52_notice_taken
    if _lua52_notice_taken:
        return None
    _lua52_notice_taken = True
    return lua52compat_message(LUA52COMPAT)


def torch7_tree(template: str) -> bool:
    """Whether a LUA_PATH entry ('DIR/?.lua', 'DIR/?/init.lua') is the Lua tree of a Torch7
    install (DIR/torch/init.lua exists): what `torch-activate` puts in every old user's LUA_PATH."""
    base = template.split("?", 1)[0]
    return bool(base) and os.path.isfile(os.path.join(base, "torch", "init.lua"))


def lua_path_order(env_path: str) -> tuple[list[str], list[str]]:
    """The LUA_PATH entries to put before luabridge's tree and after it. As Torch7's LuaJIT read
    LUA_PATH, the entries before its ';;' come first (luabridge's tree stands where torch's install
    folders stood, in the defaults ';;' stands for): a repository's own `rnn` shadows the installed
    one. A Torch7 install's own tree goes after luabridge's wherever it stands, so an old torch
    activated in the shell never replaces luabridge's torch, nn, ...; its other rocks stay found."""
    own, _, rest = env_path.partition(";;")
    first = [e for e in own.split(";") if e]
    after = [e for e in first if torch7_tree(e)] + [e for e in rest.split(";") if e]
    return [e for e in first if not torch7_tree(e)], after


class Bridge:
    """A thread's Lua runtime together with the Python state its Lua side calls back into."""

    def __init__(self) -> None:
        notice = take_lua52_notice()
        if notice:
            warnings.warn(notice, Lua52CompatWarning, stacklevel=4)
        self.lua = luajit21.LuaRuntime(unpack_returned_tuples=True, encoding=STRING_ENCODING)
        self.buffers = BufferRegistry()
        self.modules: dict[str, Any] = {}   # Lua modules the layers above keep (see `module`)
        # the Models built here: model/handle.py's ModelCache, made on first use (this layer may not name it)
        self.model_cache: object = None
        callbacks: dict[str, Any] = {"is_interrupt": _is_interrupt}
        for provider in _callback_providers:
            given = provider(self)
            undeclared = sorted(set(given) - set(_declared_callbacks))
            if undeclared:
                raise RuntimeError(f"{provider.__module__} gives Python callbacks that are not declared in "
                                   f"luabridge/providers/callbacks.py: {', '.join(undeclared)}")
            callbacks.update(given)
        dirs = [str(lua_dir()), *_extra_paths]
        boot = _loaded(self.lua.globals().loadfile(f"{dirs[0]}/luabridge/core/runtime.lua"))
        self._protected = boot(self.lua.table_from(callbacks), self.lua.table_from(sorted(_declared_callbacks)),
                               ";".join(dirs), dirs[0])
        self._lua_type = self.lua.globals().type
        env_path = os.environ.get("LUA_PATH")
        if env_path:
            g = self.lua.globals()
            first, after = lua_path_order(env_path)
            g.package.path = ";".join([*first, g.package.path, *after])

    def call(self, fn: Any, *args: Any) -> Any:
        """Calls a Lua function, turning a Lua error into LuaError with its traceback."""
        with foreign_objects_named:
            result = self._protected(fn, *args)
        if not isinstance(result, tuple):  # true alone: the function returned nothing
            return None
        if result[0] is False:
            if _is_interrupt(result[3]):   # Ctrl-C inside a callback: Python's own exception
                raise result[3]
            raise LuaError(str(result[1]), str(result[2] or ""))
        rest = result[1:]
        return rest[0] if len(rest) == 1 else rest

    def check_owned(self, obj: Any) -> None:
        """Raises LuaError for an object of another thread's runtime: its fields would be read
        against this runtime's buffers, which are not the ones it points into."""
        try:
            self._lua_type(obj)
        except luajit21.LuaError:
            raise LuaError(FOREIGN_OBJECT) from None

    def load(self, code: str, chunkname: str) -> Any:
        return _loaded(self.lua.globals().loadstring(code, chunkname))

    def stop_workers(self) -> None:
        """Ends the worker threads this runtime started and waits for them (luabridge.stop_workers)."""
        self.call(self.load(_STOP_WORKERS, "=stop_workers"))

    def module(self, name: str) -> Any:
        """The Lua module `name` (required on first use): a per-runtime cache for the layers
        above, which keep their Lua helpers here rather than by the id of a runtime."""
        m = self.modules.get(name)
        if m is None:
            m = self.modules[name] = self.call(self.lua.globals().require, name)
        return m


# Every team of worker threads a runtime started registers its stop with lua/threads/pthread.lua;
# a runtime that never loaded it has none (and this loads nothing)
_STOP_WORKERS = "local p = package.loaded['threads.pthread']; if p then p.stopAll() end"


def _is_interrupt(error: Any) -> bool:
    """True for the exceptions that stop a program rather than report a failure (Ctrl-C's
    KeyboardInterrupt, SystemExit): no Lua error stands in for them."""
    return isinstance(error, BaseException) and not isinstance(error, Exception)


def _loaded(result: Any) -> Any:
    """The function from loadstring/loadfile, or LuaError with the syntax message."""
    if isinstance(result, tuple):
        raise LuaError(str(result[1]))
    return result


def provide_callbacks(provider: Callable[[Bridge], dict[str, Any]]) -> None:
    """Adds functions for Lua to call (provider(bridge) -> {name: function}) to the
    __luabridge_py table of every runtime created from now on."""
    _callback_providers.append(provider)


def declare_callbacks(table: dict[str, str]) -> None:
    """Declares the names (name -> purpose) of the functions Lua may call: a provider giving
    another name is refused, and every runtime's Lua boot checks that each one is present."""
    _declared_callbacks.update(table)


def bridge() -> Bridge:
    b = getattr(_thread, "bridge", None)
    if b is None:
        b = _thread.bridge = Bridge()
    return b


def runtime() -> luajit21.LuaRuntime:
    """The calling thread's LuaJIT runtime, created on first use."""
    return bridge().lua


def stop_workers() -> None:
    """Ends the worker threads that the calling thread's runtime started for its own work, and
    returns once they have ended: the team that runs large fused groups and the parallel loops
    (max pooling's), and the second-thread product worker (LUABRIDGE_GEMM_ASYNC=1). The runtime
    stays usable: a later operation that wants threads starts them again. Without it they end
    within about a second of their thread's end, or when Python collects the runtime; call it
    where a thread goes on without luabridge (a server's thread between requests, a thread pool's
    worker, a test that counts threads), as one calls an executor's shutdown(). Each thread has a
    runtime of its own, and this acts on the calling thread's only; it makes no runtime where the
    thread has none."""
    b = getattr(_thread, "bridge", None)
    if b is not None:
        b.stop_workers()


def add_lua_path(directory: str | os.PathLike) -> None:
    """Adds a directory to package.path (for this thread's runtime and any created later)."""
    d = str(Path(directory).resolve())
    if d not in _extra_paths:
        _extra_paths.append(d)
    b = getattr(_thread, "bridge", None)
    if b is not None:
        g = b.lua.globals()
        g.package.path = f"{d}/?.lua;{d}/?/init.lua;" + g.package.path


def execute(code: str) -> Any:
    """Runs a chunk of Lua; returns what it returns."""
    b = bridge()
    return b.call(b.load(code, "=(execute)"))


def eval(expr: str) -> Any:  # noqa: A001 - mirrors lupa's name
    """Evaluates a Lua expression."""
    b = bridge()
    return b.call(b.load("return " + expr, "=(eval)"))


def dofile(path: str | os.PathLike) -> Any:
    """Runs a Lua file; errors carry the file name and line."""
    b = bridge()
    return b.call(_loaded(b.lua.globals().loadfile(str(path))))


def require(name: str) -> Any:
    """Lua's require: loads a module once and returns it."""
    b = bridge()
    return b.call(b.lua.globals().require, name)
