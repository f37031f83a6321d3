-- The Lua half of luabridge.Model (luabridge/model/handle.py): while a model's source runs, the user's
-- files (name -> source) are loadable by require and dofile; a class that an earlier build in this
-- runtime defined may be defined again (the same source runs once per Model built here), where
-- torch.class would refuse it. Outside a build, require, dofile and torch.class are torch7's.
require 'torch'
local M = {}

local built = {}     -- class names defined during builds in this runtime
local origin = {}    -- module name -> the file source that require ran for it
local saved          -- what install replaced, while a build runs

-- The source of `name` (a require name or a dofile path) among files, and its file name.
local function lookup(files, name)
  local path = name:gsub('^%./', '')
  local dotted = name:gsub('%.', '/')
  for _, candidate in ipairs({ path, path .. '.lua', dotted .. '.lua', dotted .. '/init.lua' }) do
    if files[candidate] then return files[candidate], candidate end
  end
end

local function tolerant(class)
  return function(name, parentName, module)
    local mt = type(name) == 'string' and built[name] and torch.getmetatable(name)
    if not mt then
      local made, parent = class(name, parentName, module)
      built[name] = true
      return made, parent
    end
    if type(parentName) == 'table' and module == nil then module = parentName end
    if module then rawset(module, name:match('([^%.]+)$'), mt.__constructor) end
    return mt, torch.parentOf(mt)
  end
end

-- Makes files loadable until uninstall; a module that require loaded from another source of the
-- same name in an earlier build is loaded again from this one. With keepRandom, uninstall puts
-- torch's random generator back as it was (a source run only to define classes draws no numbers).
function M.install(files, keepRandom)
  if saved then error('luabridge.Model: a model is already being built in this runtime', 2) end
  for name, source in pairs(origin) do
    local current = lookup(files, name)
    if current and current ~= source then
      package.loaded[name], origin[name] = nil, nil
    end
  end
  local function searcher(name)
    local source, file = lookup(files, name)
    if not source then return '\n\tno file ' .. name .. ' among the model\'s files' end
    local chunk = assert(loadstring(source, '@' .. file))
    return function(...)
      origin[name] = source
      return chunk(...)
    end
  end
  saved = { dofile = dofile, class = torch.class, searcher = searcher,
            random = keepRandom and torch.getRNGState() or nil }
  table.insert(package.loaders, 2, searcher)
  torch.class = tolerant(saved.class)
  dofile = function(path)
    local source, file = lookup(files, tostring(path))
    if not source then return saved.dofile(path) end
    return assert(loadstring(source, '@' .. file))()
  end
end

function M.uninstall()
  if not saved then return end
  for i, loader in ipairs(package.loaders) do
    if loader == saved.searcher then table.remove(package.loaders, i) break end
  end
  if saved.random then torch.setRNGState(saved.random) end
  dofile, torch.class, saved = saved.dofile, saved.class, nil
end

-- What a Model may hold: 'module' (an nn.Module) or 'criterion' (an nn.Criterion); else nil.
function M.kind(value)
  if torch.isTypeOf(value, 'nn.Module') then return 'module' end
  if torch.isTypeOf(value, 'nn.Criterion') then return 'criterion' end
end

-- 'torch.FloatTensor'...: the type of a module's first parameter, else of its output; nil for a
-- criterion (it takes its inputs as they come).
function M.tensor_type(module)
  if M.kind(module) ~= 'module' then return nil end
  local params = module:parameters()
  if params and params[1] then return torch.typename(params[1]) end
  return torch.typename(module.output) or torch.getdefaulttensortype()
end

-- A module's or criterion's bytes as torch.save writes them, after dropping a module's
-- intermediate buffers.
function M.serialize(object)
  if object.clearState then object:clearState() end
  return torch.serialize(object, 'binary')
end

return M
