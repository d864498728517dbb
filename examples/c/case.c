/*
 * case is an example latent-node HTTP handler in C for the WAGI ABI, built
 * against wasi-libc:
 *
 *     clang --target=wasm32-wasi -O2 -o case.wasm case.c
 *
 * It changes the case of a text: the body of a POST (streamed through a
 * 4 KiB buffer), or the `text` parameter of a GET's query (`?text=Hello+Ada`,
 * percent-decoded). The path below the node's route picks the change:
 * `/upper` (also the bare route) or `/lower`. A request header
 * `X-Repeat: N` (1 to 9) writes a GET's text N times, one per line. Every
 * answer carries `X-Example: c-case`, a success also `X-Transform`; another
 * path answers 404, another method 405.
 *
 * Built with -DREACTOR -mexec-model=reactor it is a reactor exporting the
 * same handler as "web" (see reactor.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef REACTOR
#include "reactor.h"
#define GETENV reactor_getenv
#else
#define GETENV getenv
#endif

static const char *var(const char *name) {
	const char *v = GETENV(name);
	return v ? v : "";
}

static int fail(int status, const char *msg) {
	printf("Status: %d\nContent-Type: text/plain\nX-Example: c-case\n\n%s\n", status, msg);
	return 0;
}

static void transform(char *s, size_t n, int upper) {
	for (size_t i = 0; i < n; i++) {
		s[i] = (char)(upper ? toupper((unsigned char)s[i]) : tolower((unsigned char)s[i]));
	}
}

static int hex(int c) {
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

/* query_text copies the decoded value of text= in query to out (at most
 * cap-1 bytes); it returns its length or -1 when there is none. */
static long query_text(const char *query, char *out, size_t cap) {
	const char *p = query;
	while (*p) {
		if (strncmp(p, "text=", 5) == 0) {
			size_t n = 0;
			for (p += 5; *p && *p != '&' && n + 1 < cap; p++) {
				if (*p == '+') {
					out[n++] = ' ';
				} else if (*p == '%' && hex(p[1]) >= 0 && hex(p[2]) >= 0) {
					out[n++] = (char)(hex(p[1]) * 16 + hex(p[2]));
					p += 2;
				} else {
					out[n++] = *p;
				}
			}
			out[n] = 0;
			return (long)n;
		}
		p = strchr(p, '&');
		if (!p) break;
		p++;
	}
	return -1;
}

/* serve answers the request; it returns the exit status. */
static int serve(void) {
	static char buf[4096];
	const char *path = var("PATH_INFO"), *method = var("REQUEST_METHOD");
	int upper;
	if (!strcmp(path, "") || !strcmp(path, "/") || !strcmp(path, "/upper")) {
		upper = 1;
	} else if (!strcmp(path, "/lower")) {
		upper = 0;
	} else {
		return fail(404, "no such transform: want /upper or /lower");
	}
	const char *head = upper ? "Status: 200\nContent-Type: text/plain\nX-Example: c-case\nX-Transform: upper\n\n"
	                         : "Status: 200\nContent-Type: text/plain\nX-Example: c-case\nX-Transform: lower\n\n";
	if (!strcmp(method, "GET")) {
		long n = query_text(var("QUERY_STRING"), buf, sizeof buf);
		if (n < 0) return fail(400, "GET wants ?text=...");
		int repeat = atoi(var("HTTP_X_REPEAT"));
		if (repeat < 1 || repeat > 9) repeat = 1;
		transform(buf, (size_t)n, upper);
		fputs(head, stdout);
		for (int i = 0; i < repeat; i++) {
			fwrite(buf, 1, (size_t)n, stdout);
			putchar('\n');
		}
		return 0;
	}
	if (strcmp(method, "POST")) return fail(405, "want GET or POST");
	fputs(head, stdout);
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) {
		transform(buf, n, upper);
		if (fwrite(buf, 1, n, stdout) != n) return 1;
	}
	return ferror(stdin) || fflush(stdout) ? 1 : 0;
}

#ifdef REACTOR
/* web is the entry function of the reactor build (see reactor.h), called
 * once per request: the CGI variables are read from the host now, stdin's
 * end-of-file of the previous request is forgotten, and stdout is flushed
 * before returning (exit status 0) or exiting through proc_exit. */
__attribute__((export_name("web"))) void web(void) {
	reactor_environ();
	clearerr(stdin);
	int status = serve();
	if (fflush(stdout) != 0 && status == 0)
		status = 1;
	if (status != 0)
		exit(status);
}
#else
int main(void) {
	return serve();
}
#endif
