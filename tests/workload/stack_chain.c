/* The fixture of tests/stacks_resolve.rs: main -> middle -> leaf, and leaf
 * blocks in nanosleep until killed. Compiled at test time with
 * -fomit-frame-pointer and with -fno-omit-frame-pointer; the volatile
 * stores after each call keep -O2 from turning the calls into jumps. */
#include <stdio.h>
#include <time.h>

volatile int sink;
volatile int stop;

__attribute__((noinline)) int leaf(int n)
{
	struct timespec ts = { 1, 0 };
	while (!stop) {
		nanosleep(&ts, NULL);
		sink += n;
	}
	return sink;
}

__attribute__((noinline)) int middle(int n)
{
	int r = leaf(n + 1);
	sink = r;
	return r + 1;
}

int main(int argc, char **argv)
{
	(void)argv;
	printf("ready\n");
	fflush(stdout);
	int r = middle(argc);
	sink = r;
	return 0;
}
