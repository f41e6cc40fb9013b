-- expect: ok
-- limits: fs-tmp=64k fs-files=20
-- Attack: fill the memory /tmp past its size, and create more files than the quota allows.
-- Writes fail with ENOSPC (28) once /tmp is full, creates with EDQUOT (122); nothing grows
-- past the quota, and removing files gives the room back.
local f = assert(io.open("/tmp/fill", "w"))
local chunk, written = string.rep("x", 4096), 0
while true do
  local ok, msg, errno = f:write(chunk)
  if not ok then
    assert(errno == 28, tostring(msg))
    break
  end
  written = written + #chunk
  assert(written <= 64 * 1024, "wrote past the tmp quota")
end
f:close()
assert(written == 64 * 1024 - 4096 or written == 64 * 1024, written)
assert(fs.stat("/tmp/fill").size <= 64 * 1024)
local made, last_errno = 1, nil
for i = 1, 100 do
  local h, msg, errno = io.open("/tmp/f" .. i, "w")
  if not h then last_errno = errno break end
  h:close()
  made = made + 1
end
assert(made == 20 and last_errno == 122, made .. " " .. tostring(last_errno))
local ok, msg, errno = fs.mkdir("/tmp/d")
assert(not ok and errno == 122)
assert(os.remove("/tmp/fill"))
assert(io.open("/tmp/again", "w")) -- the room and the file slot are back
print("quotas hold")
