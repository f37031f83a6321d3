"""Batch inference of a Lua convnet over synthetic images with Ray Data.

    python examples/ray_inference.py [--images 3000] [--workers 2]

Ray Data makes the images in its workers (from their ids, as a reader would decode files), runs
a luabridge.ray.Predictor per worker on them, and writes the predicted classes and scores to
Parquet files in a temporary directory. The example reads them back and checks them against
model.predict run in this one process. Needs Ray Data: pip install 'luabridge[ray]'.
"""
from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import pyarrow.parquet as pq
import ray

import luabridge
import luabridge.ray

CONVNET = """
torch.manualSeed(1)
local model = nn.Sequential()
model:add(nn.SpatialConvolution(1, 8, 5, 5)):add(nn.ReLU()):add(nn.SpatialMaxPooling(2, 2, 2, 2))
model:add(nn.SpatialConvolution(8, 16, 5, 5)):add(nn.ReLU()):add(nn.SpatialMaxPooling(2, 2, 2, 2))
model:add(nn.View(16 * 4 * 4)):add(nn.Linear(16 * 4 * 4, 10)):add(nn.LogSoftMax())
return model:float()
"""
SIDE = 28


def images(ids: np.ndarray) -> np.ndarray:
    """Image i (1 x 28 x 28 float32): a stripe pattern whose angle and phase follow i."""
    y, x = np.mgrid[0:SIDE, 0:SIDE] / SIDE
    angle = (ids * 0.37)[:, None, None]
    waves = np.sin(8 * (x * np.cos(angle) + y * np.sin(angle)) + ids[:, None, None] * 0.11)
    return waves[:, None].astype(np.float32)


def with_images(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"id": batch["id"], "image": images(batch["id"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    model = luabridge.Model.from_lua(CONVNET)
    ray.init(num_cpus=args.workers, include_dashboard=False)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        # the ids are made here: a read task would wait for a CPU that the workers hold
        (ray.data.from_items([{"id": i} for i in range(args.images)])
         .map_batches(with_images)
         .map_batches(luabridge.ray.Predictor, batch_format="numpy", batch_size=500,
                      fn_constructor_kwargs={"model": model, "input": "image", "output": "scores",
                                             "batch_size": 250},
                      compute=ray.data.ActorPoolStrategy(size=args.workers))
         .write_parquet(out))
        seconds = time.perf_counter() - start
        table = pq.read_table(out)
        ray.shutdown()
    order = np.argsort(table["id"].to_numpy())
    ids = table["id"].to_numpy()[order]
    scores = table["scores"].combine_chunks().to_numpy()[order]
    expected = model.predict(images(np.arange(args.images)))
    assert np.array_equal(ids, np.arange(args.images)), "rows missing or repeated"
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
    classes = np.bincount(scores.argmax(1), minlength=10)
    print(f"{args.images} images on {args.workers} workers in {seconds:.1f} s "
          f"({args.images / seconds:.0f} images/s, the workers' start-up included)")
    print(f"predicted classes: {classes.tolist()}")
    print(f"equal to model.predict in one process (max difference {np.abs(scores - expected).max():.1e})")


if __name__ == "__main__":
    main()
