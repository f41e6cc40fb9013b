-- expect: ok
-- Attack: reach host capabilities (io, os, debug, package, require, dofile, loadfile, loadlib...)
-- through _G, _ENV, load with and without an env, and the package/registry tables (THREATS E1-E5).
local dangerous = {
  "loadstring", "module", "newproxy", "setfenv", "getfenv",
}
local dangerous_fields = {
  io = {"popen", "open", "lines", "input", "output", "close", "tmpfile", "read"},
  os = {"execute", "exit", "getenv", "remove", "rename", "tmpname", "setlocale"},
}
local function probe(where, env)
  if type(env) ~= "table" then return end
  for _, name in ipairs(dangerous) do
    if rawget(env, name) ~= nil then print("ESCAPED: " .. where .. "." .. name .. " exists") end
  end
  for lib, fields in pairs(dangerous_fields) do
    local t = rawget(env, lib)
    if type(t) == "table" then
      for _, f in ipairs(fields) do
        -- A virtual io/os may exist; its functions must not be the host's (see reach_host_io).
        if t[f] ~= nil then print("NOTE: " .. where .. "." .. lib .. "." .. f .. " exists") end
      end
    end
  end
  -- package exists (stdlib/package.c): loadlib only refuses, and the loaded libraries are
  -- the sandbox's own tables.
  local pkg = rawget(env, "package")
  if type(pkg) == "table" then
    if pkg.loadlib and pcall(pkg.loadlib, "/lib/x86_64-linux-gnu/libc.so.6", "system") then
      print("ESCAPED: package.loadlib loaded a C library via " .. where)
    end
    if type(pkg.loaded) == "table" then
      for _, lib in ipairs({"io", "os", "string", "debug"}) do
        if pkg.loaded[lib] ~= nil and pkg.loaded[lib] ~= rawget(_G, lib) then
          print("ESCAPED: package.loaded." .. lib .. " is not the sandbox's via " .. where)
        end
      end
    end
    if pkg.cpath ~= nil and pkg.cpath ~= "" then print("ESCAPED: a C path via " .. where) end
  end
end

probe("_G", _G)
probe("_ENV", _ENV)
probe("load(return _G)", load("return _G")())
probe("load(return _ENV)", load("return _ENV")())
probe("load(return _G, t, nil env)", select(2, pcall(function() return load("return _G", "c", "t", nil)() end)))
probe("load with env {}", load("return _G", "c", "t", {})())
probe("load with env {} via _ENV", load("return _ENV", "c", "t", {})())
-- Functions whose upvalues or environments might still point at the real globals.
for _, f in ipairs({print, tostring, pcall, load, setmetatable, getmetatable}) do
  if type(f) ~= "function" then error("a basic function is missing") end
end
local g = load("local t = {} for k in pairs(_ENV) do t[#t + 1] = k end return t")()
for _, k in ipairs(g) do
  if k == "loadstring" or k == "setfenv" or k == "newproxy" then
    print("ESCAPED: load's default env holds " .. k)
  end
end
-- The real globals may hide behind a metatable on the sandbox's globals.
local gmt = getmetatable(_G)
if type(gmt) == "table" and type(rawget(gmt, "__index")) == "table" then
  probe("getmetatable(_G).__index", gmt.__index)
end
-- require exists, but serves only the sandbox's own tables and files of its view (see
-- require_escape).
for _, name in ipairs({"ffi", "io.popen"}) do
  if pcall(require, name) then print("ESCAPED: require('" .. name .. "') returned a module") end
end
-- Library tables must not lead anywhere else either.
for _, lib in ipairs({"string", "table", "math", "utf8", "coroutine", "os", "io", "json"}) do
  local t = _G[lib]
  if type(t) ~= "table" then error("library " .. lib .. " is missing") end
  for k, v in pairs(t) do
    if type(v) == "table" and v ~= t then probe(lib .. "." .. k, v) end
  end
end
-- debug is the curated subset (stdlib/debug.c): the stock functions that reach the VM's
-- internals raise.
for _, f in ipairs({"sethook", "gethook", "getregistry", "getuservalue", "setuservalue",
                    "setcstacklimit", "debug"}) do
  local ok, r = pcall(debug[f], function() end, 1, 1)
  if ok then print("ESCAPED: debug." .. f .. " worked: " .. tostring(r)) end
end
