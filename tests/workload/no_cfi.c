/* A fixture of tests/stacks_resolve.rs: main -> middle -> leaf, leaf
 * blocking in nanosleep until killed, compiled with
 * -fno-asynchronous-unwind-tables (no .eh_frame entry for these
 * functions) and -fomit-frame-pointer. middle leaves in rbp, a general
 * register here, the address of two words that look like a frame: a null
 * frame pointer and a return address 0x101b46a7, which a frame-pointer
 * walk from leaf would take for its caller. */
#include <stdio.h>
#include <time.h>

volatile int sink;
volatile int stop;

__attribute__((noinline)) void leaf(void)
{
	struct timespec ts = { 1, 0 };
	while (!stop)
		nanosleep(&ts, NULL);
}

__attribute__((noinline)) void middle(void)
{
	volatile long frame[2] = { 0, 0x101b46a7 };
	__asm__ volatile("mov %0, %%rbp" : : "r"(frame) : "rbp", "memory");
	leaf();
	sink = (int)frame[1];
}

int main(void)
{
	printf("ready\n");
	fflush(stdout);
	middle();
	return sink;
}
