-- expect: time_limit
-- limits: memory=64M instructions=0 time=1s
-- stdout-contains: chain would be 17 tables long
-- Attack: an __index chain of tables all keyed by one 8 MiB string, looked up with an
-- equal-length key that differs at the last byte: Lua follows every link inside one
-- instruction and each is a full memcmp (issue 9, B.2: 88 s for a 3 s limit with 2000
-- links). setmetatable refuses the 17th link, so a lookup costs at most 17 compares and the
-- loop meets its deadline.
local k = "k"
for _ = 1, 23 do k = k .. k end -- 8 MiB
local hit, miss = k .. "1", k .. "2"
k = nil
local chain = {[hit] = true}
for _ = 2, 2000 do
  local ok, longer = pcall(setmetatable, {[hit] = true}, {__index = chain})
  if not ok then print(longer) break end
  chain = longer
end
local n = 0
while true do
  if chain[miss] then n = n + 1 end
end
