"""tostring / print of tensors and storages, against strings worked out by hand from torch7's rules.

torch7's rules (Tensor.lua, Storage__printformat), which every expected string below follows:
- All values are looked at together (the whole tensor, even for one slice). mag(x) is
  floor(log10(x)) + 1, and 1 for x == 0; expMin = mag(min |v|), expMax = mag(max |v|).
- All values integral (inf counts as integral, nan does not): "%{expMax+1}d", or "%11.4e" when
  expMax > 9. Otherwise: "%11.4e" when expMax - expMin > 4 (width 12 when |expMax| or |expMin|
  > 99); else "%7.4f" with a scale 10^(expMax-1) when expMax > 5 or expMax < 0; else "%7.4f" when
  expMax == 0 and "%{expMax+6}.4f" otherwise. The scale prints as "%g *" above the values.
- A nan anywhere: plain "%f" for every value, no column blocks.
- 1D: one value per line. 2D: values joined by " ", at most floor((80 - #indent) / (width + 1))
  columns per block; with more columns each block starts with "Columns a to b" (blocks after the
  first one after an empty line), and each block repeats the scale line; rows under a scale get
  one extra leading space. 3D+: each 2D slice under "(i,j,.,.) = " with indent " ", the FIRST
  leading index varying fastest, slices separated by an empty line.
- Footer "[torch.XTensor of size AxB]"; no dims: "[torch.XTensor with no dimension]"; every
  string ends with a newline.
"""
import numpy as np
import pytest

import luabridge


def tostr(lua, expr: str) -> str:
    return lua.eval(f"tostring({expr})")


CASES = [
    # integral doubles: max |v| = 10 -> expMax = 2 -> "%3d"
    ("torch.Tensor({{1, -2, 3}, {10, 0, 7}})",
     "  1  -2   3\n"
     " 10   0   7\n"
     "[torch.DoubleTensor of size 2x3]\n"),
    # integral values in a FloatTensor still print as integers: max 4 -> "%2d"
    ("torch.FloatTensor({{2, 4}})",
     " 2  4\n[torch.FloatTensor of size 1x2]\n"),
    # min |v| = 0.5 -> expMin 0, max 3 -> expMax 1 -> "%7.4f" (expMax + 6)
    ("torch.FloatTensor({{0.5, -1.25, 3}})",
     " 0.5000 -1.2500  3.0000\n[torch.FloatTensor of size 1x3]\n"),
    # max 10 -> log10 exactly 1 -> expMax 2 -> "%8.4f"
    ("torch.Tensor({10, 0.5})",
     " 10.0000\n  0.5000\n[torch.DoubleTensor of size 2]\n"),
    # 99999.5 -> expMax 5: no scale yet, "%11.4f"
    ("torch.Tensor({99999.5})",
     " 99999.5000\n[torch.DoubleTensor of size 1]\n"),
    # both ~1e5 -> expMax = expMin = 6 > 5 -> scale 10^5, which %g prints as 100000
    ("torch.Tensor({123456.7, 100000.5})",
     "100000 *\n 1.2346\n 1.0000\n[torch.DoubleTensor of size 2]\n"),
    # 2345678.9 -> expMax 7, 1.5e6 -> expMin 7 -> scale 10^6, which %g prints as 1e+06
    ("torch.Tensor({2345678.9, -1500000})",
     "1e+06 *\n 2.3457\n-1.5000\n[torch.DoubleTensor of size 2]\n"),
    # max 0.15 -> expMax 0 -> "%7.4f" and no scale
    ("torch.Tensor({0.1, -0.15})",
     " 0.1000\n-0.1500\n[torch.DoubleTensor of size 2]\n"),
    # max 0.09 -> expMax -1 < 0 -> scale 10^-2
    ("torch.Tensor({0.05, 0.09})",
     "0.01 *\n 5.0000\n 9.0000\n[torch.DoubleTensor of size 2]\n"),
    # 1.234e-5, 5e-5 -> expMax = expMin = -4 -> scale 1e-05
    ("torch.Tensor({0.00001234, -0.00005})",
     "1e-05 *\n 1.2340\n-5.0000\n[torch.DoubleTensor of size 2]\n"),
    # 2D under a scale: the scale line, then rows with one extra space
    ("torch.Tensor({{1.5e-5, 2e-5}, {-3e-5, 1.25e-5}})",
     "1e-05 *\n"
     "  1.5000  2.0000\n"
     " -3.0000  1.2500\n"
     "[torch.DoubleTensor of size 2x2]\n"),
    # 0.001234 -> expMin -2, 123.4 -> expMax 3: spread 5 > 4 -> "%11.4e"
    ("torch.Tensor({0.001234, -123.4})",
     " 1.2340e-03\n-1.2340e+02\n[torch.DoubleTensor of size 2]\n"),
    # 1.5e-120 -> expMin -119, |expMin| > 99 -> "%12.4e"
    ("torch.Tensor({1.5e-120, 2.5})",
     " 1.5000e-120\n  2.5000e+00\n[torch.DoubleTensor of size 2]\n"),
    # integral but 1e10 -> expMax 11 > 9 -> "%11.4e"
    ("torch.Tensor({1e10, -3})",
     " 1.0000e+10\n-3.0000e+00\n[torch.DoubleTensor of size 2]\n"),
    # inf counts as integral: expMax = inf > 9 -> "%11.4e"
    ("torch.Tensor({1, 1/0, -1/0})",
     " 1.0000e+00\n        inf\n       -inf\n[torch.DoubleTensor of size 3]\n"),
    # with a non-integer: expMax - expMin = inf > 4 and |expMax| > 99 -> "%12.4e"
    ("torch.Tensor({0.5, 1/0})",
     "  5.0000e-01\n         inf\n[torch.DoubleTensor of size 2]\n"),
    # a nan: plain "%f"
    ("torch.Tensor({1.5, 0/0})",
     "1.500000\nnan\n[torch.DoubleTensor of size 2]\n"),
    ("torch.Tensor({{1, 0/0}, {-2, 3}})",
     "1.000000 nan\n-2.000000 3.000000\n[torch.DoubleTensor of size 2x2]\n"),
    # integer types: max |v| = 100 -> expMax 3 -> "%4d"
    ("torch.LongTensor({{-100, 5}})",
     "-100    5\n[torch.LongTensor of size 1x2]\n"),
    ("torch.ByteTensor({255, 0})",
     " 255\n   0\n[torch.ByteTensor of size 2]\n"),
    # half values go through the same double rules
    ("torch.HalfTensor({0.5, 2})",
     " 0.5000\n 2.0000\n[torch.HalfTensor of size 2]\n"),
    # a transposed (non-contiguous) view prints its own element order
    ("torch.Tensor({{1, 2, 3}, {4, 5, 6}}):t()",
     " 1  4\n 2  5\n 3  6\n[torch.DoubleTensor of size 3x2]\n"),
    # no dimension
    ("torch.Tensor()", "[torch.DoubleTensor with no dimension]\n"),
    ("torch.FloatTensor()", "[torch.FloatTensor with no dimension]\n"),
    # zero-size dims: no values, just the footer
    ("torch.Tensor(2, 0)", "[torch.DoubleTensor of size 2x0]\n"),
    ("torch.Tensor(0)", "[torch.DoubleTensor of size 0]\n"),
    ("torch.Tensor(2, 0, 3)", "[torch.DoubleTensor of size 2x0x3]\n"),
    # 3D: indent " ", "%2d" (max 8)
    ("torch.Tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})",
     "(1,.,.) = \n"
     "  1  2\n"
     "  3  4\n"
     "\n"
     "(2,.,.) = \n"
     "  5  6\n"
     "  7  8\n"
     "[torch.DoubleTensor of size 2x2x2]\n"),
    # 4D: the first leading index varies fastest: (1,1), (2,1), (1,2), (2,2)
    ("torch.Tensor({1, 2, 3, 4}):view(2, 2, 1, 1)",
     "(1,1,.,.) = \n  1\n\n"
     "(2,1,.,.) = \n  3\n\n"
     "(1,2,.,.) = \n  2\n\n"
     "(2,2,.,.) = \n  4\n"
     "[torch.DoubleTensor of size 2x2x1x1]\n"),
    # 3D under a scale: " " indent, scale line indented, rows indented by two (then "%7.4f")
    ("torch.Tensor({{{0.05}}, {{0.09}}})",
     "(1,.,.) = \n 0.01 *\n   5.0000\n\n"
     "(2,.,.) = \n 0.01 *\n   9.0000\n"
     "[torch.DoubleTensor of size 2x1x1]\n"),
    # storages: one value per line, the same format rules
    ("torch.DoubleStorage({1, 2.5})", " 1.0000\n 2.5000\n[torch.DoubleStorage of size 2]\n"),
    ("torch.LongStorage({1, -20})", "  1\n-20\n[torch.LongStorage of size 2]\n"),
    # 0.002, 0.005 -> expMax -2 -> scale 10^-3
    ("torch.FloatStorage({0.002, 0.005})",
     "0.001 *\n 2.0000\n 5.0000\n[torch.FloatStorage of size 2]\n"),
    ("torch.ByteStorage()", "[torch.ByteStorage of size 0]\n"),
]


@pytest.mark.parametrize("expr,expected", CASES)
def test_tostring(lua, expr, expected):
    assert tostr(lua, expr) == expected


def _columns_block(first: int, last: int, rows: list[list[int]], fmt: str, indent: str = "") -> str:
    head = f"Columns {first} to {last}\n"
    body = "".join(indent + " ".join(fmt % v for v in r[first - 1:last]) + "\n" for r in rows)
    return head + body


def test_columns_split_at_80(lua):
    # values 1..42 -> max 42 -> expMax 2 -> "%3d": floor(80 / 4) = 20 columns per block
    rows = [list(range(1, 22)), list(range(22, 43))]
    expected = (_columns_block(1, 20, rows, "%3d") + "\n" + _columns_block(21, 21, rows, "%3d")
                + "[torch.DoubleTensor of size 2x21]\n")
    t = luabridge.from_numpy(np.arange(1.0, 43.0).reshape(2, 21))
    assert lua.eval("tostring")(t) == expected


def test_exactly_full_line_is_not_split(lua):
    # 20 columns of "%3d" + separators = 79 characters: fits, no "Columns" line
    row = list(range(1, 21))
    expected = " ".join("%3d" % v for v in row) + "\n[torch.DoubleTensor of size 1x20]\n"
    t = luabridge.from_numpy(np.arange(1.0, 21.0).reshape(1, 20))
    assert lua.eval("tostring")(t) == expected


def test_columns_in_3d_slices_use_the_indent(lua):
    # "%2d" (max 9), indent " ": floor(79 / 3) = 26 columns per block; the "Columns" line of
    # the first block follows the indent, later ones start the line
    s = tostr(lua, "torch.Tensor(1, 1, 30):fill(9)")
    expected = ("(1,.,.) = \n"
                " Columns 1 to 26\n"
                " " + " ".join([" 9"] * 26) + "\n"
                "\nColumns 27 to 30\n"
                " " + " ".join([" 9"] * 4) + "\n"
                "[torch.DoubleTensor of size 1x1x30]\n")
    assert s == expected


def test_scale_repeats_in_each_column_block(lua):
    # 0.0011..0.0015 -> expMax -2 -> scale 10^-3, "%7.4f": floor(80 / 8) = 10 columns per block
    s = tostr(lua, "torch.Tensor(1, 12):fill(0.0015)")
    row = " ".join([" 1.5000"] * 10)
    expected = ("Columns 1 to 10\n0.001 *\n " + row + "\n"
                "\nColumns 11 to 12\n0.001 *\n  1.5000  1.5000\n"
                "[torch.DoubleTensor of size 1x12]\n")
    assert s == expected


def test_print_goes_through_tostring(lua, capfd):
    lua.execute("print(torch.Tensor({{1, 2}}))")
    out = capfd.readouterr().out
    assert out == " 1  2\n[torch.DoubleTensor of size 1x2]\n\n"


def test_python_repr_matches(lua):
    t = luabridge.wrap(lua.eval("torch.Tensor({3, 4})"))
    assert str(t) == " 3\n 4\n[torch.DoubleTensor of size 2]\n"


def test_printing_leaves_tensor_unchanged(lua):
    t = lua.eval("torch.Tensor({{1.5, -2}, {3, 4}}):t()")
    before = luabridge.to_numpy(t).copy()
    lua.eval("function(x) return tostring(x) end")(t)
    assert (luabridge.to_numpy(t) == before).all()
    assert list(luabridge.to_numpy(t).strides) == [8, 16]
