"""The Python providers the Lua backends call (lua/torch/backend/): numpy's ufunc loops and
OpenBLAS/LAPACK for the CPU, the CuPy array-module code (numpy standing in) for CUDA."""
