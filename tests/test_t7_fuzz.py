"""A small sample of tests/fuzz_t7.py (the dedicated run does 100,000 cases): mutated .t7 files
fed to Lua's torch.deserialize and luabridge.t7.read load or raise the reader's own error, and
never crash, hang or run out of memory."""
import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("fuzz_t7", HERE / "fuzz_t7.py")
fuzz_t7 = sys.modules["fuzz_t7"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz_t7)


@pytest.fixture(scope="module")
def corpus():
    return fuzz_t7.build_corpus()


def test_cases_are_deterministic_and_mutated(corpus):
    a = [fuzz_t7.make_case(corpus, 7, i) for i in range(200)]
    b = [fuzz_t7.make_case(corpus, 7, i) for i in range(200)]
    assert [c.data for c in a] == [c.data for c in b]
    assert sum(c.data != c.seed.data for c in a) > 150
    assert {c.seed.format for c in a} >= {"binary", "ascii"}  # our own writer's files are seeds too


def test_fuzz_sample_has_no_failures(corpus, tmp_path):
    settings = fuzz_t7.Settings(jobs=2, chunk=1500, fail_dir=tmp_path)
    summary = fuzz_t7.Runner(corpus, 20261202, settings).run(first=0, cases=3000)
    print(summary.report())
    assert summary.cases == 3000
    if summary.failures:
        pytest.fail(f"{len(summary.failures)} failing cases, saved in {tmp_path}; the first ones:\n" + "\n".join(
            f"{f['replay']}: {f['reader']} {f['kind']}: {f['message'][:300]}" for f in summary.failures[:10]))
    for reader in ("lua", "python"):  # the mutations reach both outcomes in both readers
        assert summary.counts[reader, "l"] > 100 and summary.counts[reader, "r"] > 100


def test_harness_reports_crashes_hangs_and_memory(corpus, tmp_path, monkeypatch):
    """A worker that dies, stops or outgrows its memory cap names the case it was on, and the run
    goes on after it."""
    monkeypatch.setenv("FUZZ_T7_CRASH_AT", "5")
    monkeypatch.setenv("FUZZ_T7_HANG_AT", "12")
    monkeypatch.setenv("FUZZ_T7_HOG_AT", "15")  # asks for twice the cap
    # 5 s without a result is a hang: a loaded machine stalls a worker for a second or two (1.5 s
    # reported a healthy case as hung beside other tests); the hung case costs this once
    settings = fuzz_t7.Settings(which="python", jobs=1, chunk=20, fail_dir=tmp_path, hang_s=5.0, memory_mb=256)
    summary = fuzz_t7.Runner(corpus, 1, settings).run(first=0, cases=20)
    assert [(f["case"], f["kind"]) for f in summary.failures] == [(5, "crash"), (12, "hang"), (15, "crash")]
    assert "SIGSEGV" in summary.failures[0]["message"]
    assert "MemoryError" in summary.failures[2]["message"]
    assert summary.cases == 20
    assert (tmp_path / "seed1-case5-python-crash.t7").read_bytes() == fuzz_t7.make_case(corpus, 1, 5).data


def test_readers_disagreeing_fail_the_case(corpus):
    """One reader loading what the other rejects fails the case, except where the Lua reader
    rightly knows more: a class's own read method, or a class it lacks under unknownClasses='error'."""
    Outcome, case = fuzz_t7.Outcome, fuzz_t7.make_case(corpus, 3, 0)
    plain = fuzz_t7.Case(0, case.seed, "binary", {}, b"\x03\x00\x00\x00")
    knows = {"nn.Linear"}.__contains__
    loaded, rejected = Outcome("lua", "loaded"), Outcome("python", "rejected", "t7.read: bad")
    assert fuzz_t7.disagreement(plain, loaded, rejected, set(), knows) == "only lua loaded; python: t7.read: bad"
    lua_no = Outcome("lua", "rejected", "torch.deserialize: bad")
    assert fuzz_t7.disagreement(plain, lua_no, Outcome("python", "loaded"), set(), knows).startswith("only python")
    assert fuzz_t7.disagreement(plain, lua_no, Outcome("python", "loaded"), {"nn.Linear"}, knows) is None
    unknown = Outcome("lua", "rejected", "unknown Torch class <Blah> (...)")
    assert fuzz_t7.disagreement(plain, unknown, Outcome("python", "loaded"), {"Blah"}, knows) is None
    as_table = fuzz_t7.Case(0, case.seed, "binary", {"unknownClasses": "table"}, plain.data)
    assert fuzz_t7.disagreement(as_table, unknown, Outcome("python", "loaded"), {"Blah"}, knows) is not None
    timer = fuzz_t7.Case(0, case.seed, "binary", {}, b"torch.Timer")
    assert fuzz_t7.disagreement(timer, loaded, rejected, set(), knows) is None


def test_a_disagreement_is_a_failure_of_the_run(corpus, tmp_path, monkeypatch):
    """Readers.run reports a disagreement as a failing outcome, which the worker saves."""
    readers = fuzz_t7.Readers("both")
    case = next(c for c in (fuzz_t7.make_case(corpus, 5, i) for i in range(200))
                if [o.status for o in readers.run(c)] == ["loaded", "loaded"]
                and not any(name in c.data for name in fuzz_t7.OWN_LAYOUT))
    monkeypatch.setattr(readers, "python", lambda c, p: fuzz_t7.Outcome("python", "rejected", "forced"))
    outcomes = readers.run(case)
    assert [(o.reader, o.status) for o in outcomes][-1] == ("lua+python", "disagree")
    assert outcomes[-1].failed and "only lua loaded" in outcomes[-1].message


def test_lua_knows_the_classes_its_reader_reads_under_an_alias():
    """cudnn.SpatialConvolution is read as nn's class, whose read method may refuse fields the
    Python reader keeps: the Lua side knows the class even before cudnn is required."""
    readers = fuzz_t7.Readers("lua")
    assert readers.lua_knows("cudnn.SpatialConvolution") and readers.lua_knows("nn.Linear")
    assert not readers.lua_knows("cudnn.NoSuchLayer")
