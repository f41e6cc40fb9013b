-- expect: ok
-- Attack: warn("@on") would make Lua write warnings to the host's stderr (THREATS 0.6, D11).
local w = warn or _G.warn or _ENV.warn or load("return warn")()
if w ~= nil then
  pcall(w, "@on")
  pcall(w, "ESCAPED: warn reached the host")
  print("ESCAPED: warn is available")
end
