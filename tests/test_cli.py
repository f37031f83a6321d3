"""The `luabridge th` command: scripts with arguments, -e, `python -m luabridge`, the prompt."""
from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Callable

import pytest

SCRIPT_BIN = Path(sys.executable).parent / "luabridge"
DEADLINE = 120   # seconds to wait for a child's exit or output: only a broken th takes that long
# SIGINT's disposition a th under test starts with (a nohup'ed or background job's is 'ignored')
SIGINT_AT_START = {"handled": signal.SIG_DFL, "ignored": signal.SIG_IGN}


def entry_point() -> list[str]:
    """The installed console script (next to this Python), else the one on PATH."""
    if SCRIPT_BIN.exists():
        return [str(SCRIPT_BIN)]
    found = shutil.which("luabridge")
    if found is None:
        pytest.skip("the luabridge console script is not installed")
    return [found]


def th(*args: str, stdin: str | None = None, cwd: Path | None = None,
       module: bool = False) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "luabridge"] if module else entry_point()
    return subprocess.run([*cmd, "th", *args], input=stdin, cwd=cwd, capture_output=True,
                          text=True, errors="replace", timeout=DEADLINE)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_script_sees_arg_table_and_torch(tmp_path):
    write(tmp_path / "show.lua", """
print(arg[0], #arg)
for i = 1, #arg do print(i, arg[i]) end
print(torch.typename(torch.FloatTensor(2)))
""")
    r = th("show.lua", "first", "two words", "-x", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "show.lua\t3", "1\tfirst", "2\ttwo words", "3\t-x", "torch.FloatTensor"]


def test_script_by_absolute_path_from_other_cwd(tmp_path):
    script = write(tmp_path / "abs.lua", "print(arg[0], #arg)\n")
    r = th(str(script), cwd=Path("/"))
    assert (r.returncode, r.stdout) == (0, f"{script}\t0\n")


def test_script_error_exit_status_and_traceback(tmp_path):
    write(tmp_path / "bad.lua", """local function inner()
  error('bad thing')
end
inner()
""")
    r = th("bad.lua", cwd=tmp_path)
    assert r.returncode == 1
    assert "bad.lua:2: bad thing" in r.stderr
    assert "stack traceback" in r.stderr
    assert "bad.lua:4: in main chunk" in r.stderr


def test_torch_error_names_the_script_line(tmp_path):
    write(tmp_path / "narrow.lua",
          "local t = torch.Tensor(3)\nprint('before')\nt:narrow(1, 3, 2)\nprint('after')\n")
    r = th("narrow.lua", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout == "before\n"
    assert "narrow.lua:3: narrow: out of range" in r.stderr


def test_script_syntax_error(tmp_path):
    write(tmp_path / "syntax.lua", "x = 1\ny = = 2\n")
    r = th("syntax.lua", cwd=tmp_path)
    assert r.returncode == 1
    assert "syntax.lua:2:" in r.stderr


def test_missing_script(tmp_path):
    r = th("nope.lua", cwd=tmp_path)
    assert r.returncode == 1
    assert "nope.lua" in r.stderr


def test_dash_e_runs_in_order_then_exits():
    r = th("-e", "x = 6", "-e", "print(x * 7)")
    assert (r.returncode, r.stdout) == (0, "42\n")


def test_dash_e_error():
    r = th("-e", "print('ok')", "-e", "torch.Tensor(2):select(1, 5)")
    assert r.returncode == 1
    assert r.stdout == "ok\n"
    assert "(command line):1: select: index 5 out of range" in r.stderr


def test_dash_e_syntax_error():
    r = th("-e", "x = = 1")
    assert r.returncode == 1
    assert "(command line):1:" in r.stderr


def test_dash_e_before_script(tmp_path):
    write(tmp_path / "uses.lua", "print(shared + 1, arg[1])\n")
    r = th("-e", "shared = 41", "uses.lua", "a", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "42\ta\n")


def test_print_tensor_from_script():
    r = th("-e", "print(torch.Tensor({{1, 2}, {3, 4}}))")
    assert r.returncode == 0, r.stderr
    # print adds its newline after tostring's trailing one, as in torch7
    assert r.stdout == " 1  2\n 3  4\n[torch.DoubleTensor of size 2x2]\n\n"


def test_python_dash_m():
    r = th("-e", "print(torch.typename(torch.Tensor()))", module=True)
    assert (r.returncode, r.stdout) == (0, "torch.DoubleTensor\n")


def test_python_dash_m_script_error(tmp_path):
    write(tmp_path / "e.lua", "\n\nerror('third line')\n")
    r = th("e.lua", cwd=tmp_path, module=True)
    assert r.returncode == 1
    assert "e.lua:3: third line" in r.stderr


def prompt_session(lines: list[str], *args: str) -> subprocess.CompletedProcess:
    return th(*args, stdin="".join(line + "\n" for line in lines))


def outputs(stdout: str) -> list[str]:
    """What the session printed, with the banner and prompts taken out."""
    body = stdout.split("\n", 1)[1]
    return [part for part in body.replace("th> ", "\n").split("\n") if part]


def test_prompt_expressions_statements_and_eof():
    r = prompt_session(["x = 20", "x + 1", "= x * 2", "print('hi')", "1, 'two'", "local y = 3"])
    assert r.returncode == 0, r.stderr
    assert outputs(r.stdout) == ["21", "40", "hi", "1\ttwo"]
    assert r.stderr == ""


def test_prompt_reports_errors_and_continues():
    r = prompt_session(["error('boom')", "x = = 1", "torch.Tensor(2):narrow(1, 2, 5)", "= 'still here'"])
    assert r.returncode == 0
    # each error with the traceback of the prompt's own frames (the chunk is stdin's main chunk)
    assert r.stderr.splitlines() == [
        "stdin:1: boom", "stack traceback:", "\tstdin:1: in main chunk",
        "stdin:1: unexpected symbol near '='",
        "stdin:1: narrow: out of range: index 2, size 5 for dimension 1 of size 2",
        "stack traceback:", "\tstdin:1: in main chunk"]
    assert outputs(r.stdout) == ["still here"]


def test_prompt_continues_unfinished_chunks():
    r = prompt_session(["for i = 1, 2 do", "print(i * 10)", "end", "s = [[a", "b]]", "s", "x = {"])
    assert outputs(r.stdout) == ["..> ..> 10", "20", "..> ", "a", "b", "..> "]
    # input ended inside a chunk: its error, once
    assert r.stderr.startswith("stdin:1: ") and r.stderr.endswith(" near '<eof>'\n")
    assert r.stderr.count("\n") == 1


def test_prompt_semicolon_quiets_and_results_are_kept():
    r = prompt_session(["f = function() return 5, nil end", "f();", "f()", "_RESULTS[1], #_RESULTS, _LAST",
                        "print(7)"])
    assert outputs(r.stdout) == ["5\tnil", "5\t1\t5", "7"]


def test_prompt_shell_command_and_help():
    r = prompt_session(["$ echo from-the-shell", "_LAST", "?"])
    assert outputs(r.stdout)[:2] == ["from-the-shell", "from-the-shell"]
    assert "Tab" in r.stdout and "$ command" in r.stdout


def test_prompt_shell_line_with_a_nul_byte_is_refused_and_the_prompt_goes_on():
    """Refused with a message, as no C string holds it (trepl's io.popen would run a cut command);
    a command's output is kept as its bytes, whatever their encoding."""
    r = prompt_session(["$ echo a\0b", "$ printf 'raw \\377 bytes'", "#_LAST, _LAST:byte(5)", "= 'still here'"])
    assert r.returncode == 0, r.stderr
    assert r.stderr == "luabridge th: the shell command holds a NUL byte: not run\n"
    assert outputs(r.stdout) == ["raw \ufffd bytes", "11\t255", "still here"]


def test_prompt_prints_tensors():
    r = prompt_session(["t = torch.Tensor(2):fill(3)", "t"])
    assert r.returncode == 0, r.stderr
    assert " 3\n 3\n[torch.DoubleTensor of size 2]\n" in r.stdout


def test_prompt_empty_input_exits_zero():
    r = prompt_session([])
    assert r.returncode == 0
    assert r.stdout.startswith("luabridge th")


def test_dash_i_enters_prompt_after_code():
    r = prompt_session(["= v"], "-e", "v = 'set by -e'", "-i")
    assert r.returncode == 0, r.stderr
    assert outputs(r.stdout) == ["set by -e"]


def test_top_level_help_describes_every_command():
    r = subprocess.run([*entry_point(), "--help"], capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0
    commands = [line.split()[0] for line in r.stdout.split("commands:")[1].split("options:")[0]
                .splitlines() if line.startswith("  ") and not line.startswith("   ")]
    assert commands == ["th", "info", "convert", "export"]
    for option in ("-e", "-l", "th -h", "info -h", "convert -h", "export -h", "--version"):
        assert option in r.stdout


@pytest.mark.parametrize("argv,code", [([], 2), (["frobnicate"], 2), (["th", "--frob"], 2),
                                       (["th", "-e"], 2)])
def test_usage_errors(argv, code):
    r = subprocess.run([*entry_point(), *argv], capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == code
    assert "usage" in r.stderr or "luabridge --help" in r.stderr


def test_th_help_and_version():
    r = th("-h")
    assert r.returncode == 0
    for option in ("-l NAME", "-e STATEMENT", "-i, --interactive", "--version"):
        assert option in r.stdout
    r = th("--version")
    import luabridge
    assert r.returncode == 0
    assert r.stdout.startswith(f"luabridge th {luabridge.__version__} (LuaJIT 2.1")


def test_preloads_as_trepl():
    r = th("-e", "print(type(torch), type(paths), type(sys), type(xlua), type(rawget(_G, 'nn')))")
    assert (r.returncode, r.stdout) == (0, "table\ttable\ttable\ttable\tnil\n")


@pytest.mark.parametrize("flags", [["-l", "nn"], ["-lnn"]])
def test_dash_l_loads_a_library(flags):
    r = th(*flags, "-e", "print(torch.type(nn.Linear(2, 3)))")
    assert (r.returncode, r.stdout) == (0, "nn.Linear\n")


def test_dash_l_missing_library_is_skipped():
    r = th("-l", "no_such_library", "-e", "print('went on')")
    assert (r.returncode, r.stdout) == (0, "went on\n")
    assert r.stderr.startswith("could not load no_such_library, skipping\nmodule 'no_such_library' not found")


def test_options_after_the_script_are_its_arguments(tmp_path):
    write(tmp_path / "args.lua", "print(#arg, arg[1], arg[2], arg[3])\n")
    r = th("args.lua", "-e", "x", "-h", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "3\t-e\tx\t-h\n")


def test_script_traceback_shows_only_the_scripts_frames(tmp_path):
    # nn's frames and torch's checks are luabridge's own: only train.lua's frames are shown
    write(tmp_path / "train.lua", """require 'nn'
local model = nn.Linear(3, 2)
local Trainer = {}
function Trainer.step(input)
  local output = model:forward(input)
  return output
end
Trainer.step(torch.Tensor(4))
""")
    r = th("train.lua", cwd=tmp_path)
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert lines[0].startswith("train.lua:5: nn.Linear: ") and "4" in lines[0]
    assert lines[1:] == ["stack traceback:", "\ttrain.lua:5: in function 'step'", "\ttrain.lua:8: in main chunk"]


def test_traceback_in_a_containers_message_shows_the_scripts_frames(tmp_path):
    """nn's containers put the failing module's traceback into the error message (as torch7's
    do): that one too lists the script's frames only."""
    write(tmp_path / "net.lua", """require 'nn'
local function build()
  return nn.Sequential():add(nn.Linear(3, 4)):add(nn.Linear(5, 2))
end
local net = build()
net:forward(torch.randn(3))
""")
    r = th("net.lua", cwd=tmp_path)
    assert r.returncode == 1
    assert "In 2 module of nn.Sequential:\nnet.lua:6: nn.Linear: size mismatch" in r.stderr
    traces = r.stderr.split("stack traceback:\n")[1:]
    assert len(traces) == 2 and all(t.split("\n\n")[0].strip() == "net.lua:6: in main chunk" for t in traces)


def test_traceback_of_user_code_called_back_by_the_library(tmp_path):
    """A user function that optim or Tensor:apply calls fails: the traceback shows the user's
    frames on both sides of the library's, and none of the library's own."""
    write(tmp_path / "fit.lua", """require 'optim'
local x = torch.Tensor(3):fill(1)
local function loss(p)
  error('loss of ' .. p:sum())
end
local function feval(p) local l = loss(p) return l end
if arg[1] == 'apply' then x:apply(function(v) local l = loss(x) return l end) end
optim.sgd(feval, x, {learningRate = 0.1})
""")
    r = th("fit.lua", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "fit.lua:4: loss of 3", "stack traceback:", "\tfit.lua:4: in function 'loss'",
        "\tfit.lua:6: in function 'opfunc'", "\tfit.lua:8: in main chunk"]
    r = th("fit.lua", "apply", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "fit.lua:4: loss of 3", "stack traceback:", "\tfit.lua:4: in function 'loss'",
        "\tfit.lua:7: in function 'fn'", "\tfit.lua:7: in main chunk"]


# print as trepl: the expected layouts follow trepl's printer (init.lua's print_new): '{' and '}'
# at 4 spaces per level, entries 2 further as `key : value`, strings quoted inside tables,
# tensors and storages by type and size, tables past the depth limit (or empty) as {...}

def test_print_lays_out_tables():
    r = th("-e", "print({10, 'a', {x = true}, {}})")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("{\n  1 : 10\n  2 : \"a\"\n  3 : \n    {\n      x : true\n    }\n"
                        "  4 : {...}\n}\n")


def test_print_shows_tensors_inside_tables_by_size():
    r = th("-e", "print({torch.Tensor(2, 3), torch.FloatStorage(4), torch.LongTensor()})")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("{\n  1 : DoubleTensor - size: 2x3\n  2 : FloatStorage - size: 4\n"
                        "  3 : LongTensor - empty\n}\n")


def test_print_depth_limit_and_setprintlevel():
    # five levels open by default; the table at the fifth level's entry shows as {...}
    r = th("-e", "print({a = {b = {c = {d = {e = {f = 1}}}}}})")
    opening, closing = [], []
    for depth, key in enumerate("abcde"):
        opening += [" " * (4 * depth) + "{", " " * (4 * depth + 2) + f"{key} : " + ("{...}" if key == "e" else "")]
        closing.insert(0, " " * (4 * depth) + "}")
    assert (r.returncode, r.stdout.splitlines()) == (0, opening + closing)
    r = th("-e", "setprintlevel(1); print({a = {b = 1}}); setprintlevel(0); print({})")
    lines = r.stdout.splitlines()
    assert lines[:3] == ["{", "  a : {...}", "}"] and lines[3].startswith("table: 0x")


def test_print_values_and_objects_with_tostring():
    r = th("-l", "nn", "-e", "print(1, nil, 'x', torch.Timer() ~= nil); print(nn.Identity()); print({}, 2)")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1\tnil\tx\ttrue\nnn.Identity\n{}\n2\n"


# The prompt on a terminal: a pseudo-terminal driven as a person types (readline is on)

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r|\x07")


def _own_terminal(sigint: str) -> Callable[[], None]:
    """What the child runs before th, in the session spawn gave it: the pty becomes its
    controlling terminal (so Ctrl-C is SIGINT), and SIGINT starts as `sigint` (SIGINT_AT_START)."""
    def setup() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        signal.signal(signal.SIGINT, SIGINT_AT_START[sigint])
    return setup


class Terminal:
    """`luabridge th` on a pseudo-terminal: `type` sends keys, `expect` waits for output."""

    def __init__(self, spawn, home: Path, *args: str, sigint: str = "handled") -> None:
        (home / "inputrc").write_text("set enable-bracketed-paste off\nset bell-style none\n")
        env = {**os.environ, "HOME": str(home), "TREPL_HISTORY": str(home / "history"),
               "INPUTRC": str(home / "inputrc"), "TERM": "xterm"}
        main, child = os.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
        try:
            self.proc = spawn([*entry_point(), "th", *args], stdin=child, stdout=child, stderr=child,
                              env=env, cwd=home, preexec_fn=_own_terminal(sigint))
        finally:
            os.close(child)
        self.fd, self.raw, self.pos = main, b"", 0

    def text(self) -> str:
        return ESCAPES.sub("", self.raw.decode("utf-8", "replace"))

    def expect(self, wanted: str, timeout: float = DEADLINE) -> str:
        """Waits for `wanted`; returns what came before it since the last expect."""
        deadline = time.monotonic() + timeout
        while (found := self.text().find(wanted, self.pos)) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise AssertionError(f"{wanted!r} never came; after the last match: {self.text()[self.pos:]!r}")
            try:
                self.raw += os.read(self.fd, 65536)
            except OSError:  # the child closed the terminal
                raise AssertionError(f"{wanted!r} never came: {self.text()[self.pos:]!r}") from None
        before, self.pos = self.text()[self.pos:found], found + len(wanted)
        return before

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def close(self) -> int:
        """Waits for th to end (spawn kills it after the test if it never does)."""
        status = self.proc.wait(timeout=DEADLINE)
        self.release()
        return status

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def drop_unfinished_chunk(t: Terminal) -> None:
    """Ctrl-C at a '..>' prompt drops the chunk: back at 'th> '."""
    t.type("\x03")
    t.expect("th> ")


@pytest.fixture
def terminal(tmp_path, spawn):
    sessions: list[Terminal] = []

    def start(*args: str, sigint: str = "handled") -> Terminal:
        sessions.append(Terminal(spawn, tmp_path, *args, sigint=sigint))
        sessions[-1].expect("th> ")
        return sessions[-1]

    yield start
    for t in sessions:
        t.release()


def test_terminal_multiline_chunk_printing_and_timing(terminal):
    t = terminal()
    t.type("function sq(x)\r")
    t.expect("..> ")                      # unfinished: the chunk goes on
    t.type("  return x * x\r")
    t.expect("..> ")
    t.type("end\r")
    t.expect("th> ")
    t.type("sq(7), sq(1.5)\r")
    out = t.expect("th> ")
    assert "49\t2.25\n" in out
    assert re.search(r" {70}\[\d+\.\d{4}s\]", out)   # trepl times each command
    t.type("{n = sq(3)}\r")
    assert "{\n  n : 9\n}\n" in t.expect("th> ")
    t.type("_RESULTS[1], _LAST.n\r")
    assert "49\t9\n" in t.expect("th> ")
    t.type("for i = 1, 3 do\r")
    t.expect("..> ")
    drop_unfinished_chunk(t)
    t.type("sq(4)\r")
    assert "16\n" in t.expect("th> ")


def test_terminal_completion(terminal):
    t = terminal()
    t.type("torch.Ten\t")
    t.expect("torch.Tensor.")             # a table: completed with '.'
    t.type("\x7f(2, 5):fill(3):sum()\r")
    assert "30\n" in t.expect("th> ")
    t.type("t = torch.Tensor(2, 5)\r")
    t.expect("th> ")
    t.type("t:siz\t")
    t.expect("t:size(")                   # a method, found through the tensor's metatable
    t.type(")\r")
    assert "[torch.LongStorage of size 2]" in t.expect("th> ")
    t.type("t:si\t\t")                   # several matches: Tab twice lists them
    listed = t.expect("th> t:si")
    assert all(m in listed for m in ("t:sigmoid(", "t:sign(", "t:sin(", "t:sinh(", "t:size("))
    t.type("\x15my_value = 21\r")
    t.expect("th> ")
    t.type("my_v\t")
    t.expect("my_value ")                 # a number: completed with a space
    t.type("* 2\r")
    assert "42\n" in t.expect("th> ")


def test_terminal_errors_history_and_exit(terminal, tmp_path):
    t = terminal()
    t.type("local function f()\r")
    t.expect("..> ")
    t.type("error('boom') end f()\r")
    out = t.expect("th> ")
    assert "stdin:2: boom\nstack traceback:\n\tstdin:2: in function 'f'\n\tstdin:2: in main chunk\n" in out
    assert not any(noise in out for noise in ("xpcall", "builtin", "<python>", "[C]"))
    t.type("x = = 1\r")                   # a syntax error is not an unfinished chunk
    assert "stdin:1: unexpected symbol near '='" in t.expect("th> ")
    t.type("answer = 6 * 7\r")
    t.expect("th> ")
    t.type("\x04")                        # Ctrl-D asks first, as trepl
    t.expect("Do you really want to exit ([y]/n)? ")
    t.type("y\r")
    assert t.close() == 0
    history = (tmp_path / "history").read_text().splitlines()
    assert history[-1] == "answer = 6 * 7" and "x = = 1" in history
    assert "local function f()" in history     # a multi-line chunk is one entry

    t = terminal()                           # a new session recalls the history
    t.type("\x1b[A\r")
    t.expect("th> ")
    t.type("answer\r")
    assert "42\n" in t.expect("th> ")
    t.type("exit\r")
    t.expect("Do you really want to exit ([y]/n)? ")
    t.type("\r")
    assert t.close() == 0


def test_relative_require_as_trepl(tmp_path):
    """require './x' and '../' resolve from the calling file's folder (trepl); a plain name that
    package.path misses is tried in the current folder; .json files decode."""
    pkg = tmp_path / "pkg"
    (pkg / "tasks").mkdir(parents=True)
    write(pkg / "init.lua", "pkgloaded = (pkgloaded or 0) + 1 return 'pkg'\n")
    write(pkg / "tasks" / "util.lua", "return { twice = function(x) return 2 * x end }\n")
    write(pkg / "tasks" / "vocab.json", '{"a": 1, "b": [2, 3]}\n')
    write(pkg / "tasks" / "main.lua", """
local root = require('../')
local util = require('./util')
local vocab = require('./vocab.json')
print(root, util.twice(21), vocab.a + vocab.b[2], pkgloaded)
""")
    write(tmp_path / "beside.lua", "return 'found beside'\n")
    r = th(str(pkg / "tasks" / "main.lua"), "-e", "x = 1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "pkg\t42\t4\t1"
    r = th("-e", "print(require('beside'))", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "found beside\n"), r.stderr
    r = th("-e", "require('nothing_here')", cwd=tmp_path)
    assert r.returncode == 1 and "module 'nothing_here' not found" in r.stderr


def test_plain_require_falls_back_to_the_current_folder_whatever_the_searchers(tmp_path):
    """A name that no searcher finds, not even one a script added, is looked for in the current
    folder as trepl does ('vocab.json' is no Lua module name); a file there that does not compile
    is require's own error."""
    write(tmp_path / "vocab.json", '{"a": 7}\n')
    write(tmp_path / "broken.lua", "return {\n")
    script = ("table.insert(package.loaders, function(n) if n == 'virt' then return function() return 'v' end end "
              "return '\\n\\tno virt here' end) print(require('virt'), require('vocab.json').a)")
    r = th("-e", script, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "v\t7\n"), r.stderr
    r = th("-e", "require('broken')", cwd=tmp_path)
    assert r.returncode == 1 and "error loading module 'broken'" in r.stderr


def test_traceback_reaches_into_required_modules(tmp_path):
    """An error while a user's module loads shows the module's frames and the requiring
    script's, whether it is required by a relative name or through package.path."""
    write(tmp_path / "cfg.lua", "local function check(n)\n  if n > 2 then error('n too big: ' .. n) end\n"
                                "end\ncheck(3)\nreturn {}\n")
    write(tmp_path / "main.lua", "local function setup()\n  local cfg = require(arg[1])\n  return cfg\nend\n"
                                 "setup()\n")
    for name, require_frame in [("./cfg", []), ("cfg", ["\t[C]: in function 'require'"])]:
        r = th("main.lua", name, cwd=tmp_path)
        assert r.returncode == 1
        # the module's path as Lua shortens it ('./cfg.lua', '/tmp/.../cfg.lua', '...g/cfg.lua')
        assert re.sub(r"\S*cfg\.lua", "cfg.lua", r.stderr).splitlines() == [
            "cfg.lua:2: n too big: 3", "stack traceback:", "\tcfg.lua:2: in function 'check'",
            "\tcfg.lua:4: in main chunk", *require_frame, "\tmain.lua:2: in function 'setup'",
            "\tmain.lua:5: in main chunk"]
    r = th("-e", "require './missing'", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith(f"(command line):1: module './missing' not found: no {tmp_path}/missing.lua")


def test_penlight_globals_and_who(tmp_path):
    """With a 'pl' module on LUA_PATH, th loads it as trepl does (Penlight's lazy globals)."""
    (tmp_path / "lib" / "pl").mkdir(parents=True)
    write(tmp_path / "lib" / "pl" / "init.lua", "path = { sep = '/' } return {}\n")
    env = {**os.environ, "LUA_PATH": f"{tmp_path}/lib/?.lua;{tmp_path}/lib/?/init.lua;;"}
    r = subprocess.run([*entry_point(), "th", "-e", "mine = 5", "-e", "print(path.sep) who()"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "/" and "== User Variables ==" in lines
    user = lines[lines.index("== User Variables ==") + 1:lines.index("==")]
    assert [line.split()[0] for line in user] == ["mine"]


def test_real_penlight_globals_and_format_operator(tmp_path):
    """Penlight itself (a checkout named by LUABRIDGE_PENLIGHT, as for nngraph's suite): its lazy
    globals, and the '%' format operator on strings that trepl turns on."""
    penlight = os.environ.get("LUABRIDGE_PENLIGHT", "")
    if not os.path.isfile(os.path.join(penlight, "lua", "pl", "init.lua")):
        pytest.skip("needs LUABRIDGE_PENLIGHT, a checkout of lunarmodules/Penlight")
    lib = os.path.join(penlight, "lua")
    env = {**os.environ, "LUA_PATH": f"{lib}/?.lua;{lib}/?/init.lua;;"}
    code = ("print(path.basename('/data/train.t7'), #stringx.split('a b c'), '%5.2f|%s' % {3.14159, 'x'})"
            " utils.printf('%d\\n', 7) mine = 1 who()")
    r = subprocess.run([*entry_point(), "th", "-e", code], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == [f"train.t7\t3\t{'%5.2f|%s' % (3.14159, 'x')}", "7"]
    user = lines[lines.index("== User Variables ==") + 1:lines.index("==")]
    assert "mine" in [line.split()[0] for line in user]


def test_import_copies_a_package_into_the_globals():
    r = th("-e", "Linear = 'mine' import 'nn'"
                 " print(Sequential == nn.Sequential, Linear, _torchimport.nn == nn)"
                 " import('nn', true) print(Linear == nn.Linear)")
    assert (r.returncode, r.stdout) == (0, "true\tmine\ttrue\ntrue\n"), r.stderr


# Ctrl-C stops running Lua code with 'interrupted!' (as LuaJIT's interpreter, so Torch7's th),
# whether th started with SIGINT handled or ignored (nohup, a shell's background job, some CI
# runners): LuaJIT's interpreter sets its handler around every chunk, whatever it inherited. The
# tests send Ctrl-C once the loop has said it runs, and wait for lines, never for a time.

def th_started_with(spawn, sigint: str, *args: str, **popen) -> subprocess.Popen:
    """`luabridge th args` with SIGINT's disposition `sigint` at start, whatever this suite's own."""
    disposition = SIGINT_AT_START[sigint]
    return spawn([*entry_point(), "th", *args], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 preexec_fn=lambda: signal.signal(signal.SIGINT, disposition), **popen)


def next_line(stream, deadline: float = DEADLINE) -> str:
    """The next line the child writes to `stream` (each comes only after the test's own step)."""
    if not select.select([stream], [], [], deadline)[0]:
        raise AssertionError(f"no line within {deadline} s")
    return stream.readline()


def ctrl_c_once_running(spawn, folder: Path, sigint: str, name: str, source: str) -> subprocess.Popen:
    """th running the script `source` (saved as `name`), sent a Ctrl-C once it wrote 'running'
    to stderr from inside its loop (a Ctrl-C that comes as that write returns stops the same line)."""
    write(folder / name, source)
    proc = th_started_with(spawn, sigint, name, cwd=folder)
    assert next_line(proc.stderr) == "running\n"
    proc.send_signal(signal.SIGINT)
    return proc


BUSY_LOOP = """require 'nn'
local m, x = nn.Linear(20, 20), torch.randn(20)
local function train()
  local said = false
  while true do m:forward(x) if not said then said = true io.stderr:write('running\\n') end end
end
train()
"""


@pytest.mark.parametrize("sigint", SIGINT_AT_START)
def test_ctrl_c_stops_a_running_script(tmp_path, spawn, sigint):
    proc = ctrl_c_once_running(spawn, tmp_path, sigint, "busy.lua", BUSY_LOOP)
    assert proc.wait(timeout=DEADLINE) == 1
    # the message names the user's line that was running, the traceback the user's frames
    assert proc.stderr.read().splitlines() == [
        "busy.lua:5: interrupted!", "stack traceback:", "\tbusy.lua:5: in function 'train'",
        "\tbusy.lua:7: in main chunk"]


# A loop that goes on after a Ctrl-C, as one running in a compiled trace (which checks no hooks)
# never sees it: this one swallows the error, and says so.
SWALLOWS_CTRL_C = """require 'nn'
local m, x = nn.Linear(20, 20), torch.randn(20)
io.write('buffered')   -- C's stdout into a pipe: still in its buffer when the process quits
local said = false
local function train()
  while true do m:forward(x) if not said then said = true io.stderr:write('running\\n') end end
end
while true do
  local _, err = pcall(train)
  io.stderr:write(err, '\\n')
end
"""


@pytest.mark.parametrize("sigint", SIGINT_AT_START)
def test_second_ctrl_c_quits_a_loop_that_goes_on(tmp_path, spawn, sigint):
    proc = ctrl_c_once_running(spawn, tmp_path, sigint, "swallow.lua", SWALLOWS_CTRL_C)
    assert next_line(proc.stderr) == "swallow.lua:6: interrupted!\n"
    proc.send_signal(signal.SIGINT)   # the first is still pending: this one quits (status 130)
    assert proc.wait(timeout=DEADLINE) == 130
    # then read: communicate() after a readline() loses what the readline buffered
    assert (proc.stdout.read(), proc.stderr.read()) == ("buffered", "\ninterrupted twice: quitting\n")


@pytest.mark.parametrize("sigint", SIGINT_AT_START)
def test_terminal_ctrl_c_stops_a_running_chunk(terminal, sigint):
    t = terminal("-l", "nn", sigint=sigint)
    t.type("m, x, n = nn.Linear(20, 20), torch.randn(20), 0\r")
    t.expect("th> ")
    # 'run' .. 'ning': the echo of the typed line holds no 'running'
    t.type("while true do m:forward(x) n = n + 1 if n == 1 then print('run' .. 'ning') end end\r")
    t.expect("running\n")
    t.type("\x03")
    out = t.expect("th> ")
    # wherever it stopped (nn, a BLAS call, an element-wise kernel), only the user's frame shows
    assert "stdin:1: interrupted!\nstack traceback:\n\tstdin:1: in main chunk\n" in out
    t.type("n > 0, torch.type(m)\r")     # the session and its globals live on
    assert "true\tnn.Linear\n" in t.expect("th> ")
    t.type("for i = 1, 3 do\r")
    t.expect("..> ")
    drop_unfinished_chunk(t)              # at the prompt Ctrl-C still drops the line
    t.type("1 + 1\r")
    assert "2\n" in t.expect("th> ")


HOOK_LEFT_ON = """
from luabridge.core.errors import LuaError
from luabridge.core.runtime import bridge
from luabridge.th.interrupt import Interrupter

b = bridge()
interrupter = Interrupter(b)
count = b.load("local n = 0 for i = 1, 10 do n = n + i end return n", "=count")
interrupter.interrupt()                  # between runs: nothing happens
print(b.call(count))
with interrupter:                        # the Ctrl-C came as the run ended, before any hook fired
    interrupter.interrupt()
print(b.call(count))
b.lua.globals().ctrl_c = interrupter.interrupt
try:
    with interrupter:
        b.call(b.load("ctrl_c() for i = 1, 10 do end", "=run"))
except LuaError as e:
    print(e.message)
print(b.call(count))
"""


CTRL_C_BEFORE_THE_PROMPT_WAITS = """
import signal, sys, threading
from luabridge.core.runtime import bridge
from luabridge.th.interrupt import Interrupter

interrupter = Interrupter(bridge())
# the main thread takes no SIGINT: each reaches another thread, as one does that comes just
# before Python's readline goes into select() (it looks at signals only when one interrupts it)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
threading.Thread(target=threading.Event().wait, daemon=True).start()
try:   # as the prompt's loop: the KeyboardInterrupt may come as soon as 'waiting' is out
    print("waiting", flush=True)
    sys.stdin.readline()
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
"""


def test_ctrl_c_between_runs_reaches_a_main_thread_that_missed_it(spawn):
    """Ctrl-C at the prompt is a KeyboardInterrupt even when the SIGINT did not interrupt the
    main thread's wait for input (it used to wait for the next key)."""
    proc = spawn([sys.executable, "-c", CTRL_C_BEFORE_THE_PROMPT_WAITS], stdin=subprocess.PIPE,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert next_line(proc.stdout) == "waiting\n"
    proc.send_signal(signal.SIGINT)
    assert next_line(proc.stdout) == "KeyboardInterrupt\n"
    assert proc.wait(timeout=DEADLINE) == 0, proc.stderr.read()


def test_ctrl_c_leaves_no_hook_after_the_run():
    # Interrupter.interrupt is what the watcher thread calls on SIGINT
    r = subprocess.run([sys.executable, "-c", HOOK_LEFT_ON], capture_output=True, text=True, timeout=DEADLINE)
    assert (r.returncode, r.stdout) == (0, "55\n55\nrun:1: interrupted!\n55\n"), r.stderr
