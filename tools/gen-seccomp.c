/* tools/gen-seccomp.c — compiles ward's seccomp policy into BPF at build time.
 *
 * Usage: gen-seccomp OUTPUT.h    writes the program as a C array
 *        gen-seccomp --time      prints how long libseccomp takes
 *
 * The program has two parts, both from lib/layers/seccomp-rules.h:
 *   1. argument guards, hand-assembled: clone, ioctl, personality, socket,
 *      socketpair, memfd_create and the calls that take a file mode (open,
 *      openat, creat, mkdir, mkdirat, mknod, mknodat, chmod, fchmod,
 *      fchmodat, fchmodat2) are refused with a specific errno for some
 *      argument values.
 *      libseccomp cannot express "errno E unless the argument is in a set"
 *      for a syscall that is otherwise allowed (an unconditional rule absorbs
 *      the conditional ones), so these few checks are written by hand. They
 *      only return an errno or fall through to part 2.
 *   2. the allowlist table, compiled by libseccomp: architecture check (other
 *      ABIs, including x32 numbers, kill the process), allowed syscalls,
 *      refused ones with their errno, and ENOSYS for everything else.
 * A build-time tool, never linked into ward: it may allocate and print.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "layers/seccomp-rules.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define RET_ERRNO(e) (SECCOMP_RET_ERRNO | ((uint32_t)(e) & SECCOMP_RET_DATA))
/* The low word of a 64-bit argument (x86_64 is little-endian). */
#define ARG_LO(i) ((uint32_t)offsetof(struct seccomp_data, args[i]))

/* --- a tiny assembler with forward labels for the guard part --- */

enum label {
	L_NEXT = -1,    /* the following instruction */
	L_TABLE,        /* the end of the guards: the libseccomp program */
	L_CLONE, L_IOCTL, L_IOCTL_DENY, L_PERSONALITY, L_SOCKET, L_SOCKET_DENY,
	L_SOCKETPAIR, L_MEMFD, L_OPEN, L_OPENAT, L_MODE_ARG1, L_MODE_ARG2,
	L_MODE_ARG3, L_MODE_CHECK,
	L_COUNT,
};

enum { GUARD_MAX = 128 };

struct bpf_asm {
	struct sock_filter insn[GUARD_MAX];
	enum label jt[GUARD_MAX], jf[GUARD_MAX];
	long at[L_COUNT];
	size_t n;
	int overflow;
};

static void emit(struct bpf_asm *a, uint16_t code, uint32_t k, enum label jt,
		 enum label jf)
{
	if (a->n == GUARD_MAX) {
		a->overflow = 1;
		return;
	}
	a->insn[a->n] = (struct sock_filter){ code, 0, 0, k };
	a->jt[a->n] = jt;
	a->jf[a->n] = jf;
	a->n++;
}

static void stmt(struct bpf_asm *a, uint16_t code, uint32_t k)
{
	emit(a, code, k, L_NEXT, L_NEXT);
}

static void here(struct bpf_asm *a, enum label l)
{
	a->at[l] = (long)a->n;
}

/* Resolves every label into a relative offset; forward jumps only. */
static int link_labels(struct bpf_asm *a)
{
	here(a, L_TABLE);
	for (size_t i = 0; i < a->n; i++) {
		struct sock_filter *f = &a->insn[i];
		enum label ls[2] = { a->jt[i], a->jf[i] };
		long off[2];

		if (BPF_CLASS(f->code) != BPF_JMP)
			continue;
		for (int j = 0; j < 2; j++) {
			off[j] = ls[j] == L_NEXT ? 0 : a->at[ls[j]] - (long)i - 1;
			if (ls[j] != L_NEXT && (a->at[ls[j]] < 0 || off[j] < 0 || off[j] > 255))
				return -1;
		}
		if (BPF_OP(f->code) == BPF_JA)
			f->k = (uint32_t)off[0];
		else {
			f->jt = (uint8_t)off[0];
			f->jf = (uint8_t)off[1];
		}
	}
	return a->overflow ? -1 : 0;
}

/* The calls whose mode argument is always read, and its index. open and
 * openat read theirs only when they create, and are dispatched apart. */
static const struct {
	int nr, arg;
} mode_calls[] = {
	{ __NR_chmod, 1 }, { __NR_fchmod, 1 }, { __NR_creat, 1 },
	{ __NR_mkdir, 1 }, { __NR_mknod, 1 }, { __NR_fchmodat, 2 },
	{ __NR_fchmodat2, 2 }, { __NR_mkdirat, 2 }, { __NR_mknodat, 2 },
};

static void guard_dispatch(struct bpf_asm *a)
{
	/* Foreign ABIs go straight to the table, whose arch check kills them;
	 * x32 numbers (bit 30 set) match none of the numbers below. */
	stmt(a, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, L_NEXT, L_TABLE);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, L_CLONE, L_NEXT);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, L_IOCTL, L_NEXT);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, __NR_personality, L_PERSONALITY, L_NEXT);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, L_SOCKET, L_NEXT);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, __NR_socketpair, L_SOCKETPAIR, L_NEXT);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, __NR_memfd_create, L_MEMFD, L_NEXT);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, __NR_open, L_OPEN, L_NEXT);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, L_OPENAT, L_NEXT);
	for (size_t i = 0; i < ARRAY_SIZE(mode_calls); i++)
		emit(a, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)mode_calls[i].nr,
		     mode_calls[i].arg == 1 ? L_MODE_ARG1 : L_MODE_ARG2, L_NEXT);
	emit(a, BPF_JMP | BPF_JA, 0, L_TABLE, L_TABLE);
}

static void guard_clone_ioctl(struct bpf_asm *a)
{
	here(a, L_CLONE);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
	emit(a, BPF_JMP | BPF_JSET | BPF_K, WARD_SC_CLONE_NS_FLAGS, L_NEXT, L_TABLE);
	stmt(a, BPF_RET | BPF_K, RET_ERRNO(WARD_SC_CLONE_ERRNO));

	here(a, L_IOCTL);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(1));
	for (size_t i = 0; i < ARRAY_SIZE(ward_sc_ioctl_denied); i++)
		emit(a, BPF_JMP | BPF_JEQ | BPF_K, ward_sc_ioctl_denied[i],
		     L_IOCTL_DENY, L_NEXT);
	emit(a, BPF_JMP | BPF_JA, 0, L_TABLE, L_TABLE);
	here(a, L_IOCTL_DENY);
	stmt(a, BPF_RET | BPF_K, RET_ERRNO(WARD_SC_IOCTL_ERRNO));
}

static void guard_personality_socket(struct bpf_asm *a)
{
	here(a, L_PERSONALITY);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
	for (size_t i = 0; i < ARRAY_SIZE(ward_sc_personality_allowed); i++)
		emit(a, BPF_JMP | BPF_JEQ | BPF_K, ward_sc_personality_allowed[i],
		     L_TABLE, L_NEXT);
	stmt(a, BPF_RET | BPF_K, RET_ERRNO(WARD_SC_PERSONALITY_ERRNO));

	here(a, L_SOCKET);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
	for (size_t i = 0; i < ARRAY_SIZE(ward_sc_socket_families); i++)
		emit(a, BPF_JMP | BPF_JEQ | BPF_K, ward_sc_socket_families[i],
		     L_TABLE, L_NEXT);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, L_NEXT, L_SOCKET_DENY);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(2));
	for (size_t i = 0; i < ARRAY_SIZE(ward_sc_netlink_protocols); i++)
		emit(a, BPF_JMP | BPF_JEQ | BPF_K, ward_sc_netlink_protocols[i],
		     L_TABLE, L_NEXT);
	stmt(a, BPF_RET | BPF_K, RET_ERRNO(WARD_SC_NETLINK_ERRNO));

	here(a, L_SOCKETPAIR);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, WARD_SC_SOCKETPAIR_FAMILY, L_TABLE, L_NEXT);
	here(a, L_SOCKET_DENY);
	stmt(a, BPF_RET | BPF_K, RET_ERRNO(WARD_SC_SOCKET_ERRNO));

	here(a, L_MEMFD);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(1));
	emit(a, BPF_JMP | BPF_JSET | BPF_K, WARD_SC_MEMFD_REQUIRED, L_TABLE, L_NEXT);
	stmt(a, BPF_RET | BPF_K, RET_ERRNO(WARD_SC_MEMFD_ERRNO));
}

/* A set-id mode: EPERM. open and openat look at the mode only when their
 * flags create a file, as the kernel does (it ignores the mode otherwise). */
static void guard_setid_mode(struct bpf_asm *a)
{
	here(a, L_OPEN);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(1));
	emit(a, BPF_JMP | BPF_JSET | BPF_K, WARD_SC_CREATE_FLAGS, L_MODE_ARG2, L_TABLE);
	here(a, L_OPENAT);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(2));
	emit(a, BPF_JMP | BPF_JSET | BPF_K, WARD_SC_CREATE_FLAGS, L_MODE_ARG3, L_TABLE);

	here(a, L_MODE_ARG1);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(1));
	emit(a, BPF_JMP | BPF_JA, 0, L_MODE_CHECK, L_MODE_CHECK);
	here(a, L_MODE_ARG2);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(2));
	emit(a, BPF_JMP | BPF_JA, 0, L_MODE_CHECK, L_MODE_CHECK);
	here(a, L_MODE_ARG3);
	stmt(a, BPF_LD | BPF_W | BPF_ABS, ARG_LO(3));
	here(a, L_MODE_CHECK);
	emit(a, BPF_JMP | BPF_JSET | BPF_K, WARD_SC_SETID_MODE, L_NEXT, L_TABLE);
	stmt(a, BPF_RET | BPF_K, RET_ERRNO(WARD_SC_SETID_ERRNO));
}

static int build_guards(struct bpf_asm *a)
{
	memset(a, 0, sizeof(*a));
	for (int l = 0; l < L_COUNT; l++)
		a->at[l] = -1;
	guard_dispatch(a);
	guard_clone_ioctl(a);
	guard_personality_socket(a);
	guard_setid_mode(a);
	if (link_labels(a) < 0) {
		fprintf(stderr, "gen-seccomp: guard program does not assemble\n");
		return -1;
	}
	return 0;
}

/* --- the table, through libseccomp --- */

/* A typo in a raw number or a rule listed twice would silently change the
 * policy; refuse both. */
static int check_table(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(ward_sc_rules); i++) {
		const struct ward_sc_rule *r = &ward_sc_rules[i];
		int known = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, r->name);

		if (r->nr < 0 || (known != __NR_SCMP_ERROR && known != r->nr)) {
			fprintf(stderr, "gen-seccomp: %s: number %d, libseccomp says %d\n",
				r->name, r->nr, known);
			return -1;
		}
		for (size_t j = 0; j < i; j++)
			if (ward_sc_rules[j].nr == r->nr) {
				fprintf(stderr, "gen-seccomp: %s: listed twice\n", r->name);
				return -1;
			}
	}
	return 0;
}

static scmp_filter_ctx table_ctx(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(WARD_SC_DEFAULT_ERRNO));
	int r;

	if (!ctx)
		return NULL;
	/* x86_64 only (not NATIVE: the output must not depend on the build
	 * machine); anything else, x32 numbers included, kills the process. */
	r = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE);
	if (r == 0 || r == -EEXIST)
		r = seccomp_arch_add(ctx, SCMP_ARCH_X86_64);
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	/* A binary tree of syscall numbers instead of a linear list. */
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(ward_sc_rules); i++) {
		const struct ward_sc_rule *rule = &ward_sc_rules[i];
		uint32_t action = rule->errnum ? SCMP_ACT_ERRNO((uint32_t)rule->errnum)
					       : SCMP_ACT_ALLOW;
		/* Listed for the record (docs, probe): libseccomp refuses a
		 * rule that repeats the default action. */
		if (action == SCMP_ACT_ERRNO(WARD_SC_DEFAULT_ERRNO))
			continue;
		r = seccomp_rule_add_exact(ctx, action, rule->nr, 0);
		if (r < 0)
			fprintf(stderr, "gen-seccomp: %s: %s\n", rule->name, strerror(-r));
	}
	if (r < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

/* Compiles the table and reads the BPF back through a memfd. */
static struct sock_filter *build_table(size_t *n)
{
	scmp_filter_ctx ctx = table_ctx();
	struct sock_filter *insn = NULL;
	struct stat st;
	int fd;

	if (!ctx)
		return NULL;
	fd = memfd_create("ward-seccomp", MFD_CLOEXEC);
	if (fd >= 0 && seccomp_export_bpf(ctx, fd) == 0 && fstat(fd, &st) == 0 &&
	    st.st_size > 0 && st.st_size % (off_t)sizeof(*insn) == 0) {
		insn = malloc((size_t)st.st_size);
		if (insn && pread(fd, insn, (size_t)st.st_size, 0) != st.st_size) {
			free(insn);
			insn = NULL;
		}
		*n = (size_t)st.st_size / sizeof(*insn);
	}
	if (!insn)
		fprintf(stderr, "gen-seccomp: unable to export the table program\n");
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
	return insn;
}

/* --- output --- */

static void write_insns(FILE *f, const struct sock_filter *insn, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "\t{ 0x%02x, %3u, %3u, 0x%08x },\n", insn[i].code,
			insn[i].jt, insn[i].jf, insn[i].k);
}

static int write_header(const char *path, const struct bpf_asm *guards,
			const struct sock_filter *table, size_t n_table)
{
	const struct scmp_version *v = seccomp_version();
	FILE *f = fopen(path, "we");

	if (!f) {
		fprintf(stderr, "gen-seccomp: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "/* Generated by tools/gen-seccomp.c from lib/layers/seccomp-rules.h"
		   " (libseccomp %u.%u.%u).\n * Do not edit. */\n",
		v->major, v->minor, v->micro);
	fprintf(f, "#ifndef WARD_SECCOMP_BPF_H\n#define WARD_SECCOMP_BPF_H\n\n");
	fprintf(f, "#include <linux/filter.h>\n\n");
	fprintf(f, "/* %zu rules; %zu guard + %zu table instructions. */\n",
		ARRAY_SIZE(ward_sc_rules), guards->n, n_table);
	fprintf(f, "static const struct sock_filter ward_seccomp_program[] = {\n");
	fprintf(f, "\t/* argument guards */\n");
	write_insns(f, guards->insn, guards->n);
	fprintf(f, "\t/* allowlist table (libseccomp) */\n");
	write_insns(f, table, n_table);
	fprintf(f, "};\n\n#endif\n");
	if (fclose(f) != 0) {
		fprintf(stderr, "gen-seccomp: %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Why the program is compiled here and not per run. */
static int print_timing(void)
{
	enum { ROUNDS = 20 };
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t0 = now_ns();
		size_t n;
		struct sock_filter *p = build_table(&n);
		uint64_t dt = now_ns() - t0;

		if (!p)
			return 1;
		free(p);
		if (dt < best)
			best = dt;
	}
	printf("libseccomp compile+export: best of %d: %llu us\n", ROUNDS,
	       (unsigned long long)(best / 1000));
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_asm guards;
	struct sock_filter *table;
	size_t n_table = 0;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: gen-seccomp OUTPUT.h | --time\n");
		return 2;
	}
	if (check_table() < 0)
		return 1;
	if (strcmp(argv[1], "--time") == 0)
		return print_timing();
	if (build_guards(&guards) < 0)
		return 1;
	table = build_table(&n_table);
	if (!table)
		return 1;
	if (guards.n + n_table > BPF_MAXINSNS) {
		fprintf(stderr, "gen-seccomp: %zu instructions, over BPF_MAXINSNS\n",
			guards.n + n_table);
		free(table);
		return 1;
	}
	r = write_header(argv[1], &guards, table, n_table);
	free(table);
	return r < 0 ? 1 : 0;
}
