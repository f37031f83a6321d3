"""A VGG-19-shaped Caffe model for the corpus's style-transfer programs, which read
VGG_ILSVRC_19_layers.caffemodel (548 MB, a download) through loadcaffe. This writes a file of the same
layout (the same layers, names, kernel sizes, strides, paddings and ceil-mode poolings, in the V1
`layers` format of the published file) with narrow layers and seeded random weights, and the deploy
prototxt beside it. Programs run on it as on the real one; what they learn is not VGG's.

    python tools/corpus_caffemodel.py DIR [--widths 8,16,32,64,64] [--fc 32] [--seed 0]

writes DIR/VGG_ILSVRC_19_layers.caffemodel and DIR/VGG_ILSVRC_19_layers_deploy.prototxt (names
changeable with --name). The protobuf encoding is written here (caffe.proto's field numbers)."""
from __future__ import annotations

import argparse
import struct
from pathlib import Path

import numpy as np

# V1LayerParameter.LayerType
CONVOLUTION, RELU, POOLING, INNER_PRODUCT, DROPOUT, SOFTMAX = 4, 18, 17, 14, 6, 20
BLOCKS = (2, 2, 4, 4, 4)   # convolutions per block in VGG-19


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def uint(field: int, n: int) -> bytes:   # protobuf: a varint field, then length-delimited and 32-bit ones
    return varint(field << 3) + varint(n)


def ld(field: int, payload: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def f32(field: int, x: float) -> bytes:
    return varint(field << 3 | 5) + struct.pack("<f", x)


def _blob(data: np.ndarray, legacy: tuple[int, int, int, int]) -> bytes:
    head = b"".join(uint(i + 1, v) for i, v in enumerate(legacy))   # num, channels, height, width
    return head + ld(5, np.asarray(data, dtype="<f4").ravel().tobytes())


def _layer(name: str, kind: int, *extra: bytes) -> bytes:
    return ld(4, name.encode()) + uint(5, kind) + b"".join(extra)


def vgg19(widths: list[int], fc: int, seed: int) -> tuple[bytes, str]:
    """The caffemodel's bytes and the deploy prototxt's text."""
    rng = np.random.default_rng(seed)
    layers, proto = [], ['name: "VGG_ILSVRC_19_layers"', 'input: "data"', "input_dim: 10", "input_dim: 3",
                         "input_dim: 224", "input_dim: 224"]
    bottom, nin = "data", 3

    def text(name, kind, params=""):
        nonlocal bottom
        proto.append(f'layers {{\n  bottom: "{bottom}"\n  top: "{name}"\n  name: "{name}"\n  type: {kind}\n{params}}}')
        bottom = name

    for b, (count, width) in enumerate(zip(BLOCKS, widths), start=1):
        for i in range(1, count + 1):
            name = f"conv{b}_{i}"
            w = rng.normal(0, np.sqrt(2.0 / (nin * 9)), (width, nin, 3, 3))
            layers.append(_layer(name, CONVOLUTION, ld(6, _blob(w, (width, nin, 3, 3))),
                                 ld(6, _blob(np.zeros(width), (1, 1, 1, width))),
                                 ld(10, uint(1, width) + uint(3, 1) + uint(4, 3))))
            text(name, "CONVOLUTION", f"  convolution_param {{\n    num_output: {width}\n    pad: 1\n    kernel_size: 3\n  }}\n")
            layers.append(_layer(f"relu{b}_{i}", RELU))
            text(f"relu{b}_{i}", "RELU")
            nin = width
        layers.append(_layer(f"pool{b}", POOLING, ld(19, uint(1, 0) + uint(2, 2) + uint(3, 2))))
        text(f"pool{b}", "POOLING", "  pooling_param {\n    pool: MAX\n    kernel_size: 2\n    stride: 2\n  }\n")
    sizes = [(nin * 7 * 7, fc, "fc6"), (fc, fc, "fc7"), (fc, 10, "fc8")]
    for k, (n_in, n_out, name) in enumerate(sizes):
        w = rng.normal(0, np.sqrt(1.0 / n_in), (n_out, n_in))
        layers.append(_layer(name, INNER_PRODUCT, ld(6, _blob(w, (1, 1, n_out, n_in))),
                             ld(6, _blob(np.zeros(n_out), (1, 1, 1, n_out))), ld(17, uint(1, n_out))))
        text(name, "INNER_PRODUCT", f"  inner_product_param {{\n    num_output: {n_out}\n  }}\n")
        if k < 2:
            n = name[2:]
            layers.append(_layer(f"relu{n}", RELU))
            text(f"relu{n}", "RELU")
            layers.append(_layer(f"drop{n}", DROPOUT, ld(12, f32(1, 0.5))))
            text(f"drop{n}", "DROPOUT", "  dropout_param {\n    dropout_ratio: 0.5\n  }\n")
    layers.append(_layer("prob", SOFTMAX))
    text("prob", "SOFTMAX")
    model = ld(1, b"VGG_ILSVRC_19_layers") + b"".join(ld(2, m) for m in layers)
    return model, "\n".join(proto) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--widths", default="8,16,32,64,64", help="channels of the five blocks")
    ap.add_argument("--fc", type=int, default=32, help="width of fc6 and fc7")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="VGG_ILSVRC_19_layers")
    a = ap.parse_args(argv)
    widths = [int(w) for w in a.widths.split(",")]
    if len(widths) != 5:
        ap.error("--widths takes five numbers")
    model, proto = vgg19(widths, a.fc, a.seed)
    a.dir.mkdir(parents=True, exist_ok=True)
    (a.dir / f"{a.name}.caffemodel").write_bytes(model)
    (a.dir / f"{a.name}_deploy.prototxt").write_text(proto)


if __name__ == "__main__":
    main()
