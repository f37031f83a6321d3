"""The one declared table of what Lua calls in Python: every function of the Lua global
`__luabridge_py` (`local py = rawget(_G, '__luabridge_py')`), its name and what it does, grouped
by the provider that gives it (the Lua package that calls it in brackets).

providers/__init__.py declares this table to the runtime at start-up and registers each
provider's `callbacks(bridge) -> {name: function}`. A runtime refuses a provider's name missing
here (core/runtime.py), and its Lua boot (lua/luabridge/core/runtime.lua) stops with the name of
any declared callback that no provider gave. tests/test_layering.py checks that every `py.<name>`
the Lua tree calls is declared here.
"""
from __future__ import annotations

CALLBACKS: dict[str, str] = {
    # core/runtime.py itself (every pcall of the library asks it)
    "is_interrupt": "whether a Lua error value is Python's KeyboardInterrupt or SystemExit, to rethrow",
    # buffers.py (torch: lua/torch/core/memory.lua, the CPU copy kernels)
    "alloc": "a new numpy-owned CPU buffer of n bytes: its id and address halves",
    "release": "drops a buffer id when its Lua storage is collected",
    "map_file": "a buffer mapped from a file (torch.*Storage(path, shared)): id, address, size",
    "copy_tensor": "copies a CPU tensor into another with numpy's casting copy (any types, strides)",
    "copy_storage": "copies a CPU storage into another of any element type",
    "buffer_viewed": "whether anything besides the registry still holds a buffer's array (a numpy view)",
    # torch_cpu/ufuncs.py (torch: backend/cpu/ufunc.lua)
    "ufunc_loop": "the address of numpy's inner SIMD loop for a ufunc and signature, or nil",
    # torch_cpu/blocked.py (torch: backend/cpu/pointwise.lua, backend/cpu/random.lua)
    "blocked_compile": "compiles an elementwise program over named tensors and scalars: its id (nil: path off)",
    "blocked_run": "runs a compiled program over contiguous CPU tensors in cache-sized blocks on n threads",
    "blocked_bernoulli": "fills a contiguous Float/Double tensor with a 0/1 mask, threaded, from a seed",
    # torch_cpu/linalg.py (torch: backend/cpu/blas.lua)
    "blas_library": "the OpenBLAS/LAPACK library numpy links: path, symbol prefix/suffix, int bits, lapack",
    "blas_threads": "the BLAS thread count for a product of a given size (free CPUs, setnumthreads)",
    "blas_gemm": "a BLAS gemm on CPU buffers, off the Lua thread (interruptible)",
    "blas_gemv": "a BLAS gemv on CPU buffers",
    "blas_ger": "a BLAS ger on CPU buffers",
    "blas_dot": "a BLAS dot on CPU buffers",
    # torch_cuda/arrays.py (cutorch: backend/cuda/core.lua)
    "cuda_alloc": "a new CUDA storage array of the array module (CuPy, or numpy standing in)",
    "cuda_op": "runs one CUDA op by name on flattened tensor arguments",
    # lfs.py (lfs, torch's File and serialization)
    "file_stat": "os.stat of a path as LuaFileSystem's attributes table",
    "file_call": "os.<name>(*args) (mkdir, rmdir, chdir, rename, remove, chmod): true or nil, message, errno",
    "file_list": "the entries of a directory",
    "file_touch": "sets a file's access and modification times",
    "file_cwd": "the current directory",
    # image/codecs.py (image)
    "image_missing": "why Pillow cannot be used (nil when it can)",
    "image_info": "format, channels, height and width from an image file's header",
    "image_decode": "decodes an image file into a tensor (byte 0..255 or float 0..1)",
    "image_decode_into": "decodes image bytes into a preallocated tensor (the loaders' fast path)",
    "image_max_scans": "the most progressive JPEG scans a decode accepts",
    "image_encode": "writes a channels x height x width tensor as a PNG, JPEG, PPM/PGM file",
    "image_text": "draws text with Pillow's bitmap font onto a tensor",
    # image/ops.py (image)
    "image_scale": "resizes an image tensor (simple, bilinear, bicubic)",
    "image_rotate": "rotates an image tensor by theta",
    "image_convert": "a colour-space conversion (rgb2yuv, rgb2hsl, ...) between tensors",
    "image_warp": "warps an image tensor by a flow field",
    # graphicsmagick.py (graphicsmagick)
    "gm_missing": "why the graphicsmagick package cannot run (nil when it can)",
    "gm_read": "reads an image file into a handle",
    "gm_from_tensor": "a handle from a tensor and a colour-space / dimension order",
    "gm_to_tensor": "a handle's pixels as a tensor",
    "gm_size": "a handle's width and height",
    "gm_resize": "resizes a handle's image",
    "gm_edit": "applies an edit (crop, flip, rotate, colour ops, ...) to a handle",
    "gm_property": "reads or sets a property (format, quality, colorspace, ...) of a handle",
    "gm_encode": "encodes a handle into a blob of a format",
    "gm_write": "writes a handle to a file",
    "gm_clone": "a copy of a handle",
    "gm_profile": "reads or sets a handle's ICC/EXIF profile",
    "gm_free": "frees a handle",
    # gnuplot.py (gnuplot)
    "plot_missing": "why matplotlib cannot draw (nil when it can)",
    "plot_palette_known": "whether a palette name is known",
    "plot_draw": "draws (or queues) a figure's snapshot",
    # hdf5.py (hdf5)
    "hdf5_missing": "why h5py cannot be used (nil when it can)",
    "hdf5_version": "the HDF5 library's version under h5py",
    "hdf5_open": "opens an HDF5 file: a handle",
    "hdf5_close": "closes an HDF5 handle",
    "hdf5_kind": "'group', 'dataset' or nil for a path; a group's sorted names",
    "hdf5_info": "a dataset's tensor type and sizes",
    "hdf5_read": "fills a tensor from a dataset selection",
    "hdf5_write": "writes a tensor as a dataset",
    "hdf5_exists_dir": "whether a directory exists (for paths the file is created under)",
    # matio.py (matio)
    "matio_missing": "why scipy.io cannot be used (nil when it can)",
    "matio_load": "reads a .mat file's variables as tensors and values",
    "matio_save": "writes tensors and values as a .mat file",
    # threads.py (threads)
    "threads_pool": "a pool of worker threads, each with its own Lua runtime",
    "threads_addjob": "queues a serialised job on a pool",
    "threads_dojob": "the next result of a pool (waits for one)",
    "threads_queued": "how many jobs a pool's queue (or one worker's) holds",
    "threads_specific": "switches a pool's specific mode (jobs sent to given workers)",
    "threads_close": "stops a pool's workers",
    "threads_handle": "shared memory for a Mutex, Condition or AtomicCounter",
    "threads_thread": "a single thread running a serialised function",
    "threads_join": "waits for a single thread",
    # display.py (display)
    "display_send": "posts a display command to the display server",
}
