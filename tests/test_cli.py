"""The `luabridge th` command: scripts with arguments, -e, `python -m luabridge`, the prompt."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT_BIN = Path(sys.executable).parent / "luabridge"


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
                          text=True, timeout=60)


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
    errors = r.stderr.splitlines()
    assert errors[0] == "stdin:1: boom"
    assert errors[1].startswith("stdin:1:")
    assert errors[2].startswith("stdin:1: narrow: out of range")
    assert outputs(r.stdout) == ["still here"]


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


@pytest.mark.parametrize("argv,code", [([], 2), (["--help"], 0), (["frobnicate"], 2)])
def test_top_level_usage(argv, code):
    r = subprocess.run([*entry_point(), *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == code
    if code == 0:
        assert "luabridge th" in r.stdout
