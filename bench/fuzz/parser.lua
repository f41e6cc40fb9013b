-- A 40-line arithmetic parser: tokens, precedence climbing, parentheses; errors are caught.
local function tokens(s)
  local out, i = {}, 1
  while i <= #s do
    local c = s:sub(i, i)
    if c:match("%s") then
      i = i + 1
    elseif c:match("%d") then
      local j = i
      while j <= #s and s:sub(j, j):match("%d") do j = j + 1 end
      out[#out + 1] = {"num", tonumber(s:sub(i, j - 1))}
      i = j
    elseif c:match("[-+*/()]") then
      out[#out + 1] = {c}
      i = i + 1
    else
      error("bad character " .. c)
    end
  end
  return out
end

local prec = {["+"] = 1, ["-"] = 1, ["*"] = 2, ["/"] = 2}
local function parse(t, pos, min)
  local tok = t[pos] or error("unexpected end")
  local lhs
  if tok[1] == "num" then lhs, pos = tok[2], pos + 1
  elseif tok[1] == "(" then
    lhs, pos = parse(t, pos + 1, 1)
    if not t[pos] or t[pos][1] ~= ")" then error("missing )") end
    pos = pos + 1
  elseif tok[1] == "-" then lhs, pos = parse(t, pos + 1, 3); lhs = -lhs
  else error("unexpected " .. tok[1]) end
  while t[pos] and prec[t[pos][1]] and prec[t[pos][1]] >= min do
    local op = t[pos][1]
    local rhs
    rhs, pos = parse(t, pos + 1, prec[op] + 1)
    if op == "+" then lhs = lhs + rhs elseif op == "-" then lhs = lhs - rhs
    elseif op == "*" then lhs = lhs * rhs else lhs = rhs ~= 0 and lhs // rhs or 0 end
  end
  return lhs, pos
end

function fuzz(data)
  pcall(function() return parse(tokens(data), 1, 1) end)
end
