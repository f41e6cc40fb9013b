-- expect: time_limit
-- limits: instructions=0 time=300ms
-- Attack: nested pcall/xpcall layers, each restarting the loop after the deadline error (THREATS D6).
local function layer(depth)
  if depth == 0 then while true do end end
  while true do
    xpcall(layer, function() return "again" end, depth - 1)
    pcall(layer, depth - 1)
    print("ESCAPED: a layer survived the deadline")
  end
end
layer(5)
