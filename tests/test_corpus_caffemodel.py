"""tools/corpus_caffemodel.py: the VGG-19-shaped caffemodel that stands in for the published one
loads through loadcaffe with the published file's module list (names and order as loadcaffe gives
them for VGG-19: relu3_1 at 12, relu4_1 at 21, relu4_2 at 23, 46 modules), its geometry, and the
setup env of the corpus runner names the tools folder."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import luabridge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import corpus_caffemodel  # noqa: E402
import real_programs as rp  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))


def test_vgg19_layout(tmp_path):
    corpus_caffemodel.main([str(tmp_path), "--widths", "4,8,8,16,16", "--fc", "8"])
    luabridge.require("loadcaffe")
    net = luabridge.eval("function(p, b) return loadcaffe.load(p, b, 'nn') end")(
        str(tmp_path / "VGG_ILSVRC_19_layers_deploy.prototxt"), str(tmp_path / "VGG_ILSVRC_19_layers.caffemodel"))
    names = luabridge.eval("function(n) local t = {} for i = 1, #n.modules do t[i] = n.modules[i].name end return t end")(net)
    names = [v.decode() if isinstance(v, bytes) else v for v in names.values()]
    assert len(names) == 46
    assert names[11] == "relu3_1" and names[20] == "relu4_1" and names[22] == "relu4_2" and names[-1] == "prob"
    assert names[:5] == ["conv1_1", "relu1_1", "conv1_2", "relu1_2", "pool1"]
    assert names[37:40] == ["torch_view", "fc6", "relu6"]
    x = np.random.default_rng(0).random((1, 3, 224, 224))
    out = luabridge.eval("function(n, x) n:evaluate(); return n:forward(x) end")(net, luabridge.from_numpy(x))
    p = luabridge.to_numpy(out)
    assert p.shape == (1, 10) and abs(p.sum() - 1) < 1e-6
    # the prototxt names every layer the caffemodel has
    text = (tmp_path / "VGG_ILSVRC_19_layers_deploy.prototxt").read_text()
    assert text.count("layers {") == 45 and 'name: "conv5_4"' in text


def test_setup_env_names_the_tools_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(rp, "CACHE", tmp_path / "cache")
    from test_real_programs_tool import make_mirror
    mirror = make_mirror(tmp_path)
    p = rp.Program(name="t", repo="someone/models", what="w", args=["train.lua"], expect=["loss"],
                   setup="test -f \"$CORPUS_TOOLS/corpus_caffemodel.py\"")
    assert rp.run_program(p, mirror, 1.0).ok
