"""A sample of tests/fuzz_nn.py (`make fuzz` runs 100,000 cases): every nn class, built with
random constructor arguments and run forward and backward on random inputs, never crashes,
hangs, writes outside its operands or raises an error that does not name the module."""
import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fuzz_tensor = load("fuzz_tensor")
fuzz_nn = load("fuzz_nn")


def test_cases_cover_every_class():
    assert len(fuzz_nn.CLASSES) > 150 and "Linear" in fuzz_nn.CLASSES and "Module" not in fuzz_nn.CLASSES
    cases = [fuzz_nn.make_case(1, i) for i in range(len(fuzz_nn.CLASSES))]
    assert cases == [fuzz_nn.make_case(1, i) for i in range(len(fuzz_nn.CLASSES))]
    assert all(any(f"nn.{c}(" in case for case in cases) for c in fuzz_nn.CLASSES)


def test_fuzz_sample_has_no_failures():
    failures = fuzz_tensor.fuzz(20261203, 3000, make=fuzz_nn.make_case, packages="torch,nn")
    if failures:
        pytest.fail("\n".join(f"case {c}: {kind}: {msg[:300]}" for c, kind, msg in failures[:10]))


def test_found_cases_pass_the_harness():
    """Cases the nn fuzzer found, now clear errors, pass through its harness."""
    found = ["nn.SpatialAveragePooling()", "nn.Unsqueeze(0/0)", "nn.SoftSign():type('torch.FloatTensor')",
             "nn.Clamp(true)", "nn.MapTable(3)", "nn.Transpose(nil, {}, 2, 2)", "nn.Kmeans(1, 2, nn.Tanh())",
             "nn.HingeEmbeddingCriterion({1, 2})", "nn.GradientReversal({})"]
    sources = ["return harness({{'Long', {1, 5}, 'plain'}}, function(o) return %s:forward(o[1]) end)" % m
               for m in found]
    cases = list(range(len(found)))
    assert not list(fuzz_tensor.run_chunk(0, cases, lambda seed, case: sources[case], "torch,nn"))
