-- tests/agent/stock_driver.lua -- runs one agent snippet in stock lua5.4 and prints a result
-- shaped like `moonbox run --json` (status, value, stdout, error.message), so run_agent.sh can
-- check the snippets' declared expectations against stock Lua too. Not part of ctest: it is the
-- independent check that the expectations are right (see README.md).
-- Usage (via stock_moonbox.sh): lua5.4 stock_driver.lua FILE [--seed N] [--time T] [--input J]
-- The json module here is a plain-Lua stand-in following docs/compat.md (sorted keys, exact
-- integers, json.null, json.array); run with TZ=UTC so os.date agrees with moonbox's UTC.

local file = arg[1]
local opts = {}
do
  local i = 2
  while arg[i] do
    opts[arg[i]:sub(3)] = arg[i + 1]
    i = i + 2
  end
end
local stdout = {}

-- JSON -----------------------------------------------------------------------------------
-- A userdata sentinel, so type(json.null) == "userdata" holds as in moonbox.
local null = io.stderr
local array_mt = {__jsontype = "array"}

local function is_array(t)
  local mt = getmetatable(t)
  if mt and mt.__jsontype == "array" then return true end
  local n = 0
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 then return false end
    n = n + 1
  end
  if n == 0 then return false end
  for i = 1, n do if rawget(t, i) == nil then return false end end
  return true
end

local escapes = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t',
  ['\b'] = '\\b', ['\f'] = '\\f'}
local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function encode(v, seen)
  local t = type(v)
  if v == nil or v == null then return "null" end
  if t == "boolean" then return tostring(v) end
  if t == "number" then
    if math.type(v) == "integer" then return string.format("%d", v) end
    if v ~= v or v == math.huge or v == -math.huge then
      error("cannot encode NaN or infinity as JSON", 0)
    end
    for digits = 14, 17 do
      local s = string.format("%." .. digits .. "g", v)
      if tonumber(s) == v then
        if not s:find("[.eni]") then s = s .. ".0" end
        return s
      end
    end
  end
  if t == "string" then return encode_string(v) end
  if t == "table" then
    seen = seen or {}
    if seen[v] then error("cannot encode a cycle (a table that contains itself) as JSON", 0) end
    seen[v] = true
    local parts = {}
    if is_array(v) then
      for i = 1, #v do parts[i] = encode(v[i], seen) end
      seen[v] = nil
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local keys = {}
    for k in pairs(v) do
      if math.type(k) == "integer" then k = tostring(k) end
      if type(k) ~= "string" then error("cannot encode a key of type " .. type(k), 0) end
      keys[#keys + 1] = k
    end
    table.sort(keys)
    for i, k in ipairs(keys) do
      local item = v[k]
      if item == nil then item = v[math.tointeger(tonumber(k))] end
      parts[i] = encode_string(k) .. ":" .. encode(item, seen)
    end
    seen[v] = nil
    return "{" .. table.concat(parts, ",") .. "}"
  end
  error("cannot encode a " .. t .. " as JSON", 0)
end

local function decode(text)
  local pos = 1
  local function fail(what) error(string.format("json.decode: %s at byte %d", what, pos), 0) end
  local function skip() pos = text:find("[^ \t\r\n]", pos) or #text + 1 end
  local value
  local function str()
    local out = {}
    pos = pos + 1
    while true do
      local c = text:sub(pos, pos)
      if c == "" then fail("unterminated string") end
      if c == '"' then pos = pos + 1 break end
      if c == "\\" then
        local e = text:sub(pos + 1, pos + 1)
        if e == "u" then
          local cp = tonumber(text:sub(pos + 2, pos + 5), 16)
          pos = pos + 6
          if cp >= 0xD800 and cp < 0xDC00 and text:sub(pos, pos + 1) == "\\u" then
            local lo = tonumber(text:sub(pos + 2, pos + 5), 16)
            cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
            pos = pos + 6
          end
          out[#out + 1] = utf8.char(cp)
        else
          out[#out + 1] = ({b = "\b", f = "\f", n = "\n", r = "\r", t = "\t"})[e] or e
          pos = pos + 2
        end
      else
        out[#out + 1] = c
        pos = pos + 1
      end
    end
    return table.concat(out)
  end
  function value()
    skip()
    local c = text:sub(pos, pos)
    if c == "{" then
      local t = {}
      pos = pos + 1
      skip()
      if text:sub(pos, pos) == "}" then pos = pos + 1 return t end
      while true do
        skip()
        if text:sub(pos, pos) ~= '"' then fail("expected a string key") end
        local k = str()
        skip()
        if text:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        t[k] = value()
        skip()
        local d = text:sub(pos, pos)
        pos = pos + 1
        if d == "}" then return t end
        if d ~= "," then fail("expected ',' or '}'") end
      end
    elseif c == "[" then
      local t = setmetatable({}, array_mt)
      pos = pos + 1
      skip()
      if text:sub(pos, pos) == "]" then pos = pos + 1 return t end
      setmetatable(t, nil)
      while true do
        t[#t + 1] = value()
        skip()
        local d = text:sub(pos, pos)
        pos = pos + 1
        if d == "]" then return t end
        if d ~= "," then fail("expected ',' or ']'") end
      end
    elseif c == '"' then
      return str()
    elseif text:find("^true", pos) then pos = pos + 4 return true
    elseif text:find("^false", pos) then pos = pos + 5 return false
    elseif text:find("^null", pos) then pos = pos + 4 return null
    else
      local num = text:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not num or num == "" then fail("unexpected character") end
      pos = pos + #num
      if num:find("^-?%d+$") then return math.tointeger(tonumber(num)) or tonumber(num) + 0.0 end
      return tonumber(num) + 0.0
    end
  end
  local v = value()
  skip()
  if pos <= #text then fail("trailing characters") end
  return v
end

local json = {
  null = null,
  encode = function(v)
    local ok, s = pcall(encode, v)
    if not ok then error("json.encode: " .. s, 2) end
    return s
  end,
  decode = decode,
  array = function(t) return setmetatable(t or {}, array_mt) end,
}

-- The sandbox's environment, as the CLI options would set it -------------------------------
_G.json = json
local stock_require = require
require = function(name)
  if name == "json" or name == "cjson" or name == "dkjson" then return json end
  return stock_require(name)
end
print = function(...)
  local parts = table.pack(...)
  for i = 1, parts.n do parts[i] = tostring(parts[i]) end
  stdout[#stdout + 1] = table.concat(parts, "\t", 1, parts.n) .. "\n"
end
io.write = function(...)
  for _, s in ipairs({...}) do stdout[#stdout + 1] = tostring(s) end
  return io.stdout
end
if opts.seed then math.randomseed(math.tointeger(tonumber(opts.seed))) end
if opts.time then
  local fixed, stock_time, stock_date = math.tointeger(tonumber(opts.time)), os.time, os.date
  os.time = function(t) if t == nil then return fixed end return stock_time(t) end
  os.date = function(fmt, t) return stock_date(fmt, t or fixed) end
end
if opts.input then
  for k, v in pairs(decode(opts.input)) do _G[k] = v end
end

-- Run it -------------------------------------------------------------------------------------
local function pack(...) return select("#", ...), {...} end
local chunk, load_err = loadfile(file)
local result = {stdout = "", value = null, error = null}
if not chunk then
  result.status, result.error = "syntax_error", {message = load_err}
else
  local ok, n, values = pcall(function() return pack(chunk()) end)
  if ok then
    result.status = "ok"
    if n == 1 then
      result.value = values[1] == nil and null or values[1]
    elseif n > 1 then
      for i = 1, n do if values[i] == nil then values[i] = null end end
      result.value = values
    end
  else
    local msg = n
    if type(msg) ~= "string" then
      msg = "(error object is a " .. type(msg) .. " value)"
    else
      msg = msg:gsub("^[^\n]-:%d+: ", "", 1)
    end
    result.status, result.error = "runtime_error", {message = msg}
  end
end
result.stdout = table.concat(stdout)
local ok, text = pcall(encode, result)
if not ok then
  text = encode({status = "runtime_error", stdout = result.stdout, value = null,
    error = {message = "stock driver: the value cannot be encoded: " .. text}})
end
io.stdout:write(text, "\n")
