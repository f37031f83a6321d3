-- torch.Tensor and torch.Storage follow the default tensor type (Double, as in torch7).
local torch = require 'torch.env'
local check = require 'torch.core.check'

local default = 'torch.DoubleTensor'

function torch.setdefaulttensortype(name)
  local mt = torch.getmetatable(name)
  if not mt or not rawget(mt, '__tensor') or rawget(mt, '__dtype').integer then
    check.error('setdefaulttensortype: expected a floating-point tensor type such as torch.FloatTensor, got ' .. tostring(name))
  end
  default = name
  local short = name:match('^torch%.(%a+)Tensor$')
  torch.Tensor = torch[short .. 'Tensor']
  torch.Storage = torch[short .. 'Storage']
end

function torch.getdefaulttensortype() return default end

torch.setdefaulttensortype('torch.DoubleTensor')
