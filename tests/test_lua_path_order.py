"""LUA_PATH as Torch7's LuaJIT read it: the entries before its ";;" come before the installed
packages, luabridge's tree standing where torch's install dirs stood (inside the ";;"
defaults), and the entries after ";;" after them. So a library a user puts first shadows a
package of the same name, as yujiali/ggnn's README asks for its own `rnn` (th under torch7 with
LUA_PATH="./?.lua;./?/init.lua;$LUA_PATH" loads ggnn's rnn, not Element-Research's).
"""
import os
import subprocess
import sys
from pathlib import Path


def th(code: str, lua_path: str, cwd: Path) -> str:
    exe = Path(sys.executable).with_name("luabridge")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "luabridge"]
    env = {**os.environ, "LUA_PATH": lua_path}
    r = subprocess.run([*cmd, "th", "-e", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def make_rnn(root: Path, tag: str) -> Path:
    (root / "rnn").mkdir(parents=True)
    (root / "rnn" / "init.lua").write_text(f"return {{ tag = '{tag}' }}\n")
    return root


def test_entries_before_the_defaults_come_first(tmp_path):
    lib = make_rnn(tmp_path / "lib", "mine")
    assert th("print(require('rnn').tag)", f"{lib}/?.lua;{lib}/?/init.lua;;", tmp_path) == "mine"


def test_entries_after_the_defaults_come_after_luabridge(tmp_path):
    lib = make_rnn(tmp_path / "lib", "mine")
    got = th("require 'nn'; print(require('rnn').tag, nn.SeqLSTM ~= nil)", f";;{lib}/?.lua;{lib}/?/init.lua", tmp_path)
    assert got.split() == ["nil", "true"]


def test_a_module_only_the_path_has_is_found_either_way(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "onlyhere.lua").write_text("return 7\n")
    for path in (f"{tmp_path}/lib/?.lua;;", f";;{tmp_path}/lib/?.lua", f"{tmp_path}/lib/?.lua"):
        assert th("print(require('onlyhere'))", path, tmp_path) == "7"


def test_an_old_torch7_tree_never_replaces_luabridges_packages(tmp_path):
    # what `torch-activate` (in every Torch7 user's .bashrc) sets: the install's tree first, no ';;'.
    # Its torch, nn, ... would need libTH; its other rocks stay found, after luabridge's tree.
    tree = tmp_path / "torch" / "install" / "share" / "lua" / "5.1"
    for name, body in (("torch", "error('the old Torch7 tree was loaded')"), ("nn", "error('old nn')"),
                       ("oldrock", "return { from = 'the old tree' }")):
        (tree / name).mkdir(parents=True)
        (tree / name / "init.lua").write_text(body + "\n")
    activate = f"{tree}/?.lua;{tree}/?/init.lua;./?.lua"
    got = th("require 'nn'; print(torch.ones(3):sum(), nn.Linear ~= nil, require('oldrock').from)", activate, tmp_path)
    assert got.split("\t") == ["3", "true", "the old tree"]
