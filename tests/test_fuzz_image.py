"""A sample of tests/fuzz_image.py (`make fuzz` runs 100,000 cases): valid and mutated PNG, JPEG,
PPM and PGM files read by image.load / loadPNG / loadJPG / loadPPM / getSize / decompress* never
crash, hang, blow up memory, refuse a valid file or raise an error that does not name the
function and the file."""
import io
import random

import pytest

Image = pytest.importorskip("PIL.Image", reason="the image extra (Pillow) is not installed: pip install 'luabridge[image]'")

import fuzz_image  # noqa: E402 - beside this file, as helpers

fuzz_tensor = fuzz_image.fuzz_tensor


def test_cases_are_deterministic_and_reach_every_function():
    cases = [fuzz_image.make_case(5, i) for i in range(300)]
    assert cases == [fuzz_image.make_case(5, i) for i in range(300)]
    assert len(set(cases)) == 300
    assert all(any(f"pcall(image.{fn}," in c for c in cases) for fn in fuzz_image.FUNCTIONS)
    assert sum("'refused'" in c for c in cases) > 20   # valid files that must be read


def test_valid_files_are_every_kind_and_what_they_claim():
    """The generator's valid files open in Pillow at the size they are checked against, and span
    the kinds the issue names: palettes with and without tRNS, grey with alpha, 16-bit, CMYK, YCCK."""
    kinds = set()
    for seed in range(400):
        fmt, data, (channels, height, width) = fuzz_image.valid_file(random.Random(seed))
        with Image.open(io.BytesIO(data)) as img:
            assert img.size == (width, height)
            img.load()
            kinds.add((fmt, img.mode, "transparency" in img.info, img.info.get("adobe_transform")))
            if img.mode == "P":
                assert channels == 3 == len(img.convert("RGB").getbands())
    modes = {(fmt, mode) for fmt, mode, _, _ in kinds}
    assert {("PNG", "P"), ("PNG", "LA"), ("PNG", "RGBA"), ("PNG", "1"), ("JPEG", "CMYK"), ("JPEG", "L"),
            ("PPM", "RGB"), ("PGM", "L"), ("PGM", "I")} <= modes
    assert ("PNG", "P", True, None) in kinds and ("JPEG", "CMYK", False, 2) in kinds


def test_fuzz_sample_has_no_failures():
    failures = fuzz_tensor.fuzz(20261206, 500, make=fuzz_image.make_case, packages="torch,image")
    if failures:
        pytest.fail("\n".join(f"case {c}: {kind}: {msg[:300]}" for c, kind, msg in failures[:10]))


def test_harness_catches_each_kind_of_failure(monkeypatch):
    """Outcomes built to fail each way are reported as such, naming their case, and the run goes on."""
    outcomes = {   # ok, result = ...; then what check is told: failed and the size a valid file has
        0: ("pcall(error, 'image.load: broken', 0)", "'error'"),                  # names no file
        1: ("pcall(error, 'image.load: cannot read x.png: ', 0)", "'error'"),     # gives no reason
        2: ("pcall(error, 'image.load: cannot read x.png: broken', 0)", "'refused'"),  # a valid file refused
        3: ("true, torch.rand(5, 2, 2)", "'error'"),                             # no image
        4: ("true, torch.Tensor(3, 2, 2):fill(2)", "'error'"),                   # floats outside [0, 1]
        5: ("true, torch.rand(3, 4, 5)", "'refused', 3, 4, 6"),                  # read at the wrong size
        6: ("pcall(error, 'image.load: cannot read x.png: broken', 0)", "'error'"),    # fine
        7: ("true, torch.ByteTensor(3, 4, 6)", "'refused', 3, 4, 6"),            # fine
    }
    special = {8: "require('ffi').cast('int *', 16)[0] = 1", 9: "while true do end"}   # crash, hang
    monkeypatch.setattr(fuzz_tensor, "CASE_SECONDS", 1)

    def make(seed: int, case: int) -> str:
        if case in special:
            return special[case]
        result, told = outcomes[case]
        return fuzz_image.CHECK + f"local ok, r = {result}; return check('image.load', 'x.png', ok, r, {told})"

    found = {c: kind for c, kind, _ in fuzz_tensor.run_chunk(0, list(range(10)), make, "torch,image")}
    assert found == {0: "unnamed", 1: "unnamed", 2: "refused", 3: "badresult", 4: "badresult", 5: "badresult",
                     8: "crash", 9: "hang"}
