-- expect: time_limit
-- limits: memory=64M instructions=0 time=3s
-- stdout-contains: chain of 2000 links
-- Attack: an __index chain of tables all keyed by one 8 MiB string, looked up with an
-- equal-length key that differs at the last byte: stock Lua follows every link inside one
-- instruction and each is a full memcmp (issue 9, B.2: 88 s for a 3 s limit with 2000
-- links). The chain is accepted (issue 26): the VM follows at most 16 links, the rest are
-- walked in C, charged per link by the key's length with a full budget check, so the loop
-- meets its deadline.
local k = "k"
for _ = 1, 23 do k = k .. k end -- 8 MiB
local hit, miss = k .. "1", k .. "2"
k = nil
local chain = {[hit] = true}
for _ = 2, 2000 do
  chain = setmetatable({[hit] = true}, {__index = chain})
end
print("chain of 2000 links")
local n = 0
while true do
  if chain[miss] then n = n + 1 end
end
