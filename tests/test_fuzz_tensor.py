"""A sample of tests/fuzz_tensor.py (`make fuzz` runs 100,000 cases): random tensor API calls
(methods, torch.* functions, generators, storages) never crash, hang, write outside their
operands or raise an error that does not name the op."""
import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("fuzz_tensor", HERE / "fuzz_tensor.py")
fuzz_tensor = sys.modules["fuzz_tensor"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz_tensor)


def test_cases_are_deterministic_and_varied():
    a = [fuzz_tensor.make_case(3, i) for i in range(300)]
    assert a == [fuzz_tensor.make_case(3, i) for i in range(300)]
    assert len(set(a)) == 300
    assert sum(any(f":{m}(" in c for c in a) for m in fuzz_tensor.METHODS) > 60  # most methods reached
    assert sum(any(f"torch.{f}(" in c for c in a) for f in fuzz_tensor.FUNCTIONS) > 30  # functional forms
    assert sum("Storage(s, 4, s:size() - 6)" in c for c in a) > 20  # storage calls on a guarded view


def test_fuzz_sample_has_no_failures():
    failures = fuzz_tensor.fuzz(20261202, 2000)
    if failures:
        pytest.fail("\n".join(f"case {c}: {kind}: {msg[:300]}" for c, kind, msg in failures[:10]))


def test_harness_catches_guard_hits_changes_crashes_and_hangs(monkeypatch):
    """Cases built to fail each way are reported as such, naming their case, and the run goes on."""
    calls = {
        0: "o[1]:storage()[1] = 0",                                    # writes into the guard
        1: "o[1]:fill(5); error('named: failed after writing')",         # a failed call changed it
        2: "local x = nil; return x.y",                                 # a Lua runtime error
        3: "require('ffi').cast('int *', 16)[0] = 1",                   # segfault
        4: "return o[1]:add(1)",                                        # fine
    }
    monkeypatch.setattr(fuzz_tensor, "CASE_SECONDS", 1)
    monkeypatch.setattr(fuzz_tensor, "make_case", lambda seed, case: (
        "return harness({{'Double', {2, 2}, 'plain'}}, function(o) %s end)" % (
            calls[case] if case in calls else "while true do end")))
    found = {c: kind for c, kind, _ in fuzz_tensor.run_chunk(0, [0, 1, 2, 3, 4, 5])}
    assert found == {0: "guard", 1: "changed", 2: "unclear", 3: "crash", 5: "hang"}
