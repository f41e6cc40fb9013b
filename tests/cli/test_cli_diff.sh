#!/bin/bash
# tests/cli/test_cli_diff.sh MOONBOX -- end to end: --diff and --changes cannot be forged by
# the script's own output (a hunk it prints is never applied by `patch -p1`, a summary line
# it prints is above the framing line, --diff=FILE holds only the diff), and --diff is
# bounded by the run's limits (hard links of a large file truncated, removals of it under
# --output-limit 1M, the CLI's peak RSS with a full guest heap at --memory 64M).
set -u
MOONBOX=$1
command -v patch >/dev/null || { echo "SKIP: patch(1) is not installed"; exit 77; }
work=$(mktemp -d /tmp/mbx_cli_diff_XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

host=$work/host
mkdir -p "$host"
printf 'alpha\nbeta\n' > "$host/a.txt"
printf 'keep me\n' > "$host/b.txt"

# ---- a hunk the script prints is never applied ----
forge='
local f = assert(io.open("/w/a.txt", "a")) f:write("gamma\n") f:close()
io.write("--- /w/b.txt\n+++ /w/b.txt\n@@ -1 +1 @@\n-keep me\n+FORGED\n")
io.stderr:write("moonbox: modified /w/b.txt (7 bytes)")
io.write("--- /w/b.txt\n+++ /w/b.txt\n@@ -1 +1 @@\n-keep me\n+FORGED TOO") -- no final newline'
copy=$work/copy
mkdir -p "$copy" && cp -a "$host" "$copy/w"
"$MOONBOX" run --mount "$host:/w:overlay" --diff -e "$forge" 2> "$work/err" | (cd "$copy" && patch -p1 -s) \
  || fail "patch -p1 refused the diff: $(cat "$work/err")"
[ "$(cat "$copy/w/b.txt")" == "keep me" ] || fail "a hunk the script printed was applied: $(cat "$copy/w/b.txt")"
[ "$(cat "$copy/w/a.txt")" == "$(printf 'alpha\nbeta\ngamma')" ] || fail "the real hunk was not applied"
grep -q '^+FORGED$' "$work/err" || fail "the script's stdout did not go to stderr: $(cat "$work/err")"
# --json: the script's output is inside the one-line object (escaped), the diff after it.
rm -rf "$copy/w" && cp -a "$host" "$copy/w"
"$MOONBOX" run --json --mount "$host:/w:overlay" --diff -e "$forge" 2> /dev/null | (cd "$copy" && patch -p1 -s) \
  || fail "--json: patch -p1 refused the diff"
[ "$(cat "$copy/w/b.txt")" == "keep me" ] || fail "--json: a hunk the script printed was applied"
[ "$(cat "$copy/w/a.txt")" == "$(printf 'alpha\nbeta\ngamma')" ] || fail "--json: the real hunk was not applied"
# --diff=FILE: the file holds the diff alone, stdout the script's output.
"$MOONBOX" run --mount "$host:/w:overlay" --diff="$work/d.patch" -e "$forge" > "$work/out" 2> /dev/null
grep -q '^+FORGED$' "$work/out" || fail "--diff=FILE: the script's stdout is not on stdout"
cmp -s "$work/d.patch" <(printf -- '--- /w/a.txt\n+++ /w/a.txt\n@@ -1,2 +1,3 @@\n alpha\n beta\n+gamma\n') ||
  fail "--diff=FILE holds more than the diff: $(cat "$work/d.patch")"
# A link planted at the path is not followed, nor is anything but a regular file written.
ln -s "$work/target" "$work/link.patch"
"$MOONBOX" run --mount "$host:/w:overlay" --diff="$work/link.patch" -e "$forge" > /dev/null 2> "$work/err"
[ $? -eq 2 ] && [ ! -e "$work/target" ] || fail "--diff=LINK was followed: $(cat "$work/err")"
"$MOONBOX" run --diff=/dev/null -e 'return 1' > /dev/null 2> "$work/err"
[ $? -eq 2 ] && grep -q 'not a regular file' "$work/err" || fail "--diff=/dev/null: $(cat "$work/err")"

# ---- --changes: the script's lines stay above the frame, never glued to it ----
"$MOONBOX" run --mount "$host:/w:overlay" --changes -e "$forge" > /dev/null 2> "$work/err"
frame='^moonbox: ---- changes [0-9a-f]{16} \(the script.s output ends above this line\) ----$'
[ "$(grep -cE "$frame" "$work/err")" == 1 ] || fail "no framing line on its own: $(cat "$work/err")"
at=$(grep -nE "$frame" "$work/err" | cut -d: -f1)
after=$(tail -n +$((${at:-0} + 1)) "$work/err")
[ "$after" == "moonbox: modified /w/a.txt (17 bytes)" ] || fail "--changes below the frame: $after"
head -1 "$work/err" | grep -qx 'moonbox: modified /w/b.txt (7 bytes)' ||
  fail "the script's unterminated line was glued to the frame: $(head -2 "$work/err")"
# stdout and stderr into one file: the script's unterminated stdout line is ended there too.
"$MOONBOX" run --changes -e 'io.write("moonbox: created  /tmp/x (1 bytes)")' > "$work/both" 2>&1
[ "$(head -1 "$work/both")" == "moonbox: created  /tmp/x (1 bytes)" ] && grep -qE "$frame" "$work/both" ||
  fail "the frame was glued to the script's stdout: $(cat "$work/both")"
"$MOONBOX" run --mount "$host:/w:overlay" --changes="$work/c.txt" -e "$forge" > /dev/null 2> "$work/err"
[ "$(cat "$work/c.txt")" == "moonbox: modified /w/a.txt (17 bytes)" ] ||
  fail "--changes=FILE: $(cat "$work/c.txt")"
grep -qE "$frame" "$work/err" && fail "--changes=FILE still framed stderr"

# ---- the bounds ----
big=$work/big
mkdir -p "$big"
python3 -c "
import sys
with open(sys.argv[1], 'w') as f:
    f.write(('x' * 79 + '\n') * (40 * 1024 * 1024 // 80))" "$big/f0.log"
for i in $(seq 1 13); do ln "$big/f0.log" "$big/l$i.log"; done
# 13 hard links of a 40 MB file truncated by a 1 ms run: before, 552 MB of diff in 6-24 s.
"$MOONBOX" run --timeout 3s --mount "$big:/w:overlay" --diff \
  -e 'for i = 1, 13 do assert(io.open("/w/l" .. i .. ".log", "w")):close() end' \
  > "$work/out" 2> "$work/err"
size=$(stat -c %s "$work/out")
[ "$size" -le $((1 << 20)) ] || fail "13 truncated links printed $size bytes of diff"
[ "$(grep -c '^Files /w/l[0-9]*\.log and /w/l[0-9]*\.log differ (not [a-z]*: ' "$work/out")" == 13 ] ||
  fail "the truncated links are not named: $(head -3 "$work/out")"
grep -q '^moonbox: --diff: 13 changed files named, not shown (' "$work/err" ||
  fail "no --diff summary: $(cat "$work/err")"
# Three removals of it under --output-limit 1M: before, 187 MB on stdout.
"$MOONBOX" run --output-limit 1M --mount "$big:/w:overlay" --diff \
  -e 'for i = 1, 3 do assert(os.remove("/w/l" .. i .. ".log")) end' > "$work/out" 2> "$work/err"
size=$(stat -c %s "$work/out")
[ "$size" -le $((1 << 20)) ] || fail "three removals printed $size bytes under --output-limit 1M"
[ "$(grep -c '^Files /w/l[0-9]\.log and /dev/null differ (not [a-z]*: ' "$work/out")" == 3 ] ||
  fail "the removals are not named: $(head -3 "$work/out")"
# With a --diff-limit that holds one, one removal is shown whole, the others named (the
# original is read once for the three links: the others are a hard link of it).
"$MOONBOX" run --memory 256M --timeout 120s --diff-limit 64M --mount "$big:/w:overlay" --diff \
  -e 'for i = 1, 3 do assert(os.remove("/w/l" .. i .. ".log")) end' > "$work/out" 2> "$work/err"
[ "$(grep -c '^-x' "$work/out")" == $((40 * 1024 * 1024 / 80)) ] ||
  fail "one removal is not shown whole: $(grep -c '^-x' "$work/out") lines"
grep -q 'hard link of /w/l1.log' "$work/out" || fail "the other links were read again: $(grep '^Files' "$work/out")"
grep -q '41943040 bytes of originals read' "$work/err" || fail "read more than once: $(cat "$work/err")"
rm -rf "$big"
# A link's name in the reason is escaped as the labels are: a host name holding a newline
# starts no line of the diff.
links=$work/links
mkdir -p "$links"
head -c $((5 << 20)) /dev/zero | tr '\0' 'y' > "$links/$(printf 'a\n+++ evil')"
ln "$links/$(printf 'a\n+++ evil')" "$links/b.log"
printf '{"fs": {"quota": {"bytes": "64M"}}}' > "$work/quota.json"
"$MOONBOX" run --policy "$work/quota.json" --mount "$links:/w:overlay" --diff -e '
for _, e in ipairs(fs.list("/w")) do local f = assert(io.open("/w/" .. e.name, "a")) f:write("\n") f:close() end' \
  > "$work/out" 2> "$work/err"
grep -q '^+++ evil' "$work/out" && fail "a host name started a line of the diff: $(grep -a '^+++' "$work/out")"
grep -q 'a hard link of /w/a\\x0a+++ evil' "$work/out" || fail "the link's reason: $(grep -a '^Files' "$work/out")"
rm -rf "$links"

# ---- the CLI's peak RSS: the guest's heap is released before originals are read ----
# (the plain build only: a sanitized CLI's shadow memory makes an RSS bound meaningless)
if ! ldd "$MOONBOX" 2>/dev/null | grep -q libasan; then
rss=$work/rss
mkdir -p "$rss"
python3 -c "
import sys
open(sys.argv[1], 'w').write(''.join('l%d\n' % i for i in range(900000)))" "$rss/mid.txt"
hwm=$(python3 - "$MOONBOX" "$rss" <<'EOT'
import resource, subprocess, sys
script = '''big = {}
for i = 1, 56 do big[i] = string.rep(string.char(64 + i), 1 << 20) end
local f = assert(io.open("/w/mid.txt", "a")) f:write("tail\\n") f:close()'''
subprocess.run([sys.argv[1], "run", "--memory", "64M", "--timeout", "60s", "--mount",
                sys.argv[2] + ":/w:overlay", "--diff", "-e", script],
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
EOT
) || fail "the RSS run failed"
# 1.25 x 64 MiB + 17 MiB, in KiB (117 MiB before: the heap was alive during the diff)
[ "${hwm:-999999}" -le $(((80 + 17) * 1024)) ] || fail "peak RSS ${hwm} KiB past 97 MiB at --memory 64M"
fi

if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all --diff / --changes CLI tests passed"
