-- The elementwise maximum of a table of tensors.
local tables = require 'nn.util.tables'
local CMaxTable, parent = torch.class('nn.CMaxTable', 'nn.Module')

function CMaxTable:__init()
  parent.__init(self)
  self.gradInput = {}
  self.maxIdx = torch.Tensor()
end

tables.extremum(CMaxTable, '>', 'maxIdx')
