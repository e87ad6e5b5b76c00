/*
 * The stack tests' target (tests/stacks.rs), built at test time with
 * -O2 -fomit-frame-pointer (and again with frame pointers). Every mode
 * runs for SECS seconds of wall time, then exits 0:
 *   split SECS     main -> middle_layer -> hot_seventy / hot_thirty, the
 *                  CPU split 70/30 between the two by equal work units;
 *   syscalls SECS  main -> syscall_loop: read()s of /dev/zero, so most of
 *                  the time is in the kernel's read path;
 *   sleeper SECS   main -> sleepy_cycle: busy 10 ms, then nanosleep 10 ms
 *                  (half the wall time waiting off-CPU);
 *   exec SECS      split for SECS/2, then execs itself as `syscalls SECS/2`
 *                  (the new image's functions are named only if the
 *                  sampler re-reads the process's mappings).
 * Prints "ready" once running. Functions are noinline and their calls are
 * not in tail position, so each keeps its frame.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One unit of work: the same instructions whoever calls it. */
static inline unsigned long unit(unsigned long x)
{
	for (int i = 0; i < 20000; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

__attribute__((noinline)) unsigned long hot_seventy(unsigned long x)
{
	for (int i = 0; i < 7; i++)
		x = unit(x);
	sink += x;
	return x;
}

__attribute__((noinline)) unsigned long hot_thirty(unsigned long x)
{
	for (int i = 0; i < 3; i++)
		x = unit(x);
	sink += x;
	return x;
}

__attribute__((noinline)) unsigned long middle_layer(unsigned long x)
{
	x = hot_seventy(x);
	x = hot_thirty(x);
	sink += x;
	return x + 1;
}

__attribute__((noinline)) unsigned long syscall_loop(int fd)
{
	static char buf[65536];
	unsigned long n = 0;

	for (int i = 0; i < 64; i++) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r > 0)
			n += (unsigned long)r;
	}
	sink += n;
	return n;
}

__attribute__((noinline)) void sleepy_cycle(void)
{
	struct timespec ten_ms = {0, 10 * 1000 * 1000};
	double until = now_s() + 0.010;
	unsigned long x = 1;

	while (now_s() < until)
		x = unit(x);
	sink += x;
	nanosleep(&ten_ms, NULL);
	sink++;
}

static void split(double secs)
{
	double end = now_s() + secs;
	unsigned long x = 1;

	while (now_s() < end)
		x = middle_layer(x);
}

int main(int argc, char **argv)
{
	double secs, end;

	if (argc != 3 || (secs = atof(argv[2])) <= 0 || secs > 120) {
		fprintf(stderr, "usage: %s split|syscalls|sleeper|exec SECS\n", argv[0]);
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	end = now_s() + secs;
	if (!strcmp(argv[1], "split")) {
		split(secs);
	} else if (!strcmp(argv[1], "syscalls")) {
		int fd = open("/dev/zero", O_RDONLY);

		if (fd < 0)
			return 1;
		while (now_s() < end)
			syscall_loop(fd);
	} else if (!strcmp(argv[1], "sleeper")) {
		while (now_s() < end)
			sleepy_cycle();
	} else if (!strcmp(argv[1], "exec")) {
		char half[32];

		split(secs / 2);
		snprintf(half, sizeof(half), "%.3f", secs / 2);
		execl("/proc/self/exe", argv[0], "syscalls", half, (char *)NULL);
		return 1;
	} else {
		return 2;
	}
	return 0;
}
