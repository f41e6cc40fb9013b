-- Agent task: "Count characters (not bytes) in multilingual names and list code points."
-- expect-value: {"built":"Hé世😀","charpattern":true,"codepoints":[104,233,108,108,111],"codes":["1:97","2:241","4:8364","7:128512"],"invalid":["nil",3],"names":["José bytes=5 chars=4","Zoë bytes=4 chars=3","北京 bytes=6 chars=2","Ångström bytes=10 chars=8","plain bytes=5 chars=5","😀ok bytes=6 chars=3"],"offset3":4,"offset_last":7}
local names = {"José", "Zoë", "北京", "Ångström", "plain", "😀ok"}
local out = {}
for _, n in ipairs(names) do
  out[#out + 1] = string.format("%s bytes=%d chars=%d", n, #n, utf8.len(n))
end
local cps = {}
for pos, cp in utf8.codes("añ€😀") do cps[#cps + 1] = pos .. ":" .. cp end
local bad_len, bad_pos = utf8.len("ok\xffno")
return {
  names = out,
  codes = cps,
  built = utf8.char(72, 233, 0x4E16, 0x1F600),
  codepoints = {utf8.codepoint("héllo", 1, -1)},
  offset3 = utf8.offset("añ€😀", 3),
  offset_last = utf8.offset("añ€😀", -1),
  invalid = {tostring(bad_len), bad_pos},
  charpattern = utf8.charpattern == "[\0-\x7F\xC2-\xFD][\x80-\xBF]*",
}
