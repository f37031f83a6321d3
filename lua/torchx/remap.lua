-- torch.remap(t1, t2, f[, p1, p2]): calls f(x, y) on each pair of tensors at the same place in the
-- nested tables t1 and t2; a missing side gets tables, and tensors new'd from p1 (for t1),
-- p2 or p1 (for t2), or the other side's tensor. Returns t1, t2.
function torch.remap(t1, t2, f, p1, p2)
  if type(f) ~= 'function' then
    error('torch.remap: expecting a function at arg 3, got ' .. torch.type(f), 2)
  end
  if type(t1) == 'table' and not torch.typename(t1) then
    t2 = t2 or {}
    for i = 1, #t1 do t1[i], t2[i] = torch.remap(t1[i], t2[i], f, p1, p2) end
  elseif type(t2) == 'table' and not torch.typename(t2) then
    t1 = t1 or {}
    for i = 1, #t2 do t1[i], t2[i] = torch.remap(t1[i], t2[i], f, p1, p2) end
  elseif torch.isTensor(t1) or torch.isTensor(t2) then
    if not t1 then
      t1 = (p1 or t2).new()
    elseif not t2 then
      t2 = (p2 or p1 or t1).new()
    end
    f(t1, t2)
  else
    error('torch.remap: expecting nested tensors or tables, got ' .. torch.type(t1) .. ' and '
      .. torch.type(t2), 2)
  end
  return t1, t2
end
