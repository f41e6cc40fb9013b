-- expect: ok
-- stdout-contains: table: 0x
-- Attack: tostring/print/%p of tables reveal heap addresses, an ASLR bypass for memory bugs
-- (THREATS E10, 8.13). Checks the keyed-hash form: `table: 0x<hex>`, distinct per object, stable
-- per object, and not the adjacent addresses a real allocator hands out.
local function hexval(s, prefix)
  if s:sub(1, #prefix) ~= prefix then error("unexpected tostring form: " .. s) end
  local hex = s:sub(#prefix + 1)
  if #hex == 0 or #hex > 16 then error("unexpected tostring form: " .. s) end
  local v = 0
  for i = 1, #hex do
    local c = hex:byte(i)
    local d
    if c >= 48 and c <= 57 then d = c - 48
    elseif c >= 97 and c <= 102 then d = c - 87
    elseif c >= 65 and c <= 70 then d = c - 55
    else error("unexpected tostring form: " .. s) end
    v = (v << 4) | d
  end
  return v
end
local objs = {}
for i = 1, 16 do objs[i] = {} end
local vals = {}
for i, t in ipairs(objs) do
  local s = tostring(t)
  if tostring(t) ~= s then error("tostring of one table is not stable") end
  vals[i] = hexval(s, "table: 0x")
end
local close = 0
for i = 1, #vals do
  for j = i + 1, #vals do
    if vals[i] == vals[j] then error("two tables print the same") end
    local d = vals[i] - vals[j]
    if d < 0 then d = -d end
    if d < 4096 then close = close + 1 end
  end
end
if close > 2 then print("ESCAPED: consecutive tables print as nearby (real heap) addresses") end
hexval(tostring(function() end), "function: 0x")
hexval(tostring(coroutine.create(function() end)), "thread: 0x")
local ok, p = pcall(string.format, "%p", objs[1])
if ok and p ~= tostring(objs[1]):sub(8) and p ~= tostring(objs[1]) then
  print("ESCAPED: %p reveals something other than the keyed hash: " .. tostring(p))
end
print({})
