"""The public face of the CUDA backend: which array module holds CUDA tensors (CuPy, or numpy
standing in for it). The backend itself is luabridge/providers/torch_cuda/arrays.py."""
from .providers.torch_cuda.arrays import array_module, use_array_module

__all__ = ["array_module", "use_array_module"]
