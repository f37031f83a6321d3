"""rnn's own test folder (github.com/Element-Research/rnn, test/) run unmodified through
`luabridge th`: the whole suite as `require 'rnn'; dofile(...); rnn.test()`, each test of test.lua
alone as `rnn.test{'^name$'}` (a fresh process each, so a failure names its test), and
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
# The one test of test.lua that cannot pass here, as on torch7: it draws its sizes at random and
# feeds the 3-D output to nn.CrossEntropyCriterion, which squeezes it first. For 17 of the 40
# draws torch7 refuses that input too: 1x1x1 squeezes to a number, a 3-D result reaches
# ClassNLLCriterion ("input tensor should be 1D or 2D"), a 2-D target is "multi-target". In the
# whole suite's run the seeded stream draws sizes 1x1x1.
UNPASSABLE = {
    "MufuruGradients": "random sizes that nn.CrossEntropyCriterion refuses, as torch7's does "
                       "(1x1x1 in the whole suite's run: torch7's squeeze gives a number)",
}
# Run alone (an unseeded process), this one is close to a coin flip: it trains 5 epochs on random,
# unseeded data and noise samples and asserts that the last epoch's loss is below the first, but
# random targets leave almost nothing to learn (2 of 4 seeds passed in a check). It passes in the
# whole suite's run, where the tests before it have seeded the generator.
COIN_FLIP_ALONE = {"NCE_MaskZero": "unseeded random data with little to learn: alone, 'the loss fell' is "
                                   "about a coin flip; checked in test_rnn_suite_whole"}
TEST_LINE = re.compile(r"^\s*\d+/\d+ (\w+) \.+[^\[]*\[(PASS|FAIL|ERROR)\]", re.M)


def _th(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "luabridge", "th", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", NAMES)
def test_rnn_suite(name: str) -> None:
    if name in UNPASSABLE or name in COIN_FLIP_ALONE:
        pytest.skip(UNPASSABLE.get(name) or COIN_FLIP_ALONE[name])
    done = _th(["-e", f"require 'rnn'; dofile('{FOLDER / 'test.lua'}'); rnn.test{{'^{name}$'}}"], FOLDER)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "[PASS]" in done.stdout


def test_rnn_suite_whole() -> None:
    """The suite as the issue runs it: rnn.test() once, every test in one process and order."""
    done = _th(["-e", f"require 'rnn'; dofile('{FOLDER / 'test.lua'}'); rnn.test()"], FOLDER, timeout=1200)
    results = dict(TEST_LINE.findall(done.stdout))
    assert sorted(results) == sorted(NAMES), done.stdout[-3000:]
    failed = {name for name, verdict in results.items() if verdict != "PASS"}
    assert failed <= set(UNPASSABLE), done.stdout[-3000:]
    if failed:  # refused by the criterion, not an error of ours elsewhere
        assert "CrossEntropyCriterion.lua" in done.stdout, done.stdout[-3000:]


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
