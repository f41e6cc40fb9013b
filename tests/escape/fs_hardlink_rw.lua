-- expect: ok
-- mounts: /work=work:rw
-- Attack: a file outside the rw mount is hard-linked into it; writing the link would write the
-- file outside. A file with more than one link is read-only to the guest (the driver checks
-- afterwards that the outside file still reads "original"). Plain writes in the mount work.
local f, msg, errno = io.open("/work/hard", "w")
assert(f == nil and msg:find("hard links", 1, true) and errno == 13, tostring(msg))
assert(io.open("/work/hard", "a") == nil and io.open("/work/hard", "r+") == nil)
assert(io.open("/work/hard"):read("a") == "original\n")
assert(fs.stat("/work/hard").writable == false)
local w = assert(io.open("/work/new.txt", "w"))
w:write("written by the guest\n")
w:close()
assert(io.open("/work/new.txt"):read("a") == "written by the guest\n")
print("hard link read-only")
