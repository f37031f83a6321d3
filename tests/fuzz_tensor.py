"""Fuzzes the tensor API with random calls: every element type, views, zero-size and expanded
operands, NaN/inf/huge/negative numbers and wrong types as arguments.

    python tests/fuzz_tensor.py --cases 100000 [--seed S] [--chunk N]
    python tests/fuzz_tensor.py --seed S --case I          (one case, here, with its Lua source)

Every operand is a view into the middle of a storage with GUARD elements of a sentinel value on
each side. After each call: the guards must be intact (no out-of-bounds write), a call that
raised must have left its operands' values as they were, every tensor it returned must lie
inside its storage, and an error must be the library's own (a message that names the op, not
a Lua runtime error such as "attempt to index" or numpy's words). Cases run in a child process
under an address-space cap, in chunks; a crash or hang names its case. A case is a function of
(seed, case number): a failure replays from them.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
from typing import IO, Callable, Iterator

import fuzz_progress  # beside this file (on the path: this file's folder, or tests/ under pytest)

# A case that used this much CPU time, or ten times as long by the clock, is a hang. CPU time,
# unlike the clock, does not grow with the machine's load (filling 2 GiB takes a second of it).
CASE_SECONDS = 10
MEMORY_MB = 2048  # in this sandbox touching 2 GiB costs 8 s of page faults: bigger asks must fail
TYPES = ("Byte", "Char", "Short", "Int", "Long", "Float", "Double")
NUMBERS = ("0", "1", "-1", "2", "3", "0.5", "-2.5", "0/0", "1/0", "-1/0", "2^31", "2^53", "1e18", "-2^31", "7")
# numeric strings are numbers to torch7's C functions (lua_isnumber), so they go where numbers go
OTHER_ARGS = ("nil", "'x'", "{}", "{2, 3}", "torch.LongStorage({2, 2})", "true", "'2'", "' -0x1 '", "'1e300'")

# method -> argument count range (beyond self); arguments are numbers, other values or operands
METHODS = {
    "fill": (1, 1), "zero": (0, 0), "add": (1, 3), "mul": (1, 2), "cmul": (1, 2), "div": (1, 2),
    "copy": (1, 1), "narrow": (3, 3), "select": (2, 2), "sub": (2, 6), "transpose": (2, 2), "t": (0, 0),
    "view": (1, 3), "resize": (1, 3), "resizeAs": (1, 1), "expand": (1, 3), "unfold": (3, 3),
    "squeeze": (0, 1), "unsqueeze": (1, 1), "repeatTensor": (1, 3), "permute": (1, 3), "index": (2, 2),
    "indexFill": (3, 3), "indexCopy": (3, 3), "indexAdd": (3, 3), "gather": (2, 2), "scatter": (3, 3),
    "maskedFill": (2, 2), "maskedSelect": (1, 1), "maskedCopy": (2, 2), "sum": (0, 1), "max": (0, 1),
    "min": (0, 1), "mean": (0, 1), "cumsum": (0, 1), "sort": (0, 2), "topk": (1, 3), "kthvalue": (1, 2),
    "diag": (0, 1), "tril": (0, 1), "triu": (0, 1), "clamp": (2, 2), "pow": (1, 1), "abs": (0, 0),
    "cat": (1, 2), "split": (1, 2), "chunk": (1, 2), "renorm": (3, 3), "dist": (1, 2), "norm": (0, 2),
    "addmm": (2, 4), "mm": (1, 1), "mv": (1, 1), "addmv": (2, 4), "dot": (1, 1), "cross": (1, 2),
    "set": (0, 5), "isSetTo": (1, 1), "type": (0, 1), "apply": (1, 1), "storageOffset": (0, 0),
    "reshape": (1, 3), "contiguous": (0, 0), "clone": (0, 0), "fmod": (1, 1), "sign": (0, 0),
    "histc": (0, 3), "nonzero": (0, 0), "eq": (1, 1), "lt": (1, 1), "addcmul": (2, 3), "lerp": (2, 2),
}

# torch.<name>(...) functional forms -> argument count range beyond the operands; with an
# operand first as the result half the time (torch7's [res,] convention)
FUNCTIONS = {
    **{f: (0, 0) for f in ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "exp", "floor", "frac", "log",
                           "log1p", "neg", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan",
                           "tanh", "trunc", "cinv", "trace", "nonzero", "inverse", "qr", "geqrf")},
    **{f: (1, 1) for f in ("mul", "div", "cmul", "cdiv", "cpow", "pow", "fmod", "remainder", "cfmod",
                           "cremainder", "cmax", "cmin", "atan2", "bitand", "bitor", "bitxor", "lshift",
                           "rshift", "cbitand", "cbitor", "cbitxor", "clshift", "crshift", "equal", "mm", "mv",
                           "dot", "ger", "bmm", "expandAs", "viewAs", "maskedSelect", "eq", "ne", "lt", "le",
                           "gt", "ge", "gesv", "gels")},
    **{f: (0, 2) for f in ("sum", "mean", "prod", "cumsum", "cumprod", "std", "var", "max", "min", "median",
                           "mode", "all", "any", "norm", "sort", "potrf", "potri", "pstrf", "svd", "eig",
                           "symeig", "diag", "tril", "triu")},
    **{f: (1, 2) for f in ("add", "csub", "kthvalue", "dist", "cross", "conv2", "xcorr2", "conv3", "xcorr3",
                           "potrs", "cat", "chunk", "split")},
    **{f: (2, 2) for f in ("clamp", "lerp", "index", "gather")},
    **{f: (1, 3) for f in ("topk", "trtrs", "orgqr", "ormqr", "expand", "view", "reshape", "repeatTensor")},
    **{f: (2, 4) for f in ("addmm", "addmv", "addr", "addbmm", "baddbmm", "addcmul", "addcdiv")},
    **{f: (0, 3) for f in ("histc", "bhistc", "uniform", "normal", "bernoulli", "exponential", "cauchy",
                           "logNormal", "geometric", "random", "multinomial", "renorm", "scatter")},
}
# torch.<name>(numbers...): constructors and generators with no operand
GENERATORS = ("zeros", "ones", "rand", "randn", "range", "linspace", "logspace", "randperm", "eye")
# storage methods -> argument count range; called on a storage view of operand 1's elements
STORAGE_METHODS = {"fill": (1, 1), "zero": (0, 0), "resize": (1, 1), "copy": (1, 1), "totable": (0, 0),
                   "string": (0, 1), "type": (0, 1), "size": (0, 0)}
STORAGE_ARGS = ("{1, 2, 3}", "{1, 'x'}", "{}", "v", "torch.DoubleStorage(3)", "torch.ByteStorage(0)",
                "'torch.FloatStorage'", "'torch.NoStorage'", "'abc'")

UNCLEAR = ("attempt to ", "bad argument #", "Unable to allocate", "Maximum allowed", "stack overflow",
           "table index is", "invalid key to", "KeyError", "cannot convert", "not enough memory\n")

GUARD = 3  # sentinel elements on each side of every operand
HARNESS = r"""
local GUARD, SENTINEL = @GUARD@, 77
local function operand(ty, sizes, kind)
  local n = 1
  for _, s in ipairs(sizes) do n = n * s end
  local st = torch[ty .. 'Storage'](n + 2 * GUARD):fill(SENTINEL)
  local t = torch[ty .. 'Tensor']()
  if kind == 'empty' then return t, st end
  t:set(st, GUARD + 1, torch.LongStorage(sizes))
  t:copy(torch.Tensor(t:size()):random(0, 9))
  if kind == 'special' then   -- values that become addresses or counts if unchecked
    local specials, flat = { 0/0, 1/0, -1/0, -1, 0, 2^31, -2^40, 0.5 }, t:view(-1)
    for i = 1, flat:nElement(), 2 do flat[i] = specials[(i - 1) / 2 % #specials + 1] end
  end
  if kind == 'transposed' and t:dim() >= 2 then t = t:transpose(1, t:dim())
  elseif kind == 'expanded' and t:dim() >= 1 and t:size(1) == 1 then
    local sz = t:size(); sz[1] = 3; t = t:expand(sz) end
  return t, st
end
-- The guards at both ends of a storage of n elements. An operand the call resized (a result
-- argument, as torch7's [res,] convention allows) may legitimately reach into its tail guard:
-- then only the head guard, below its offset, is checked.
local function guardsIntact(st, n, resized)
  for i = 1, GUARD do
    if st[i] ~= SENTINEL or (not resized and st[n - i + 1] ~= SENTINEL) then return false end
  end
  return true
end
local function signature(t)
  return table.concat(t:size():totable(), 'x') .. '/' .. table.concat(t:stride():totable(), ',') .. '@' .. t:storageOffset()
end
local function snapshot(t) return t:dim() > 0 and t:double():clone() or false end
local function same(t, s)
  if not s then return t:dim() == 0 or t:nElement() == 0 end
  local a = t:double()
  if not a:isSameSizeAs(s) then return false end
  local u, v = a:contiguous():storage(), s:contiguous():storage()
  local ua, va = a:contiguous():storageOffset() - 1, s:contiguous():storageOffset() - 1
  for i = 1, a:nElement() do
    local x, y = u[ua + i], v[va + i]
    if not (x == y or (x ~= x and y ~= y)) then return false end   -- NaN equals NaN here
  end
  return true
end
local function inside(t)
  if not torch.isTensor(t) or t:nElement() == 0 then return true end
  local st = t:storage()
  if not st then return false end
  local n, first, last = torch._viewExtent(t:size():totable(), t:stride():totable(), t:storageOffset())
  return first >= 0 and last < st:size()
end
-- harness(specs, call[, prepare]): prepare(ops), when given, runs first and may change the
-- operands (an in-place forward); its errors count as the call's. The operands are then
-- snapshotted and call(ops, prepared) runs.
return function(specs, call, prepare)
  local ops, sts, sizes, sigs, snaps = {}, {}, {}, {}, {}
  for i, s in ipairs(specs) do ops[i], sts[i] = operand(s[1], s[2], s[3]) end
  local ok, state = true, nil
  if prepare then ok, state = pcall(prepare, ops) end
  for i = 1, #ops do sizes[i], sigs[i], snaps[i] = sts[i]:size(), signature(ops[i]), snapshot(ops[i]) end
  local a, b, c = state
  if ok then ok, a, b, c = pcall(call, ops, state) end
  for i = 1, #sts do
    local resized = ops[i]:storage() ~= sts[i] or signature(ops[i]) ~= sigs[i] or sts[i]:size() ~= sizes[i]
    if sts[i]:size() >= GUARD and not guardsIntact(sts[i], sizes[i], resized) then return 'guard', 'operand ' .. i .. ' written outside its view' end
  end
  if not ok then
    for i = 1, #ops do
      if not same(ops[i], snaps[i]) then return 'changed', 'operand ' .. i .. ' changed by a failed call: ' .. tostring(a) end
    end
    return 'error', tostring(a)
  end
  for _, r in ipairs({ a, b, c }) do
    if type(r) == 'table' and not torch.isTensor(r) then
      for _, x in ipairs(r) do if not inside(x) then return 'outside', 'a returned tensor lies outside its storage' end end
    elseif not inside(r) then return 'outside', 'a returned tensor lies outside its storage' end
  end
  return 'ok', ''
end
""".replace("@GUARD@", str(GUARD))


def make_case(seed: int, case: int) -> str:
    """The Lua source of one case: `return harness(specs, function(o) ... end)`: a tensor method,
    a torch.* function, a generator or a storage call."""
    rng = random.Random(seed * 1_000_003 + case)

    def spec(nd: int) -> tuple[str, str]:
        ty = rng.choice(TYPES)
        sizes = [rng.choice((0, 1, 1, 2, 3, 4)) for _ in range(nd)]
        kind = "empty" if nd == 0 else rng.choice(("plain", "plain", "transposed", "expanded", "special"))
        return ty, "{'%s', {%s}, '%s'}" % (ty, ", ".join(map(str, sizes)), kind)

    n_ops = rng.randint(1, 3)
    form = rng.random()
    # a storage case views operand 1's storage: it must have one
    specs = [spec(rng.choice((1, 1, 2, 2, 3)) if form >= 0.85 and i == 0 else rng.choice((0, 1, 1, 2, 2, 3)))
             for i in range(n_ops)]

    def operand() -> str:
        k = rng.randint(1, n_ops)
        return f"o[{k}]" if rng.random() < 0.85 else f"o[{k}]:long()"

    def args(lo: int, hi: int) -> str:
        out = []
        for _ in range(rng.randint(lo, hi)):
            r = rng.random()
            out.append(rng.choice(NUMBERS) if r < 0.45 else operand() if r < 0.9 else rng.choice(OTHER_ARGS))
        return ", ".join(out)

    def numbers(lo: int, hi: int) -> str:
        return ", ".join(rng.choice(NUMBERS) for _ in range(rng.randint(lo, hi)))

    if form < 0.6:
        method = rng.choice(sorted(METHODS))
        a = args(*METHODS[method])
        call = f"return o[1]:{method}({a})" if method != "cat" else f"return torch.cat(o[1], {a})"
    elif form < 0.8:
        fn = rng.choice(sorted(FUNCTIONS))
        first = f"o[{rng.randint(1, n_ops)}], o[1]" if rng.random() < 0.5 else "o[1]"
        rest = args(*FUNCTIONS[fn])
        call = f"return torch.{fn}({first}{', ' + rest if rest else ''})"
    elif form < 0.85:
        call = f"return torch.{rng.choice(GENERATORS)}({numbers(0, 3)})"
    else:
        ty = specs[0][0]
        # v: a storage view of exactly operand 1's elements (its guards stay outside)
        view = f"local s = o[1]:storage(); local v = torch.{ty}Storage(s, {GUARD + 1}, s:size() - {2 * GUARD}); "

        def sarg() -> str:
            return rng.choice(NUMBERS) if rng.random() < 0.5 else rng.choice(STORAGE_ARGS)

        r = rng.random()
        if r < 0.6:
            method = rng.choice(sorted(STORAGE_METHODS))
            lo, hi = STORAGE_METHODS[method]
            call = view + f"return v:{method}({', '.join(sarg() for _ in range(rng.randint(lo, hi)))})"
        elif r < 0.75:
            call = view + f"return v[{sarg()}]"
        elif r < 0.9:
            call = view + f"v[{sarg()}] = {sarg()}"
        else:
            call = view + f"return torch.{rng.choice(TYPES)}Storage({', '.join(sarg() for _ in range(rng.randint(0, 3)))})"
    return f"return harness({{{', '.join(s for _, s in specs)}}}, function(o) {call} end)"


CHILD = r"""
import json, os, resource, signal, sys
# records go to the original stdout; what a case prints itself (Lua's print) goes nowhere
records = os.fdopen(os.dup(1), 'w')
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
# a case still running at either timer ends the child: SIGPROF counts CPU time, SIGALRM the clock
signal.signal(signal.SIGALRM, signal.SIG_DFL)
signal.signal(signal.SIGPROF, signal.SIG_DFL)
limit = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import luabridge
for package in sys.argv[4].split(','):
    luabridge.require(package)
g = luabridge.runtime().globals()
g.harness = luabridge.execute(sys.argv[2])
for line in sys.stdin:
    case, code = json.loads(line)
    print(json.dumps([case, 'start']), file=records, flush=True)
    signal.setitimer(signal.ITIMER_PROF, int(sys.argv[3]))
    signal.alarm(10 * int(sys.argv[3]))
    try:
        kind, message = luabridge.execute(code)
    except luabridge.LuaError as e:
        kind, message = 'error', str(e).split('\nstack traceback')[0]
    except Exception as e:  # anything but the library's own error
        kind, message = 'python', f'{type(e).__name__}: {e}'
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.alarm(0)
    print(json.dumps([case, kind, message]), file=records, flush=True)
"""


def classify(kind: str, message: str) -> str | None:
    """The failure a case's outcome is, or None when it passed."""
    if kind in ("ok",):
        return None
    if kind == "error":
        return "unclear" if any(p in message for p in UNCLEAR) else None
    return kind


def feed(pipe: IO[str], lines: list[str]) -> None:
    try:
        for line in lines:
            pipe.write(line + "\n")
        pipe.close()
    except BrokenPipeError:
        pass


def run_chunk(seed: int, cases: list[int], make: Callable[[int, int], str] | None = None,
              packages: str = "torch", child: str = CHILD,
              on_case: Callable[[], None] | None = None) -> Iterator[tuple[int, str, str]]:
    """(case, failure, message) for each failing case of a chunk, one child process for all;
    make(seed, case) gives a case's Lua source (make_case here), packages what to require,
    child the program that runs the cases (CHILD here; another fuzzer's takes the same argv);
    on_case() is called as each case ends (before its failure, if any, is yielded)."""
    make = make or make_case
    pending = list(cases)
    while pending:
        errors = tempfile.TemporaryFile()   # a file, not a pipe: a chatty child cannot block on it
        proc = subprocess.Popen([sys.executable, "-c", child, str(MEMORY_MB), HARNESS, str(CASE_SECONDS), packages], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errors, text=True)
        assert proc.stdin and proc.stdout
        # fed from a thread: the child's output is read meanwhile (no pipe can fill up and block
        # both), and a child that crashes before reading everything just ends the feed
        feeder = threading.Thread(target=feed, args=(proc.stdin, [json.dumps([c, make(seed, c)]) for c in pending]))
        feeder.start()
        started = None
        done: set[int] = set()
        for line in proc.stdout:
            rec = json.loads(line)
            if rec[1] == "start":
                started = rec[0]
                continue
            done.add(rec[0])
            if on_case is not None:
                on_case()
            failure = classify(rec[1], rec[2])
            if failure:
                yield rec[0], failure, rec[2]
        rc = proc.wait()
        feeder.join()
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")[-500:]
        errors.close()
        rest = [c for c in pending if c not in done]
        if not rest:
            return
        culprit = started if started in rest else rest[0]
        kind = "hang" if rc in (-signal.SIGALRM, -signal.SIGPROF) else "crash"
        if on_case is not None:
            on_case()
        yield culprit, kind, f"exit {rc}: {stderr}"
        pending = [c for c in rest if c != culprit]


def fuzz(seed: int, n: int, chunk: int = 500, make: Callable[[int, int], str] | None = None,
         packages: str = "torch", child: str = CHILD,
         progress: fuzz_progress.FuzzProgress | None = None) -> list[tuple[int, str, str]]:
    failures: list[tuple[int, str, str]] = []
    done = 0

    def on_case() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress.update(done, len(failures))

    try:
        for first in range(0, n, chunk):
            failures.extend(run_chunk(seed, list(range(first, min(n, first + chunk))), make, packages, child,
                                      on_case))
    finally:
        if progress is not None:
            progress.close()
    return failures


def main(make: Callable[[int, int], str] | None = None, packages: str = "torch", doc: str = __doc__,
         child: str = CHILD) -> int:
    make = make or make_case
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", type=int)
    ap.add_argument("--chunk", type=int, default=500)
    fuzz_progress.add_option(ap)
    a = ap.parse_args()
    if a.case is not None:
        print(make(a.seed, a.case))
        for c, failure, message in run_chunk(a.seed, [a.case], make, packages, child):
            print(f"case {c}: {failure}: {message}")
            return 1
        print("passed")
        return 0
    label = os.path.basename(sys.argv[0]).removesuffix(".py") or "fuzz"
    progress = fuzz_progress.FuzzProgress(label, a.cases) if fuzz_progress.wanted(a.progress) else None
    failures = fuzz(a.seed, a.cases, a.chunk, make, packages, child, progress)
    for c, failure, message in failures:
        print(f"seed {a.seed} case {c}: {failure}: {message[:300]}")
    print(f"{a.cases - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
