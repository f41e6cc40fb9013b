-- expect: ok
-- mounts: /data=tree:overlay
-- Attack: change an overlay mount every way the API allows (write, append, truncate, create,
-- mkdir, remove a file and a directory, rename over a file) and check the guest sees its
-- edits; the driver checks afterwards that the host tree is byte for byte and name for name
-- what it was (THREATS.md: the filesystem view).
local function put(path, mode, text)
  local f = assert(io.open(path, mode)); assert(f:write(text)); f:close()
end
local function get(path)
  local f = assert(io.open(path)); local t = f:read("a"); f:close(); return t
end
put("/data/x.txt", "a", "appended\n")
assert(get("/data/x.txt") == "inside\nappended\n")
put("/data/sub/y.txt", "w", "")
assert(get("/data/sub/y.txt") == "")
put("/data/new.txt", "w", "created\n")
assert(fs.mkdir("/data/made"))
put("/data/made/deep.txt", "w", "deep\n")
assert(os.rename("/data/new.txt", "/data/x.txt")) -- over a host file
assert(get("/data/x.txt") == "created\n")
assert(io.open("/data/new.txt") == nil)
assert(os.remove("/data/sub/y.txt"))
assert(fs.remove("/data/sub"))
assert(not fs.exists("/data/sub/y.txt"))
-- A directory rename answers EXDEV (18), as overlayfs does.
local ok, msg, errno = os.rename("/data/made", "/data/made2")
assert(not ok and errno == 18, tostring(msg))
-- r+ and seek edit the sandbox's copy in place.
local f = assert(io.open("/data/x.txt", "r+"))
assert(f:seek("set", 2)); assert(f:write("XX")); f:close()
assert(get("/data/x.txt") == "crXXted\n")
print("overlay edits stayed in the sandbox")
