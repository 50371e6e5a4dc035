/* gopmi's Flux job-shell plugin: the job's coordinator (started by the
 * leader shell), the socket the tasks reach their node's server through,
 * and what every child of the shell does before its exec. The node's
 * server is server.c's. */

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

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* While the job runs, the coordinator ends only when told. */
		flux_watcher_stop(w);
		if (!g->coord_closing)
			flux_shell_raise("exec", 0, "gopmi: the job's coordinator (gopmi-slurm coordinate) ended unexpectedly");
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

/* in_child is what every child of the shell does before its exec, with
 * its fds 0..keep-1 in place: nothing else of the shell's stays open in it
 * (the tasks' stdio sockets, which libsubprocess makes inheritable: a
 * task reading its stdin would never see its end), it leaves the shell's
 * process group (the shell's signals to its tasks are not for it), and it
 * dies with the shell. System calls only: the shell has threads. */
void in_child(int keep, pid_t shell, long open_max)
{
	if (close_range(keep, ~0U, 0) != 0)
		for (long fd = keep; fd < open_max; fd++)
			close(fd);
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != shell)
		_exit(125); /* the shell went before the death signal was set */
}

/* exec_failed is what a child says when its exec fails. */
void exec_failed(void)
{
	static const char msg[] = "gopmi: exec of a gopmi binary failed\n";
	(void) !write(2, msg, sizeof(msg) - 1);
	_exit(127);
}

/* envp_with is a copy of the shell's environment without the variables
 * drop names and with sets ("NAME=value") added, made before fork: the
 * shell has threads, so a child only makes system calls until it execs. */
char **envp_with(char *const *sets, const char *const *drop)
{
	size_t n = 0, k = 0, nsets = 0;
	char **env;

	while (environ[n])
		n++;
	while (sets[nsets])
		nsets++;
	if (!(env = calloc(n + nsets + 1, sizeof(char *))))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int skip = 0;
		for (const char *const *d = drop; *d && !skip; d++) {
			size_t l = strlen(*d);
			skip = !strncmp(environ[i], *d, l) && environ[i][l] == '=';
		}
		for (size_t j = 0; j < nsets && !skip; j++) {
			size_t l = strcspn(sets[j], "=");
			skip = !strncmp(environ[i], sets[j], l + 1);
		}
		if (!skip)
			env[k++] = environ[i];
	}
	for (size_t j = 0; j < nsets; j++)
		env[k++] = sets[j];
	return env;
}

/* listen_coordinator makes the job's secret and the coordinator's
 * listening socket, and publishes its address and the secret in the
 * job's KVS (a node connects there before the coordinator runs: the
 * connection waits in the socket's queue). Leader shell only. */
int listen_coordinator(struct gopmi *g)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t slen = sizeof(sin);
	unsigned char raw[32];
	const char *host = NULL;
	flux_t *h = flux_shell_get_flux(g->shell);
	int fd;

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
	g->coord_lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (g->coord_lfd < 0 || bind(g->coord_lfd, (struct sockaddr *) &sin, sizeof(sin)) ||
	    listen(g->coord_lfd, SOMAXCONN) || getsockname(g->coord_lfd, (struct sockaddr *) &sin, &slen))
		return shell_log_errno("coordinator socket");
	snprintf(g->coord, sizeof(g->coord), "%s:%d", host, ntohs(sin.sin_port));
	if (kvs_put(h, KVS_COORD, g->coord) < 0 || kvs_put(h, KVS_SECRET, g->secret) < 0)
		return shell_log_errno("write the coordinator's address to the job's KVS");
	return 0;
}

/* flux_command is the flux of this shell's Flux (its libexecdir's
 * prefix), else flux on PATH. */
static void flux_command(char *out, size_t size)
{
	const char *libexec = flux_conf_builtin_get("libexecdir", FLUX_CONF_AUTO);
	char *dir = libexec ? strdup(libexec) : NULL;

	snprintf(out, size, "flux");
	if (dir) {
		char *slash = strrchr(dir, '/');
		if (slash && (*slash = 0, slash = strrchr(dir, '/'))) {
			*slash = 0;
			snprintf(out, size, "%s/bin/flux", dir);
			if (access(out, X_OK) != 0)
				snprintf(out, size, "flux");
		}
	}
	free(dir);
}

/* coordinator_argv is the coordinator's command: a spawn is a job of this
 * instance, run by flux run with the options that select gopmi, this
 * job's gopmi options, and the userrc that loads it when this job used
 * one. */
static void coordinator_argv(struct gopmi *g, char *path)
{
	static char flux[600], userrc[600], bindir[600], pmix[64], timeout[64], level[64];
	char *userrc_json = NULL;
	const char *opts[8];
	int n = 0, k = 0;

	flux_command(flux, sizeof(flux));
	snprintf(bindir, sizeof(bindir), "gopmi.bindir=%s", g->bindir);
	opts[k++] = "pmi=gopmi";
	opts[k++] = bindir;
	if (flux_shell_getopt(g->shell, "userrc", &userrc_json) == 1 && userrc_json) {
		/* A JSON string: its quotes off (a path holds no escape). */
		size_t l = strlen(userrc_json);
		if (l >= 2 && userrc_json[0] == '"' && !strchr(userrc_json, '\\')) {
			snprintf(userrc, sizeof(userrc), "userrc=%.*s", (int) (l - 2), userrc_json + 1);
			opts[k++] = userrc;
		}
	}
	free(userrc_json);
	if (g->pmix_opt[0]) {
		snprintf(pmix, sizeof(pmix), "gopmi.pmix=%s", g->pmix_opt);
		opts[k++] = pmix;
	}
	if (g->timeout > 0) {
		snprintf(timeout, sizeof(timeout), "gopmi.timeout=%d", g->timeout);
		opts[k++] = timeout;
	}
	if (g->log_level[0]) {
		snprintf(level, sizeof(level), "gopmi.log-level=%s", g->log_level);
		opts[k++] = level;
	}
	const char *head[] = { path, "coordinate", "-step", g->jobid, "-end-fd", "4", "-flux-run", flux, "-flux-run", "run" };
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		g->coord_argv[n++] = (char *) head[i];
	for (int i = 0; i < k; i++) {
		g->coord_argv[n++] = "-flux-run";
		g->coord_argv[n++] = "-o";
		g->coord_argv[n++] = "-flux-run";
		g->coord_argv[n++] = (char *) opts[i];
	}
	g->coord_argv[n] = NULL;
}

/* start_coordinator starts gopmi-slurm coordinate on the listening socket
 * (fd 3, LISTEN_FDS=1), with a pipe as its stdin (closing it ends the
 * coordinator) and another as fd 4, where it says the job must end. */
int start_coordinator(struct gopmi *g)
{
	char path[600], secret_var[100], **env;
	int in[2], end[2];
	pid_t pid, shell;
	long open_max;

	snprintf(path, sizeof(path), "%s/gopmi-slurm", g->bindir);
	if (access(path, X_OK) != 0)
		return shell_log_errno("%s (install gopmi there, or set GOPMI_BINDIR or -o gopmi.bindir=DIR)", path);
	if (pipe2(in, O_CLOEXEC))
		return shell_log_errno("pipe");
	if (pipe2(end, O_CLOEXEC)) {
		close(in[0]);
		close(in[1]);
		return shell_log_errno("pipe");
	}
	snprintf(secret_var, sizeof(secret_var), ENV_SECRET "=%s", g->secret);
	coordinator_argv(g, path);
	env = envp_with((char *[]) { "LISTEN_FDS=1", secret_var, NULL },
			(const char *[]) { "LISTEN_PID", "LISTEN_FDNAMES", NULL });
	shell = getpid();
	open_max = sysconf(_SC_OPEN_MAX);
	pid = env ? fork() : -1;
	if (pid == 0) {
		char **argv = g->coord_argv;
		/* Out of the way of 0, 3 and 4 first. */
		int fin = fcntl(in[0], F_DUPFD_CLOEXEC, 5), fl = fcntl(g->coord_lfd, F_DUPFD_CLOEXEC, 5),
		    fe = fcntl(end[1], F_DUPFD_CLOEXEC, 5);
		if (fin < 0 || fl < 0 || fe < 0 || dup2(fin, 0) < 0 || dup2(fl, 3) < 0 || dup2(fe, 4) < 0)
			exec_failed(); /* dup2 cleared close-on-exec on 0, 3 and 4 */
		in_child(5, shell, open_max);
		execve(path, argv, env);
		exec_failed();
	}
	if (!env)
		shell_log_errno("no memory for the coordinator's environment");
	free(env);
	/* The coordinator's now (or nobody's): a node that connects to a
	 * coordinator that died is refused at once. */
	close(g->coord_lfd);
	g->coord_lfd = -1;
	close(in[0]);
	close(end[1]);
	if (pid < 0) {
		close(in[1]);
		close(end[0]);
		return env ? shell_log_errno("fork") : -1;
	}
	g->coordinator = pid;
	g->coord_in = in[1];
	g->coord_end = end[0];
	if (!(g->end_watch = flux_fd_watcher_create(flux_get_reactor(flux_shell_get_flux(g->shell)), end[0], FLUX_POLLIN,
						     on_end, g)))
		return shell_log_errno("watch the coordinator");
	flux_watcher_start(g->end_watch);
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

/* accept_tasks takes the tasks' connections waiting on the socket,
 * knowing each task by its pid (SO_PEERCRED against task.fork's); wait_ms
 * bounds how long it waits for those not there yet (0: none). A task
 * connects in task.exec, before its exec, and the shell's fork waits for
 * that exec: by task.fork its connection is queued, and taking it there
 * keeps the queue short (a backlog of 128 on older kernels). It returns
 * how many tasks have no connection. */
int accept_tasks(struct gopmi *g, int wait_ms)
{
	struct timespec t0, t;
	int missing = 0;

	for (int i = 0; i < g->nlocal; i++)
		missing += g->conns[i] < 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (missing > 0) {
		struct pollfd pfd = { .fd = g->lfd, .events = POLLIN };
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		long waited;
		int c, i;

		clock_gettime(CLOCK_MONOTONIC, &t);
		waited = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (poll(&pfd, 1, waited >= wait_ms ? 0 : wait_ms - waited) <= 0)
			break;
		c = accept4(g->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				continue;
			shell_log_errno("accept a task's connection");
			break;
		}
		/* The server reads it blocking or not, as it likes. */
		fcntl(c, F_SETFL, fcntl(c, F_GETFL) & ~O_NONBLOCK);
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
		missing--;
	}
	return missing;
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
			kill(-pid, sig); /* its process group: what it started too */
		if (waited >= ms + 2000) {
			kill(-pid, SIGKILL);
			return waitpid(pid, &status, 0) == pid ? status : -1;
		}
		usleep(10000);
	}
}
