-- expect: ok
-- limits: open-files=64
-- Attack: open thousands of files without closing them (the handles are host fds and host
-- memory). Past the open_files quota io.open answers EMFILE (24); closed handles are reused,
-- so thousands of open/close pairs work; a closed or stale handle reaches nothing.
local keep, refused = {}, 0
for i = 1, 5000 do
  local f, msg, errno = io.open("/tmp/h", "a")
  if f then keep[#keep + 1] = f else assert(errno == 24, tostring(msg)); refused = refused + 1 end
end
assert(#keep == 64 and refused == 5000 - 64, #keep)
for _, f in ipairs(keep) do f:close() end
for i = 1, 5000 do
  local f = assert(io.open("/tmp/h", "a"))
  f:write("x")
  f:close()
end
assert(fs.stat("/tmp/h").size == 5000)
local ok, e = pcall(keep[1].write, keep[1], "y")
assert(not ok and e:find("closed file", 1, true))
print("handles bounded")
