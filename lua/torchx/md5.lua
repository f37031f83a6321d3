-- torch.md5: MD5 digests of Lua strings (RFC 1321), as torchx's: sumhexa(s) gives 32 hex
-- digits, sum(s) the 16 raw bytes. paths.indexdir names its cache file with it.
local bit = require 'bit'
local band, bor, bxor, bnot, rol, tobit = bit.band, bit.bor, bit.bxor, bit.bnot, bit.rol, bit.tobit

-- per step: the sine-derived constant and the left rotation
local K, S = {}, {}
local rotations = { { 7, 12, 17, 22 }, { 5, 9, 14, 20 }, { 4, 11, 16, 23 }, { 6, 10, 15, 21 } }
for i = 0, 63 do
  K[i] = tobit(math.floor(math.abs(math.sin(i + 1)) * 2 ^ 32))
  S[i] = rotations[math.floor(i / 16) + 1][i % 4 + 1]
end

local function littleEndianWord(s, at)
  local b1, b2, b3, b4 = s:byte(at, at + 3)
  return tobit(b1 + b2 * 0x100 + b3 * 0x10000 + b4 * 0x1000000)
end

-- one 64-byte block of s starting at offset into the state h[0..3]
local function digestBlock(h, s, offset)
  local M = {}
  for j = 0, 15 do M[j] = littleEndianWord(s, offset + 4 * j) end
  local a, b, c, d = h[0], h[1], h[2], h[3]
  for i = 0, 63 do
    local f, g
    if i < 16 then f, g = bor(band(b, c), band(bnot(b), d)), i
    elseif i < 32 then f, g = bor(band(d, b), band(bnot(d), c)), (5 * i + 1) % 16
    elseif i < 48 then f, g = bxor(b, c, d), (3 * i + 5) % 16
    else f, g = bxor(c, bor(b, bnot(d))), (7 * i) % 16 end
    a, b, c, d = d, tobit(b + rol(tobit(a + f + K[i] + M[g]), S[i])), b, c
  end
  h[0], h[1], h[2], h[3] = tobit(h[0] + a), tobit(h[1] + b), tobit(h[2] + c), tobit(h[3] + d)
end

local function digestWords(s)
  local bits = #s * 8
  local lengthBytes = {}
  for i = 1, 8 do lengthBytes[i] = math.floor(bits / 2 ^ (8 * (i - 1))) % 256 end
  local padded = s .. '\128' .. string.rep('\0', (55 - #s) % 64) .. string.char(unpack(lengthBytes))
  local h = { [0] = tobit(0x67452301), tobit(0xefcdab89), tobit(0x98badcfe), tobit(0x10325476) }
  for offset = 1, #padded, 64 do digestBlock(h, padded, offset) end
  return h
end

torch.md5 = {}

function torch.md5.sumhexa(s)
  local h = digestWords(s)
  return bit.tohex(bit.bswap(h[0])) .. bit.tohex(bit.bswap(h[1])) .. bit.tohex(bit.bswap(h[2]))
    .. bit.tohex(bit.bswap(h[3]))
end

function torch.md5.sum(s)
  return (torch.md5.sumhexa(s):gsub('%x%x', function(byte) return string.char(tonumber(byte, 16)) end))
end

return torch.md5
