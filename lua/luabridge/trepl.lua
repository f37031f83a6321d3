-- The globals Torch7's th (trepl) gives every script besides its print: a require that also takes
-- paths relative to the calling file ('./util', '../', 'model.net'), Penlight's lazy globals
-- (path, stringx, tablex, ...) and its '%' operator on strings when Penlight is on package.path,
-- import and who().
local trepl = {}

local baseRequire = require

-- What a relative name stands for, tried in trepl's order: Lua source, a saved object, JSON, the
-- file itself, then a folder's init.lua.
local function requireFile(pkg)
  local function has(suffix) return paths.filep(pkg .. suffix) end
  if has('.lua') then return dofile(pkg .. '.lua') end
  for _, suffix in ipairs { '.th', '.net', '.t7' } do
    if pkg:sub(-#suffix) == suffix and has('') or has(suffix) then
      if suffix == '.net' then baseRequire 'nn' end
      return torch.load(pkg:sub(-#suffix) == suffix and pkg or pkg .. suffix)
    end
  end
  if pkg:sub(-5) == '.json' and has('') or has('.json') then
    local f = assert(io.open(pkg:sub(-5) == '.json' and pkg or pkg .. '.json'))
    local text = f:read('*a')
    f:close()
    return baseRequire('cjson').decode(text)
  end
  if has('') then return dofile(pkg) end
  return dofile(paths.concat(pkg, 'init.lua'))
end

function trepl.require(name)
  if type(name) == 'string' and name:sub(1, 1) == '.' then
    local source = debug.getinfo(2, 'S').source
    local file = source:sub(1, 1) == '@' and source:sub(2) or ''
    local dir = (file ~= '' and paths.filep(file)) and paths.dirname(file) or '.'
    return requireFile(paths.concat(dir, name))
  end
  local ok, result = pcall(baseRequire, name)
  if ok then return result end
  -- a module in the current folder that package.path does not reach
  local found, here = pcall(requireFile, paths.concat('.', name))
  if found then return here end
  error(result, 2)
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
