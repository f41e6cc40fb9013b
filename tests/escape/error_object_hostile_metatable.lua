-- expect: runtime_error
-- limits: time=500ms
-- Attack: an error object whose every metamethod loops, with a __name and a __metatable, for a
-- host that reads it with lua_getfield/lua_len/lua_compare (THREATS section 4).
local function spin() while true do end end
local mt = {
  __index = spin, __newindex = spin, __len = spin, __eq = spin, __lt = spin, __le = spin,
  __call = spin, __pairs = spin, __close = spin, __unm = spin, __name = "hostile",
  __metatable = "locked",
}
error(setmetatable({message = "m", traceback = "t", code = 1}, mt))
