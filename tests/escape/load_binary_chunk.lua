-- expect: ok
-- Attack: load a precompiled binary chunk (luac5.4 of `return "BYTECODE-RAN"`), with every mode,
-- through a reader function, and corrupted copies that crash 5.4.4's undump (THREATS E4, ab859fe5).
local chunk = "\27\76\117\97\84\0\25\147\13\10\26\10\4\8\8\120\86\0\0\0\0\0\0\0\0\0\0\0\40\119\64"
  .. "\1\128\128\128\0\1\2\132\81\0\0\0\3\0\0\0\70\0\2\1\70\0\1\1\129\4\141\66\89\84\69\67\79"
  .. "\68\69\45\82\65\78\129\1\0\0\128\128\128\128\128"
assert(#chunk == 79 and chunk:byte(1) == 27)

-- try(label, pcall(load, ...)): a refusal is load returning nil plus a message, or raising.
local function try(label, called, f, err)
  if not called then return end
  if f ~= nil then
    local ok, r = pcall(f)
    print("ESCAPED: load accepted a binary chunk (" .. label .. "), it returned " .. tostring(r))
  elseif type(err) ~= "string" then
    error("load gave no error message for " .. label)
  end
end

try("default mode", pcall(load, chunk))
try("mode b", pcall(load, chunk, "bin", "b"))
try("mode bt", pcall(load, chunk, "bin", "bt"))
try("mode b with env", pcall(load, chunk, "bin", "b", {}))

-- A reader function handing the chunk over in small pieces.
local pos = 1
try("reader", pcall(load, function()
  local piece = chunk:sub(pos, pos + 6)
  pos = pos + 7
  if piece == "" then return nil end
  return piece
end, "reader", "bt"))

-- Corrupted copies: truncations and single-byte changes all through the chunk.
for cut = 1, #chunk - 1 do
  local ok, f = pcall(load, chunk:sub(1, cut), "cut", "bt")
  if ok and f then print("ESCAPED: a truncated binary chunk loaded") end
end
for i = 2, #chunk do
  for _, v in ipairs({0, 1, 127, 128, 255}) do
    local bad = chunk:sub(1, i - 1) .. string.char(v) .. chunk:sub(i + 1)
    local ok, f = pcall(load, bad, "bad", "bt")
    if ok and f then print("ESCAPED: a corrupted binary chunk loaded") end
  end
end
