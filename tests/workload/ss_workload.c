/*
 * Ground-truth workload for sockscope's trace tests: performs exactly the
 * syscalls its options ask for, so a tracer's counts can be checked against
 * known numbers. Built statically (no dynamic loader probing paths, so no
 * stray failed opens).
 *
 *   -g N   N getppid calls in the main thread
 *   -W N   N one-byte writes to /dev/null (one openat + one close around them)
 *   -e N   N opens of a missing file (raw SYS_open on x86_64: glibc itself
 *          only uses openat, so these are the only `open` calls), all ENOENT
 *   -t T   T threads, created with pthread_create, each doing -G getppid
 *   -G N   getppid calls per thread
 *   -P     create the threads before waiting for -w's go (they wait on a
 *          barrier), so an attaching tracer must find them in /proc
 *   -c N   fork one child that makes N getppid calls and _exits
 *   -w     print "ready <pid>" and wait for one byte on stdin before working
 *   -b MS  busy mode: getppid in a loop, checking every result, for MS
 *          milliseconds or until stdin has data or is closed (checked every
 *          1000 calls); fails on any signal. Exit 0 on success, 3 on a wrong
 *          result, 4 on an unexpected signal or EINTR
 *   -r F   write this process's own getrusage(RUSAGE_SELF) to file F at the
 *          end: "utime_us stime_us nvcsw nivcsw minflt majflt"
 *   -n S   name the process S first (prctl PR_SET_NAME, one more syscall;
 *          threads and the -c child inherit it): any bytes, escapes too
 *   -s N   N short-lived threads, started in batches of four and joined
 *          batch by batch (after -t's threads): each spins -u microseconds
 *          on the vDSO clock around three getppid calls, then exits; most
 *          live less than a scheduler tick
 *   -u US  spin time of each -s thread (default 100)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long thread_getppid;
static pthread_barrier_t start_barrier;
static int prestart;
static volatile sig_atomic_t got_signal;
static long short_spin_us = 100;

static void on_signal(int sig)
{
	(void)sig;
	got_signal = 1;
}

static void *worker(void *arg)
{
	(void)arg;
	if (prestart)
		pthread_barrier_wait(&start_barrier);
	for (long i = 0; i < thread_getppid; i++)
		syscall(SYS_getppid);
	return NULL;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no syscall */
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static long now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no syscall */
	return ts.tv_sec * 1000000L + ts.tv_nsec / 1000L;
}

static void *short_lived(void *arg)
{
	(void)arg;
	long start = now_us(), end = start + short_spin_us;
	syscall(SYS_getppid);
	while (now_us() < start + short_spin_us / 2)
		;
	syscall(SYS_getppid);
	while (now_us() < end)
		;
	syscall(SYS_getppid);
	return NULL;
}

/* -s: n threads, four at a time, so several are alive at once and each
 * lives a fraction of a tick. */
static int short_threads(long n)
{
	pthread_t batch[4];
	while (n > 0) {
		int k = n < 4 ? (int)n : 4;
		for (int i = 0; i < k; i++)
			if (pthread_create(&batch[i], NULL, short_lived, NULL) != 0)
				return 10;
		for (int i = 0; i < k; i++)
			pthread_join(batch[i], NULL);
		n -= k;
	}
	return 0;
}

static int busy(long ms)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	/* Any of these arriving means a tracer disturbed us. */
	int sigs[] = { SIGTRAP, SIGINT, SIGTERM, SIGHUP, SIGUSR1,
		       SIGUSR2, SIGCHLD, SIGCONT, SIGALRM, SIGPIPE };
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	long expect = syscall(SYS_getppid);
	long end = now_ms() + ms, calls = 0;
	while (now_ms() < end) {
		for (int i = 0; i < 1000; i++, calls++) {
			errno = 0;
			long r = syscall(SYS_getppid);
			if (r != expect)
				return errno == EINTR ? 4 : 3;
		}
		if (got_signal)
			return 4;
		struct pollfd in = { .fd = 0, .events = POLLIN };
		if (poll(&in, 1, 0) == 1)
			break;
	}
	return calls > 0 ? 0 : 3;
}

int main(int argc, char **argv)
{
	long getppid_n = 0, writes = 0, enoent = 0, threads = 0, child_n = -1, busy_ms = -1;
	long short_n = 0;
	int wait_go = 0;
	const char *rusage_file = NULL, *name = NULL;
	int opt;

	while ((opt = getopt(argc, argv, "g:W:e:t:G:Pc:wb:r:n:s:u:")) != -1) {
		switch (opt) {
		case 'g': getppid_n = atol(optarg); break;
		case 'W': writes = atol(optarg); break;
		case 'e': enoent = atol(optarg); break;
		case 't': threads = atol(optarg); break;
		case 'G': thread_getppid = atol(optarg); break;
		case 'P': prestart = 1; break;
		case 'c': child_n = atol(optarg); break;
		case 'w': wait_go = 1; break;
		case 'b': busy_ms = atol(optarg); break;
		case 'r': rusage_file = optarg; break;
		case 'n': name = optarg; break;
		case 's': short_n = atol(optarg); break;
		case 'u': short_spin_us = atol(optarg); break;
		default:
			fprintf(stderr, "ss_workload: bad option\n");
			return 2;
		}
	}
	if (threads < 0 || threads > 256) {
		fprintf(stderr, "ss_workload: -t must be 0..256\n");
		return 2;
	}
	if (name && prctl(PR_SET_NAME, name, 0, 0, 0) != 0) {
		perror("ss_workload: prctl");
		return 2;
	}

	pthread_t tids[256];
	if (prestart && threads > 0) {
		pthread_barrier_init(&start_barrier, NULL, threads + 1);
		for (long i = 0; i < threads; i++)
			pthread_create(&tids[i], NULL, worker, NULL);
	}
	if (wait_go) {
		char line[64];
		int n = snprintf(line, sizeof(line), "ready %d\n", getpid());
		if (write(1, line, n) != n)
			return 5;
		char b;
		ssize_t r;
		do {
			r = read(0, &b, 1);
		} while (r < 0 && errno == EINTR);
		if (r != 1)
			return 5;
	}
	if (busy_ms >= 0)
		return busy(busy_ms);

	if (writes > 0) {
		int fd = open("/dev/null", O_WRONLY);
		if (fd < 0)
			return 6;
		for (long i = 0; i < writes; i++)
			if (write(fd, "x", 1) != 1)
				return 6;
		close(fd);
	}
	for (long i = 0; i < enoent; i++) {
#ifdef SYS_open
		long r = syscall(SYS_open, "/nonexistent/sockscope-ground-truth", O_RDONLY);
#else
		long r = syscall(SYS_openat, AT_FDCWD, "/nonexistent/sockscope-ground-truth", O_RDONLY);
#endif
		if (r != -1 || errno != ENOENT)
			return 7;
	}
	if (prestart && threads > 0) {
		pthread_barrier_wait(&start_barrier);
	} else {
		for (long i = 0; i < threads; i++)
			pthread_create(&tids[i], NULL, worker, NULL);
	}
	for (long i = 0; i < threads; i++)
		pthread_join(tids[i], NULL);
	if (short_n > 0 && short_threads(short_n) != 0)
		return 10;
	if (child_n >= 0) {
		pid_t c = fork();
		if (c < 0)
			return 8;
		if (c == 0) {
			for (long i = 0; i < child_n; i++)
				syscall(SYS_getppid);
			_exit(0);
		}
		int st;
		if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 8;
	}
	for (long i = 0; i < getppid_n; i++)
		syscall(SYS_getppid);
	if (rusage_file) {
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		FILE *f = fopen(rusage_file, "w");
		if (!f)
			return 9;
		fprintf(f, "%ld %ld %ld %ld %ld %ld\n",
			ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec,
			ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec,
			ru.ru_nvcsw, ru.ru_nivcsw, ru.ru_minflt, ru.ru_majflt);
		fclose(f);
	}
	return 0;
}
