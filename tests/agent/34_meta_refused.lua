-- Agent task: a model reaches for a weak cache and a __concat operator, catches the refusal
-- and falls back, as docs/compat.md suggests.
-- stock: skip (documented difference: __mode/__concat/__gc are refused by moonbox's setmetatable)
-- expect-value: {"concat":[false,true],"gc":[false,true],"path":"usr/local/bin","weak":[false,true]}
local ok_weak, err_weak = pcall(setmetatable, {}, {__mode = "k"})
local ok_concat, err_concat = pcall(setmetatable, {}, {__concat = function(a, b) return "x" end})
local ok_gc, err_gc = pcall(setmetatable, {}, {__gc = function() end})
local Path = {}
Path.__index = Path
function Path.new(s) return setmetatable({s = s}, Path) end
function Path:join(other) return Path.new(self.s .. "/" .. other.s) end
local p = Path.new("usr"):join(Path.new("local")):join(Path.new("bin"))
return {
  weak = {ok_weak, err_weak:find("'__mode' are not allowed", 1, true) ~= nil},
  concat = {ok_concat, err_concat:find("'__concat' are not allowed", 1, true) ~= nil},
  gc = {ok_gc, err_gc:find("'__gc' are not allowed", 1, true) ~= nil},
  path = p.s,
}
