"""Device passes of the nn modules whose CPU kernels are LuaJIT loops (lua/torch/backend/cpu's
nn_conv, nn_pool, nn_batchnorm, and lua/nn/util): spatial convolution, max and average pooling
and ClassNLLCriterion, written in the array module so that
CuPy runs them on the GPU (numpy stands in without one).

They are ops of luabridge/providers/torch_cuda/arrays.py, called by name from the modules (``cuda.call``) after Lua has
checked every argument with the CPU path's checks. Images arrive as (C, H, W) or (B, C, H, W)
views; a window geometry is (kH, kW, dH, dW, padH, padW, dilationH, dilationW) and the output's
oH, oW as Lua computed them (floor or ceil mode). Convolution unfolds each padded image into
columns through a strided view (im2col) and multiplies them by the weight; the backward passes
fold columns back by adding the kH*kW strided slices (col2im). Max pooling indices are torch7's:
1-based offsets of each maximum inside its H x W plane.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import Backend, op

Geometry = tuple[int, int, int, int, int, int, int, int]


def _images(x: Any) -> Any:
    """x as (B, C, H, W): a 3-D image is a batch of one."""
    return x[None] if x.ndim == 3 else x


def _padded_size(g: Geometry, H: int, W: int, oH: int, oW: int) -> tuple[int, int]:
    """The padded plane's size, wide enough for every window (ceil mode's last windows may reach
    past the padding)."""
    kH, kW, dH, dW, padH, padW, lH, lW = g
    return (max(H + 2 * padH, (oH - 1) * dH + (kH - 1) * lH + 1),
            max(W + 2 * padW, (oW - 1) * dW + (kW - 1) * lW + 1))


def _padded(xp: Any, x: Any, g: Geometry, oH: int, oW: int, fill: float) -> Any:
    """x (B, C, H, W) inside a border of `fill` (x itself when it needs none)."""
    B, C, H, W = x.shape
    Hn, Wn = _padded_size(g, H, W, oH, oW)
    if (Hn, Wn) == (H, W):
        return x
    padH, padW = g[4], g[5]
    out = xp.full((B, C, Hn, Wn), fill, dtype=x.dtype)
    out[:, :, padH:padH + H, padW:padW + W] = x
    return out


def _windows(xp: Any, padded: Any, g: Geometry, oH: int, oW: int) -> Any:
    """The (B, C, kH, kW, oH, oW) strided view of padded's windows (no copy)."""
    kH, kW, dH, dW, _, _, lH, lW = g
    sB, sC, sH, sW = padded.strides
    return xp.lib.stride_tricks.as_strided(padded, shape=padded.shape[:2] + (kH, kW, oH, oW),
                                           strides=(sB, sC, sH * lH, sW * lW, sH * dH, sW * dW))


def _unpadded_fold(xp: Any, cols: Any, g: Geometry, H: int, W: int) -> Any:
    """col2im: each window tap of cols (B, C, kH, kW, oH, oW) added at its input position; the
    (B, C, H, W) part inside the padding."""
    kH, kW, dH, dW, padH, padW, lH, lW = g
    B, C, _, _, oH, oW = cols.shape
    Hn, Wn = _padded_size(g, H, W, oH, oW)
    out = xp.zeros((B, C, Hn, Wn), dtype=cols.dtype)
    for i in range(kH):
        rows = slice(i * lH, i * lH + (oH - 1) * dH + 1, dH)
        for j in range(kW):
            out[:, :, rows, j * lW:j * lW + (oW - 1) * dW + 1:dW] += cols[:, :, i, j]
    return out[:, :, padH:padH + H, padW:padW + W]


def _columns(xp: Any, x: Any, g: Geometry, oH: int, oW: int) -> Any:
    """im2col: the (B, C*kH*kW, oH*oW) patch matrices of x (B, C, H, W)."""
    B, C = x.shape[:2]
    return _windows(xp, _padded(xp, x, g, oH, oW, 0), g, oH, oW).reshape(B, C * g[0] * g[1], oH * oW)


@op
def conv_forward(b: Backend, out: Any, x: Any, w: Any, bias: Any, oH: int, oW: int, *g: int) -> None:
    xp = b.xp
    O = w.shape[0]
    y = xp.matmul(w.reshape(O, -1), _columns(xp, _images(x), g, oH, oW))
    if bias is not None:
        y += bias[:, None]
    out[...] = y.reshape(out.shape)


@op
def conv_grad_input(b: Backend, gi: Any, gout: Any, w: Any, oH: int, oW: int, *g: int) -> None:
    xp = b.xp
    x = _images(gi)
    B, C, H, W = x.shape
    O = w.shape[0]
    cols = xp.matmul(w.reshape(O, -1).T, gout.reshape(B, O, oH * oW))
    gi[...] = _unpadded_fold(xp, cols.reshape(B, C, g[0], g[1], oH, oW), g, H, W).reshape(gi.shape)


@op
def conv_acc_grad(b: Backend, gw: Any, gb: Any, x: Any, gout: Any, scale: float, oH: int, oW: int,
                  *g: int) -> None:
    xp = b.xp
    x = _images(x)
    B = x.shape[0]
    go = gout.reshape(B, gw.shape[0], oH * oW)
    gw += (scale * xp.tensordot(go, _columns(xp, x, g, oH, oW), axes=([0, 2], [0, 2]))).reshape(gw.shape)
    if gb is not None:
        gb += scale * go.sum(axis=(0, 2))


@op
def max_pool_forward(b: Backend, out: Any, indices: Any, x: Any, oH: int, oW: int, *g: int) -> None:
    xp = b.xp
    kH, kW, dH, dW, padH, padW, lH, lW = g
    x = _images(x)
    B, C, H, W = x.shape
    taps = _windows(xp, _padded(xp, x, g, oH, oW, -np.inf), g, oH, oW).reshape(B, C, kH * kW, oH, oW)
    k = taps.argmax(axis=2)   # the first maximum of each window, as torch7
    out[...] = xp.take_along_axis(taps, k[:, :, None], axis=2).reshape(out.shape)
    y = xp.arange(oH)[:, None] * dH - padH + (k // kW) * lH
    x_ = xp.arange(oW) * dW - padW + (k % kW) * lW
    indices[...] = (y * W + x_ + 1).reshape(indices.shape)


@op
def max_pool_backward(b: Backend, gi: Any, gout: Any, indices: Any) -> None:
    """gradInput: each gradient added at its window's maximum (a sum where windows share one)."""
    xp = b.xp
    x = _images(gi)
    P, plane = x.shape[0] * x.shape[1], x.shape[2] * x.shape[3]
    at = indices.reshape(P, -1).astype(np.int64) - 1
    valid = (at >= 0) & (at < plane)
    flat = (xp.arange(P)[:, None] * plane + xp.where(valid, at, 0)).ravel()
    weights = xp.where(valid, gout.reshape(P, -1), 0).ravel()
    sums = xp.bincount(flat, weights=weights, minlength=P * plane)
    gi[...] = sums.reshape(gi.shape).astype(gi.dtype)


def _divisors(xp: Any, g: Geometry, H: int, W: int, oH: int, oW: int, count_pad: bool, divide: bool,
              dtype: Any) -> Any:
    """The (oH, oW) divisors of average pooling: the window clipped at the padded border
    (count_pad) or at the image; without divide, that over the kernel size (torch7)."""
    kH, kW, dH, dW, padH, padW = g[:6]

    def along(o: int, k: int, d: int, pad: int, n: int) -> Any:
        start = xp.arange(o) * d - pad
        if count_pad:
            return xp.minimum(start + k, n + pad) - start
        return xp.minimum(start + k, n) - xp.maximum(start, 0)

    n = along(oH, kH, dH, padH, H)[:, None] * along(oW, kW, dW, padW, W)[None, :]
    return (n if divide else n / (kH * kW)).astype(dtype)


@op
def avg_pool_forward(b: Backend, out: Any, x: Any, oH: int, oW: int, count_pad: bool, divide: bool,
                     *g: int) -> None:
    xp = b.xp
    x = _images(x)
    H, W = x.shape[2:]
    sums = _windows(xp, _padded(xp, x, g, oH, oW, 0), g, oH, oW).sum(axis=(2, 3))
    out[...] = (sums / _divisors(xp, g, H, W, oH, oW, count_pad, divide, x.dtype)).reshape(out.shape)


@op
def avg_pool_backward(b: Backend, gi: Any, gout: Any, oH: int, oW: int, count_pad: bool, divide: bool,
                      *g: int) -> None:
    xp = b.xp
    B, C, H, W = _images(gi).shape
    each = gout.reshape(B, C, oH, oW) / _divisors(xp, g, H, W, oH, oW, count_pad, divide, gi.dtype)
    cols = xp.broadcast_to(each[:, :, None, None], (B, C, g[0], g[1], oH, oW))
    gi[...] = _unpadded_fold(xp, cols, g, H, W).reshape(gi.shape)


def _nll_terms(xp: Any, target: Any, weights: Any, ignore: float) -> tuple[Any, Any, Any]:
    """0-based classes (0 where ignored) and each sample's class weight (0 where ignored)."""
    t = xp.asarray(target).reshape(-1)
    keep = t != ignore
    c = xp.where(keep, t - 1, 0).astype(np.int64)
    w = xp.asarray(weights)[c].astype(np.float64) if weights is not None else xp.ones(c.shape)
    return c, xp.where(keep, w, 0)


@op
def class_nll_forward(b: Backend, x: Any, target: Any, weights: Any, ignore: float) -> tuple[float, float]:
    """(-sum of the weighted log-probabilities at the targets, the total weight), in double."""
    xp = b.xp
    c, w = _nll_terms(xp, target, weights, ignore)
    rows = x.reshape(-1, x.shape[-1]) if x.ndim == 1 else x
    picked = rows[xp.arange(c.shape[0]), c].astype(np.float64)
    return float(-(picked * w).sum()), float(w.sum())


@op
def class_nll_backward(b: Backend, gi: Any, target: Any, weights: Any, ignore: float, size_average: bool) -> None:
    """gradInput (zeroed): -weight (over the total weight when size_average) at each target,
    none at all unless the total weight is positive (torch7)."""
    xp = b.xp
    c, w = _nll_terms(xp, target, weights, ignore)
    gi[...] = 0
    total = float(w.sum())
    if not total > 0:
        return
    values = (-w / (total if size_average else 1)).astype(gi.dtype)
    if gi.ndim == 1:
        gi[c] = values
    else:
        gi[xp.arange(c.shape[0]), c] = values


@op
def full_conv_forward(b: Backend, out: Any, x: Any, w: Any, bias: Any, iH: int, iW: int, *g: int) -> None:
    """SpatialFullConvolution (transposed): the input gradient of the convolution whose output x
    is (B, C_in, iH, iW) and weight w (C_in, C_out, kH, kW), plus the bias."""
    conv_grad_input(b, out, x, w, iH, iW, *g)
    if bias is not None:
        out += bias[:, None, None]


@op
def full_conv_acc_grad(b: Backend, gw: Any, gb: Any, x: Any, gout: Any, scale: float, iH: int, iW: int,
                       *g: int) -> None:
    """gw += scale * the weight gradient of that convolution (gout its input, x its output
    gradient); gb += scale * gout's plane sums."""
    conv_acc_grad(b, gw, None, gout, x, scale, iH, iW, *g)
    if gb is not None:
        gb += scale * _images(gout).sum(axis=(0, 2, 3))


@op
def plane_maps(b: Backend, out: Any, x: Any, backward: bool, *maps: Any) -> None:
    """out = x with each of its last len(maps) dims mapped by a host matrix M (O x I): out[.., o,
    ..] = sum_i M[o, i] x[.., i, ..]; backward: by the transposes (x the output's gradient)."""
    xp = b.xp
    first = x.ndim - len(maps)
    y = x
    for k, m in enumerate(maps):
        m = xp.asarray(m.T if backward else m, dtype=x.dtype)
        y = xp.moveaxis(xp.tensordot(y, m, axes=([first + k], [1])), -1, first + k)
    out[...] = y


@op
def adaptive_max_forward(b: Backend, out: Any, indices: Any, x: Any, oH: int, oW: int) -> None:
    """Adaptive max pooling: window (oy, ox) spans rows [floor(oy H / oH), ceil((oy + 1) H / oH))
    and likewise columns; indices are 1-based offsets in the H x W plane (the first maximum)."""
    xp = b.xp
    x = _images(x)
    H, W = x.shape[2:]
    o = xp.empty(x.shape[:2] + (oH, oW), dtype=x.dtype)
    at = xp.empty(o.shape, dtype=np.int64)
    for oy in range(oH):
        y0, y1 = oy * H // oH, -(-(oy + 1) * H // oH)
        for ox in range(oW):
            x0, x1 = ox * W // oW, -(-(ox + 1) * W // oW)
            window = x[:, :, y0:y1, x0:x1].reshape(x.shape[:2] + (-1,))
            k = window.argmax(axis=2)
            o[:, :, oy, ox] = xp.take_along_axis(window, k[:, :, None], axis=2)[:, :, 0]
            at[:, :, oy, ox] = (y0 + k // (x1 - x0)) * W + x0 + k % (x1 - x0) + 1
    out[...] = o.reshape(out.shape)
    indices[...] = at.reshape(indices.shape)


def _frames(xp: Any, x: Any, kW: int, dW: int, nOF: int) -> Any:
    """The (B, nOF, kW*F) windows of kW frames every dW of x (B, T, F) (a strided view)."""
    x = xp.ascontiguousarray(x)
    B, _, F = x.shape
    sB, sT, sF = x.strides
    return xp.lib.stride_tricks.as_strided(x, shape=(B, nOF, kW * F), strides=(sB, sT * dW, sF))


@op
def temporal_conv_forward(b: Backend, out: Any, x: Any, w: Any, bias: Any, kW: int, dW: int) -> None:
    """TemporalConvolution: out (B, nOF, O) = the windows of x (B, T, F) times w^T (w: O x kW*F) + bias."""
    out[...] = b.xp.matmul(_frames(b.xp, x, kW, dW, out.shape[1]), w.T) + bias


@op
def temporal_conv_grad_input(b: Backend, gi: Any, gout: Any, w: Any, kW: int, dW: int) -> None:
    """Each window's gradient (gout w) added back to the frames it read."""
    xp = b.xp
    nOF, F = gout.shape[1], gi.shape[2]
    cols = xp.matmul(gout, w)
    acc = xp.zeros(gi.shape, dtype=gi.dtype)
    for k in range(kW):
        acc[:, k:k + (nOF - 1) * dW + 1:dW] += cols[:, :, k * F:(k + 1) * F]
    gi[...] = acc


@op
def temporal_conv_acc_grad(b: Backend, gw: Any, gb: Any, x: Any, gout: Any, scale: float, kW: int,
                           dW: int) -> None:
    xp = b.xp
    gw += scale * xp.tensordot(gout, _frames(xp, x, kW, dW, gout.shape[1]), axes=([0, 1], [0, 1]))
    gb += scale * gout.sum(axis=(0, 1))


@op
def im2col(b: Backend, col: Any, img: Any, oH: int, oW: int, *g: int) -> None:
    """col (B, C*kH*kW, oH*oW) = the patches of img (B, C, H, W): torch7's finput layout."""
    col[...] = _columns(b.xp, img, g, oH, oW).reshape(col.shape)


@op
def col2im(b: Backend, img: Any, col: Any, keep: bool, oH: int, oW: int, *g: int) -> None:
    """img (B, C, H, W) = (img when keep, else 0) + each patch of col added back where it was taken."""
    B, C, H, W = img.shape
    folded = _unpadded_fold(b.xp, col.reshape(B, C, g[0], g[1], oH, oW), g, H, W)
    if keep:
        img += folded
    else:
        img[...] = folded
