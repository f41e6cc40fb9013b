-- Structured input through require("fuzz").provider.
local provider = require("fuzz").provider
function fuzz(data)
  local fdp = provider(data)
  local op = fdp:choice({"add", "mul", "neg"})
  local n = fdp:int(0, 1000)
  if op == "mul" and n == 777 and fdp:bool() then
    error("mul 777")
  end
end
