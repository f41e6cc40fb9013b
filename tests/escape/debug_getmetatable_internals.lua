-- expect: ok
-- Attack: reach moonbox's internal metatables through debug.getmetatable (the string
-- metatable and its library table, the FILE* methods, the JSON array marker, setmetatable's
-- clones) and change them; or give a string, number or function a metatable.
-- Past a guest's own __metatable it returns that guest's table (as stock), never the clone.
local locked = {__metatable = "locked"}
local values = {"", io.stdout, io.stderr, json.array(), json.null, 1, print, true,
                setmetatable({}, {__index = {}}), setmetatable({}, locked),
                coroutine.create(print)}
for i, v in ipairs(values) do
  local a, b = getmetatable(v), debug.getmetatable(v)
  if i == 10 then a = locked end
  if a ~= b then print("ESCAPED: debug.getmetatable differs for value " .. i .. ": " .. tostring(b)) end
  if type(b) == "table" and i <= 5 then
    pcall(function() b.__index = function() return "ESCAPED" end end)
    pcall(function() rawset(b, "__gc", true) end)
  end
end
for _, v in ipairs({"", 1, print, true, coroutine.create(print), json.null}) do
  if pcall(debug.setmetatable, v, {__index = function() return "ESCAPED" end}) then
    print("ESCAPED: debug.setmetatable on a " .. type(v))
  end
end
print(("x"):upper(), io.stdout:write(""))
local t = json.array()
print(json.encode(t))
