-- Agent task: "Render an invoice line table with fixed-width columns."
-- expect-value: {"lines":["Widget      |    3|     4.50| 1.350e+01","Gadget with |    1|   120.00| 1.200e+02","Nut         |  250|     0.01| 3.750e+00"],"misc":["00042","+7","ff/FF/10","1e+20 0.0001 100","\"he said \\\"hi\\\"\\\n\"","Lua"," 99.4%","1|1.0","ab    |","abc","-5","0x1.5555555555555p-2","    3.1416|","0x1p+0"]}
local lines = {
  {"Widget", 3, 4.5},
  {"Gadget with a long name", 1, 120},
  {"Nut", 250, 0.015},
}
local out = {}
for _, l in ipairs(lines) do
  out[#out + 1] = string.format("%-12.12s|%5d|%9.2f|%10.3e", l[1], l[2], l[3], l[2] * l[3])
end
return {
  lines = out,
  misc = {
    string.format("%05d", 42), string.format("%+d", 7), string.format("%x/%X/%o", 255, 255, 8),
    string.format("%g %g %g", 1e20, 0.0001, 100), string.format("%q", 'he said "hi"\n'),
    string.format("%c%c%c", 76, 117, 97), string.format("%5.1f%%", 99.44), string.format("%s|%s", 1, 1.0),
    string.format("%-6s|", "ab"), string.format("%.3s", "abcdef"), string.format("%i", -5),
    string.format("%q", 1/3), string.format("%10.4f|", math.pi), string.format("%a", 1.0),
  },
}
