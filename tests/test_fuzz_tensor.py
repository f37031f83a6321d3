"""A sample of tests/fuzz_tensor.py (`make fuzz` runs 100,000 cases): random tensor API calls
never crash, hang, write outside their operands or raise an error that does not name the op."""
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


def test_nn_fuzz_cases_cover_every_class():
    """tests/fuzz_nn.py builds its cases on the same harness, over every nn class file."""
    spec_nn = importlib.util.spec_from_file_location("fuzz_nn", HERE / "fuzz_nn.py")
    fuzz_nn = importlib.util.module_from_spec(spec_nn)
    spec_nn.loader.exec_module(fuzz_nn)
    assert len(fuzz_nn.CLASSES) > 150 and "Linear" in fuzz_nn.CLASSES and "Module" not in fuzz_nn.CLASSES
    cases = [fuzz_nn.make_case(1, i) for i in range(len(fuzz_nn.CLASSES))]
    assert cases == [fuzz_nn.make_case(1, i) for i in range(len(fuzz_nn.CLASSES))]
    assert all(any(f"nn.{c}(" in case for case in cases) for c in fuzz_nn.CLASSES)
    # cases the nn fuzzer found, now clear errors, pass through its harness
    found = ["nn.SpatialAveragePooling()", "nn.Unsqueeze(0/0)", "nn.SoftSign():type('torch.FloatTensor')"]
    sources = ["return harness({{'Long', {1, 5}, 'plain'}}, function(o) return %s:forward(o[1]) end)" % m
               for m in found]
    assert not list(fuzz_tensor.run_chunk(0, [0, 1, 2], lambda seed, case: sources[case], "torch,nn"))
