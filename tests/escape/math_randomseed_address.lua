-- expect: ok
-- Attack: stock math.randomseed() seeds from time(NULL) and the lua_State's address and
-- returns both: a heap address for any memory bug's exploit (THREATS E10, P1 item 13).
local function looks_like_address(v)
  return math.type(v) == "integer" and v >= 0x500000000000 and v < 0x800000000000
end
for _ = 1, 8 do
  local a, b = math.randomseed()
  if looks_like_address(a) or looks_like_address(b) then
    print("ESCAPED: math.randomseed() returned an address-like value " .. tostring(b))
  end
end
-- Explicit seeds still make the generator reproducible.
math.randomseed(42)
local x = math.random(1 << 40)
math.randomseed(42)
assert(x == math.random(1 << 40))
