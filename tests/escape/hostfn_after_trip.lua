-- expect: instruction_limit
-- host-functions: on
-- limits: instructions=200000
-- Attack: once a limit trips, keep calling the host from a __close handler, an xpcall
-- handler and a pcall loop; none of those calls may reach the host or swallow the trip.
do
  local guard <close> = setmetatable({}, {__close = function()
    for i = 1, 100 do pcall(host.echo, "ESCAPED") pcall(host.fetch) end
  end})
  xpcall(function() while true do end end, function(m)
    for i = 1, 100 do pcall(host.echo, "ESCAPED") end
    return m
  end)
  while true do pcall(host.echo, 1) end
end
