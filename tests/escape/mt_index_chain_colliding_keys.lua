-- expect: time_limit
-- limits: memory=64M instructions=0 time=1s
-- stdout-contains: chain would be 17 tables long
-- Attack: an __index chain of tables whose integer keys all collide into one bucket, looked
-- up with one more colliding key: every link walks its whole bucket inside one instruction
-- (issue 9, B.2: 7.5 s for a 3 s limit). The chain is refused at 17 tables, and a chain of
-- distinct tables walks each bucket once, so a lookup costs at most the heap it holds.
local size = 1024 -- nodes per table; keys k * (size - 1) all share one main position
local function colliding()
  local t = {}
  for k = 1, size do t[k * (size - 1)] = true end
  return t
end
local chain = colliding()
for _ = 2, 2000 do
  local ok, longer = pcall(setmetatable, colliding(), {__index = chain})
  if not ok then print(longer) break end
  chain = longer
end
local miss = (size + 1) * (size - 1)
local n = 0
while true do
  if chain[miss] then n = n + 1 end
end
