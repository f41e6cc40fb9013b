-- expect: ok
-- Attack: use io/os, if present at all, against the host: read /etc/passwd, the host's stdin and
-- environment, run a shell, write and remove files, see the host's /tmp (THREATS E1, E2).
local function contains(s, sub)
  for i = 1, #s - #sub + 1 do
    if s:sub(i, i + #sub - 1) == sub then return true end
  end
  return false
end
local function try(label, f, ...)
  if type(f) ~= "function" then return nil end
  local ok, a, b = pcall(f, ...)
  if ok then return a, b end
  return nil
end
if io then
  local fh = try("io.open", io.open, "/etc/passwd", "r")
  if fh then
    local data = try("read", fh.read, fh, "a")
    if type(data) == "string" and contains(data, "root:") then
      print("ESCAPED: read the host's /etc/passwd")
    end
  end
  local it = try("io.lines", io.lines, "/etc/hostname")
  if type(it) == "function" and try("lines", it) then print("ESCAPED: io.lines read a host file") end
  local line = try("io.read", io.read, "l")
  if type(line) == "string" and contains(line, "HOST-STDIN-SECRET") then
    print("ESCAPED: io.read returned the host's stdin")
  end
  local p = try("io.popen", io.popen, "echo ESCAPED-from-popen")
  if p then print("ESCAPED: io.popen returned a handle") end
  local tf = try("io.tmpfile", io.tmpfile)
  if type(tf) == "userdata" then print("NOTE: io.tmpfile returned a file") end
end
if os then
  for _, name in ipairs({"HOME", "PATH", "USER", "PWD"}) do
    local v = try("os.getenv", os.getenv, name)
    if type(v) == "string" and #v > 0 then print("ESCAPED: os.getenv(" .. name .. ") leaked") end
  end
  local r = try("os.execute", os.execute, "echo ESCAPED-from-os.execute")
  if r then print("ESCAPED: os.execute ran a command") end
  local shell = try("os.execute", os.execute)
  if shell then print("ESCAPED: os.execute reports a shell") end
  -- /tmp is the sandbox's memory /tmp: os.tmpname and io.open may create files there, but
  -- the host's /tmp (never empty while tests run: they make their trees in it) is not what
  -- the guest sees. Whatever the guest lists there, it made itself.
  local made = {}
  local name = try("os.tmpname", os.tmpname)
  if type(name) == "string" then made[name:match("[^/]+$")] = true end
  local probe = "/tmp/mbx-escape-probe"
  local w = io and try("io.open", io.open, probe, "w")
  if w then made["mbx-escape-probe2"] = true; w:write("x"); w:close() end
  try("os.rename", os.rename, probe, probe .. "2")
  if fs then
    local list = try("fs.list", fs.list, "/tmp") or {}
    for _, e in ipairs(list) do
      if not made[e.name] then print("ESCAPED: the host's /tmp is visible: " .. e.name) end
    end
  end
  if type(name) == "string" then try("os.remove", os.remove, name) end
  try("os.remove", os.remove, probe .. "2")
  -- Outside /tmp nothing is writable: "/" is the sandbox's read-only root.
  if io and try("io.open", io.open, "/mbx-escape-root", "w") then
    print("ESCAPED: io.open created a file at the root")
  end
  if try("os.remove", os.remove, "/etc/hostname") then print("ESCAPED: os.remove on the host") end
  if try("os.rename", os.rename, "/etc/hostname", "/tmp/h") then
    print("ESCAPED: os.rename on the host")
  end
  local loc = try("os.setlocale", os.setlocale, "")
  if type(loc) == "string" then print("NOTE: os.setlocale returned " .. loc) end
end
