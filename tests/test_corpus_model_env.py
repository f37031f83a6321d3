"""tools/real_programs.py: a [[model]]'s `env` reaches the runtime that builds it (cunn/cudnn code
needs LUABRIDGE_CUDA_ON_CPU=1 as the programs' entries give it), and no other model sees it."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_programs as rp  # noqa: E402
from test_real_programs_tool import make_mirror  # noqa: E402


def test_model_env_reaches_the_build(tmp_path, monkeypatch):
    monkeypatch.setattr(rp, "CACHE", tmp_path / "cache")
    mirror = make_mirror(tmp_path)
    build = ("assert(os.getenv('CORPUS_MODEL_ENV') == 'on', 'env: ' .. tostring(os.getenv('CORPUS_MODEL_ENV'))); "
             "return dofile('models/mlp.lua')(8)")
    model = rp.Model(name="mlp", repo="someone/models", build=build, input=[2, 4], output=[2, 3],
                     env={"CORPUS_MODEL_ENV": "on"})
    good = rp.run_model(model, mirror, 1.0)
    assert good.ok and good.detail == "output 2x3", good.detail
    without = rp.run_model(rp.Model(**{**model.__dict__, "env": {}}), mirror, 1.0)
    assert not without.ok and "env: nil" in without.detail, without.detail


def test_model_env_in_a_manifest(tmp_path):
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[repo]]\nrepo = "a/b"\n\n[[model]]\nrepo = "a/b"\nname = "x"\nbuild = "return nn.Linear(2, 2)"\n'
                        'input = [1, 2]\nenv = { LUABRIDGE_CUDA_ON_CPU = "1" }\n')
    corpus = rp.load_manifest([manifest])
    assert corpus.models[0].env == {"LUABRIDGE_CUDA_ON_CPU": "1"}
