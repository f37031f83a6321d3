"""tools/real_programs.py: a [[model]] whose output is a table (a gModule with auxiliary heads, a
ConcatTable) gives one list of sizes per output, checked output by output."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_programs as rp  # noqa: E402
from test_real_programs_tool import make_mirror  # noqa: E402


def test_table_of_outputs(tmp_path, monkeypatch):
    monkeypatch.setattr(rp, "CACHE", tmp_path / "cache")
    mirror = make_mirror(tmp_path)
    build = "return nn.ConcatTable():add(nn.Linear(4, 3)):add(nn.Sequential():add(nn.Linear(4, 5)):add(nn.Tanh()))"
    model = rp.Model(name="two heads", repo="someone/models", build=build, input=[2, 4], output=[[2, 3], [2, 5]])
    good = rp.run_model(model, mirror, 1.0)
    assert good.ok and good.detail == "output {2x3, 2x5}", good.detail
    wrong = rp.run_model(rp.Model(**{**model.__dict__, "output": [[2, 3], [2, 4]]}), mirror, 1.0)
    assert not wrong.ok and "output is {2x3, 2x5}, expected {2x3, 2x4}" in wrong.detail, wrong.detail
    flat = rp.run_model(rp.Model(**{**model.__dict__, "output": [2, 3]}), mirror, 1.0)
    assert not flat.ok and "expected 2x3" in flat.detail, flat.detail


def test_nested_sizes_in_the_spec():
    assert rp.lua_sizes([2, 10]) == "{2, 10}"
    assert rp.lua_sizes([[2, 1000], [2, 1000]]) == "{{2, 1000}, {2, 1000}}"
