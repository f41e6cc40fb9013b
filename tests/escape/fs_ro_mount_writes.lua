-- expect: ok
-- mounts: /data=tree:ro
-- Attack: modify a read-only mount every way the API allows: write, append, r+, create,
-- truncate, remove, rename, mkdir. Each answers EROFS (30), and the driver checks afterwards
-- that the host files are byte for byte what they were.
local function refused(ok, msg, errno)
  assert(not ok and errno == 30, tostring(msg))
end
for _, mode in ipairs({"w", "a", "r+", "w+", "a+", "wb"}) do
  refused(io.open("/data/x.txt", mode))
  refused(io.open("/data/created.txt", mode))
end
refused(os.remove("/data/x.txt"))
refused(os.remove("/data/sub/y.txt"))
refused(os.rename("/data/x.txt", "/data/z.txt"))
refused(fs.mkdir("/data/newdir"))
refused(fs.remove("/data/sub"))
-- Renaming out of the mount into /tmp is a cross-mount rename.
local ok, msg, errno = os.rename("/data/x.txt", "/tmp/x.txt")
assert(not ok and errno == 18, tostring(msg))
assert(io.open("/data/x.txt"):read("a") == "inside\n")
print("read-only mount untouched")
