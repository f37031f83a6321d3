"""`require 'trepl'` and trepl.colorize, as scripts use them (cifar.torch's train.lua colours its
accuracy with trepl.colorize; demos require trepl to get th's globals under a plain luajit)."""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_script


@pytest.mark.parametrize("name, code", [("red", "\x1b[0;31m"), ("Black", "\x1b[1;30m"), ("_blue", "\x1b[44m"),
                                        ("white", "\x1b[0;37m"), ("Cyan", "\x1b[1;36m")])
def test_colorize_wraps_text_in_the_ansi_code_and_a_reset(lua, name, code):
    # ANSI SGR: 0;3N normal foreground, 1;3N bold, 4N background; 0 resets
    assert lua.eval(f"require('trepl.colorize').{name}('acc 91%')") == code + "acc 91%\x1b[0m"
    assert lua.eval(f"require('trepl.colors').{name}") == code


def test_require_trepl_gives_ths_globals_and_no_prompt(tmp_path: Path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper.lua").write_text("return { answer = 42 }\n")
    out = run_script(
        tmp_path,
        "local repl = require 'trepl'\n"
        "assert(type(who) == 'function' and type(import) == 'function')\n"
        "print('relative', require('./lib/helper').answer)\n"
        "print('prompt', pcall(repl))\n")
    assert out.returncode == 0, out.stderr
    assert "relative\t42" in out.stdout
    assert "prompt\tfalse" in out.stdout and "`luabridge th`" in out.stdout
