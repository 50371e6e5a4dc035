/* gopmi's Flux job-shell plugin: the processes it starts (the job's
 * coordinator in the leader shell, the node's server in each shell) and
 * the socket the tasks reach their server through. */

#include "gopmi_flux.h"

/* kvs_put writes key=value into the job's KVS namespace, committed. */
static int kvs_put(flux_t *h, const char *key, const char *value)
{
	flux_kvs_txn_t *txn = flux_kvs_txn_create();
	flux_future_t *f = NULL;
	int rc = -1;

	if (txn && flux_kvs_txn_put(txn, 0, key, value) == 0 && (f = flux_kvs_commit(h, NULL, 0, txn)) &&
	    flux_future_get(f, NULL) == 0)
		rc = 0;
	flux_future_destroy(f);
	flux_kvs_txn_destroy(txn);
	return rc;
}

/* kvs_get reads key from the job's KVS namespace into out. */
int kvs_get(flux_t *h, const char *key, char *out, size_t size)
{
	flux_future_t *f = flux_kvs_lookup(h, NULL, 0, key);
	const char *v = NULL;
	int rc = -1;

	if (f && flux_kvs_lookup_get(f, &v) == 0 && v && strlen(v) < size) {
		snprintf(out, size, "%s", v);
		rc = 0;
	}
	flux_future_destroy(f);
	return rc;
}

/* on_end reads the coordinator's "end <status> <why>": a rank aborted
 * (MPI_Abort's errorcode) or failed. The job ends now, with that status,
 * and the exception says why. */
static void on_end(flux_reactor_t *r, flux_watcher_t *w, int revents, void *arg)
{
	struct gopmi *g = arg;
	char line[4096];
	ssize_t n = read(g->coord_end, line, sizeof(line) - 1);
	int status = 0, off = 0;

	if (n <= 0) {
		flux_watcher_stop(w);
		return;
	}
	line[n] = 0;
	line[strcspn(line, "\n")] = 0;
	if (sscanf(line, "end %d %n", &status, &off) < 1 || status <= 0 || status > 255) {
		shell_log_error("the coordinator's end makes no sense: %s", line);
		status = 1;
		off = 0;
	}
	flux_watcher_stop(w);
	flux_shell_raise_exit_status(status << 8, "%s", line + off);
}

/* start_coordinator starts gopmi-slurm coordinate with a listening TCP
 * socket as fd 3 (LISTEN_FDS=1) and a pipe as stdin, and publishes its
 * address and the job's secret in the job's KVS. Leader shell only. */
int start_coordinator(struct gopmi *g)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t slen = sizeof(sin);
	unsigned char raw[32];
	const char *host = NULL;
	char path[600];
	int fd, lfd, in[2], end[2];
	pid_t pid;

	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, raw, sizeof(raw)) != sizeof(raw)) {
		if (fd >= 0)
			close(fd);
		return shell_log_errno("no job secret: /dev/urandom");
	}
	close(fd);
	for (int i = 0; i < 32; i++)
		snprintf(g->secret + 2 * i, 3, "%02x", raw[i]);
	if (flux_shell_rank_info_unpack(g->shell, 0, "{s:s}", "name", &host) < 0 || !host)
		return shell_log_errno("the leader's host");
	snprintf(path, sizeof(path), "%s/gopmi-slurm", g->bindir);
	if (access(path, X_OK) != 0)
		return shell_log_errno("%s (install gopmi there, or set GOPMI_BINDIR or -o gopmi.bindir=DIR)", path);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *) &sin, sizeof(sin)) || listen(lfd, SOMAXCONN) ||
	    getsockname(lfd, (struct sockaddr *) &sin, &slen)) {
		shell_log_errno("coordinator socket");
		if (lfd >= 0)
			close(lfd);
		return -1;
	}
	if (pipe2(in, O_CLOEXEC)) {
		close(lfd);
		return shell_log_errno("pipe");
	}
	if (pipe2(end, O_CLOEXEC)) {
		close(lfd);
		close(in[0]);
		close(in[1]);
		return shell_log_errno("pipe");
	}
	snprintf(g->coord, sizeof(g->coord), "%s:%d", host, ntohs(sin.sin_port));
	pid = fork();
	if (pid == 0) {
		char *argv[] = { path, "coordinate", "-step", g->jobid, "-end-fd", "4", NULL };
		/* Out of the way of 0, 3 and 4 first. */
		int fin = fcntl(in[0], F_DUPFD_CLOEXEC, 5), fl = fcntl(lfd, F_DUPFD_CLOEXEC, 5),
		    fe = fcntl(end[1], F_DUPFD_CLOEXEC, 5);
		dup2(fin, 0);
		dup2(fl, 3); /* clears close-on-exec */
		dup2(fe, 4);
		setenv("LISTEN_FDS", "1", 1);
		unsetenv("LISTEN_PID");
		unsetenv("LISTEN_FDNAMES");
		setenv(ENV_SECRET, g->secret, 1);
		setpgid(0, 0); /* the shell's signals to its tasks are not ours */
		execv(path, argv);
		dprintf(2, "gopmi: exec %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	close(lfd);
	close(in[0]);
	close(end[1]);
	if (pid < 0) {
		close(in[1]);
		close(end[0]);
		return shell_log_errno("fork");
	}
	g->coordinator = pid;
	g->coord_in = in[1];
	g->coord_end = end[0];
	if (!(g->end_watch = flux_fd_watcher_create(flux_get_reactor(flux_shell_get_flux(g->shell)), end[0], FLUX_POLLIN,
						     on_end, g)))
		return shell_log_errno("watch the coordinator");
	flux_watcher_start(g->end_watch);
	if (kvs_put(flux_shell_get_flux(g->shell), KVS_COORD, g->coord) < 0 ||
	    kvs_put(flux_shell_get_flux(g->shell), KVS_SECRET, g->secret) < 0)
		return shell_log_errno("write the coordinator's address to the job's KVS");
	shell_debug("coordinator pid %d at %s", (int) pid, g->coord);
	return 0;
}

/* listen_tasks makes the socket the tasks connect to from task.exec, in
 * the job's own temporary directory (the job's user only). */
int listen_tasks(struct gopmi *g)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	const char *dir = flux_shell_getenv(g->shell, "FLUX_JOB_TMPDIR");

	if (!dir)
		return shell_log_error("FLUX_JOB_TMPDIR is not set"), -1;
	if ((size_t) snprintf(g->sock, sizeof(g->sock), "%s/gopmi.sock", dir) >= sizeof(g->sock)) {
		g->sock[0] = 0;
		return shell_log_error("FLUX_JOB_TMPDIR is too long for a socket path: %s", dir), -1;
	}
	memcpy(addr.sun_path, g->sock, sizeof(g->sock));
	g->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (g->lfd < 0 || bind(g->lfd, (struct sockaddr *) &addr, sizeof(addr)) || chmod(g->sock, 0600) ||
	    listen(g->lfd, SOMAXCONN))
		return shell_log_errno("listen on %s", g->sock);
	return 0;
}

/* accept_tasks takes each local task's connection, known by its pid. */
int accept_tasks(struct gopmi *g)
{
	struct timespec t0, t;
	int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < g->nlocal) {
		struct pollfd pfd = { .fd = g->lfd, .events = POLLIN };
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		long waited;
		int c, i;

		clock_gettime(CLOCK_MONOTONIC, &t);
		waited = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (waited >= CONNECT_WAIT_MS) {
			shell_log_error("%d of %d tasks connected to their PMI server within %ds", got, g->nlocal,
					CONNECT_WAIT_MS / 1000);
			return -1;
		}
		if (poll(&pfd, 1, CONNECT_WAIT_MS - waited) <= 0)
			continue;
		c = accept4(g->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen)) {
			close(c);
			continue;
		}
		for (i = 0; i < g->nlocal && g->pids[i] != cred.pid; i++)
			;
		if (i == g->nlocal || g->conns[i] >= 0) {
			shell_warn("a connection from pid %d, not a task of this shell: refused", (int) cred.pid);
			close(c);
			continue;
		}
		g->conns[i] = c;
		got++;
	}
	return 0;
}

/* start_server starts the node's server with the tasks' connections as
 * LISTEN_FDS (fds 3, 4, ...) and the bootstrap on its stdin. */
int start_server(struct gopmi *g)
{
	char path[600], *boot = bootstrap(g), names[64];
	struct buf fdnames = { 0 };
	int in[2];
	pid_t pid;

	if (!boot)
		return shell_log_error("no memory for the bootstrap"), -1;
	snprintf(path, sizeof(path), "%s/gopmi-slurm", g->bindir);
	for (int i = 0; i < g->nlocal; i++)
		bprintf(&fdnames, "%srank%d", i ? ":" : "", g->ranks[i]);
	snprintf(names, sizeof(names), "%d", g->nlocal);
	if (fdnames.failed || pipe2(in, O_CLOEXEC)) {
		free(boot);
		free(fdnames.s);
		return shell_log_errno("pipe");
	}
	pid = fork();
	if (pid == 0) {
		char *argv[] = { path, "shim", "-host", "flux", NULL };
		int hi = 3 + g->nlocal;
		/* Move every fd out of the way of 3..3+n first. */
		int fin = fcntl(in[0], F_DUPFD_CLOEXEC, hi);
		for (int i = 0; i < g->nlocal; i++)
			g->conns[i] = fcntl(g->conns[i], F_DUPFD_CLOEXEC, hi);
		dup2(fin, 0);
		for (int i = 0; i < g->nlocal; i++)
			dup2(g->conns[i], 3 + i); /* clears close-on-exec */
		setenv("LISTEN_FDS", names, 1);
		setenv("LISTEN_FDNAMES", fdnames.s ? fdnames.s : "", 1);
		unsetenv("LISTEN_PID");
		unsetenv("NOTIFY_SOCKET");
		/* Its log is the job's stderr: text a person reads. */
		setenv("GOPMI_LOG_FORMAT", "console", 0);
		setenv(ENV_SECRET, g->secret, 1);
		setenv(ENV_COORD, g->coord, 1);
		setpgid(0, 0);
		execv(path, argv);
		dprintf(2, "gopmi: exec %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	close(in[0]);
	free(fdnames.s);
	if (pid < 0) {
		close(in[1]);
		free(boot);
		return shell_log_errno("fork");
	}
	g->server = pid;
	for (int i = 0; i < g->nlocal; i++) {
		close(g->conns[i]);
		g->conns[i] = -1;
	}
	/* A pipe's buffer holds a bootstrap of a few thousand ranks; the
	 * server reads it at once. */
	for (size_t off = 0, n = strlen(boot); off < n;) {
		ssize_t w = write(in[1], boot + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			shell_log_errno("write the bootstrap");
			break;
		}
		off += w;
	}
	close(in[1]);
	free(boot);
	shell_debug("node server pid %d serves %d tasks", (int) pid, g->nlocal);
	return 0;
}

/* reap waits up to ms for pid, then kills it; it returns its wait status
 * or -1. */
int reap(pid_t pid, int ms, int sig)
{
	int status;

	for (int waited = 0;; waited += 10) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			return status;
		if (w < 0)
			return -1;
		if (waited == ms)
			kill(pid, sig);
		if (waited >= ms + 2000) {
			kill(pid, SIGKILL);
			return waitpid(pid, &status, 0) == pid ? status : -1;
		}
		usleep(10000);
	}
}
