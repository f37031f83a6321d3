"""image.polar and image.logpolar against a literal numpy port of torch/image's C loops (generic/image.c:
Main_polar, Main_polarBilinear, Main_logPolar, Main_logPolarBilinear), with the C's float variables
rounded to float32 and its double expressions in float64."""
from __future__ import annotations

import math

import numpy as np
import pytest

from helpers import N, T, assert_lua_errors, lua_fn

pytest.importorskip("PIL.Image", reason="the image extra (Pillow) is not installed")

img = lua_fn("function(name, ...) require 'image'; return image[name](...) end")
f32 = np.float32


def reference(src: np.ndarray, out_hw: tuple[int, int], full: bool, log: bool, bilinear: bool) -> np.ndarray:
    depth, sh, sw = src.shape
    h, w = out_hw
    dst = np.zeros((depth, h, w))
    mid_y, mid_x = f32(sh / 2.0), f32(sw / 2.0)
    m = f32(math.sqrt(f32(sw) * f32(sw) + f32(sh) * f32(sh)) / 2.0) if full else (mid_x if sw < sh else mid_y)
    fw = f32(math.log(m) / float(f32(w)))
    for j in range(h):
        a = f32(2 * math.pi * j / float(f32(h)))
        for i in range(w):
            r = f32(math.exp(float(f32(f32(i) * fw)))) if log else f32(f32(m * f32(i)) / f32(w))
            rj = float(r) * math.cos(a) + float(mid_y)
            ri = -float(r) * math.sin(a) + float(mid_x)
            if log and bilinear:                      # Main_logPolarBilinear's ri, rj are floats
                ri, rj = float(f32(ri)), float(f32(rj))
            i0, j0 = math.floor(ri), math.floor(rj)
            if bilinear and 0 <= i0 and 0 <= j0 and i0 + 1 <= sw - 1 and j0 + 1 <= sh - 1:
                wi, wj = ri - i0, rj - j0
                dst[:, j, i] = ((1 - wi) * (1 - wj) * src[:, j0, i0] + wi * (1 - wj) * src[:, j0, i0 + 1]
                                + (1 - wi) * wj * src[:, j0 + 1, i0] + wi * wj * src[:, j0 + 1, i0 + 1])
            elif 0 <= i0 <= sw - 1 and 0 <= j0 <= sh - 1:
                dst[:, j, i] = src[:, j0, i0]
    return dst


@pytest.mark.parametrize("fn", ["polar", "logpolar"])
@pytest.mark.parametrize("interp", ["simple", "bilinear"])
@pytest.mark.parametrize("mode", ["valid", "full"])
def test_polar_matches_the_c_loops(fn, interp, mode):
    rng = np.random.default_rng(7)
    src = rng.uniform(size=(3, 17, 23))
    out = N(img(fn, T(src), interp, mode))
    assert out.shape == (3, 23, 23)           # torch7 sizes the destination max(H, W) square
    np.testing.assert_allclose(out, reference(src, (23, 23), mode == "full", fn == "logpolar", interp == "bilinear"),
                               rtol=1e-12, atol=1e-12)


def test_polar_into_a_destination_of_another_size():
    rng = np.random.default_rng(3)
    src = rng.uniform(size=(12, 9))
    dst = T(np.zeros((7, 11)))
    returned = img("polar", dst, T(src), "bilinear", "full")
    np.testing.assert_allclose(N(dst), reference(src[None], (7, 11), True, False, True)[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(N(returned), N(dst))


def test_polar_errors():
    assert_lua_errors([
        # torch7's defaults are swapped (interp 'valid', mode 'simple'): the source alone is refused
        ("function() require 'image'; image.polar(torch.rand(3, 4, 4)) end", "interpolation must be one of: simple | bilinear"),
        ("function() require 'image'; image.logpolar(torch.rand(3, 4, 4), 'bilinear', 'half') end", "mode must be one of: valid | full"),
        ("function() require 'image'; image.polar(torch.rand(3, 4, 4), torch.rand(2, 4, 4), 'simple', 'valid') end", "depths do not match"),
        ("function() require 'image'; image.polar(torch.rand(4, 4), 'simple', 'valid') end", "must be C x H x W"),
        ("function() require 'image'; image.polar('x') end", "image.polar: src must be"),
    ])
