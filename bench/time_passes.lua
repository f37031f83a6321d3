-- dofile'd by the per-pass benches (two_threads.lua, serial_passes.lua): wraps module m's own
-- passes (those its class defines, not nn.Module's defaults) in timed(key, f), keyed
-- 'i type pass'. A wrapped pass is an instance method, which keeps m out of a plan.
return function(timed, i, m)
  for _, pass in ipairs { 'updateOutput', 'updateGradInput', 'accGradParameters' } do
    if rawget(m, pass) == nil and m[pass] ~= nn.Module[pass] then
      m[pass] = timed(('%02d %s %s'):format(i, torch.type(m):gsub('^nn%.', ''), pass), m[pass])
    end
  end
end
