-- The algorithm choices of cudnn.torch's convolutions (fastest, setMode, resetMode): kept on
-- the module, as there, and without effect here (one algorithm per layer).
return function(class)
  function class:fastest(mode)
    if mode == nil then mode = true end
    self.fastest_mode = mode
    return self
  end
  function class:setMode(fmode, bdmode, bwmode)
    if fmode ~= nil then self.fmode = fmode end
    if bdmode ~= nil then self.bdmode = bdmode end
    if bwmode ~= nil then self.bwmode = bwmode end
    return self
  end
  function class:resetMode()
    self.fmode, self.bdmode, self.bwmode = nil, nil, nil
    return self
  end
  function class:clearDesc() end
end
