"""What Lua calls back into Python (DESIGN.md's providers/): the torch backends' CPU side
(torch_cpu: numpy's ufunc loops, OpenBLAS/LAPACK), the CUDA array-module code (torch_cuda), and
the Python halves of the Lua packages image, graphicsmagick, gnuplot, lfs, hdf5, matio, threads
and display. Each provider module gives `callbacks(bridge) -> {name: function}`; every name is
declared once in callbacks.py.

Importing this package (luabridge/__init__.py does: the start-up) declares that table to the
runtime and registers every provider, so each runtime created afterwards gets them all as
`__luabridge_py`. Nothing else imports a provider but the face (luabridge/cuda.py)."""
from ..core.runtime import declare_callbacks, provide_callbacks
from . import buffers, display, gnuplot, graphicsmagick, hdf5, lfs, matio, threads
from .callbacks import CALLBACKS
from .image import codecs, ops
from .torch_cpu import blocked, linalg, ufuncs
from .torch_cuda import arrays
from .torch_cuda import nn  # noqa: F401  (registers the nn modules' device passes as CUDA ops)
from .torch_cuda import fuse  # noqa: F401  (gives the CUDA device its fused kernels, for the graph)

declare_callbacks(CALLBACKS)
for _module in (ufuncs, blocked, linalg, arrays, lfs, hdf5, codecs, ops, graphicsmagick, matio, gnuplot, threads, display,
                buffers):
    provide_callbacks(_module.callbacks)
