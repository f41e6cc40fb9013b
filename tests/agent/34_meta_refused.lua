-- Agent task: a model reaches for a weak cache, a finalizer and a __concat operator; the cache
-- works, the finalizer is accepted (and never runs), __concat is refused and it falls back, as
-- docs/compat.md suggests.
-- stock: skip (documented difference: __concat is refused and __gc never runs in moonbox)
-- expect-value: {"concat":[false,true],"gc":true,"path":"usr/local/bin","weak":[true,1]}
local cache = setmetatable({}, {__mode = "k"})
local live = {}
cache[live] = 1
cache[{}] = 2
collectgarbage()
local entries = 0
for _ in pairs(cache) do entries = entries + 1 end
local joined = setmetatable({}, {__concat = function(a, b) return "x" end})
local ok_concat, err_concat = pcall(function() return joined .. "y" end)
local ok_gc = pcall(setmetatable, {}, {__gc = function() end})
local Path = {}
Path.__index = Path
function Path.new(s) return setmetatable({s = s}, Path) end
function Path:join(other) return Path.new(self.s .. "/" .. other.s) end
local p = Path.new("usr"):join(Path.new("local")):join(Path.new("bin"))
return {
  weak = {cache[live] == 1, entries},
  concat = {ok_concat, err_concat:find("'__concat' metamethods are not allowed", 1, true) ~= nil},
  gc = ok_gc,
  path = p.s,
}
