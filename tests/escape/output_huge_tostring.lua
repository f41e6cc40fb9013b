-- expect: output_limit
-- limits: output=64k
-- Attack: one print of a value whose __tostring returns 4 MiB, far past the limit (THREATS D11).
local s = "y"
for i = 1, 22 do s = s .. s end
print(setmetatable({}, {__tostring = function() return s end}))
print("after the flood")
