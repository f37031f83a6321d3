"""The `luabridge th` prompt, after Torch7's trepl: line editing, history and tab completion
(Python's readline, when stdin is a terminal), chunks continued over lines until complete, results
printed as trepl prints them and kept in _RESULTS, `$ command` for the shell, `?` for help, and
Ctrl-C stopping a running chunk (luabridge/th/interrupt.py).
The Lua side (print, completion, running a chunk) is lua/luabridge/th/repl.lua."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..core.errors import LuaError
from ..core.runtime import Bridge
from .interrupt import Interrupter

PROMPT, MORE = "th> ", "..> "
PRELOADED = ("torch", "paths", "sys", "xlua", "dok")  # what trepl loads before anything runs
HISTORY_LENGTH = 10_000
# readline splits words at these: everything but identifier characters, '.' and ':' (as trepl)
_WORD_BREAKS = " \t\r\n!\"#$%&'()*+,-/;<=>?@[\\]^`{|}~"

BANNER = "luabridge th | Torch7 on LuaJIT | ? for help, Ctrl-D to quit"
HELP = """\
luabridge th: a prompt for Lua Torch7 code (as Torch7's th).

  an expression        prints its values: tables laid out, tensors as torch7 prints them;
                       a chunk ending in ';' or starting with 'print' prints nothing more
  = expression         the same (as Lua's own prompt)
  unfinished chunks    continue on the next line (..>) until they are complete; Ctrl-C drops them
  Ctrl-C while running stops the chunk with 'interrupted!' (twice quits, for a loop that does not stop)
  _RESULTS, _LAST      every value printed (the first of each line), and the last one
  $ command            runs a shell command; its output also goes to _RESULTS
  setprintlevel(n)     how deep print opens nested tables (0: Lua's plain print)
  Tab                  completes names, fields and methods: torch.Ten<Tab>, t:si<Tab>
  Up, Down, Ctrl-R     history, kept in $TREPL_HISTORY or ~/.luahistory
  exit or Ctrl-D       quits
"""


def history_path() -> Path:
    """Where the history lives: $TREPL_HISTORY, else ~/.luahistory (trepl's file)."""
    return Path(os.environ.get("TREPL_HISTORY") or Path.home() / ".luahistory")


def preload(b: Bridge) -> None:
    """What Torch7's th does before running anything: torch (required), then paths, sys, xlua and
    dok when present; require takes relative names, Penlight's globals load when Penlight is on
    package.path; print lays out tables; _RESULTS and setprintlevel exist."""
    g = b.lua.globals()
    b.call(g.require, "torch")
    for name in PRELOADED[1:]:
        try:
            b.call(g.require, name)
        except LuaError:
            pass
    lua_repl = b.call(g.require, "luabridge.th.repl")
    g.print, g.setprintlevel = lua_repl.print, lua_repl.setprintlevel
    g._RESULTS, g._LAST = b.lua.table(), ""
    b.call(b.call(g.require, "luabridge.th.trepl").install)   # last: who() lists what comes after


def _is_incomplete(error: str) -> bool:
    """A chunk that is only unfinished: the parser reached its end (Lua's REPL uses the same test)."""
    return error.endswith("'<eof>'")


def complete(b: Bridge, text: str) -> list[str]:
    """The completions of `text` (a name or a path: 'torch.Ten', 't:si') in b's globals, as the
    prompt's Tab gives them (the Jupyter kernel's too); none when looking them up fails."""
    try:
        found = b.call(b.module("luabridge.th.repl").complete, text)
    except LuaError:
        return []
    return [found[i] for i in range(1, len(found) + 1)]


def load_chunk(b: Bridge, code: str, chunkname: str = "=stdin") -> tuple[Any, str]:
    """The compiled chunk, or None and the parser's message."""
    result = b.lua.globals().loadstring(code, chunkname)
    if isinstance(result, tuple):
        return None, str(result[1])
    return result, ""


def compile_chunk(b: Bridge, chunk: str, chunkname: str = "=stdin") -> tuple[Any, bool, str]:
    """(function, print its results?, the parser's message when the function is None): an
    expression list first (its values are shown), else statements; a chunk ending in ';' or
    starting with 'print' shows nothing."""
    quiet = chunk.rstrip().endswith(";") or chunk.lstrip().startswith("print")
    # as an expression list first: select passes the values on, and keeps the expression's
    # calls out of tail position so that their errors still name the chunk's line
    expression, _ = load_chunk(b, f"return select(1, {chunk}\n)", chunkname)
    if expression is not None and not quiet:
        return expression, True, ""
    statement, error = load_chunk(b, chunk, chunkname)
    return statement, False, error


def is_unfinished(b: Bridge, chunk: str, error: str) -> bool:
    """Whether a chunk that does not compile only lacks its end (more lines would finish it)."""
    return _is_incomplete(error) or _is_incomplete(load_chunk(b, "return " + chunk)[1])


class Prompt:
    def __init__(self, b: Bridge, interrupter: Interrupter) -> None:
        self.b = b
        self.interrupter = interrupter
        self.g = b.lua.globals()
        self.lua_repl = b.call(self.g.require, "luabridge.th.repl")
        self.terminal = sys.stdin.isatty()
        self.readline: Any = None
        self._matches: list[str] = []
        if self.terminal:
            self._setup_readline()

    # input -------------------------------------------------------------------------------------

    def _setup_readline(self) -> None:
        try:
            import readline
        except ImportError:  # Python built without it: plain input
            return
        self.readline = readline
        readline.set_completer(self._complete)
        readline.set_completer_delims(_WORD_BREAKS)
        if "libedit" in (readline.__doc__ or ""):
            readline.parse_and_bind("bind ^I rl_complete")
        else:
            readline.parse_and_bind("tab: complete")
        readline.set_auto_history(False)  # a whole chunk is one entry, added when complete
        readline.set_history_length(HISTORY_LENGTH)
        try:
            readline.read_history_file(history_path())
        except OSError:  # no history yet
            pass

    def _complete(self, text: str, state: int) -> str | None:
        if state == 0:
            self._matches = complete(self.b, text)
        return self._matches[state] if state < len(self._matches) else None

    def _flush(self) -> None:
        """Lua writes through C's stdout, Python through its own buffer: both out, in order."""
        self.g.io.stdout.flush(self.g.io.stdout)
        sys.stdout.flush()
        sys.stderr.flush()

    def _read(self, prompt: str) -> str | None:
        self._flush()
        try:
            return input(prompt)
        except EOFError:
            return None

    def _remember(self, chunk: str) -> None:
        if self.readline is None or not chunk.strip():
            return
        self.readline.add_history(chunk)
        try:
            self.readline.write_history_file(history_path())
        except OSError as e:
            print(f"luabridge th: history not saved ({e})", file=sys.stderr)

    def _wants_exit(self) -> bool:
        """trepl asks before quitting at a terminal; piped input just ends."""
        if not self.terminal:
            return True
        answer = self._read("Do you really want to exit ([y]/n)? ")
        if answer is None:
            print()
        return answer is None or answer.strip().lower() in ("", "y")

    # evaluation --------------------------------------------------------------------------------

    def _compile(self, chunk: str) -> tuple[Any, bool, str]:
        return compile_chunk(self.b, chunk)

    def _unfinished(self, chunk: str, error: str) -> bool:
        return is_unfinished(self.b, chunk, error)

    def _run(self, chunk: str) -> None:
        fn, show, error = self._compile(chunk)
        if fn is None:
            print(error, file=sys.stderr)
            return
        started = time.perf_counter()
        try:
            with self.interrupter:
                self.b.call(self.lua_repl.run, fn, show)
        except LuaError as e:
            self._flush()
            print(e, file=sys.stderr)  # the message, then the user's traceback
        except KeyboardInterrupt:
            self._flush()
            print("interrupted", file=sys.stderr)
        if self.terminal:  # trepl times every command
            self._flush()
            print(" " * 70 + f"[{time.perf_counter() - started:0.4f}s]")

    def _shell(self, command: str) -> None:
        """`$ command`: the shell's output as it came (bytes, so any encoding), kept in _RESULTS."""
        if "\0" in command:  # no C string holds it: the shell could only see a cut command
            print("luabridge th: the shell command holds a NUL byte: not run", file=sys.stderr)
            return
        try:
            done = subprocess.run(command, shell=True, capture_output=True)
        except OSError as e:  # no shell, no process left to start
            print(f"luabridge th: the shell command could not start: {e}", file=sys.stderr)
            return
        self._flush()
        sys.stdout.buffer.write(done.stdout)
        sys.stderr.buffer.write(done.stderr)
        results = self.g._RESULTS
        results[len(results) + 1] = done.stdout
        self.g._LAST = done.stdout

    def _read_chunk(self, line: str) -> str:
        """The chunk that starts with `line`, read on while it is unfinished."""
        chunk = line
        while True:
            fn, _, error = self._compile(chunk)
            if fn is not None or not self._unfinished(chunk, error):
                return chunk
            more = self._read(MORE)
            if more is None:  # input ended inside the chunk: running it reports the error
                return chunk
            chunk += "\n" + more

    def loop(self) -> int:
        print(BANNER)
        while True:
            try:
                line = self._read(PROMPT)
                if line is None or line.strip() == "exit":
                    if self._wants_exit():
                        return 0
                    continue
                stripped = line.strip()
                if not stripped:
                    continue
                if stripped.startswith("$"):
                    self._remember(line)
                    self._shell(stripped[1:])
                    continue
                if stripped.startswith("?"):
                    self._remember(line)
                    topic = stripped[1:].strip()
                    print(HELP if not topic else f"no documentation here for {topic}: see the docs (docs/ in a checkout)")
                    continue
                chunk = self._read_chunk(stripped[1:] if stripped.startswith("=") else line)
                self._remember(chunk)
                self._run(chunk)
            except KeyboardInterrupt:  # Ctrl-C at a prompt, or before the chunk runs, drops the line
                print()
