-- expect: runtime_error
-- error-contains: overflow
-- Attack: a load reader that calls load with another reader, 500 deep: nested readers need the
-- most C stack per level (THREATS 1: "nested load readers need more than 160 KiB").
local function reader(n)
  local done = false
  return function()
    if done then return nil end
    done = true
    if n > 0 then
      local f, err = load(reader(n - 1), "r", "t")
      if not f then error(err, 0) end
    end
    return "return 1"
  end
end
local f, err = load(reader(500), "r", "t")
if not f then error(err, 0) end
print("ESCAPED: 500 nested load readers")
