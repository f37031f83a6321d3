"""A sample of tests/fuzz_convert.py (`make fuzz` runs 100,000 cases): random module trees, valid
or corrupted once (wrong field values, gaps, cycles, garbled nngraph nodes, deep nesting), convert
and load with ConversionError / LuaError naming the class and field, or compute as Lua does."""
import pytest

pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge.torch needs it")

import fuzz_convert  # noqa: E402 - beside this file, as helpers.py
from fuzz_convert import fuzz_tensor  # noqa: E402 - the runner it uses


def test_cases_are_deterministic_and_cover_every_corruption():
    cases = [fuzz_convert.make_case(4, i) for i in range(400)]
    assert cases == [fuzz_convert.make_case(4, i) for i in range(400)]
    for mark in (", false\n\nreturn", "fieldNames(m)", "m.modules[", "pick(above", "g.forwardnodes",
                 "inner = nn.Sequential():add(inner)", "nn.gModule", "nn.MapTable", "nn.SpatialConvolution"):
        assert sum(mark in c for c in cases) >= 5, mark
    layers = {layer.split("(")[0] for layer in fuzz_convert.VECTOR_LAYERS + fuzz_convert.IMAGE_LAYERS}
    assert sum(any(f"{layer}(" in c for c in cases) for layer in layers) >= len(layers) - 3


def test_fuzz_sample_has_no_failures():
    failures = fuzz_tensor.fuzz(20261206, 300, 300, fuzz_convert.make_case, fuzz_convert.PACKAGES, fuzz_convert.CHILD)
    if failures:
        pytest.fail("\n".join(f"case {c}: {kind}: {msg[:300]}" for c, kind, msg in failures[:10]))


def case(module: str, corrupted: bool) -> str:
    """A case's Lua source: `module` (an expression) on a 2 x 3 input."""
    return f"return {module}, torch.randn(2, 3), {str(corrupted).lower()}"


BAD_LINEAR = "(function() local m = nn.Linear(3, 3); m.weight = 'x'; return m end)()"


def test_check_passes_clear_rejections_and_matching_trees():
    assert fuzz_convert.check(case("nn.Sequential():add(nn.Linear(3, 3)):add(nn.Tanh())", False)) == ("ok", "")
    assert fuzz_convert.check(case(BAD_LINEAR, True)) == ("ok", "")
    kind, message = fuzz_convert.check(case(BAD_LINEAR, False))
    assert kind == "rejected" and "nn.Linear at <root>: field weight is the string 'x'" in message


def test_check_catches_raw_errors_unnamed_fields_and_mismatches(monkeypatch):
    import torch

    from luabridge.torch.convert import CONVERTERS, ConversionError

    def raw_error(m, ctx):
        return [][0]

    def unnamed(m, ctx):
        raise ConversionError("nn.Tanh", ctx.path, "is odd", malformed=True)

    monkeypatch.setitem(CONVERTERS, "nn.Tanh", raw_error)
    kind, message = fuzz_convert.check(case("nn.Tanh()", True))
    assert kind == "python" and message.startswith("convert: IndexError")
    monkeypatch.setitem(CONVERTERS, "nn.Tanh", unnamed)
    assert fuzz_convert.check(case("nn.Tanh()", True)) == ("unclear", "convert: does not name the field: "
                                                          "nn.Tanh at <root> is odd")
    monkeypatch.setitem(CONVERTERS, "nn.Tanh", lambda m, ctx: torch.nn.Sigmoid())
    kind, message = fuzz_convert.check(case("nn.Tanh()", False))
    assert kind == "mismatch" and message.startswith("convert: ")


def test_runner_reports_crashes_and_hangs(monkeypatch):
    codes = {0: "require('ffi').cast('int *', 16)[0] = 1", 1: "while true do end", 2: case("nn.Tanh()", False)}
    monkeypatch.setattr(fuzz_tensor, "CASE_SECONDS", 1)
    found = {c: kind for c, kind, _ in fuzz_tensor.run_chunk(0, [0, 1, 2], lambda seed, c: codes[c],
                                                               fuzz_convert.PACKAGES, fuzz_convert.CHILD)}
    assert found == {0: "crash", 1: "hang"}
