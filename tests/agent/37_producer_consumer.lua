-- Agent task: "Stream events through a producer -> filter -> consumer pipeline."
-- expect-value: {"errors":["db","auth"],"finished":"eof/eof","logins":["ada","bob"],"statuses":["suspended","suspended"]}
local events = {"login:ada", "view:home", "login:bob", "error:db", "view:cart", "logout:ada", "error:auth"}
local function producer()
  return coroutine.create(function()
    for _, e in ipairs(events) do coroutine.yield(e) end
    return "eof"
  end)
end
local function filter(source, kind)
  return coroutine.create(function()
    while true do
      local ok, e = coroutine.resume(source)
      if coroutine.status(source) == "dead" then return e end
      local k, who = e:match("^(%w+):(%w+)$")
      if k == kind then coroutine.yield(who) end
    end
  end)
end
local function consume(co)
  local got = {}
  while true do
    local ok, v = coroutine.resume(co)
    if coroutine.status(co) == "dead" then return got, v end
    got[#got + 1] = v
  end
end
local logins, done1 = consume(filter(producer(), "login"))
local errors, done2 = consume(filter(producer(), "error"))
local p = producer()
local statuses = {coroutine.status(p)}
coroutine.resume(p)
statuses[2] = coroutine.status(p)
return {logins = logins, errors = errors, finished = done1 .. "/" .. done2, statuses = statuses}
