"""rnn's own test folder (github.com/Element-Research/rnn, test/) run unmodified through
`luabridge th`: each test of test.lua as `require 'rnn'; dofile(...); rnn.test{'^name$'}`, and
test_trimzero.lua (maskZero and trimZero must give the same losses).

The folder is not part of the project: point LUABRIDGE_RNN_TESTS at a checkout's test/ folder (or
place it at ../shared/conformance/rnn/test); without it every case skips with the reason. The whole
suite takes several minutes on two cores, so it is opt-in.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CANDIDATES = [os.environ.get("LUABRIDGE_RNN_TESTS", ""), str(HERE.parent.parent / "shared/conformance/rnn/test")]
FOLDER = next((Path(c) for c in CANDIDATES if c and (Path(c) / "test.lua").is_file()), None)
if FOLDER is None:
    pytest.skip("rnn's test folder not found: set LUABRIDGE_RNN_TESTS to a checkout's test/ "
                "(github.com/Element-Research/rnn)", allow_module_level=True)

NAMES = re.findall(r"^function rnntest\.(\w+)\(", (FOLDER / "test.lua").read_text(), re.M)
KNOWN = {
    "FastLSTM_issue203": "nn.ClassNLLCriterion refuses a 2-element target for a 1-D input (torch7 read the first element)",
    "MufuruGradients": "random sizes: a 3-D output that does not squeeze to 2-D is refused by "
                       "nn.CrossEntropyCriterion, as by torch7's",
}


def _th(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "luabridge", "th", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", NAMES)
def test_rnn_suite(name: str) -> None:
    if name in KNOWN:
        pytest.skip(KNOWN[name])
    done = _th(["-e", f"require 'rnn'; dofile('{FOLDER / 'test.lua'}'); rnn.test{{'^{name}$'}}"], FOLDER)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "[PASS]" in done.stdout


def test_trimzero_script(tmp_path: Path) -> None:
    # the script requires Element-Research's dp but uses nothing from it
    (tmp_path / "dp.lua").write_text("return {}\n")
    done = _th([str(FOLDER / "test_trimzero.lua")], tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    losses = re.findall(r"-- (\w+) with (\w+)\n((?:loss:\s*\S+\n)+)", done.stdout)
    by_arch: dict[str, dict[str, list[float]]] = {}
    for arch, method, block in losses:
        by_arch.setdefault(arch, {})[method] = [float(v) for v in re.findall(r"loss:\s*(\S+)", block)]
    assert set(by_arch) == {"FastLSTM", "GRU"}
    for runs in by_arch.values():
        assert runs["maskZero"] == pytest.approx(runs["trimZero"], rel=1e-9)
