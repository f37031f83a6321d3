-- loadcaffe: szagoruyko/loadcaffe's loadcaffe.load(prototxt, caffemodel, backend) without Google
-- protobuf's C++. As loadcaffe.cpp does, the prototxt is parsed and then replaced by the binary
-- model (protobuf's ParseFrom clears the message first), so the network comes from the
-- caffemodel's own layer definitions: V1 `layers` (enum types) or V2 `layer` (string types). Each
-- layer becomes the module loadcaffe.cpp writes (Convolution, Deconvolution, Pooling with ceil
-- mode, ReLU, Sigmoid, Tanh, LRN, InnerProduct with a View before it, Dropout, Softmax), named
-- after the layer, its weights and biases copied from the blobs; a layer of another type is
-- skipped with loadcaffe's warning. The wire format is read here with LuaJIT's ffi (varints,
-- packed floats), and the Lua model description is written to prototxt..'.lua' as loadcaffe did.
require 'nn'
local ffi = require 'ffi'

loadcaffe = rawget(_G, 'loadcaffe') or {}

-- --- protobuf wire format --------------------------------------------------------------------

-- the varint at s[pos]: value, next position
local function varint(s, pos)
  local value, scale = 0, 1
  while true do
    local b = s:byte(pos)
    if not b then error('loadcaffe: truncated varint', 0) end
    value = value + (b % 128) * scale
    pos = pos + 1
    if b < 128 then return value, pos end
    scale = scale * 128
  end
end

-- a message's fields: fields[number] = list of {wire, value | pos, len}
local function message(s, pos, stop)
  local fields = {}
  while pos < stop do
    local key
    key, pos = varint(s, pos)
    local number, wire = math.floor(key / 8), key % 8
    local entry
    if wire == 0 then
      local v
      v, pos = varint(s, pos)
      entry = { wire = 0, value = v }
    elseif wire == 1 then
      entry = { wire = 1, pos = pos }
      pos = pos + 8
    elseif wire == 2 then
      local len
      len, pos = varint(s, pos)
      entry = { wire = 2, pos = pos, len = len }
      pos = pos + len
    elseif wire == 5 then
      entry = { wire = 5, pos = pos }
      pos = pos + 4
    else
      error(('loadcaffe: unsupported protobuf wire type %d (field %d)'):format(wire, number), 0)
    end
    if pos > stop + 0 then error('loadcaffe: truncated message', 0) end
    local list = fields[number]
    if not list then list = {}; fields[number] = list end
    list[#list + 1] = entry
  end
  return fields
end

local Message = {}
Message.__index = Message

local function parse(s, pos, len)
  return setmetatable({ s = s, f = message(s, pos, pos + len) }, Message)
end

function Message:has(n) return self.f[n] ~= nil end

function Message:msgs(n)
  local out = {}
  for _, e in ipairs(self.f[n] or {}) do out[#out + 1] = parse(self.s, e.pos, e.len) end
  return out
end

function Message:msg(n)
  local list = self.f[n]
  return list and parse(self.s, list[#list].pos, list[#list].len) or nil
end

function Message:str(n, default)
  local list = self.f[n]
  if not list then return default end
  local e = list[#list]
  return self.s:sub(e.pos, e.pos + e.len - 1)
end

-- unsigned integers: repeated ones may be packed
function Message:uints(n)
  local out = {}
  for _, e in ipairs(self.f[n] or {}) do
    if e.wire == 0 then
      out[#out + 1] = e.value
    elseif e.wire == 2 then
      local pos, stop = e.pos, e.pos + e.len
      while pos < stop do
        local v
        v, pos = varint(self.s, pos)
        out[#out + 1] = v
      end
    end
  end
  return out
end

function Message:uint(n, default)
  local v = self:uints(n)
  return v[#v] or default
end

local function float_at(s, pos)
  local buf = ffi.new('float[1]')
  ffi.copy(buf, ffi.cast('const char *', s) + pos - 1, 4)
  return buf[0]
end

function Message:float(n, default)
  local list = self.f[n]
  if not list then return default end
  return float_at(self.s, list[#list].pos)
end

-- repeated float (packed or not) into a FloatTensor
function Message:floats(n)
  local list = self.f[n] or {}
  local count = 0
  for _, e in ipairs(list) do count = count + (e.wire == 2 and e.len / 4 or 1) end
  local t = torch.FloatTensor(count)
  if count == 0 then return t end
  local dst = ffi.cast('char *', t:data())
  local src = ffi.cast('const char *', self.s)
  local at = 0
  for _, e in ipairs(list) do
    local bytes = e.wire == 2 and e.len or 4
    ffi.copy(dst + at, src + e.pos - 1, bytes)
    at = at + bytes
  end
  return t
end

-- --- caffe.proto's messages (field numbers from BVLC caffe's caffe.proto) ----------------------

-- BlobProto: num 1, channels 2, height 3, width 4, data 5, shape 7 (BlobShape: dim 1), double_data 8
local function blob(m)
  local b = { data = m:floats(5) }
  if b.data:nElement() == 0 and m:has(8) then   -- double_data
    local list = m.f[8]
    local vals = {}
    for _, e in ipairs(list) do
      local stop = e.wire == 2 and e.pos + e.len or e.pos + 8
      for p = e.pos, stop - 1, 8 do
        local buf = ffi.new('double[1]')
        ffi.copy(buf, ffi.cast('const char *', m.s) + p - 1, 8)
        vals[#vals + 1] = buf[0]
      end
    end
    b.data = torch.FloatTensor(vals)
  end
  local shape = m:msg(7)
  if shape then b.shape = shape:uints(1) end
  b.num, b.channels, b.height, b.width = m:uint(1, 0), m:uint(2, 0), m:uint(3, 0), m:uint(4, 0)
  return b
end

-- V1LayerParameter's enum LayerType -> V2's type names (the ones loadcaffe converts)
local V1TYPES = { [4] = 'Convolution', [39] = 'Deconvolution', [17] = 'Pooling', [18] = 'ReLU',
  [19] = 'Sigmoid', [23] = 'Tanh', [15] = 'LRN', [14] = 'InnerProduct', [6] = 'Dropout',
  [20] = 'Softmax', [21] = 'SoftmaxWithLoss' }

-- a layer: name, type, blobs and its parameter messages, from V1 or V2 field numbers
local function layer(m, v1)
  local L = { blobs = {} }
  if v1 then
    L.name = m:str(4, '')
    L.typeid = m:uint(5, 0)
    L.type = V1TYPES[L.typeid] or ('V1 type ' .. L.typeid)
    for _, b in ipairs(m:msgs(6)) do L.blobs[#L.blobs + 1] = blob(b) end
    L.conv, L.pool, L.lrn, L.ip, L.drop = m:msg(10), m:msg(19), m:msg(18), m:msg(17), m:msg(12)
  else
    L.name = m:str(1, '')
    L.type = m:str(2, '')
    for _, b in ipairs(m:msgs(7)) do L.blobs[#L.blobs + 1] = blob(b) end
    L.conv, L.pool, L.lrn, L.ip, L.drop = m:msg(106), m:msg(121), m:msg(118), m:msg(117), m:msg(108)
  end
  return L
end

-- --- the model description, as loadcaffe.cpp writes it ----------------------------------------

local function weightBlob(L)
  local wB = L.blobs[1]
  if not wB then error(("loadcaffe: layer '%s' (%s) has no weight blob"):format(L.name, L.type), 0) end
  return wB
end

-- kernel/stride/pad of a ConvolutionParameter: *_w/*_h, else the one repeated value
local function conv_geometry(p)
  local function pick(n, nw, nh, default)
    local w, h = p and p:uint(nw, 0) or 0, p and p:uint(nh, 0) or 0
    if w == 0 or h == 0 then
      local v = p and p:uints(n) or {}
      if #v == 1 then w, h = v[1], v[1] elseif #v == 0 and default then w, h = default, default end
    end
    return w, h
  end
  local kW, kH = pick(4, 12, 11)
  local dW, dH = pick(6, 14, 13, 1)   -- caffe's stride defaults to 1
  local padW, padH = pick(3, 10, 9, 0)
  return kW, kH, dW, dH, padW, padH
end

local function describe(L, backend, state, lines)
  local pkg = backend == 'cudnn' and 'cudnn' or 'nn'
  local t = L.type
  if t == 'Convolution' or t == 'Deconvolution' then
    local p = L.conv
    local groups = p and p:uint(5, 1) or 1
    if groups == 0 then groups = 1 end
    local wB = weightBlob(L)
    local nInputPlane = (wB.shape and wB.shape[2] or wB.channels) * groups
    local nOutputPlane = wB.shape and wB.shape[1] or wB.num
    state.num_output = nOutputPlane
    local kW, kH, dW, dH, padW, padH = conv_geometry(p)
    if backend == 'nn' and groups ~= 1 then
      print('nn supports no groups!')
      return
    end
    local class = t == 'Convolution' and 'SpatialConvolution' or 'SpatialFullConvolution'
    local args = { nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH }
    if backend == 'cudnn' then args[#args + 1] = groups end
    local code = ('%s.%s(%s)'):format(pkg, class, table.concat(args, ', '))
    if t == 'Deconvolution' and p and p:uint(2, 1) == 0 then code = code .. ':noBias()' end
    lines[#lines + 1] = { L.name, code }
  elseif t == 'Pooling' then
    local p = L.pool
    local pool = p and p:uint(1, 0) or 0
    local kW, kH = p and p:uint(6, 0) or 0, p and p:uint(5, 0) or 0
    if kW == 0 or kH == 0 then kW = p and p:uint(2, 0) or 0; kH = kW end
    local dW, dH = p and p:uint(8, 0) or 0, p and p:uint(7, 0) or 0
    if dW == 0 or dH == 0 then dW = p and p:uint(3, 1) or 1; dH = dW end
    local padW, padH = p and p:uint(10, 0) or 0, p and p:uint(9, 0) or 0
    if padW == 0 and padH == 0 then padW = p and p:uint(4, 0) or 0; padH = padW end
    local code
    if pool == 0 then
      code = ('%s.SpatialMaxPooling(%d, %d, %d, %d, %d, %d):ceil()'):format(pkg, kW, kH, dW, dH, padW, padH)
    elseif pool == 1 then
      code = ('%s.SpatialAveragePooling(%d, %d, %d, %d, %d, %d):ceil()'):format(pkg, kW, kH, dW, dH, padW, padH)
    else
      code = ('inn.SpatialStochasticPooling(%d, %d, %d, %d)'):format(kW, kH, dW, dH)
    end
    lines[#lines + 1] = { L.name, code }
  elseif t == 'ReLU' then
    lines[#lines + 1] = { L.name, pkg .. '.ReLU(true)' }
  elseif t == 'Sigmoid' then
    lines[#lines + 1] = { L.name, backend == 'cudnn' and 'cudnn.Sigmoid(true)' or 'nn.Sigmoid()' }
  elseif t == 'Tanh' then
    lines[#lines + 1] = { L.name, backend == 'cudnn' and 'cudnn.Tanh(true)' or 'nn.Tanh()' }
  elseif t == 'LRN' then
    local p = L.lrn
    local size = p and p:uint(1, 5) or 5
    local alpha, beta, k = p and p:float(2, 1) or 1, p and p:float(3, 0.75) or 0.75, p and p:float(5, 1) or 1
    lines[#lines + 1] = { L.name, ('%s.SpatialCrossMapLRN(%d, %.6f, %.4f, %f)'):format(pkg, size, alpha, beta, k) }
  elseif t == 'InnerProduct' then
    local wB = weightBlob(L)
    local nInputPlane = wB.shape and wB.shape[2] or wB.width
    local nOutputPlane = L.ip and L.ip:uint(1, 0) or 0
    if state.num_output ~= nInputPlane then
      lines[#lines + 1] = { 'torch_view', 'nn.View(-1):setNumInputDims(3)' }
    end
    lines[#lines + 1] = { L.name, ('nn.Linear(%d, %d)'):format(nInputPlane, nOutputPlane) }
    state.num_output = nOutputPlane
  elseif t == 'Dropout' then
    lines[#lines + 1] = { L.name, ('nn.Dropout(%f)'):format(L.drop and L.drop:float(1, 0.5) or 0.5) }
  elseif t == 'Softmax' or t == 'SoftmaxWithLoss' then
    lines[#lines + 1] = { L.name, pkg .. '.SoftMax()' }
  end
end

-- the weights of a layer as loadModule gives them: weight (out, in, kW, kH) or (1, 1, in, out), bias
local function weights(L)
  local wB = L.blobs[1]
  local w = wB.data
  local b = L.blobs[2] and L.blobs[2].data or torch.FloatTensor()
  return w, b
end

local function read_all(name)
  local f = io.open(name, 'rb')
  if not f then return nil end
  local s = f:read('*a')
  f:close()
  return s
end

-- the layers of a caffemodel; nil when it cannot be read (loadcaffe prints "Couldn't load")
function loadcaffe.layers(binary_name)
  local s = read_all(binary_name)
  if not s then return nil end
  local ok, net = pcall(parse, s, 1, #s)
  if not ok then return nil, net end
  local layers = {}
  local v1 = net:msgs(2)
  if #v1 > 0 then
    for _, m in ipairs(v1) do layers[#layers + 1] = layer(m, true) end
  else
    for _, m in ipairs(net:msgs(100)) do layers[#layers + 1] = layer(m, false) end
  end
  return layers, net:str(1, '')
end

loadcaffe.load = function(prototxt_name, binary_name, backend)
  backend = backend or 'nn'
  if backend ~= 'nn' and backend ~= 'cudnn' then
    error(("loadcaffe.load: backend '%s' is not available in luabridge (nn or cudnn)"):format(backend), 2)
  end
  local layers, why = loadcaffe.layers(binary_name)
  if not layers then
    print("Couldn't load " .. tostring(binary_name) .. (why and (': ' .. why) or ''))
    return
  end
  print('Successfully loaded ' .. binary_name)

  -- the model description, written beside the prototxt as loadcaffe.cpp does
  local state, out = { num_output = 0 }, { "require '" .. backend .. "'", 'local model = {}' }
  local byName = {}
  for _, L in ipairs(layers) do
    byName[L.name] = L
    local lines = {}
    describe(L, backend, state, lines)
    if #lines == 0 then
      local kind = L.typeid or L.type
      out[#out + 1] = ("-- warning: module '%s [type %s]' not found"):format(L.name, kind)
      print(("warning: module '%s [type %s]' not found"):format(L.name, kind))
    end
    for _, it in ipairs(lines) do
      out[#out + 1] = ("table.insert(model, {'%s', %s})"):format(it[1], it[2])
    end
  end
  out[#out + 1] = 'return model'
  local code = table.concat(out, '\n')
  local lua_name = prototxt_name .. '.lua'
  local f = io.open(lua_name, 'w')
  if f then f:write(code); f:close() end
  if code:find('inn%.') then require 'inn' end
  local list = assert(loadstring(code, '=' .. lua_name))()

  local net = nn.Sequential()
  for _, item in ipairs(list) do
    item[2].name = item[1]
    if item[2].weight then
      local w, b = weights(byName[item[1]])
      print(('%s: %s'):format(item[1], table.concat(w:size():totable(), ' ')))
      if w:nElement() ~= item[2].weight:nElement() then
        error(("loadcaffe.load: layer '%s' has %d weights in the caffemodel, its module %d"):format(
          item[1], w:nElement(), item[2].weight:nElement()), 2)
      end
      item[2].weight:copy(w)
      if item[2].bias then item[2].bias:copy(b) end
    end
    net:add(item[2])
  end
  if backend == 'cudnn' then net:cuda() end
  return net
end

return loadcaffe
