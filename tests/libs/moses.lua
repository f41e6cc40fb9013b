-- Moses (Debian's lua-moses, packaged for Lua 5.1-5.3 only: loaded from 5.3's folder) under
-- moonbox and stock lua5.4: tests/libs/test_libs.sh.
-- packages: lua-moses
-- luadir: 5.3
local root = assert(arg and arg[1], "usage: lua5.4 SCRIPT.lua /usr/share/lua/5.x")
package.path = root .. "/?.lua;" .. root .. "/?/init.lua"
local check = assert(loadfile("support/check.lua"))(root)

local M = require "moses"
local function square(x) return x * x end
local function even(x) return x % 2 == 0 end
local function collect(iter) local out = {}; for v in iter do out[#out + 1] = v end return out end

-- tables
check("each", function() local s = 0; M.each({1, 2, 3}, function(v) s = s + v end); return s end)
check("map", M.map, {1, 2, 3}, square)
check("reduce", M.reduce, {1, 2, 3, 4}, function(a, b) return a + b end)
check("reduceRight", M.reduceRight, {"a", "b", "c"}, function(a, b) return a .. b end)
check("mapReduce", M.mapReduce, {1, 2, 3}, function(a, b) return a * b end)
check("select/reject", function() return M.select({1, 2, 3, 4, 5}, even), M.reject({1, 2, 3, 4, 5}, even) end)
check("all/include", function() return M.all({2, 4}, even), M.include({1, 2}, 3), M.include({1, 2}, 2) end)
check("detect/findWhere", function() return M.detect({5, 6, 7}, 6), M.findWhere({{a = 1, b = 2}, {a = 2, b = 3}}, {a = 2}) end)
check("count/countf", function() return M.count({1, 1, 2, 1}, 1), M.countf({1, 2, 3, 4}, even) end)
check("max/min", function() return M.max({3, 9, 2}), M.min({{n = 3}, {n = 1}}, function(t) return t.n end) end)
check("sort", M.sort, {5, 3, 8, 1})
check("sortBy", function() return M.sortBy({{n = "b", a = 2}, {n = "a", a = 1}}, "a") end)
check("groupBy", M.groupBy, {1, 2, 3, 4, 5, 6}, function(v) return v % 3 end)
check("countBy", M.countBy, {1, 2, 3, 4, 5}, function(v) return even(v) and "even" or "odd" end)
check("size/containsKeys", function() return M.size({a = 1, b = 2, 3}), M.containsKeys({a = 1, b = 2}, {a = 0}) end)
-- arrays
check("range", function() return M.range(1, 10, 3), M.range(5) end)
check("flatten", M.flatten, {1, {2, {3, {4}}}})
check("flatten shallow", M.flatten, {1, {2, {3}}}, true)
check("unique/union", function() return M.unique({1, 1, 2, 3, 3}), M.union({1, 2}, {2, 3}) end)
check("intersection/difference", function() return M.intersection({1, 2, 3}, {2, 3, 4}), M.difference({1, 2, 3}, {2}) end)
check("zip", M.zip, {1, 2}, {"a", "b"}, {true, false})
check("partition", function() return collect(M.partition({1, 2, 3, 4, 5}, 2)) end)
check("chunk", M.chunk, {1, 1, 2, 3, 3, 4}, function(v) return v % 2 end)
check("slice/first/last", function() return M.slice({1, 2, 3, 4, 5}, 2, 4), M.first({1, 2, 3}, 2), M.last({1, 2, 3}, 2) end)
check("reverse/fill", function() return M.reverse({1, 2, 3}), M.fill({0, 0, 0, 0}, 9, 2, 3) end)
check("indexOf/find", function() return M.indexOf({"a", "b"}, "b"), M.find({3, 4, 5}, 5) end)
check("append/push", function() return M.append({1}, {2, 3}), M.push({1}, 2, 3) end)
check("compact/interleave", function() return M.compact({1, false, 2, nil, 3}), M.interleave({1, 3}, {2, 4}) end)
check("nsorted", M.nsorted, {5, 1, 4, 2, 3}, 2)
check("overlapping", function() return collect(M.overlapping({1, 2, 3, 4, 5}, 3, 1)) end)
check("aperture", function() return collect(M.aperture({1, 2, 3, 4}, 2)) end)
check("pairwise", function() return collect(M.pairwise({1, 2, 3})) end)
check("permutation count", function() local n = 0; for _ in M.permutation({1, 2, 3}) do n = n + 1 end return n end)
check("powerset", M.powerset, {1, 2})
check("concat", M.concat, {1, 2, 3}, "-")
-- functions
check("memoize", function() local calls = 0; local f = M.memoize(function(x) calls = calls + 1; return x * 2 end); return f(3), f(3), calls end)
check("once/after", function() local n = 0; local f = M.once(function() n = n + 1; return n end); f(); f(); return n end)
check("compose/pipe", function() return M.compose(square, function(x) return x + 1 end)(2), M.pipe(2, function(x) return x + 1 end, square) end)
check("bind/bind2/bindn", function() return M.bind(math.max, 10)(3), M.bind2(string.rep, 3)("ab"), M.bindn(math.max, 1, 50)(7) end)
check("curry", function() return M.curry(function(a, b, c) return a + b + c end, 3)(1)(2)(3) end)
check("partial", function() return M.partial(string.sub, "_", 2, 3)("abcd") end)
check("times", M.times, function(i) return i * i end, 4)
check("juxtapose", M.juxtapose, 4, square, math.sqrt)
check("flip/negate", function() return M.flip(function(a, b) return a .. b end)("x", "y"), M.complement(even)(3) end)
check("iterator", function() local out = {}; for v in M.iterator(function(x) return x * 2 end, 1, 4) do out[#out + 1] = v end return out end)
-- objects
check("keys/values sorted", function() local k, v = M.keys({b = 1, a = 2}), M.values({b = 1, a = 2}); table.sort(k); table.sort(v); return k, v end)
check("invert", M.invert, {"a", "b"})
check("pick/omit", function() return M.pick({a = 1, b = 2, c = 3}, "a", "c"), M.omit({a = 1, b = 2, c = 3}, "b") end)
check("extend/clone", function() local c = M.clone({a = {1}}); return M.extend({a = 1}, {b = 2}), c end)
check("isEqual", function() return M.isEqual({a = {1, 2}}, {a = {1, 2}}), M.isEqual({1}, {2}) end)
check("type checks", function() return M.isTable({}), M.isArray({1, 2}), M.isArray({a = 1}), M.isCallable(print), M.isNumber(1), M.isNil(nil), M.isFinite(1 / 0), M.isInteger(3.0) end)
check("chaining", function() return M.chain({1, 2, 3, 4}):map(function(v) return v * 10 end):filter(function(v) return v > 15 end):value() end)
check("result/property", function() return M.result({n = 5}, "n"), M.property("k")({k = "v"}) end)
check("operator", function() return M.operator.add(1, 2), M.operator.concat("a", "b") end)
check("bad argument", M.range, "x")
