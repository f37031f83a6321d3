"""Scale-out on Ray: batch inference of Lua models on Ray Data (Predictor) and data-parallel
training on Ray actors (fit).

Ray is optional: ``import luabridge`` never imports it; importing this package needs it.
"""
try:
    import ray as _ray  # noqa: F401 - fails here, clearly, when Ray is absent
except ImportError as e:
    raise ImportError("luabridge.ray needs Ray Data: pip install 'luabridge[ray]'") from e

from .fit import fit
from .predict import Predictor

__all__ = ["Predictor", "fit"]
