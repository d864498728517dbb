/*
 * reactor.h: what the reactor builds of upper.c and case.c need, compiled
 * in with -DREACTOR (and -mexec-model=reactor, which links wasi-libc's
 * reactor start file: the module exports _initialize, runs the static
 * constructors there once, and never runs main):
 *
 *   clang --target=wasm32-wasi -O2 -DREACTOR -mexec-model=reactor \
 *       -o case-reactor.wasm case.c
 *
 * The node then calls the module's exported entry function once per
 * activation, each with its own stdin, stdout and environment. Three things
 * a command gets for free need doing by hand:
 *
 * - the environment: wasi-libc's getenv copies the host's environment once,
 *   on first use, and keeps it (__wasilibc_deinitialize_environ would make
 *   it copy again but leaks the old copy). reactor_environ reads this
 *   activation's from the host through WASI's environ_get, freeing the
 *   previous activation's; reactor_getenv looks a name up in it.
 * - stdin: a FILE remembers end-of-file, so an entry function that reads
 *   stdin through stdio clears it first (clearerr) and reads it to the end.
 * - stdout: a FILE buffers, so an entry function flushes it before
 *   returning; exit(n) flushes too.
 */
#ifndef REACTOR_H
#define REACTOR_H

#include <stdlib.h>
#include <string.h>
#include <wasi/api.h>

/* The activation's environment: "NAME=value" strings in one buffer. */
static char **reactor_env;
static char *reactor_env_buf;
static size_t reactor_env_count;

/* reactor_environ reads the environment from the host now; on failure the
 * environment is empty. */
static void reactor_environ(void) {
	free(reactor_env);
	free(reactor_env_buf);
	reactor_env = NULL;
	reactor_env_buf = NULL;
	reactor_env_count = 0;
	size_t count, size;
	if (__wasi_environ_sizes_get(&count, &size) != 0 || count == 0)
		return;
	char **env = calloc(count, sizeof *env);
	char *buf = malloc(size);
	if (!env || !buf || __wasi_environ_get((uint8_t **)env, (uint8_t *)buf) != 0) {
		free(env);
		free(buf);
		return;
	}
	reactor_env = env;
	reactor_env_buf = buf;
	reactor_env_count = count;
}

/* reactor_getenv is getenv on what reactor_environ last read. */
static const char *reactor_getenv(const char *name) {
	size_t n = strlen(name);
	for (size_t i = 0; i < reactor_env_count; i++)
		if (!strncmp(reactor_env[i], name, n) && reactor_env[i][n] == '=')
			return reactor_env[i] + n + 1;
	return NULL;
}

#endif
