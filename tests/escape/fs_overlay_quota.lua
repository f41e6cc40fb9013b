-- expect: ok
-- mounts: /data=tree:overlay
-- limits: fs-bytes=64k fs-files=20
-- Attack: grow an overlay past the write quota and create (or white out) more entries than
-- the files quota allows. Writes fail with EDQUOT (122); whiteouts count as entries, so a
-- remove past the quota is refused too; the host stays untouched (driver check).
local f = assert(io.open("/data/x.txt", "a"))
local chunk, written = string.rep("x", 4096), 0
while true do
  local ok, msg, errno = f:write(chunk)
  if not ok then assert(errno == 122, tostring(msg)); break end
  written = written + #chunk
  assert(written <= 64 * 1024, "wrote past the quota")
end
f:close()
local made, last
for i = 1, 100 do
  local g, msg, errno = io.open("/data/n" .. i, "w")
  if not g then last = errno; break end
  g:close()
  made = i
end
assert(last == 122 and made < 20, tostring(made))
local ok, msg, errno = os.remove("/data/sub/y.txt")
assert(not ok and errno == 122, tostring(msg))
print("quota held")
