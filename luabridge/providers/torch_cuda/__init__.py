"""The CUDA side of the torch backend (lua/torch/backend/cuda/ marshals each op here): the CuPy
array-module code (arrays.py; numpy standing in), the nn modules' device passes (nn.py) and the
graph's fused elementwise groups as CuPy kernels (fuse.py)."""
