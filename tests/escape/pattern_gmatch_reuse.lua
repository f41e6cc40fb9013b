-- expect: ok
-- accept: runtime_error
-- limits: time=500ms
-- Attack: a gmatch iterator reused after "pattern too complex" recurses without limit in 5.4.4
-- (THREATS 0.1, efddc230): SIGSEGV on the stock library.
local subject, pattern = "", ""
for i = 1, 300 do subject = subject .. "a"; pattern = pattern .. "a?" end
local ok, it = pcall(string.gmatch, subject, pattern)
if ok and type(it) == "function" then
  for i = 1, 5 do pcall(it) end
end
