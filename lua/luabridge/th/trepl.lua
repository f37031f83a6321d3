-- The globals Torch7's th (trepl) gives every script besides its print: a require that also takes
-- paths relative to the calling file ('./util', '../', 'model.net'), Penlight's lazy globals
-- (path, stringx, tablex, ...) and its '%' operator on strings when Penlight is on package.path,
-- import and who().
local trepl = {}

local baseRequire = require

-- pkg when it ends with suffix, else pkg .. suffix: the one that exists, if any.
local function existing(pkg, suffix)
  if pkg:sub(-#suffix) == suffix and paths.filep(pkg) then return pkg end
  if paths.filep(pkg .. suffix) then return pkg .. suffix end
end

-- What a file name given to require stands for, tried in trepl's order (Lua source, a saved
-- object, JSON, the file itself, a folder's init.lua): the file and how to load it, or nil.
local kinds = { { '.lua', 'lua' }, { '.th', 't7' }, { '.net', 'net' }, { '.t7', 't7' }, { '.json', 'json' } }

local function locate(pkg)
  for _, kind in ipairs(kinds) do
    local file = existing(pkg, kind[1])
    if file then return file, kind[2] end
  end
  if paths.filep(pkg) then return pkg, 'lua' end
  local init = paths.concat(pkg, 'init.lua')
  if paths.filep(init) then return init, 'lua' end
end

local loaders = {
  lua = function(file)
    local result = dofile(file)   -- not a tail call: dofile's frame stays out of tracebacks
    return result
  end,
  t7 = function(file) return torch.load(file) end,
  net = function(file)
    baseRequire 'nn'
    return torch.load(file)
  end,
  json = function(file)
    local f = assert(io.open(file))
    local text = f:read('*a')
    f:close()
    return baseRequire('cjson').decode(text)
  end,
}

-- Whether Lua's require finds name: loaded or preloaded already, a file on package.path or
-- package.cpath (Lua's own four searchers, asked without compiling anything), or a loader from a
-- searcher added after those four (luabridge.model adds one). A searcher that raises has found
-- it too: require then raises that error itself.
local function requireFinds(name)
  if package.loaded[name] ~= nil or package.preload[name] ~= nil
      or package.searchpath(name, package.path) or package.searchpath(name, package.cpath) then
    return true
  end
  for i = 5, #package.loaders do
    local ok, loader = pcall(package.loaders[i], name)
    if not ok or type(loader) == 'function' then return true end
  end
  return false
end

-- require as trepl's: './x' and '../' name files relative to the calling file, and a name that
-- require cannot find is looked for in the current folder. Errors inside a module pass through
-- untouched, so the traceback reaches into the module's own frames.
function trepl.require(name)
  if type(name) ~= 'string' then return baseRequire(name) end
  if name:sub(1, 1) == '.' then
    local source = debug.getinfo(2, 'S').source
    local file = source:sub(1, 1) == '@' and source:sub(2) or ''
    local pkg = paths.concat((file ~= '' and paths.filep(file)) and paths.dirname(file) or '.', name)
    local found, kind = locate(pkg)
    if not found then
      error(("module '%s' not found: no %s.lua, .th, .net, .t7, .json, nor %s"):format(
        name, pkg, paths.concat(pkg, 'init.lua')), 2)
    end
    return loaders[kind](found)
  end
  if not requireFinds(name) then
    local found, kind = locate(paths.concat('.', name))
    if found then return loaders[kind](found) end
  end
  return baseRequire(name)
end

-- Makes a package's fields globals (those not defined yet; all of them when forced), as trepl's
-- import: after import 'nn', Linear and Sequential are globals. _torchimport keeps each package.
function trepl.import(name, forced)
  local result = trepl.require(name)
  local fields = rawget(_G, name)
  if type(fields) ~= 'table' then fields = type(result) == 'table' and result or {} end
  local imported = rawget(_G, '_torchimport') or {}
  rawset(_G, '_torchimport', imported)
  imported[name] = fields
  for k, v in pairs(fields) do
    if forced or rawget(_G, k) == nil then rawset(_G, k, v) end
  end
end

-- Penlight's `'%5.2f' % x` for strings, as trepl turns it on (stringx holds it since Penlight
-- 1.11; before, text did).
local function penlightFormatOperator()
  for _, name in ipairs { 'pl.stringx', 'pl.text' } do
    local ok, lib = pcall(baseRequire, name)
    if ok and type(lib) == 'table' and lib.format_operator then return lib.format_operator() end
  end
end

-- Prints the user's globals (those defined after th started), as trepl's who().
local preloaded
function trepl.who()
  local names = {}
  for k, v in pairs(_G) do
    if not preloaded[k] then names[#names + 1] = ('%-20s = %s'):format(tostring(k), tostring(v)) end
  end
  table.sort(names)
  print('== User Variables ==')
  for _, line in ipairs(names) do print(line) end
  print('==')
end

function trepl.install()
  rawset(_G, 'require', trepl.require)
  rawset(_G, 'who', trepl.who)
  rawset(_G, 'import', trepl.import)
  if pcall(baseRequire, 'pl') then   -- Penlight, as trepl loads it: lazy globals path, stringx, ...
    penlightFormatOperator()
  end
  preloaded = {}
  for k in pairs(_G) do preloaded[k] = true end
end

return trepl
