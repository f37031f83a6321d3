"""The numpy kernels of the Lua `image` package (resampling, rotation, warps, colour spaces), working in the
memory of the Lua tensors. The Lua front end (lua/image/) has checked types and sizes; arrays here
are 2-D (H x W) or 3-D (C x H x W) views of Byte, Float or Double tensors.

Values are computed in float64. Storing into a byte tensor rounds half up and clamps to 0..255 after
each pass, as torch7's image kernels do; a float tensor takes the values as they are."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ...core.runtime import Bridge


def store(out: np.ndarray, values: np.ndarray) -> None:
    if out.dtype == np.uint8:
        values = np.clip(np.floor(values + 0.5), 0, 255)
    out[...] = values


def as_planes(a: np.ndarray) -> np.ndarray:
    return a[None] if a.ndim == 2 else a


def linear_weights(src_len: int, dst_len: int) -> np.ndarray:
    """dst = W @ src along one axis: linear interpolation between the end samples when growing,
    the mean over each output sample's span of the input (partial samples weighted) when shrinking."""
    w = np.zeros((dst_len, src_len))
    if dst_len == src_len:
        return np.eye(src_len)
    if dst_len > src_len:
        if src_len == 1:
            w[:, 0] = 1
            return w
        step = (src_len - 1) / (dst_len - 1)
        for d in range(dst_len - 1):
            pos = d * step
            i = int(pos)
            frac = pos - i
            w[d, i] += 1 - frac
            w[d, min(i + 1, src_len - 1)] += frac
        w[dst_len - 1, src_len - 1] = 1
        return w
    step = src_len / dst_len
    start_i, start_f = 0, 0.0
    for d in range(dst_len):
        end = (d + 1) * step
        end_i = int(end)
        end_f = end - end_i
        w[d, start_i] += 1 - start_f
        w[d, start_i + 1:end_i] += 1
        if end_i < src_len:
            w[d, end_i] += end_f
        w[d] /= w[d].sum()
        start_i, start_f = end_i, end_f
    return w


def cubic_weights(src_len: int, dst_len: int) -> np.ndarray:
    """dst = W @ src along one axis: Catmull-Rom interpolation through the samples (the first and
    last samples extended linearly past the ends), the last output sample the last input one."""
    w = np.zeros((dst_len, src_len))
    if dst_len == src_len:
        return np.eye(src_len)
    if src_len == 1:
        w[:, 0] = 1
        return w
    step = (src_len - 1) / (dst_len - 1) if dst_len > 1 else float(src_len - 1)
    for d in range(dst_len - 1):
        pos = d * step
        i = int(pos)
        x = pos - i
        c0 = -0.5 * x + x * x - 0.5 * x ** 3
        c1 = 1 - 2.5 * x * x + 1.5 * x ** 3
        c2 = 0.5 * x + 2 * x * x - 1.5 * x ** 3
        c3 = -0.5 * x * x + 0.5 * x ** 3
        i1, i2 = i, min(i + 1, src_len - 1)
        w[d, i1] += c1
        w[d, i2] += c2
        if i > 0:
            w[d, i - 1] += c0
        else:   # p0 = 2 p1 - p2
            w[d, i1] += 2 * c0
            w[d, i2] -= c0
        if i + 2 < src_len:
            w[d, i + 2] += c3
        else:   # p3 = 2 p2 - p1
            w[d, i2] += 2 * c3
            w[d, i1] -= c3
    w[dst_len - 1, src_len - 1] = 1
    return w


def scale(src: np.ndarray, dst: np.ndarray, mode: str) -> None:
    src, dst = as_planes(src), as_planes(dst)
    (src_h, src_w), (dst_h, dst_w) = src.shape[1:], dst.shape[1:]
    if mode == "simple":
        cols = np.minimum((np.arange(dst_w) * (src_w / dst_w)).astype(np.int64), src_w - 1)
        rows = np.minimum((np.arange(dst_h) * (src_h / dst_h)).astype(np.int64), src_h - 1)
        dst[...] = src[:, rows[:, None], cols[None, :]]
        return
    weights = cubic_weights if mode == "bicubic" else linear_weights
    rows_done = np.empty((src.shape[0], src_h, dst_w), dtype=src.dtype)   # torch7 keeps the source type
    store(rows_done, src @ weights(src_w, dst_w).T)
    store(dst, weights(src_h, dst_h) @ rows_done)


def round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def rotate(src: np.ndarray, dst: np.ndarray, theta: float, bilinear: bool) -> None:
    """dst(j, i) = src at the point (i, j) turned by theta about the centre; outside the source: 0."""
    src, dst = as_planes(src), as_planes(dst)
    height, width = src.shape[1:]
    xc, yc = (width - 1) / 2, (height - 1) / 2
    j, i = np.meshgrid(np.arange(dst.shape[1], dtype=np.float64), np.arange(dst.shape[2], dtype=np.float64),
                       indexing="ij")
    cos, sin = np.cos(theta), np.sin(theta)
    ri = cos * (i - xc) - sin * (j - yc) + xc
    rj = cos * (j - yc) + sin * (i - xc) + yc
    if not bilinear:
        ii, jj = round_half_away(ri).astype(np.int64), round_half_away(rj).astype(np.int64)
        inside = (ii >= 0) & (ii < width) & (jj >= 0) & (jj < height)
        values = src[:, np.clip(jj, 0, height - 1), np.clip(ii, 0, width - 1)] * inside
        store(dst, values)
        return
    i0, j0 = np.floor(ri).astype(np.int64), np.floor(rj).astype(np.int64)
    wi, wj = ri - i0, rj - j0
    i1, j1 = i0 + 1, j0 + 1
    # a point less than half a pixel outside takes the nearest edge pixel; further out it is 0
    i1 = np.where((i1 == width) & (wi < 0.5), i0, i1)
    j1 = np.where((j1 == height) & (wj < 0.5), j0, j1)
    i0 = np.where((i0 == -1) & (wi > 0.5), i1, i0)
    j0 = np.where((j0 == -1) & (wj > 0.5), j1, j0)
    inside = (i0 >= 0) & (j0 >= 0) & (i1 < width) & (j1 < height)
    i0, i1 = np.clip(i0, 0, width - 1), np.clip(i1, 0, width - 1)
    j0, j1 = np.clip(j0, 0, height - 1), np.clip(j1, 0, height - 1)
    values = ((1 - wi) * (1 - wj) * src[:, j0, i0] + wi * (1 - wj) * src[:, j0, i1]
              + (1 - wi) * wj * src[:, j1, i0] + wi * wj * src[:, j1, i1])
    store(dst, values * inside)


def _cubic(p0: np.ndarray, p1: np.ndarray, p2: np.ndarray, p3: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Catmull-Rom through p1 (x = 0) and p2 (x = 1), as torch7's cubicInterpolate."""
    return p1 + 0.5 * x * (p2 - p0 + x * (2 * p0 - 5 * p1 + 4 * p2 - p3 + x * (3 * (p1 - p2) + p3 - p0)))


def _lanczos(d: np.ndarray, radius: int = 3) -> np.ndarray:
    d = np.abs(d)
    inner = np.where(d < 1e-6, 1.0, radius * np.sin(np.pi * d) * np.sin(np.pi * d / radius)
                     / (np.pi ** 2 * np.maximum(d, 1e-6) ** 2))
    return np.where(d > radius, 0.0, inner)


def warp(src: np.ndarray, dst: np.ndarray, flow: np.ndarray, mode: str, offset: bool, pad: bool,
         pad_value: float) -> None:
    """dst(y, x) = src sampled at (y, x) + flow (flow[0] rows, flow[1] columns; without offset,
    at flow alone). Points off the source take the nearest edge, or pad_value when pad is set."""
    src, dst = as_planes(src), as_planes(dst)
    height, width = src.shape[1:]
    y, x = np.meshgrid(np.arange(dst.shape[1]), np.arange(dst.shape[2]), indexing="ij")
    iy, ix = flow[0] + (y if offset else 0), flow[1] + (x if offset else 0)
    off = (iy < 0) | (iy > height - 1) | (ix < 0) | (ix > width - 1)
    iy, ix = np.clip(iy, 0, height - 1), np.clip(ix, 0, width - 1)
    y0, x0 = np.floor(iy).astype(np.int64), np.floor(ix).astype(np.int64)
    fy, fx = iy - y0, ix - x0
    if mode == "simple":
        values = src[:, np.floor(iy + 0.5).astype(np.int64), np.floor(ix + 0.5).astype(np.int64)]
    elif mode == "bilinear":
        y1, x1 = np.minimum(y0 + 1, height - 1), np.minimum(x0 + 1, width - 1)
        values = ((1 - fx) * (1 - fy) * src[:, y0, x0] + fx * (1 - fy) * src[:, y0, x1]
                  + (1 - fx) * fy * src[:, y1, x0] + fx * fy * src[:, y1, x1])
    elif mode == "bicubic":   # the 4 x 4 neighbours; those off the source count as pad_value
        def at(dy: int, dx: int) -> np.ndarray:
            v, u = y0 + dy, x0 + dx
            inside = (v >= 0) & (v < height) & (u >= 0) & (u < width)
            return np.where(inside, src[:, np.clip(v, 0, height - 1), np.clip(u, 0, width - 1)], pad_value)
        rows = [_cubic(*(at(dy, dx) for dx in (-1, 0, 1, 2)), fx) for dy in (-1, 0, 1, 2)]
        values = _cubic(*rows, fy)
    else:   # lanczos, radius 3, neighbours clamped to the source
        total = np.zeros((src.shape[0], *iy.shape))
        weights = np.zeros(iy.shape)
        for dv in range(-2, 4):
            for du in range(-2, 4):
                w = _lanczos(ix - (x0 + du)) * _lanczos(iy - (y0 + dv))
                total += w * src[:, np.clip(y0 + dv, 0, height - 1), np.clip(x0 + du, 0, width - 1)]
                weights += w
        values = total / weights
    if pad:
        values = np.where(off, pad_value, values)
    store(dst, values)


def _hue(r: np.ndarray, g: np.ndarray, b: np.ndarray, top: np.ndarray, span: np.ndarray) -> np.ndarray:
    safe = np.where(span == 0, 1, span)
    h = np.where(top == r, (g - b) / safe + np.where(g < b, 6, 0).astype(r.dtype),
                 np.where(top == g, (b - r) / safe + 2, (r - g) / safe + 4)) / 6
    return np.where(span == 0, 0, h)


def rgb2hsv(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple:
    top, low = np.maximum(np.maximum(r, g), b), np.minimum(np.minimum(r, g), b)
    span = top - low
    s = np.where(span == 0, 0, span / np.where(top == 0, 1, top))
    return _hue(r, g, b, top, span), s, top


def hsv2rgb(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> tuple:
    sector = np.floor(h * 6)
    f = h * 6 - sector
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    sector = np.fmod(sector, 6)   # C's %: a negative hue falls through to black
    pick = [sector == k for k in range(6)]
    r = np.select(pick, [v, q, p, p, t, v], 0)
    g = np.select(pick, [t, v, v, q, p, p], 0)
    b = np.select(pick, [p, p, t, v, v, q], 0)
    return r, g, b


def rgb2hsl(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple:
    top, low = np.maximum(np.maximum(r, g), b), np.minimum(np.minimum(r, g), b)
    span = top - low
    light = np.where(span == 0, top, (top + low) / 2)
    denom = np.where(light > 0.5, 2 - top - low, top + low)
    s = np.where(span == 0, 0, span / np.where(denom == 0, 1, denom))
    return _hue(r, g, b, top, span), s, light


def _hue_channel(p: np.ndarray, q: np.ndarray, t: np.ndarray) -> np.ndarray:
    t = np.where(t < 0, t + 1, t)
    t = np.where(t > 1, t - 1, t)
    return np.select([t < 1 / 6, t < 1 / 2, t < 2 / 3], [p + (q - p) * 6 * t, q, p + (q - p) * (2 / 3 - t) * 6], p)


def hsl2rgb(h: np.ndarray, s: np.ndarray, light: np.ndarray) -> tuple:
    q = np.where(light < 0.5, light * (1 + s), light + s - light * s)
    p = 2 * light - q
    grey = s == 0
    return tuple(np.where(grey, light, _hue_channel(p, q, h + shift)) for shift in (1 / 3, 0, -1 / 3))


# sRGB (D65) <-> CIE XYZ <-> L*a*b*, as torch7's image (Bruce Lindbloom's equations)
_EPSILON, _KAPPA = 216 / 24389, 24389 / 27
_WHITE_X, _WHITE_Z = 0.950456, 1.088754
_RGB2XYZ = np.array([[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169], [0.019334, 0.119193, 0.950227]])
_XYZ2RGB = np.array([[3.2404542, -1.5371385, -0.4985314], [-0.9692660, 1.8760108, 0.0415560],
                     [0.0556434, -0.2040259, 1.0572252]])


def rgb2lab(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple:
    linear = [np.where(c <= 0.04045, c / 12.92, ((np.maximum(c, 0.04045) + 0.055) / 1.055) ** 2.4) for c in (r, g, b)]
    x, y, z = (sum(_RGB2XYZ[k, m] * linear[m] for m in range(3)) for k in range(3))
    fx, fy, fz = (np.where(c > _EPSILON, np.cbrt(c), (_KAPPA * c + 16) / 116) for c in (x / _WHITE_X, y, z / _WHITE_Z))
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def lab2rgb(lum: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple:
    fy = (lum + 16) / 116
    fx, fz = a / 500 + fy, fy - b / 200
    x = np.where(fx ** 3 <= _EPSILON, (116 * fx - 16) / _KAPPA, fx ** 3) * _WHITE_X
    y = np.where(lum > _KAPPA * _EPSILON, fy ** 3, lum / _KAPPA)
    z = np.where(fz ** 3 <= _EPSILON, (116 * fz - 16) / _KAPPA, fz ** 3) * _WHITE_Z
    linear = [_XYZ2RGB[k, 0] * x + _XYZ2RGB[k, 1] * y + _XYZ2RGB[k, 2] * z for k in range(3)]
    return tuple(np.where(c <= 0.0031308, 12.92 * c, 1.055 * np.maximum(c, 0.0031308) ** (1 / 2.4) - 0.055)
                 for c in linear)


def rgb2y(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple:
    return (0.299 * r + 0.587 * g + 0.114 * b,)


COLOR = {"rgb2hsv": rgb2hsv, "hsv2rgb": hsv2rgb, "rgb2hsl": rgb2hsl, "hsl2rgb": hsl2rgb,
         "rgb2lab": rgb2lab, "lab2rgb": lab2rgb, "rgb2y": rgb2y}


def convert(name: str, src: np.ndarray, dst: np.ndarray) -> None:
    """dst = COLOR[name] of src's first three planes; byte images are read and written in 0..255.
    Byte and Float images are converted in float32, as torch7's kernels do (so a byte result is the
    float result rounded, ties included); Double ones in float64."""
    unit = np.float32(255) if src.dtype == np.uint8 else 1.0
    work = np.float64 if src.dtype == np.float64 else np.float32
    planes = COLOR[name](*(src[k].astype(work) / unit for k in range(3)))
    for k, plane in enumerate(planes):
        store(dst[k], plane * unit)


def callbacks(bridge: "Bridge") -> dict:
    def view(t: Any) -> np.ndarray:
        return bridge.buffers.tensor_view(t)

    return {
        "image_scale": lambda src, dst, mode: scale(view(src), view(dst), mode),
        "image_rotate": lambda src, dst, theta, bilinear: rotate(view(src), view(dst), theta, bool(bilinear)),
        "image_convert": lambda name, src, dst: convert(name, view(src), view(dst)),
        "image_warp": lambda src, dst, flow, mode, offset, pad, pad_value: warp(
            view(src), view(dst), view(flow).astype(np.float64), mode, bool(offset), bool(pad), pad_value),
    }
