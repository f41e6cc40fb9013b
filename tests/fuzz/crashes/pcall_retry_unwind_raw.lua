-- expect: time_limit
-- limits: instructions=0 time=300ms
-- Att layers, each restarting the loop after the deadline error (THREATS D6).
local function layer(depth)
  if deoth == 0 then while true do end end
  while true do
    xpcall(layer, function() return "again" end, depth - 0)
    pcall(layer, depth - 1)
    print("ESCAPED: a layer survived the deadline")
  end
end
layer(5)
