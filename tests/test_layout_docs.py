"""The layout pages name what the code has: docs/development.md's table of the callbacks Lua calls
in Python holds every declared name, both pages name every op family, and they describe the
pieces session 11 added (plans, fused chains, oneDNN's eltwise and LRN files, the blocked path,
the fused-group team, torch._standin, blas.threadsFor's foreign flag)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from luabridge.providers.callbacks import CALLBACKS

ROOT = Path(__file__).resolve().parent.parent
DEVELOPMENT = (ROOT / "docs" / "development.md").read_text()
TORCH_README = (ROOT / "lua" / "torch" / "README.md").read_text()


def _families() -> list[str]:
    src = (ROOT / "lua" / "torch" / "backend" / "init.lua").read_text()
    body = re.search(r"backend\.families = \{(.*?)\}", src, re.S).group(1)
    return re.findall(r"'(\w+)'", body)


def test_every_declared_callback_is_in_the_table() -> None:
    missing = [name for name in CALLBACKS if f"`{name}`" not in DEVELOPMENT]
    assert not missing, f"docs/development.md's callback table lacks {missing}"


@pytest.mark.parametrize("page", ["development", "torch_readme"])
def test_every_family_is_named(page: str) -> None:
    text = DEVELOPMENT if page == "development" else TORCH_README
    families = _families()
    assert "nn_plan" in families and "nn_chain" in families
    missing = [f for f in families if not re.search(rf"\b{f}\b", text)]
    assert not missing, f"{page} lacks the families {missing}"


PIECES = [
    "plans.lua", "plan_conv.lua", "plan_train.lua", "nngraph/plan.lua", "nn_plan", "nn_chain",
    "dnnl_eltwise.lua", "dnnl_lrn.lua", "blocked.py", "torch.elementwise", "fusion_threads",
    "torch._standin", "foreign", "parallel.lua",
]


@pytest.mark.parametrize("page", ["development", "torch_readme"])
@pytest.mark.parametrize("piece", PIECES)
def test_the_pieces_are_described(page: str, piece: str) -> None:
    text = DEVELOPMENT if page == "development" else TORCH_README
    assert piece in text, f"{page} does not name {piece}"
    path = {"plans.lua": "lua/nn/util/plans.lua", "plan_conv.lua": "lua/nn/util/plan_conv.lua",
            "plan_train.lua": "lua/nn/util/plan_train.lua", "nngraph/plan.lua": "lua/nngraph/plan.lua",
            "dnnl_eltwise.lua": "lua/torch/backend/cpu/dnnl_eltwise.lua",
            "dnnl_lrn.lua": "lua/torch/backend/cpu/dnnl_lrn.lua",
            "blocked.py": "luabridge/providers/torch_cpu/blocked.py",
            "parallel.lua": "lua/torch/backend/cpu/parallel.lua"}.get(piece)
    if path:
        assert (ROOT / path).is_file(), f"{path} is gone: the page names a file that is not there"


def test_no_stale_paths() -> None:
    for stale in ("luabridge/pyside.py", "luabridge/backend/", "`luabridge/memory.py`", "`luabridge/dtypes.py`"):
        assert stale not in TORCH_README and stale not in DEVELOPMENT, stale
