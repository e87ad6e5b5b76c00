/* getppid microbenchmark: N raw getppid calls timed inside the process.
 * Prints "ns_per_call=<float> calls=<n>" on stdout. Used by bench/overhead.sh. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	struct timespec a, b;
	if (n <= 0) {
		fprintf(stderr, "usage: %s [calls > 0]\n", argv[0]);
		return 2;
	}
	/* warm the path so the first page faults are not timed */
	for (int i = 0; i < 1000; i++)
		syscall(SYS_getppid);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	printf("ns_per_call=%.1f calls=%ld\n", ns / n, n);
	return 0;
}
