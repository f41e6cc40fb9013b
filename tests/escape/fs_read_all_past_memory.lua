-- expect: memory_limit
-- limits: memory=1M fs-tmp=8M fs-bytes=8M
-- Attack: write a 4 MiB file to /tmp in small pieces (each fits the 1 MiB heap), then read it
-- back in one read("a"). The read is refused before anything is allocated for it: the run
-- ends on its memory limit, never with a host allocation of the file's size.
local f = assert(io.open("/tmp/big", "w"))
local piece = string.rep("y", 64 * 1024)
for i = 1, 64 do assert(f:write(piece)) end
f:close()
piece = nil
local data = io.open("/tmp/big"):read("a")
print("ESCAPED: read " .. #data .. " bytes past the memory limit")
