-- display: szym/display's torch client (images, image grids, dygraphs plots, text and audio
-- panes for its browser server). Each call encodes a command as JSON and POSTs it to the server's
-- /events URL (luabridge/display_client.py does the HTTP that luasocket did); as with luasocket,
-- a server that does not answer makes the call do nothing, so scripts run with display on and no
-- server. configure/server set the server's host and port; every call returns the pane's id.
local json = require 'cjson'
local ffi = require 'ffi'
require 'image'

local py = rawget(_G, '__luabridge_py')

local M = { url = 'http://localhost:8000/events' }
display = M   -- szym/display's init.lua sets the global M; scripts use the returned table

local function uid()
  return 'pane_' .. (os.time() .. math.random()):gsub('%.', '')
end

local function send(command)
  return py.display_send(M.url, json.encode(command))
end
M._send = send

local b64chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

-- base64 of a Lua string (mime.b64's output: padded, no line breaks)
local function b64(s)
  local out, n = {}, #s
  for i = 1, n, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = a * 65536 + (b or 0) * 256 + (c or 0)
    local c1, c2 = math.floor(v / 262144) % 64, math.floor(v / 4096) % 64
    local c3, c4 = math.floor(v / 64) % 64, v % 64
    out[#out + 1] = b64chars:sub(c1 + 1, c1 + 1) .. b64chars:sub(c2 + 1, c2 + 1)
      .. (b and b64chars:sub(c3 + 1, c3 + 1) or '=') .. (c and b64chars:sub(c4 + 1, c4 + 1) or '=')
  end
  return table.concat(out)
end
M._b64 = b64

local function normalize(img, opts)
  -- rescale the image to 0 .. 1
  local min = opts.min or img:min()
  local max = opts.max or img:max()
  img = torch.FloatTensor(img:size()):copy(img)
  img:add(-min):mul(1 / (max - min))
  return img
end

-- the server's address: {hostname = '127.0.0.1', port = 8000}
function M.configure(config)
  config = config or {}
  local port = config.port or 8000
  local hostname = config.hostname or '127.0.0.1'
  M.url = 'http://' .. hostname .. ':' .. port .. '/events'
end
M.server = M.configure   -- the older client's name

function M.image(img, opts)
  opts = opts or {}
  local win = opts.win or uid()
  if type(img) == 'table' then
    return M.images(img, opts)
  end
  if not torch.isTensor(img) then
    error('display.image: expected a tensor or a table of tensors, got ' .. torch.type(img), 2)
  end
  -- a batch of images: a grid
  if img:dim() == 4 or (img:dim() == 3 and img:size(1) > 3) then
    local images = {}
    for i = 1, img:size(1) do images[i] = img[i] end
    return M.images(images, opts)
  end
  img = normalize(img, opts)
  local jpg = image.compressJPG(img)
  local src = 'data:image/jpg;base64,' .. b64(ffi.string(jpg:data(), jpg:nElement()))
  send({ command = 'image', id = win, src = src, labels = opts._labels, width = opts.width, title = opts.title })
  return win
end

function M.images(images, opts)
  opts = opts or {}
  local labels = opts.labels or {}
  local nperrow = opts.nperrow or math.ceil(math.sqrt(#images))
  local maxsize = {1, 0, 0}
  for i, img in ipairs(images) do
    if opts.normalize then img = normalize(img, opts) end
    if img:dim() == 2 then
      img = torch.expand(img:view(1, img:size(1), img:size(2)), maxsize[1], img:size(1), img:size(2))
    end
    images[i] = img
    maxsize[1] = math.max(maxsize[1], img:size(1))
    maxsize[2] = math.max(maxsize[2], img:size(2))
    maxsize[3] = math.max(maxsize[3], img:size(3))
  end
  -- every image onto one canvas, nperrow to a row
  local _labels = {}
  local numrows = math.ceil(#images / nperrow)
  local canvas = torch.FloatTensor(maxsize[1], maxsize[2] * numrows, maxsize[3] * nperrow):fill(0.5)
  local row, col = 0, 0
  for i, img in ipairs(images) do
    canvas:narrow(2, maxsize[2] * row + 1, img:size(2)):narrow(3, maxsize[3] * col + 1, img:size(3)):copy(img)
    if labels[i] then
      table.insert(_labels, { col / nperrow, row / numrows, labels[i] })
    end
    col = col + 1
    if col == nperrow then col = 0; row = row + 1 end
  end
  opts._labels = _labels
  return M.image(canvas, opts)
end

-- data: a 2-d tensor or a list of rows, the first column the x axis; opts.labels names the
-- columns; other options go to dygraphs as they are
function M.plot(data, opts)
  opts = opts or {}
  local win = opts.win or uid()
  local dataset = {}
  if torch.typename(data) then
    for i = 1, data:size(1) do
      local row = {}
      for j = 1, data:size(2) do table.insert(row, data[{i, j}]) end
      table.insert(dataset, row)
    end
  else
    dataset = data
  end
  local options = {}
  for k, v in pairs(opts) do options[k] = v end
  options.file = dataset
  if options.labels then options.xlabel = options.xlabel or options.labels[1] end
  options.win = nil
  send({ command = 'plot', id = win, title = opts.title, options = options })
  return win
end

function M.text(txt, opts)
  opts = opts or {}
  local win = opts.win or uid()
  send({ command = 'text', id = win, title = opts.title, text = txt })
  return win
end

-- audio needs the `audio` package (libsox), as szym/display's does: without it, a warning
function M.audio(data, opts)
  opts = opts or {}
  local win = opts.win or uid()
  if not pcall(require, 'audio') then
    print('Warning: audio package could not be loaded. Skipping audio.')
    return
  end
  return win
end

return M
