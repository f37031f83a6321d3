"""A sample of tests/fuzz_interrupt.py (`make fuzz` runs 100,000 cases): random Lua workloads
interrupted by SIGINT after a random delay end with their right values or KeyboardInterrupt,
and leave the runtime correct and without leaked buffers."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("fuzz_interrupt", HERE / "fuzz_interrupt.py")
fuzz_interrupt = sys.modules["fuzz_interrupt"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz_interrupt)
fuzz_tensor = fuzz_interrupt.fuzz_tensor


def test_cases_are_deterministic_and_varied():
    cases = [json.loads(fuzz_interrupt.make_case(5, i)) for i in range(400)]
    assert cases == [json.loads(fuzz_interrupt.make_case(5, i)) for i in range(400)]
    sources = [step[1] for c in cases for step in c["steps"] if step[0] == "lua"]
    for marker in ("DoubleTensor(", "randn(", "torch.mm(", "torch.load(", "torch.serialize(", "m:backward(",
                   "% 1000003", "fuzz_double("):
        assert any(marker in s for s in sources), marker
    kinds = {step[0] for c in cases for step in c["steps"]}
    assert kinds == {"lua", *fuzz_interrupt.PYTHON_STEPS}
    delays = [c["delay"] for c in cases]
    assert None in delays and 0.0 in delays and any(d and d > 0.002 for d in delays)


def test_fuzz_sample_has_no_failures():
    failures = fuzz_tensor.fuzz(20261206, 600, 600, fuzz_interrupt.make_case, "torch,nn", fuzz_interrupt.CHILD)
    if failures:
        pytest.fail("\n".join(f"case {c}: {kind}: {msg[:300]}" for c, kind, msg in failures[:10]))


def run(cases: dict[int, tuple[list, float | None]]) -> dict[int, str]:
    make = lambda seed, case: json.dumps({"steps": cases[case][0], "delay": cases[case][1]})  # noqa: E731
    found = fuzz_tensor.run_chunk(0, list(cases), make, "torch,nn", fuzz_interrupt.CHILD)
    return {c: kind for c, kind, _ in found}


def test_harness_catches_wrong_values_errors_crashes_and_hangs(monkeypatch):
    """Cases built to fail each way are reported as such, naming their case, and the run goes on."""
    monkeypatch.setattr(fuzz_tensor, "CASE_SECONDS", 2)
    # the signal comes 0.3 s in, long after the loop started; the loop gives up after 20 s
    swallowed = ("pcall(function() local limit = os.clock() + 20 while os.clock() < limit do fuzz_double(1) end end) "
                 "error('alloc: not enough memory')")
    cases = {
        0: ([["lua", "return 1", 2]], None),                                  # a wrong value
        1: ([["lua", "error('named: failed')", 0]], None),                    # a Lua error
        2: ([["lua", swallowed, 0]], 0.3),                                    # Ctrl-C made a message
        3: ([["lua", "require('ffi').cast('int *', 16)[0] = 1", 0]], None),   # a crash
        4: ([["lua", "return 1", 1], ["proxy", 2]], 0.0),                     # fine
        5: ([["lua", "while true do end", 0]], None),                         # a hang
    }
    assert run(cases) == {0: "wrong", 1: "lua error", 2: "lua error", 3: "crash", 5: "hang"}


def test_harness_catches_leaks():
    """Buffers a case keeps past its end show at the next count (every 50 cases)."""
    keep = "fuzz_kept = fuzz_kept or {} fuzz_kept[#fuzz_kept + 1] = torch.DoubleTensor(100) return 0"
    found = run({i: ([["lua", keep, 0]], None) for i in range(100)})
    assert found == {99: "leak"}
