-- What torch-hdf5's own tests use: a scratch folder, and a deep comparison of nested tensors.
hdf5._testUtils = {}

function hdf5._testUtils.withTmpDir(func)
  local dir = os.tmpname()
  os.remove(dir)
  assert(paths.mkdir(dir), 'cannot create ' .. dir)
  local ok, err = pcall(func, dir)
  paths.rmall(dir, 'yes')
  if not ok then error(err, 0) end
end

-- true, or false, why and the two values that differ
function hdf5._testUtils.deepAlmostEq(a, b, epsilon)
  local typeA, typeB = torch.typename(a) or type(a), torch.typename(b) or type(b)
  if typeA ~= typeB then return false, 'type mismatch', a, b end
  if typeA == 'table' then
    for k in pairs(a) do
      if b[k] == nil then return false, 'mismatching table keys', a, b end
    end
    for k, v in pairs(b) do
      if a[k] == nil then return false, 'mismatching table keys', a, b end
      local same, why, x, y = hdf5._testUtils.deepAlmostEq(a[k], v, epsilon)
      if not same then return false, why, x, y end
    end
  elseif typeA:sub(-6) == 'Tensor' then
    local diff = a:double():add(-1, b:double()):abs():sum()
    if diff > epsilon then return false, 'tensor values differ by ' .. diff .. ' > ' .. epsilon, a, b end
  end
  return true
end
