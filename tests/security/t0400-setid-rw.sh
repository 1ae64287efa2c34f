#!/bin/bash
# No set-id file can come out of a --rw directory. As root, --rw is an
# idmapped mount on which the sandbox user is the directory's owner on the
# host, so a setuid file made there would run on the host as that owner.
# Seccomp refuses every mode with S_ISUID or S_ISGID (docs/seccomp.md); here
# each way of setting one is tried on the mount itself, then the host looks.
. "$(dirname "$0")/../lib.sh"

test_user_prereqs
[ -x "$WARD_PROBE" ] || test_set_prereq_missing PROBE "no ward-probe at $WARD_PROBE"

# A directory of the user's, as a caller would hand it to ward.
user_dir() { d=$(mktemp -d "$TEST_TMP/out.XXXXXX") && chown "$TEST_USER:$TEST_USER" "$d" && chmod 755 "$d"; }
setid_on_host() { find "$1" -perm /6000 -printf '%m %u %p\n'; }

items="chmod-setuid chmod-setgid chmod-setuid-high fchmod-setuid fchmodat-setgid
fchmodat2-setuid open-creat-setuid openat-creat-setgid openat-tmpfile-setuid
creat-setuid mkdir-setgid mkdirat-setuid mknod-setuid mknodat-setgid"

for item in $items; do
	test_expect_success REALROOT,USER,PROBE "$item on a user's --rw mount: EPERM" '
		user_dir &&
		out=$("$WARD" run -q --ro "$WARD_PROBE:/probe" --rw "$d:/out" -- /probe '"$item"' /out) &&
		expect_eq "$out" "'"$item"' errno=EPERM" && expect_eq "$(setid_on_host "$d")" ""
	'
done
test_expect_success REALROOT,USER,PROBE 'a plain mode on that mount still works (the control)' '
	user_dir &&
	out=$("$WARD" run -q --ro "$WARD_PROBE:/probe" --rw "$d:/out" -- /probe chmod-sticky /out) &&
	expect_eq "$out" "chmod-sticky ok"
'

# The ways a program or a tool would do it; the files are left for the host
# to look at. Each step must fail, and the run itself must work.
script='cd /out && echo "#!/bin/sh" > f && chmod 755 f && cp /bin/true t &&
chmod u+s f; chmod g+s t; chmod 6755 f
install -m 4755 f i; mkdir -m 2755 d; cp -p /usr/bin/su s 2>/dev/null
python3 - <<EOF 2>/dev/null
import os, io, tarfile
for m in (0o4755, 0o2755):
    try: os.close(os.open("o%o" % m, os.O_CREAT | os.O_WRONLY, m))
    except OSError: pass
b = io.BytesIO()
with tarfile.open(fileobj=b, mode="w") as t:
    i = tarfile.TarInfo("tarred"); i.mode = 0o6755; t.addfile(i, io.BytesIO(b""))
b.seek(0)
tarfile.open(fileobj=b).extractall("/out")
EOF
echo done'
test_expect_success REALROOT,USER,PYTHON 'no file in a user'"'"'s --rw directory ends up setuid or setgid on the host' '
	user_dir &&
	out=$("$WARD" run -q --rw "$d:/out" -- sh -c "$script" 2>err) &&
	expect_eq "$out" done && [ -f "$d/tarred" ] && [ -x "$d/f" ] &&
	expect_eq "$(stat -c %U "$d/f")" "$TEST_USER" &&
	expect_eq "$(setid_on_host "$d")" ""
'
# Rootless the files are the caller'"'"'s own: still no set-id bit.
test_expect_success NONROOT,PYTHON 'rootless, no file in a --rw directory ends up setuid or setgid' '
	d=$(mktemp -d "$TEST_TMP/out.XXXXXX") &&
	out=$("$WARD" run -q --rw "$d:/out" -- sh -c "$script" 2>err) &&
	expect_eq "$out" done && [ -f "$d/tarred" ] && expect_eq "$(setid_on_host "$d")" ""
'
test_done
