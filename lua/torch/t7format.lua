-- The .t7 format's rules, read by both readers: File.lua (require 'torch.t7format') and
-- luabridge/t7/format.py, which parses this file without running Lua. Keep it one table
-- constructor of numbers, strings (escapes \ddd \n \r \t \\ \' \") and nested tables.
return {
  -- object type codes
  types = { NIL = 0, NUMBER = 1, STRING = 2, TABLE = 3, TORCH = 4, BOOLEAN = 5,
            FUNCTION = 6, LEGACY_RECUR_FUNCTION = 7, RECUR_FUNCTION = 8 },
  maxDepth = 4096,                -- objects inside objects
  maxDims = 64,                   -- tensor dimensions (numpy's limit)
  maxIndex = 9007199254740992,    -- tensor sizes, strides and offsets (2^53: exact as numbers)
  maxToken = 64,                  -- characters of one ascii number
  maxClassName = 256,             -- class names: ASCII letters, digits and these characters
  classNamePunctuation = '_.:-',
  versionPrefix = 'V ',           -- a class's version string is "V <number>" (files from before
                                  -- versions hold the class name there: version 0)

  -- The packages of ours a reader requires when a file names a class that no loaded package
  -- defines, as it meets the name (a file is read once): by the full class name, else by the
  -- name's prefix (before the first '.'). cudnn's classes are read as nn's (nn/util/legacy.lua);
  -- cudnn, cunn and ccn2 themselves need CUDA and are never required. A class no package
  -- provides stays an unknown class, as in torch7.
  classPackages = { ['nn.gModule'] = 'nngraph', ['nn.ModuleFromCriterion'] = 'nngraph' },
  prefixPackages = { nn = 'nn', cudnn = 'nn', nngraph = 'nngraph', graph = 'graph', nnx = 'nnx',
                     inn = 'inn', optim = 'optim', torchx = 'torchx' },

  -- Function bytecode: LuaJIT's starts with "\27LJ", a version byte and a flags byte.
  luajitVersions = { [1] = 'LuaJIT 2.0', [2] = 'LuaJIT 2.1' },
  luajitFlagBigEndian = 1,
  luajitFlagGC64 = 8,             -- LuaJIT 2.1 built with GC64, as lupa's
  luajitNoGC64 = 'LuaJIT 2.1 bytecode without GC64 (LuaJIT 2.1.0-beta, as old Torch7 installs wrote)',

  -- Files that are not .t7: their first bytes, and what they are (the first match is used);
  -- a reader that fails on a file's first object looks at its first headBytes bytes.
  headBytes = 256,
  notT7 = {
    { '\147NUMPY', 'a numpy .npy file (numpy.load reads it)' },
    { 'PK\3\4', 'a zip archive (a PyTorch file saved by torch.save since PyTorch 1.6, or a numpy .npz)' },
    { '\128\2\138\10\108\252\156\70\249\32\106\168\80\25',
      'a PyTorch file in the legacy format of torch.save before PyTorch 1.6 (PyTorch reads it)' },
    { '\128\2', 'a Python pickle (protocol 2)' },
    { '\128\3', 'a Python pickle (protocol 3)' },
    { '\128\4', 'a Python pickle (protocol 4)' },
    { '\128\5', 'a Python pickle (protocol 5)' },
    { '\137HDF\r\n\26\n', 'an HDF5 file (h5py reads it)' },
    { '\31\139', 'a gzip file (decompress it first)' },
    { 'BZh', 'a bzip2 file (decompress it first)' },
    { '\253\55zXZ\0', 'an xz file (decompress it first)' },
    { '\137PNG\r\n\26\n', 'a PNG image' },
    { '\255\216\255', 'a JPEG image' },
    { 'version https://git-lfs', 'a Git LFS pointer, not the file itself (run git lfs pull)' },
  },
}
