#!/bin/bash
# tests/cli/test_cli_fs_changes.sh MOONBOX -- end to end: an overlay mount over a temporary
# host tree (checked byte for byte afterwards: never modified), --changes (stderr and
# --json), --export-changes (applied to a copy of the tree, it reproduces the guest's view
# exactly), --diff (byte-identical to the real `diff -u --label`), and --mount ...:overlay in
# a --policy file; and io.stdin from --stdin, a pipe or a redirect.
set -u
MOONBOX=$1
command -v diff >/dev/null || { echo "SKIP: diff(1) is not installed"; exit 77; }
work=$(mktemp -d /tmp/mbx_cli_fs_XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

host=$work/host
mkdir -p "$host/sub" "$host/empty" "$host/keep"
seq 1 40 | sed 's/^/line /' > "$host/long.txt"
printf 'alpha\nbeta\ngamma\n' > "$host/a.txt"
printf 'no newline at the end' > "$host/tail.txt"
printf 'bee\n' > "$host/sub/b.txt"
printf 'removed\n' > "$host/c.txt"
printf 'bin\0ary\n' > "$host/blob.bin"
printf 'k\n' > "$host/keep/k.txt"
ln -s /etc/passwd "$host/link_out"
picture() { (cd "$1" && find . | LC_ALL=C sort | while read -r f; do
  if [ -L "$f" ]; then echo "L $f $(readlink "$f")"; elif [ -f "$f" ]; then echo "F $f $(sha256sum < "$f")"; else echo "D $f"; fi; done); }
before=$(picture "$host")
cp -a "$host" "$work/orig"

script='
local function edit(path, f)
  local h = assert(io.open(path)); local t = h:read("a"); h:close()
  h = assert(io.open(path, "w")); h:write(f(t)); h:close()
end
edit("/w/long.txt", function(t) return (t:gsub("line 5\n", "line five\n"):gsub("line 30\n", "")) end)
edit("/w/a.txt", function(t) return t .. "delta\n" end)
edit("/w/tail.txt", function(t) return t .. ", now edited" end)
edit("/w/blob.bin", function(t) return t .. "x" end)
assert(os.remove("/w/c.txt"))
assert(os.rename("/w/sub/b.txt", "/w/b.txt"))
assert(fs.remove("/w/empty"))
assert(fs.mkdir("/w/made"))
local h = assert(io.open("/w/made/new.txt", "w")); h:write("new\nfile\n"); h:close()
local ok, msg, code = os.rename("/w/keep", "/w/kept")
assert(not ok and code == 18, msg) -- EXDEV
local h2, m2 = io.open("/w/link_out")
assert(h2 == nil, "the link out was followed")
print("edited")
'

# ---- --changes on stderr (below a framing line), --diff alone on stdout (the script's output
# then goes to stderr) ----
"$MOONBOX" run --mount "$host:/w:overlay" --changes --diff -e "$script" > "$work/out" 2> "$work/err"
rc=$?
[ $rc -eq 0 ] || fail "the run exited $rc: $(cat "$work/err")"
[ "$(picture "$host")" == "$before" ] || fail "the overlay modified the host tree"
head -1 "$work/err" | grep -qx 'edited' || fail "the script's stdout is not on stderr: $(head -2 "$work/err")"
grep -qE '^moonbox: ---- changes [0-9a-f]{16} \(the script.s output ends above this line\) ----$' "$work/err" ||
  fail "no framing line: $(cat "$work/err")"
sed -i '1,2d' "$work/err"
cat > "$work/want_err" <<'EOT'
moonbox: modified /w/a.txt (23 bytes)
moonbox: renamed  /w/b.txt (from /w/sub/b.txt) (4 bytes)
moonbox: modified /w/blob.bin (9 bytes)
moonbox: removed  /w/c.txt
moonbox: removed  /w/empty (directory)
moonbox: modified /w/long.txt (306 bytes)
moonbox: created  /w/made (directory)
moonbox: created  /w/made/new.txt (9 bytes)
moonbox: modified /w/tail.txt (33 bytes)
EOT
diff "$work/want_err" "$work/err" > /dev/null || fail "--changes summary: $(diff "$work/want_err" "$work/err")"

# The diff, against the real diff -u of the same edits made on a copy.
edited=$work/edited
cp -a "$host" "$edited"
sed -i 's/^line 5$/line five/; /^line 30$/d' "$edited/long.txt"
printf 'delta\n' >> "$edited/a.txt"
printf ', now edited' >> "$edited/tail.txt"
printf 'x' >> "$edited/blob.bin"
{
  # b.txt: renamed unchanged, so no diff lines
  diff -u --label /w/a.txt --label /w/a.txt "$host/a.txt" "$edited/a.txt"
  diff -u --label /w/blob.bin --label /w/blob.bin "$host/blob.bin" "$edited/blob.bin"
  diff -u --label /w/c.txt --label /dev/null "$host/c.txt" /dev/null
  diff -u --label /w/long.txt --label /w/long.txt "$host/long.txt" "$edited/long.txt"
  printf 'new\nfile\n' > "$work/new.txt"
  diff -u --label /dev/null --label /w/made/new.txt /dev/null "$work/new.txt"
  diff -u --label /w/tail.txt --label /w/tail.txt "$host/tail.txt" "$edited/tail.txt"
} > "$work/want_out"
cmp -s "$work/want_out" "$work/out" || fail "--diff differs from diff -u: $(diff "$work/want_out" "$work/out")"

# ---- --export-changes reproduces the guest's view ----
"$MOONBOX" run --mount "$host:/w:overlay" --export-changes "$work/export" -e "$script" > /dev/null 2>&1 \
  || fail "--export-changes run failed"
[ -f "$work/export/.moonbox-changes.json" ] || fail "no manifest"
applied=$work/applied
cp -a "$host" "$applied"
(cd "$work/export/w" && find . -type f | while read -r f; do mkdir -p "$applied/$(dirname "$f")"; cp "$f" "$applied/$f"; done)
(cd "$work/export/w" && find . -type d | while read -r d; do mkdir -p "$applied/$d"; done)
# Removals and the sources of renames, from the manifest (a small jq-free reader).
python3 - "$work/export/.moonbox-changes.json" "$applied" <<'EOT' || fail "manifest unreadable"
import json, os, shutil, sys
for c in json.load(open(sys.argv[1])):
    targets = [c["path"]] if c["kind"] == "removed" else [c["from"]] if c["kind"] == "renamed" else []
    for t in targets:
        p = os.path.join(sys.argv[2], os.path.relpath(t, "/w"))
        if os.path.isdir(p) and not os.path.islink(p): os.rmdir(p)
        else: os.remove(p)
EOT
# What the guest saw, built by hand.
expect=$work/expect
cp -a "$edited" "$expect"
rm "$expect/c.txt"; mv "$expect/sub/b.txt" "$expect/b.txt"; rmdir "$expect/empty"
mkdir "$expect/made"; printf 'new\nfile\n' > "$expect/made/new.txt"
[ "$(picture "$applied")" == "$(picture "$expect")" ] || \
  fail "the export does not reproduce the edits: $(diff <(picture "$expect") <(picture "$applied"))"
"$MOONBOX" run --mount "$host:/w:overlay" --export-changes "$work/export" -e "$script" > /dev/null 2> "$work/err"
[ $? -eq 2 ] && grep -q "already holds an export" "$work/err" || fail "a second export into the same directory was not refused"
[ "$(picture "$host")" == "$before" ] || fail "the host tree changed"
diff -r "$host" "$work/orig" > /dev/null || fail "the host tree differs from its copy"

# ---- --json with --changes, and overlay from a policy file ----
printf '{"fs": {"mounts": [{"path": "/w", "host": "%s", "mode": "overlay"}]}}' "$host" > "$work/policy.json"
out=$("$MOONBOX" run --policy "$work/policy.json" --json --changes -e 'local h = io.open("/w/a.txt", "a") h:write("z") h:close()')
echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["changes"] == [{"path": "/w/a.txt", "kind": "modified", "type": "file", "size": 18}], r["changes"]
' || fail "--json changes: $out"
[ "$(picture "$host")" == "$before" ] || fail "the host tree changed"

# ---- io.stdin: --stdin FILE, piped input, a file redirect; /dev/null is empty ----
printf 'one\ntwo\n' > "$work/in.txt"
out=$("$MOONBOX" run --stdin "$work/in.txt" -e 'for l in io.lines() do io.write("[", l, "]") end')
[ "$out" == "[one][two]" ] || fail "--stdin FILE: $out"
out=$(printf '3 4' | "$MOONBOX" run -e 'print(io.read("n") + io.read("n"))')
[ "$out" == "7" ] || fail "piped stdin: $out"
out=$("$MOONBOX" run -e 'print(io.stdin:read("a"))' < "$work/in.txt")
[ "$out" == "$(printf 'one\ntwo\n')" ] || fail "redirected stdin: $out"
out=$("$MOONBOX" run -e 'print(io.read("a") == "", io.read())' < /dev/null)
[ "$out" == "$(printf 'true\tnil')" ] || fail "/dev/null stdin: $out"
# The script itself from stdin: then io.stdin is empty.
out=$(echo 'print(io.read())' | "$MOONBOX" run -)
[ "$out" == "nil" ] || fail "script on stdin: $out"
"$MOONBOX" run --stdin "$work/missing" -e 'print(1)' 2> "$work/err"
[ $? -eq 2 ] && grep -q "cannot open '$work/missing'" "$work/err" || fail "--stdin of a missing file: $(cat "$work/err")"

# ---- hostile names and sizes in --changes / --diff ----
# A name with a newline cannot forge a line of the summary or of the diff's headers.
plain=$(mktemp -d "$work/plain.XXXXXX")
"$MOONBOX" run --mount "$plain:/x:overlay" --changes --diff -e \
  'local f = io.open("/x/n.txt (5 bytes)\nmoonbox: removed  README", "w") f:write("hi\n") f:close()' \
  > "$work/out" 2> "$work/err"
grep -q '^moonbox: removed' "$work/err" && fail "a file name forged a --changes line: $(cat "$work/err")"
grep -q '^moonbox: removed' "$work/out" && fail "a file name forged a --diff line: $(cat "$work/out")"
grep -q 'n.txt (5 bytes)\\x0amoonbox: removed  README' "$work/err" ||
  fail "the name is not shown escaped: $(cat "$work/err")"
# A file of millions of lines is named, not diffed (the line tables are host memory).
out=$("$MOONBOX" run --mount "$plain:/x:overlay" --diff -e \
  'local f = io.open("/x/many.txt", "w") f:write(string.rep("\n", 3 << 20)) f:close()')
[ "$out" == "Files /dev/null and /x/many.txt differ (more lines than --diff compares)" ] ||
  fail "a 3 Mi-line file: $(echo "$out" | head -c 200)"

# ---- the same through a worker (--isolate process): byte-identical output ----
# The view and io.stdin stay in this process (the worker reaches them through the port), so
# --changes, --diff, --json --changes, --export-changes and --stdin print exactly what they
# print in-process.
printf 'first\nsecond\n' > "$work/iso_in.txt"
iso_script="$script"'
local l = io.read("l")
local h = assert(io.open("/tmp/from_stdin.txt", "w")); h:write(l, "|", io.read("a")); h:close()'
both() { # NAME ARGS...: the run in-process and in a worker, stdout and stderr compared
  local name=$1; shift
  "$MOONBOX" run "$@" > "$work/in.out" 2> "$work/in.err"; local rin=$?
  "$MOONBOX" run --isolate process "$@" > "$work/iso.out" 2> "$work/iso.err"; local riso=$?
  sed -i -E 's/"wall_us":[0-9]+/"wall_us":_/' "$work/in.out" "$work/iso.out" # the one clock
  sed -i -E 's/^(moonbox: ---- changes )[0-9a-f]{16}/\1_/' "$work/in.err" "$work/iso.err" # the nonce
  [ $rin -eq $riso ] || fail "$name: exit $rin in-process, $riso in a worker: $(cat "$work/iso.err")"
  cmp -s "$work/in.out" "$work/iso.out" ||
    fail "$name: stdout differs in a worker: $(diff "$work/in.out" "$work/iso.out" | head -20)"
  cmp -s "$work/in.err" "$work/iso.err" ||
    fail "$name: stderr differs in a worker: $(diff "$work/in.err" "$work/iso.err" | head -20)"
  [ -s "$work/in.out" ] || [ -s "$work/in.err" ] || fail "$name: printed nothing at all"
}
both "--changes --diff" --mount "$host:/w:overlay" --stdin "$work/iso_in.txt" --changes --diff \
  -e "$iso_script"
grep -q '^+first|second$' "$work/iso.out" || fail "a worker's io.stdin: $(cat "$work/iso.out")"
grep -q '^moonbox: created  /tmp/from_stdin.txt (13 bytes)$' "$work/iso.err" ||
  fail "a worker's change set: $(cat "$work/iso.err")"
both "--json --changes" --mount "$host:/w:overlay" --stdin "$work/iso_in.txt" --json --changes \
  -e "$iso_script; return io.read('a')"
rm -rf "$work/exp_in" "$work/exp_iso"
"$MOONBOX" run --mount "$host:/w:overlay" --export-changes "$work/exp_in" -e "$script" > /dev/null 2>&1
"$MOONBOX" run --isolate process --mount "$host:/w:overlay" --export-changes "$work/exp_iso" \
  -e "$script" > /dev/null 2> "$work/err" || fail "--export-changes in a worker: $(cat "$work/err")"
[ -n "$(picture "$work/exp_iso")" ] && [ "$(picture "$work/exp_in")" == "$(picture "$work/exp_iso")" ] ||
  fail "--export-changes differs in a worker: $(diff <(picture "$work/exp_in") <(picture "$work/exp_iso"))"
out=$(printf '3 4' | "$MOONBOX" run --isolate process -e 'print(io.read("n") + io.read("n"))')
[ "$out" == "7" ] || fail "piped stdin in a worker: $out"
[ "$(picture "$host")" == "$before" ] || fail "a worker's overlay modified the host tree"

if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all fs change-set CLI tests passed"
