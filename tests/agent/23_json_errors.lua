-- Agent task: "Parse each payload safely; report which ones are malformed and why."
-- stock: skip (the error texts are moonbox's: "json.decode: ... at line L, column C")
-- expect-value: {"cycle":[false,true],"fn":[false,true],"nan":[false,true],"report":["ok","error with position","error with position","ok","error with position"]}
local payloads = {'{"ok": true}', '{"a": [1, 2,]}', '{"a": 1} trailing', '[1, 2, 3]', '{"s": "unterminated'}
local report = {}
for i, p in ipairs(payloads) do
  local ok, res = pcall(json.decode, p)
  if ok then
    report[i] = "ok"
  else
    report[i] = res:match("^json%.decode: .- at line %d+, column %d+$") and "error with position" or res
  end
end
local ok_fn, err_fn = pcall(json.encode, {handler = print})
local ok_nan, err_nan = pcall(json.encode, {x = 0 / 0})
local cyc = {}
cyc.self = cyc
local ok_cyc, err_cyc = pcall(json.encode, cyc)
return {
  report = report,
  fn = {ok_fn, (err_fn:find("cannot encode a function", 1, true)) ~= nil},
  nan = {ok_nan, (err_nan:find("NaN", 1, true)) ~= nil},
  cycle = {ok_cyc, (err_cyc:find("cycle", 1, true)) ~= nil},
}
