-- argcheck (torch/argcheck): argcheck{rules..., options} returns a function that checks its
-- arguments against the rules and returns them (defaults filled in), or calls `call` with them.
-- Rules: {name=, type=, default=, defaulta= (another argument's name), defaultf= (a function),
-- opt=, check= (an extra test), help=/doc=}. Options: call, pack, quiet, overload (a checker
-- to fall back on), nonamed, noordered, help/doc, force. Calls may be ordered, f(1, 'x'), or
-- named, f{x = 1, msg = 'x'}, and methods named, obj:f{...}, when the first rule is `self`.
-- This version matches rules by backtracking rather than generating code.
local env = require 'argcheck.env'
local doc = require 'argcheck.doc'
local usage = require 'argcheck.usage'

local specs = setmetatable({}, { __mode = 'k' })   -- checker -> its spec (for overload)
local NOTHING = {}

local function optional(rule)
  return rule.opt or rule.default ~= nil or rule.defaulta ~= nil or rule.defaultf ~= nil
end

local function accepts(spec, rule, value)
  if value == nil then return false end
  if rule.type and not spec.istype(value, rule.type) then return false end
  return not rule.check or rule.check(value)
end

-- The values for every rule, from the given ones (NOTHING where the rule was skipped).
local function fillDefaults(spec, values)
  local byName = {}
  for j, rule in ipairs(spec.rules) do
    if values[j] == NOTHING then
      if rule.default ~= nil then values[j] = rule.default
      elseif rule.defaultf then values[j] = rule.defaultf()
      elseif rule.defaulta == nil then values[j] = nil end
    end
    byName[rule.name] = j
  end
  for j, rule in ipairs(spec.rules) do
    if values[j] == NOTHING then values[j] = values[byName[rule.defaulta]] end
  end
  return values
end

-- Ordered arguments args[from..n] against rules[j..]: each rule takes the next argument or,
-- when optional, none (taking first); nil is taken by an optional rule.
local function matchOrdered(spec, args, i, j, values)
  local rules = spec.rules
  if j > #rules then return i > args.n end
  local rule = rules[j]
  local v = args[i]
  if i <= args.n and (accepts(spec, rule, v) or (v == nil and optional(rule))) then
    values[j] = v == nil and NOTHING or v
    if matchOrdered(spec, args, i + 1, j + 1, values) then return true end
  end
  if optional(rule) then
    values[j] = NOTHING
    return matchOrdered(spec, args, i, j + 1, values)
  end
  return false
end

-- Named arguments: rules[first..] read from the table named (all its keys must be rules').
local function matchNamed(spec, named, first, values)
  local used = 0
  for j = first, #spec.rules do
    local rule = spec.rules[j]
    local v = named[rule.name]
    if v == nil then
      if not optional(rule) then return false end
      values[j] = NOTHING
    elseif accepts(spec, rule, v) then
      values[j] = v
      used = used + 1
    else
      return false
    end
  end
  for _ in pairs(named) do used = used - 1 end
  return used == 0
end

local function isNamedTable(v)
  return type(v) == 'table' and getmetatable(v) == nil
end

-- The values for spec's rules from args, or nil when they do not match.
local function match(spec, args)
  local values = {}
  if not spec.noordered and matchOrdered(spec, args, 1, 1, values) then return fillDefaults(spec, values) end
  if spec.nonamed then return nil end
  local rules = spec.rules
  values = {}
  if args.n == 1 and isNamedTable(args[1]) and matchNamed(spec, args[1], 1, values) then
    return fillDefaults(spec, values)
  end
  if rules[1] and rules[1].name == 'self' and args.n == 2 and accepts(spec, rules[1], args[1])
     and isNamedTable(args[2]) and matchNamed(spec, args[2], 2, values) then
    values[1] = args[1]
    return fillDefaults(spec, values)
  end
end

local function results(spec, values)
  local n = #spec.rules
  if spec.pack then
    local packed = {}
    for j, rule in ipairs(spec.rules) do packed[rule.name] = values[j] end
    if spec.call then return spec.call(packed) end
    return packed
  end
  if spec.call then return spec.call(unpack(values, 1, n)) end
  return unpack(values, 1, n)
end

-- The ordered type sequences spec accepts: every rule's type, each optional rule present or
-- left out (rules without a type read 'any').
local function signatures(spec)
  local found = { '' }
  for _, rule in ipairs(spec.rules) do
    local grown = {}
    for _, sig in ipairs(found) do
      grown[#grown + 1] = sig .. ',' .. (rule.type or 'any')
      if optional(rule) then grown[#grown + 1] = sig end
    end
    found = grown
  end
  return found
end

-- As argcheck's graph: new rules that accept a type sequence an overloaded checker accepts
-- too are an error, unless force is set (the new rules then win).
local function checkAmbiguity(spec, overloaded)
  local new = {}
  for _, sig in ipairs(signatures(spec)) do new[sig] = true end
  for _, old in ipairs(overloaded) do
    for _, sig in ipairs(signatures(old)) do
      if new[sig] then
        error(('argcheck: rules led to ambiguous situations: (%s) is accepted by the overloaded function too '
          .. '(force = true lets the new rules win)'):format(sig:sub(2)), 3)
      end
    end
  end
end

local function argcheck(options)
  if type(options) ~= 'table' then error('argcheck: a table of rules expected', 2) end
  local spec = { rules = {}, istype = env.istype }
  for k, v in pairs(options) do
    if type(k) ~= 'number' then spec[k] = v end
  end
  spec.help = spec.help or spec.doc
  for i, rule in ipairs(options) do
    if type(rule) ~= 'table' or type(rule.name) ~= 'string' then
      error(('argcheck: rule %d needs a name'):format(i), 2)
    end
    spec.rules[i] = rule
  end
  if spec.overload and not specs[spec.overload] then
    error('argcheck: overload must be a function made by argcheck', 2)
  end
  if spec.help then doc(spec.help) end
  local chain = {}   -- this spec, then those it overloads (newest first)
  local s = spec
  while s do chain[#chain + 1] = s; s = s.overload and specs[s.overload] end
  if not spec.force then checkAmbiguity(spec, { unpack(chain, 2) }) end

  local function check(...)
    local args = { n = select('#', ...), ... }
    for _, s in ipairs(chain) do
      local values = match(s, args)
      if values then
        if spec.quiet then return true, results(s, values) end
        return results(s, values)
      end
    end
    local texts = {}
    for k, s in ipairs(chain) do texts[k] = usage(s) end
    local text = table.concat(texts, '\n\nor\n\n')
    if spec.quiet then return false, text end
    error(text .. '\ninvalid arguments!', 2)
  end
  specs[check] = spec
  return check
end

return argcheck
