"""tools/real_programs.py: the manifest parses, and the runner judges a program by its exit status
and expected output, in a scratch copy, with libraries from other repositories on LUA_PATH."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import real_programs as rp  # noqa: E402


def test_manifest_entries_are_complete():
    programs = rp.load_manifest()
    assert len(programs) >= 30
    names = [p.name for p in programs]
    assert len(names) == len(set(names))
    for p in programs:
        assert "/" in p.repo and p.expect and p.args, p.name
        for where in p.lua_modules.values():
            assert where.count("/") >= 1, p.name


def make_repos(tmp_path: Path) -> Path:
    repos = tmp_path / "repos"
    prog = repos / "someone+prog"
    prog.mkdir(parents=True)
    (prog / "main.lua").write_text(
        "local helper = require 'helper'\n"
        "print('answer', helper.twice(tonumber(arg[1])))\n"
        "local f = io.open('written.txt', 'w') f:write('x') f:close()\n"
        "if arg[2] == 'fail' then error('deliberate') end\n")
    lib = repos / "other+lib" / "src"
    lib.mkdir(parents=True)
    (lib / "init.lua").write_text("return { twice = function(x) return 2 * x end }\n")
    (repos / "other+lib" / "single.lua").write_text("return { twice = function(x) return x + x end }\n")
    return repos


def program(**kw) -> rp.Program:
    base = dict(name="p", repo="someone/prog", what="w", args=["main.lua", "21"], expect=[r"answer\s+42"],
                lua_modules={"helper": "other/lib/src"}, timeout=60)
    base.update(kw)
    return rp.Program(**base)


def test_runner_passes_fails_and_keeps_the_checkout_clean(tmp_path):
    repos = make_repos(tmp_path)
    ok = rp.run_program(program(), repos, 1.0)
    assert ok.ok, ok.detail
    assert not (repos / "someone+prog" / "written.txt").exists()   # it ran in a scratch copy

    wrong = rp.run_program(program(expect=[r"answer\s+43"]), repos, 1.0)
    assert not wrong.ok and "output lacks" in wrong.detail

    failed = rp.run_program(program(args=["main.lua", "21", "fail"]), repos, 1.0)
    assert not failed.ok and "deliberate" in failed.detail and failed.detail.startswith("exit 1")

    one_file = rp.run_program(program(lua_modules={"helper": "other/lib/single.lua"}), repos, 1.0)
    assert one_file.ok, one_file.detail

    missing = rp.run_program(program(lua_modules={"helper": "nobody/here"}), repos, 1.0)
    assert not missing.ok and "nobody/here" in missing.detail


def test_runner_time_limit_and_until(tmp_path):
    repos = make_repos(tmp_path)
    # a program that never ends (sleeping: it leaves the CPUs to the rest of the suite); 10 s let
    # th start and print on a loaded machine
    (repos / "someone+prog" / "loop.lua").write_text("print('started') io.stdout:flush() while true do sys.sleep(1) end\n")
    slow = program(args=["loop.lua"], expect=["started"], timeout=3, lua_modules={})
    assert not rp.run_program(slow, repos, 1.0).ok
    assert rp.run_program(program(args=["loop.lua"], expect=["started"], timeout=10, until=True,
                                  lua_modules={}), repos, 1.0).ok


@pytest.mark.parametrize("text, expected", [
    ("a\nb\nboom: bad\nstack traceback:\n\t[C]: x", "a | b | boom: bad"),
    ("only line", "only line"),
])
def test_summary_keeps_the_error_before_the_traceback(text, expected):
    assert rp.summary(text) == expected
