-- expect: ok
-- mounts: /data=tree:overlay
-- Attack: leave an overlay mount through every planted link (absolute, relative, a chain, a
-- directory link, "..", /proc/self/root and cwd, a device link), for reading and for writing
-- (a write copies the file up first: the copy must not follow the link either), and by
-- renaming the links. Nothing outside is read (its marker would show) or written (the
-- driver checks outside/ and the tree afterwards).
local links = {"abs_link", "rel_link", "chain1", "dir_link/secret", "dotdot_link",
               "proc_root/etc/passwd", "proc_cwd/x", "dev_link"}
for _, l in ipairs(links) do
  for _, mode in ipairs({"r", "w", "a", "r+"}) do
    local f, msg = io.open("/data/" .. l, mode)
    if f then
      local t = f:read("a")
      assert(not (t and t:find("ESCAPED")), "read outside through " .. l)
      error("opened " .. l .. " with mode " .. mode)
    end
    assert(msg and not msg:find("/tmp/mbx_escape"), "a host path leaked: " .. tostring(msg))
  end
  local list = fs.list("/data/" .. l)
  assert(list == nil or #list == 0 or l == "dir_link/secret", "listed through " .. l)
end
-- Renaming a link is refused too (the source cannot be opened as a regular file).
for _, l in ipairs({"abs_link", "dir_link"}) do
  local ok = os.rename("/data/" .. l, "/data/renamed_" .. l)
  assert(not ok, "renamed " .. l)
end
-- A link that stays inside the mount may be followed (openat2 allows it), and a write
-- through it edits the sandbox's copy only: the driver checks tree/sub/y.txt afterwards.
local f = io.open("/data/inside_link", "w")
if f then f:write("overwritten"); f:close() end
print("no way out of the overlay")
