"""Ctrl-C for `luabridge th`: stops the Lua code that is running with the error 'interrupted!',
as LuaJIT's own interpreter (and so Torch7's th) does.

While Lua runs, Python's signal handlers wait for the next Python bytecode, which a Lua loop may
never reach. Python's C-level handler still writes each signal to the wakeup fd; a thread waiting
on it turns LuaJIT's hooks on (lua_sethook, which LuaJIT allows from a signal handler, so from
any thread), and the hook (lua/luabridge/th/interrupt.lua) raises the error in the Lua thread. A
second Ctrl-C before Lua stops quits the process, as LuaJIT's interpreter: code running in a
compiled trace checks no hooks.

Between runs (at the prompt) the watcher makes Ctrl-C a KeyboardInterrupt in the main thread:
Python's readline looks at signals only when one interrupts its select(), and a SIGINT that came
just before (or reached another thread) would wait there for the next key. So the watcher sends
the main thread NUDGE until its handler has raised.

The handler is installed whatever SIGINT's disposition was inherited: a job started with SIGINT
ignored (nohup, a shell's background job, some CI runners) still stops on Ctrl-C, as LuaJIT's
interpreter sets its handler around every chunk it runs (luajit.c's docall).

Scoped (`Interrupter(b, scoped=True)`, the Jupyter kernel and the %%lua magic): the wakeup fd and
the SIGINT handler are put in place by each `with interrupter:` and the caller's put back after
it (a kernel ignores SIGINT between cells); a Ctrl-C between runs does nothing. (A handler that
also raised KeyboardInterrupt in a Python callback would race the hook, which can then fire in
Lua's error handler: one way to stop, the hook, at any point of the run.)
A second one while the hook waits quits, as in th (a notebook then restarts the kernel)."""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any


from ..core.runtime import Bridge, luajit21

_MASK_CALL, _MASK_RETURN, _MASK_COUNT = 1, 2, 8   # lua.h's LUA_MASK*
QUIT_STATUS = 128 + signal.SIGINT
NUDGE = signal.SIGUSR2   # only the watcher sends it, only to the main thread
NUDGE_AGAIN_S = 0.1      # a nudge that came before the main thread waited is sent again
_libc = ctypes.CDLL(None)


class Interrupter:
    """`with interrupter:` around each Lua run makes Ctrl-C stop that run; between runs (at the
    prompt) Ctrl-C is Python's KeyboardInterrupt."""

    def __init__(self, b: Bridge, scoped: bool = False) -> None:
        lua_side = b.call(b.lua.globals().require, "luabridge.th.interrupt")
        lib = ctypes.CDLL(luajit21.__file__)
        self._sethook = lib.lua_sethook
        self._sethook.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        gethook = lib.lua_gethook
        gethook.argtypes, gethook.restype = [ctypes.c_void_p], ctypes.c_void_p
        self._state = int(b.call(lua_side.prepare), 16)
        self._hook = gethook(self._state)   # debug.sethook's C hook, which calls the Lua one
        self._disarm()
        # _running and _armed change together under the lock: the watcher cannot arm the hook
        # after __exit__ looked, which would interrupt whatever Lua runs next
        self._lock = threading.Lock()
        self._running = False
        self._armed = False
        self._main = threading.get_ident()
        self._nudging = False   # a Ctrl-C between runs waits for its KeyboardInterrupt
        self._answered = threading.Event()
        self._scoped = scoped
        self._saved: list[tuple[Any, int]] = []   # scoped: what each `with` replaced, to put back
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        self._write_end = write_end
        if not scoped:
            signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
            signal.signal(signal.SIGINT, self._on_sigint)
            signal.signal(NUDGE, self._on_nudge)
        threading.Thread(target=self._watch, args=(read_end,), daemon=True,
                         name="luabridge th Ctrl-C").start()

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        """Nothing: the watcher, woken by the same signal, stops the Lua run or nudges."""

    def _on_nudge(self, signum: int, frame: FrameType | None) -> None:
        if self._nudging:  # a copy sent after the first was answered does nothing
            self._nudging = False
            self._answered.set()
            raise KeyboardInterrupt  # at the prompt: drops the line, as Python's own handler would

    def _watch(self, read_end: int) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, NUDGE})   # for the main thread
        while True:
            if signal.SIGINT in os.read(read_end, 64) and not self.interrupt() and not self._scoped:
                self._nudge()

    def _nudge(self) -> None:
        """One KeyboardInterrupt in the main thread, between runs; none if a run started meanwhile
        (its Ctrl-C is the next one)."""
        self._answered.clear()
        self._nudging = True
        while self._nudging and not self._running:
            signal.pthread_kill(self._main, NUDGE)
            self._answered.wait(NUDGE_AGAIN_S)
        self._nudging = False

    def interrupt(self) -> bool:
        """What a Ctrl-C does while Lua runs: arms the hook, or quits when it already is. False
        between runs."""
        with self._lock:
            if not self._running:
                return False
            if self._armed:
                sys.stderr.write("\ninterrupted twice: quitting\n")
                sys.stderr.flush()
                _libc.fflush(None)   # what Lua wrote (C's buffered stdout) still reaches a log file
                os._exit(QUIT_STATUS)
            self._armed = True
            self._sethook(self._state, self._hook, _MASK_CALL | _MASK_RETURN | _MASK_COUNT, 1)
            return True

    def _disarm(self) -> None:
        # from C, not through debug.sethook: a Lua call would itself be interrupted by the hook
        self._sethook(self._state, None, 0, 0)

    def __enter__(self) -> None:
        if self._scoped:
            self._install()
        with self._lock:
            self._armed = False
            self._running = True

    def __exit__(self, kind: Any, error: Any, tb: TracebackType | None) -> None:
        with self._lock:
            if self._scoped and len(self._saved) > 1:   # an inner run (Lua -> Python -> Lua) ends
                self._saved.pop()
                return
            self._running = False
            if self._armed:  # the run may have ended before the hook fired: none may stay for the next
                self._disarm()
        if self._scoped:
            handler, fd = self._saved.pop()
            if handler is not None:
                signal.signal(signal.SIGINT, handler)
                signal.set_wakeup_fd(fd)

    def _install(self) -> None:
        """Scoped: this run's handler and wakeup fd, the caller's kept for __exit__ (nothing
        installed off the main thread, where Python allows no handler: its runs stay as they were)."""
        if self._saved or threading.get_ident() != threading.main_thread().ident:
            self._saved.append((None, -1))
            return
        handler = signal.signal(signal.SIGINT, self._on_sigint)
        self._saved.append((handler, signal.set_wakeup_fd(self._write_end, warn_on_full_buffer=False)))
