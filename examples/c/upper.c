/*
 * upper is an example latent-node function in C, built with clang and
 * wasi-libc:
 *
 *   clang --target=wasm32-wasi --sysroot=/usr/share/wasi-sysroot -O2 \
 *       -o upper.wasm upper.c
 *
 * It copies stdin (the request body) to stdout (the answer body of a 200)
 * with ASCII letters in upper case, through one fixed 4 KiB buffer, so its
 * memory does not grow with the body. An empty body is reported on stderr
 * (the node returns stderr's tail in the problem) with exit status 2, which
 * the node reports as declared-error with exit_code 2.
 *
 * Built with -DREACTOR -mexec-model=reactor it is a reactor exporting the
 * same function as "upper" (see reactor.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char buf[4096];

/* write_all writes n bytes of p to fd, or returns -1. */
static int write_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* run is the function; it returns the exit status. */
static int run(void) {
	size_t total = 0;
	for (;;) {
		ssize_t n = read(0, buf, sizeof buf);
		if (n < 0) {
			fprintf(stderr, "upper: read stdin failed\n");
			return 1;
		}
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] >= 'a' && buf[i] <= 'z')
				buf[i] -= 'a' - 'A';
		if (write_all(1, buf, (size_t)n) < 0) {
			fprintf(stderr, "upper: write answer failed\n");
			return 1;
		}
		total += (size_t)n;
	}
	if (total == 0) {
		fprintf(stderr, "upper: the body is empty; send some text\n");
		return 2;
	}
	return 0;
}

#ifdef REACTOR
/* upper is the entry function of the reactor build (see reactor.h), called
 * once per activation: returning is exit status 0, a failure exits through
 * proc_exit. It writes with write(2), unbuffered, and reads with read(2),
 * which keeps no end-of-file state. */
__attribute__((export_name("upper"))) void upper(void) {
	int status = run();
	if (status != 0)
		exit(status);
}
#else
int main(void) {
	return run();
}
#endif
