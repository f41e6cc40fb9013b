-- expect: ok
-- mounts: /data=tree:ro
-- Attack: probe the host outside the view. Paths that exist on the host (/etc/passwd,
-- /proc/self/status, /tmp, which the sandbox has as its own memory /tmp) and paths that do not
-- must answer alike: the same errno and message apart from the path, for open, stat, list,
-- remove and rename. Lexical tricks ("..", "//", ".") end at the same place.
local function probe(path)
  local _, m1, e1 = io.open(path)
  local _, m2, e2 = fs.stat(path)
  local _, m3, e3 = os.remove(path)
  local r = {tostring(e1), tostring(e2), tostring(e3), m1 and m1:sub(#path + 1) or "",
             m2 and m2:sub(#path + 1) or "", m3 and m3:sub(#path + 1) or ""}
  return table.concat(r, "|")
end
local reference = probe("/no/such/path/at/all")
for _, path in ipairs({"/etc/passwd", "/etc", "/proc/self/status", "/proc", "/home",
                       "/tmp/../etc/passwd", "//etc//passwd", "/./etc/./passwd",
                       "/data/../etc/passwd", "/data/../../../../etc/shadow", "/dev/null",
                       "/usr/bin/lua5.4", "/root"}) do
  local answer = probe(path)
  if answer ~= reference then print("DETECTED " .. path .. ": " .. answer .. " vs " .. reference) end
end
assert(reference:find("not in the sandbox view", 1, true), reference)
local ok, e = pcall(io.lines, "/etc/passwd")
assert(not ok and e:find("not in the sandbox view", 1, true))
-- The root lists only what the policy grants.
local names = {}
for _, ent in ipairs(fs.list("/")) do names[#names + 1] = ent.name end
table.sort(names)
assert(table.concat(names, " ") == "data tmp", table.concat(names, " "))
print("outside the view: one answer")
