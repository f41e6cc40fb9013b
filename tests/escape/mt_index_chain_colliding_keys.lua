-- expect: time_limit
-- limits: memory=64M instructions=0 time=3s
-- stdout-contains: chain of 512 tables
-- Attack: an __index chain of tables whose integer keys all collide into one bucket, looked
-- up with one more colliding key: every link walks its whole bucket inside one instruction
-- (issue 9, B.2: 7.5 s for a 3 s limit). The chain is accepted (issue 26): past 16 links it
-- is walked in C with a full budget check per link, so the loop meets its deadline.
local size = 256 -- nodes per table; keys k * (size - 1) all share one main position
local function colliding()
  local t = {}
  for k = 1, size do t[k * (size - 1)] = true end
  return t
end
local chain = colliding()
for _ = 2, 512 do
  chain = setmetatable(colliding(), {__index = chain})
end
print("chain of 512 tables")
local miss = (size + 1) * (size - 1)
local n = 0
while true do
  if chain[miss] then n = n + 1 end
end
