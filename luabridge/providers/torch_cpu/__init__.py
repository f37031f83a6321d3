"""The CPU side of the torch backend (lua/torch/backend/cpu/): numpy's ufunc loops (ufuncs.py) and
OpenBLAS/LAPACK through numpy's own library (linalg.py)."""
