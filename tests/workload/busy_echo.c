/* A busy-polling echo server on a Unix stream socket: one thread that
 * never sleeps, trying a non-blocking read on each connection in turn.
 * Its reads often take a request between the kernel's queueing of it and
 * the data-ready hook that follows: the race in which the anatomy once
 * recorded the answered turn twice (docs/anatomy.md, "Closing an answered
 * turn").
 *
 * usage: busy_echo PATH SECONDS (it exits by itself after SECONDS) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64

int main(int argc, char **argv)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int ls, conns[MAX_CONNS], n = 0;
	char buf[4096];
	time_t end;

	if (argc != 3 || strlen(argv[1]) >= sizeof(a.sun_path)) {
		fprintf(stderr, "usage: busy_echo PATH SECONDS\n");
		return 2;
	}
	strcpy(a.sun_path, argv[1]);
	ls = socket(AF_UNIX, SOCK_STREAM, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 64) ||
	    fcntl(ls, F_SETFL, O_NONBLOCK)) {
		perror("busy_echo: listen");
		return 1;
	}
	end = time(NULL) + atoi(argv[2]);
	while (time(NULL) < end) {
		int c = accept(ls, NULL, NULL);

		if (c >= 0) {
			if (n < MAX_CONNS && !fcntl(c, F_SETFL, O_NONBLOCK))
				conns[n++] = c;
			else
				close(c);
		}
		for (int i = 0; i < n; i++) {
			ssize_t r;

			if (conns[i] < 0)
				continue;
			r = recv(conns[i], buf, sizeof(buf), 0);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r <= 0 || send(conns[i], buf, r, MSG_NOSIGNAL) != r) {
				close(conns[i]);
				conns[i] = -1;
			}
		}
	}
	unlink(argv[1]);
	return 0;
}
