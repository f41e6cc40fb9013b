-- Agent task: "Settings object with defaults, change tracking and a callable validator."
-- expect-value: {"changes":["timeout=10","verbose=true","timeout=5"],"mode":"fast","overridden":2,"raw":true,"retries":3,"timeout":5,"valid":[true,false]}
local defaults = {timeout = 30, retries = 3, mode = "fast"}
local changes = {}
local store = {}
local settings = setmetatable({}, {
  __index = function(_, k) local v = store[k] if v == nil then v = defaults[k] end return v end,
  __newindex = function(_, k, v)
    changes[#changes + 1] = k .. "=" .. tostring(v)
    store[k] = v
  end,
  __call = function(self, key, pred) return pred(self[key]) end,
  __len = function() local n = 0 for _ in pairs(store) do n = n + 1 end return n end,
})
settings.timeout = 10
settings.verbose = true
settings.timeout = 5
local is_positive = function(v) return type(v) == "number" and v > 0 end
return {
  timeout = settings.timeout, retries = settings.retries, mode = settings.mode, missing = settings.nope,
  changes = changes, overridden = #settings, raw = rawget(settings, "timeout") == nil,
  valid = {settings("timeout", is_positive), settings("mode", is_positive)},
}
