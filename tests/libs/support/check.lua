-- tests/libs/support/check.lua -- what every tests/libs/<lib>.lua prints with: check(label, f,
-- ...) runs f and prints one line, its label and its results (tables with sorted keys) or the
-- error it raised, with addresses and the library folder (root) masked, so that stock lua5.4
-- and moonbox print the same bytes. Each script loads it from its own folder:
--   local check = assert(loadfile("support/check.lua"))(root)
local root = ...
local function order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end
local function ser(v, seen)
  if type(v) == "string" then return (string.format("%q", v):gsub("\\\n", "\\n")) end
  if type(v) ~= "table" then return tostring(v) end
  seen = seen or {}
  if seen[v] then return "<cycle>" end
  seen[v] = true
  local keys, parts = {}, {}
  for k in next, v do keys[#keys + 1] = k end
  table.sort(keys, order)
  for _, k in ipairs(keys) do
    parts[#parts + 1] = (type(k) == "string" and k or "[" .. ser(k, seen) .. "]") .. "=" .. ser(v[k], seen)
  end
  seen[v] = nil
  return "{" .. table.concat(parts, ",") .. "}"
end
local function check(label, f, ...)
  local r = table.pack(pcall(f, ...))
  local out = {}
  for i = 2, r.n do out[#out + 1] = ser(r[i]) end
  local line = label .. (r[1] and ": " or ": error: ") .. table.concat(out, ", ")
  line = line:gsub("0x%x+", "0xADDR"):gsub((root:gsub("%p", "%%%0")), "ROOT")
  print(line)
end
return check
