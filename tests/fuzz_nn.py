"""Fuzzes every nn class: random constructor arguments (plausible sizes, NaN/inf/huge/negative
numbers, nil, wrong types) and random inputs (every type, views, zero-size), then forward,
backward and, for criterions, a target; through the harness of tests/fuzz_tensor.py (guarded
operands, operands unchanged by a failed call, returned tensors inside their storage, errors
that name the module).

    python tests/fuzz_nn.py --cases 100000 [--seed S]
    python tests/fuzz_nn.py --seed S --case I          (one case, here, with its Lua source)
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_tensor  # noqa: E402 - the harness and runner, beside this file

NN_DIR = Path(__file__).resolve().parent.parent / "lua" / "nn"
ABSTRACT = {"Module", "Criterion", "Container", "Decorator", "Jacobian", "SparseJacobian", "Profile"}
NOT_MODULES = {"THNN", "StochasticGradient"}   # torch/nn's kernel table and its trainer sit in lua/nn too
# every module or criterion class file in lua/nn (one class per file)
CLASSES = sorted(p.stem for p in NN_DIR.glob("*.lua")
                 if p.stem[0].isupper() and p.stem not in ABSTRACT | NOT_MODULES)
CTOR_ARGS = ("1", "2", "3", "4", "2", "3", "0", "-1", "0.5", "0/0", "1/0", "1e9", "nil", "true", "'x'", "{}",
             "false", "-2", "{1, 2}", "'bchw'", "'torch.FloatTensor'", "torch.Tensor(3):fill(1)",
             "torch.LongStorage({2, 2})", "nn.Linear(3, 2)", "nn.Identity()", "nn.Tanh()", "nn.MSECriterion()",
             "nn.SpatialMaxPooling(2, 2)")
PLAUSIBLE = ("1", "2", "2", "3", "4")
TYPES = ("Double", "Double", "Float", "Long", "Byte")


def make_case(seed: int, case: int) -> str:
    rng = random.Random(seed * 1_000_003 + case)
    cls = CLASSES[case % len(CLASSES)]   # every class in turn

    def spec() -> str:
        nd = rng.choice((1, 2, 2, 3, 4, 4))
        sizes = [rng.choice((0, 1, 2, 3, 4, 4, 5, 8)) if rng.random() < 0.1 else rng.choice((1, 2, 3, 4, 5, 8)) for _ in range(nd)]
        kind = rng.choice(("plain", "plain", "plain", "transposed", "expanded", "special"))
        return "{'%s', {%s}, '%s'}" % (rng.choice(TYPES), ", ".join(map(str, sizes)), kind)

    n_args = rng.randint(0, 8)
    if rng.random() < 0.5:   # all random
        args = [rng.choice(CTOR_ARGS) for _ in range(min(n_args, 4))]
    else:                    # plausible sizes with one argument replaced, to get past the others' checks
        args = [rng.choice(PLAUSIBLE) for _ in range(n_args)]
        if args:
            args[rng.randrange(n_args)] = rng.choice(CTOR_ARGS)
    args = ", ".join(args)
    specs = ", ".join(spec() for _ in range(3))
    # construction and forward are prepared (an in-place module may change its input there);
    # the harness then checks what backward does to the operands
    if cls.endswith("Criterion"):
        prepare = f"local m = nn.{cls}({args}) m:forward(o[1], o[2]) return m"
        call = "return m:backward(o[1], o[2])"
    elif "Table" in cls:
        prepare = f"local m = nn.{cls}({args}) m:forward({{o[1], o[2]}}) return m"
        call = "return m:backward({o[1], o[2]}, m.output)"
    else:
        prepare = f"local m = nn.{cls}({args}) m:forward(o[1]) return m"
        call = "return m:backward(o[1], o[3]), m.output"
    return f"return harness({{{specs}}}, function(o, m) {call} end, function(o) {prepare} end)"

if __name__ == "__main__":
    sys.exit(fuzz_tensor.main(make_case, "torch,nn", __doc__))
