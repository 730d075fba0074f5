/*
 * no_cma: run a command with single copy between processes denied.
 *
 *   no_cma COMMAND [ARGS...]
 *
 * Installs a seccomp filter under which process_vm_readv and process_vm_writev fail with
 * EPERM, the error a kernel gives when ptrace rules or a container's seccomp profile forbid
 * them, then execs COMMAND (found on PATH). The filter is inherited by COMMAND and everything
 * it starts, and cannot be removed. Everything else is allowed.
 *
 * Before exec it checks that the filter bites (a process_vm_readv of our own memory must fail
 * with EPERM), so a test run under it cannot pass by accident on a kernel that ignored it.
 *
 * Exit status: COMMAND's; 77 where the filter cannot be had (not x86_64, no seccomp filter
 * support in the kernel), so a test can skip; 126 for other failures before exec, 127 when
 * COMMAND cannot be executed.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#define NO_CMA_SKIP	77
#define NO_CMA_FAIL	126
#define NO_CMA_NOEXEC	127

#if defined(__x86_64__)
#define NO_CMA_ARCH		AUDIT_ARCH_X86_64
/* the x32 ABI shares the x86_64 arch value and marks its numbers with this bit */
#define NO_CMA_X32_BIT		0x40000000u
#define NO_CMA_X32_READV	(NO_CMA_X32_BIT | 539u)
#define NO_CMA_X32_WRITEV	(NO_CMA_X32_BIT | 540u)
#endif

static int no_cma_install(void)
{
#ifdef NO_CMA_ARCH
	struct sock_filter insns[] = {
		/* a syscall number means nothing without its ABI: other ABIs end the process */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NO_CMA_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 4, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NO_CMA_X32_READV, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NO_CMA_X32_WRITEV, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
	};
	struct sock_fprog prog = {
		.len = (unsigned short)(sizeof(insns) / sizeof(insns[0])),
		.filter = insns,
	};

	/* without it an unprivileged process may not install a filter; it also keeps a setuid
	 * program started below from running with the filter it never agreed to */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		fprintf(stderr, "no_cma: prctl(PR_SET_NO_NEW_PRIVS): %s\n", strerror(errno));
		return NO_CMA_FAIL;
	}
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
		int err = errno;

		fprintf(stderr, "no_cma: seccomp(SECCOMP_SET_MODE_FILTER): %s\n", strerror(err));
		return err == EINVAL || err == ENOSYS ? NO_CMA_SKIP : NO_CMA_FAIL;
	}
	return 0;
#else
	fprintf(stderr, "no_cma: only x86_64 is supported\n");
	return NO_CMA_SKIP;
#endif
}

/* The filter must refuse a copy from our own memory, which the kernel always allows. */
static int no_cma_verify(void)
{
	uint64_t src = 0x6e6f5f636d61ULL, dst = 0;
	struct iovec l = { .iov_base = &dst, .iov_len = sizeof(dst) };
	struct iovec r = { .iov_base = &src, .iov_len = sizeof(src) };
	ssize_t ret;

	ret = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	if (ret < 0 && errno == EPERM)
		return 0;
	fprintf(stderr, "no_cma: the filter does not bite: process_vm_readv returned %zd (%s)\n",
		ret, ret < 0 ? strerror(errno) : "success");
	return NO_CMA_FAIL;
}

int main(int argc, char **argv)
{
	int ret;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(argc < 2 ? stderr : stdout,
			"usage: no_cma COMMAND [ARGS...]\n"
			"runs COMMAND with process_vm_readv/process_vm_writev failing with EPERM\n");
		return argc < 2 ? NO_CMA_FAIL : 0;
	}
	ret = no_cma_install();
	if (!ret)
		ret = no_cma_verify();
	if (ret)
		return ret;
	execvp(argv[1], argv + 1);
	fprintf(stderr, "no_cma: cannot execute %s: %s\n", argv[1], strerror(errno));
	return NO_CMA_NOEXEC;
}
