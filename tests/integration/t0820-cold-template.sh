#!/bin/bash
# The /etc template: built once per identity in the runtime directory,
# bound read-only into each sandbox, the same /etc a sandbox would have
# written for itself, and never used when it is not what it should be.
. "$(dirname "$0")/../lib.sh"
test_user_prereqs
if [ -z "${prereq_missing[USER]:-}" ] &&
   ! setpriv --reuid="$TEST_USER" --regid="$TEST_USER" --init-groups test -x "$WARD"; then
	test_set_prereq_missing USER "$TEST_USER cannot reach $WARD"
fi
as_user() { setpriv --reuid="$TEST_USER" --regid="$TEST_USER" --init-groups "$@"; }

RUNDIR=/run/ward
# What /etc holds, seen from inside: every entry's type and mode, and
# each file's digest; the bound host directories only by name.
LIST='cd /etc && find . \( -path ./alternatives/\* -o -path ./ssl/certs/\* -o -path ./fonts/\* \) -prune -o -printf "%p %y %m\n" | sort &&
	find . \( -path ./alternatives -o -path ./ssl/certs -o -path ./fonts \) -prune -o -type f -print | sort | xargs md5sum'
# The mount the sandbox's /etc comes from (its root in the host's tree).
ETC_SRC='awk "\$5 == \"/etc\" { s = \$4 } END { print s ? s : \"none\" }" /proc/self/mountinfo'
templates() { ls -d $RUNDIR/etc-* 2>/dev/null | wc -l; }
# The template the default policy uses, as the sandbox's mount table names it.
template() { "$WARD" run -q -- sh -c "$ETC_SRC" | sed "s|/etc\$||"; }

test_expect_success REALROOT 'the sandbox'"'"'s /etc is the template, bound read-only, nosuid, nodev, noexec' '
	"$WARD" run -q -- sh -c "$ETC_SRC; grep \" /etc \" /proc/self/mountinfo" > out &&
	src=$(head -1 out) && expect_contains "$src" "$RUNDIR/etc-" &&
	opts=$(tail -1 out | cut -d" " -f6) &&
	for o in ro nosuid nodev noexec; do expect_contains ",$opts," ",$o," || exit 1; done
'
test_expect_success REALROOT 'the template holds the same /etc as a synthesized one' '
	"$WARD" run -q -- sh -c "$LIST" > with-template &&
	# a runtime directory that others may write is refused: synthesized
	mode=$(stat -c %a $RUNDIR) && chmod 0777 $RUNDIR &&
	{ "$WARD" run -q -- sh -c "$ETC_SRC; $LIST" > synthesized; rc=$?; chmod "$mode" $RUNDIR; [ $rc = 0 ]; } &&
	expect_eq "$(head -1 synthesized)" none &&
	tail -n +2 synthesized > synthesized.list &&
	grep -q "  ./passwd\$" with-template && grep -q "  ./ld.so.cache\$" with-template &&
	diff with-template synthesized.list
'
test_expect_success REALROOT 'a sandbox cannot write the template, and the next run sees nothing of it' '
	t=$(template) && ino=$(stat -c %i "$t") && cp "$t/etc/passwd" passwd.before &&
	"$WARD" run -q -- sh -c "for f in /etc/passwd /etc/x /etc/ssl/y; do
		if echo x > \$f; then echo WROTE \$f; fi; done 2>&1;
		touch /etc/hosts 2>&1; chmod 777 /etc/passwd 2>&1; rm /etc/group 2>&1; mkdir /etc/d 2>&1" > out
	! grep -q WROTE out && expect_eq "$(grep -c "Read-only file system" out)" 6 &&
	expect_eq "$(grep -v -E "Read-only file system|Permission denied" out)" "" &&
	cmp "$t/etc/passwd" passwd.before && expect_eq "$(stat -c %i "$t")" "$ino" &&
	"$WARD" run -q -- sh -c "cat /etc/passwd; test ! -e /etc/x && test ! -e /etc/d && test -e /etc/group" > passwd.after &&
	cmp passwd.before passwd.after
'
test_expect_success REALROOT 'a tampered template is not used: it is rebuilt' '
	"$WARD" run -q -- cat /etc/passwd > want &&
	t=$(template) && echo "evil:x:0:0::/:/bin/sh" >> "$t/etc/passwd" &&
	"$WARD" run -q -- cat /etc/passwd > got && cmp want got &&
	# a same-size rewrite in place: the ctime tells
	t=$(template) && printf X | dd of="$t/etc/passwd" bs=1 seek=0 conv=notrunc 2>/dev/null &&
	"$WARD" run -q -- cat /etc/passwd > got && cmp want got &&
	# an entry planted beside the others
	t=$(template) && echo secret > "$t/etc/shadow" &&
	"$WARD" run -q -- sh -c "test ! -e /etc/shadow" &&
	expect_eq "$(ls -A $RUNDIR | grep -c "^\.")" 0
'
test_expect_success REALROOT 'a template made writable by others, or owned by another user, is not used' '
	"$WARD" run -q -- cat /etc/hosts > want &&
	t=$(template) && chmod o+w "$t/etc/hosts" &&
	"$WARD" run -q -- cat /etc/hosts > got && cmp want got &&
	t=$(template) && expect_eq "$(stat -c %a "$t/etc/hosts")" 644 &&
	t=$(template) && chmod g+w "$t/etc" &&
	"$WARD" run -q -- true && t=$(template) && expect_eq "$(stat -c %a "$t/etc")" 755 &&
	t=$(template) && chown nobody "$t" &&
	"$WARD" run -q -- true && t=$(template) && expect_eq "$(stat -c %U "$t")" root
'
test_expect_success REALROOT 'one template per identity, not per run; no template for a hostname of the policy'"'"'s' '
	"$WARD" run -q -- true && n=$(templates) &&
	i=0; while [ $i -lt 20 ]; do "$WARD" run -q -- true || exit 1; i=$((i + 1)); done &&
	expect_eq "$(templates)" "$n" &&
	# the hostname is the policy'"'"'s: callers must not choose how many
	# templates there are, so such an /etc is written per sandbox
	echo "{\"hostname\": \"other$$\"}" > p.json &&
	"$WARD" run -q --policy p.json -- sh -c "$ETC_SRC; cat /etc/hostname; grep other$$ /etc/hosts" > out &&
	expect_eq "$(head -2 out)" "none
other$$" && expect_contains "$(tail -1 out)" "other$$" &&
	expect_eq "$(templates)" "$n" &&
	expect_eq "$(ls -A $RUNDIR | grep -c "^\.")" 0
'
test_expect_success REALROOT 'at most 8 templates: past that, /etc is written per sandbox' '
	t=$(template) &&
	i=0; while [ $i -lt 8 ]; do
		mkdir "$RUNDIR/etc-planted$$-$i" && touch "$RUNDIR/etc-planted$$-$i/manifest"; i=$((i + 1))
	done &&
	rm -rf "$t" &&
	"$WARD" run -q -- sh -c "$ETC_SRC; cat /etc/hostname" > out; rc=$?
	rm -rf "$RUNDIR"/etc-planted$$-*
	[ $rc = 0 ] && expect_eq "$(cat out)" "none
sandbox" && test ! -e "$t" &&
	"$WARD" run -q -- true && test -d "$t"
'
test_expect_success REALROOT 'ward gc removes templates unused for a day, never one in use' '
	t=$(template) &&
	mkdir "$RUNDIR/etc-old$$" && touch -d "2 days ago" "$RUNDIR/etc-old$$/manifest" &&
	mkdir "$RUNDIR/etc-recent$$" && touch "$RUNDIR/etc-recent$$/manifest" &&
	"$WARD" gc > out; rc=$?
	ok=0; test ! -e "$RUNDIR/etc-old$$" && test -d "$RUNDIR/etc-recent$$" && ok=1
	rm -rf "$RUNDIR/etc-old$$" "$RUNDIR/etc-recent$$"
	[ $rc = 0 ] && [ $ok = 1 ] && test -d "$t" && expect_contains "$(cat out)" "removed 1 unused template"
'
test_expect_success USER 'rootless: the template is the user'"'"'s, in its own state directory' '
	mkdir home && chown "$TEST_USER" home &&
	as_user env -u XDG_RUNTIME_DIR -u XDG_STATE_HOME HOME="$PWD/home" \
		"$WARD" run -q -- sh -c "$ETC_SRC; cat /etc/passwd" > out &&
	expect_contains "$(head -1 out)" "/.local/state/ward/etc-" &&
	grep -q "^sandbox:" out &&
	expect_eq "$(stat -c %U home/.local/state/ward/etc-*)" "$TEST_USER"
'
test_expect_success USER 'rootless: a state directory writable by others is refused; /etc is synthesized' '
	mkdir home2 && chown "$TEST_USER" home2 &&
	as_user mkdir -p home2/.local/state/ward && chmod 0777 home2/.local/state/ward &&
	as_user env -u XDG_RUNTIME_DIR -u XDG_STATE_HOME HOME="$PWD/home2" \
		"$WARD" run -q -- sh -c "$ETC_SRC; cat /etc/hostname" > out &&
	expect_eq "$(head -1 out)" none && expect_eq "$(tail -1 out)" sandbox &&
	expect_eq "$(ls home2/.local/state/ward)" ""
'
# Unprivileged (as a user, or root of a user namespace): the runtime
# directory is under a private HOME.
uw() { env -u XDG_RUNTIME_DIR -u XDG_STATE_HOME HOME="$TEST_TMP/uhome" "$WARD" run -q "$@"; }
UDIR=$TEST_TMP/uhome/.local/state/ward
mkdir -p "$TEST_TMP/uhome"
test_expect_success NONROOT 'unprivileged: /etc is a template in the user'"'"'s state directory, the same as a synthesized one' '
	uw -- sh -c "$ETC_SRC" > src && expect_contains "$(cat src)" "$UDIR/etc-" &&
	uw -- sh -c "$LIST" > with-template &&
	env -u HOME -u XDG_RUNTIME_DIR -u XDG_STATE_HOME "$WARD" run -q -- sh -c "$ETC_SRC; $LIST" > synthesized &&
	expect_eq "$(head -1 synthesized)" none &&
	tail -n +2 synthesized > synthesized.list &&
	grep -q "  ./passwd\$" with-template && diff with-template synthesized.list
'
test_expect_success NONROOT 'unprivileged: the template cannot be written from inside; a tampered one is rebuilt' '
	uw -- sh -c "echo x > /etc/passwd; echo x > /etc/new" 2> err; grep -c "Read-only file system" err > n &&
	expect_eq "$(cat n)" 2 &&
	uw -- cat /etc/passwd > want &&
	t=$(ls -d "$UDIR"/etc-* | head -1) && chmod u+w "$t/etc/passwd" && echo "evil:x:0:0::/:/bin/sh" >> "$t/etc/passwd" &&
	uw -- cat /etc/passwd > got && cmp want got &&
	expect_eq "$(ls -d "$UDIR"/etc-* | wc -l)" 1
'
test_done
