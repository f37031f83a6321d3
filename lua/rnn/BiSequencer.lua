-- nn.BiSequencer(forward[, backward, merge]): a bidirectional sequencer. forward runs over the
-- sequence, backward (a reset clone of forward by default) over the reversed sequence, and merge
-- (default JoinTable(1, 1); a number n means JoinTable(1, n)) combines their outputs at each step.
local BiSequencer, parent = torch.class('nn.BiSequencer', 'nn.AbstractSequencer')

-- Shared with BiSequencerLM: forward/backward/merge modules from the constructor's arguments.
function BiSequencer.setDirections(self, forward, backward, merge)
  local name = torch.type(self)
  if not torch.isTypeOf(forward, 'nn.Module') then
    error(name .. ": expecting nn.Module instance at arg 1, got " .. torch.type(forward))
  end
  self.forwardModule = forward
  self.backwardModule = backward
  if not backward then
    self.backwardModule = forward:clone()
    self.backwardModule:reset()
  elseif not torch.isTypeOf(backward, 'nn.Module') then
    error(name .. ": expecting nn.Module instance at arg 2, got " .. torch.type(backward))
  end
  if merge == nil or torch.type(merge) == 'number' then
    self.mergeModule = nn.JoinTable(1, merge or 1)
  elseif torch.isTypeOf(merge, 'nn.Module') then
    self.mergeModule = merge
  else
    error(name .. ": expecting nn.Module or number instance at arg 3, got " .. torch.type(merge))
  end
end

-- sequencer between two ReverseTables: runs on the reversed sequence, outputs in forward order.
function BiSequencer.reversed(sequencer)
  return nn.Sequential():add(nn.ReverseTable()):add(sequencer):add(nn.ReverseTable())
end

function BiSequencer:__init(forward, backward, merge)
  self:setDirections(forward, backward, merge)
  self.fwdSeq = nn.Sequencer(self.forwardModule)
  self.bwdSeq = nn.Sequencer(self.backwardModule)
  self.mergeSeq = nn.Sequencer(self.mergeModule)
  local brnn = nn.Sequential()
    :add(nn.ConcatTable():add(self.fwdSeq):add(BiSequencer.reversed(self.bwdSeq)))
    :add(nn.ZipTable())
    :add(self.mergeSeq)
  parent.__init(self)
  self.output = {}
  self.gradInput = {}
  self.module = brnn
  self.modules[1] = brnn
end

nn.Decorator.decorate(BiSequencer)
