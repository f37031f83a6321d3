-- moses: a functional utility belt (Yonaba/Moses), with the names and semantics of its 1.x
-- releases, which rnn, dpnn and nn's tests call: iterators are f(key, value, ...).
-- local _ = require 'moses'; _.map(t, f), _(t):map(f):value(), _.import(context).
local M = {}
require('moses.table')(M)
require('moses.array')(M)
require('moses.utility')(M)
require('moses.object')(M)

local aliases = {
  forEach = 'each', forEachi = 'eachi', loop = 'cycle', collect = 'map',
  inject = 'reduce', foldl = 'reduce', injectr = 'reduceRight', foldr = 'reduceRight',
  mapr = 'mapReduce', maprr = 'mapReduceRight', any = 'include', some = 'include',
  contains = 'include', filter = 'select', discard = 'reject', every = 'all',
  takeWhile = 'selectWhile', rejectWhile = 'dropWhile', shift = 'pop', remove = 'pull',
  rmRange = 'removeRange', chop = 'removeRange', sub = 'slice', head = 'first', take = 'first',
  skip = 'last', tail = 'rest', without = 'difference', diff = 'difference',
  symdiff = 'symmetricDifference', xor = 'symmetricDifference', uniq = 'unique',
  isuniq = 'isunique', transpose = 'zip', part = 'partition', perm = 'permutation',
  mirror = 'invert', join = 'concat', cache = 'memoize', juxt = 'juxtapose', uid = 'uniqueId',
  iter = 'iterator', methods = 'functions', choose = 'pick', drop = 'omit',
  defaults = 'template', compare = 'isEqual',
}
for alias, name in pairs(aliases) do M[alias] = M[name] end

-- Chaining: _(value) or _.chain(value) wraps value; each library call on the wrapper returns a
-- new wrapper of its result, until :value().
local Wrapper = {}
Wrapper.__index = Wrapper
local function wrap(value) return setmetatable({ _wrapped = value }, Wrapper) end
function M.chain(value) return wrap(value) end
function Wrapper:value() return self._wrapped end
for name, fn in pairs(M) do
  Wrapper[name] = function(self, ...) return wrap(fn(self._wrapped, ...)) end
end
-- _.value(wrapper) is wrapper:value() (defined after the loop, which would wrap its result).
function M.value(wrapper) return wrapper._wrapped end

-- Copies the library into context (_G by default), keeping existing names when noConflict.
function M.import(context, noConflict)
  context = context or _G
  for name, fn in pairs(M) do
    if not (noConflict and context[name] ~= nil) then context[name] = fn end
  end
  return context
end

return setmetatable(M, { __call = function(_, value) return wrap(value) end })
