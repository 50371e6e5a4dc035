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
static void in_child(int keep, pid_t shell, long open_max)
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
static void exec_failed(void)
{
	static const char msg[] = "gopmi: exec of a gopmi binary failed\n";
	(void) !write(2, msg, sizeof(msg) - 1);
	_exit(127);
}

/* envp_with is a copy of the shell's environment without the variables
 * drop names and with sets ("NAME=value") added, made before fork: the
 * shell has threads, so a child only makes system calls until it execs. */
static char **envp_with(char *const *sets, const char *const *drop)
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
static int coordinator_argv(struct gopmi *g, char *path)
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
	return 0;
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
	if (coordinator_argv(g, path) < 0) {
		close(in[0]);
		close(in[1]);
		close(end[0]);
		close(end[1]);
		return shell_log_errno("the coordinator's arguments");
	}
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

/* last_exit is N of the last " exit=N" in line, or -1. */
static int last_exit(const char *line)
{
	const char *e = NULL;

	for (const char *p = line; (p = strstr(p, " exit=")); p++)
		e = p;
	return e ? atoi(e + 6) : -1;
}

/* server_ended acts on the node server's end (its log's), which its last
 * "gopmi-shim: ... exiting ... exit=N" line explains (shim/doc.go): it
 * raises the job's exception when the server ended the job on this node
 * for a reason of its own (a fence that timed out, naming the ranks and
 * their nodes; its backend lost; a bootstrap it refused), or ended
 * without a word (killed, or crashed) while the shell did not ask. An
 * abort (5) and a rank's end reach the coordinator, which ends the job
 * itself. */
static void server_ended(struct gopmi *g)
{
	const char *line = g->last, *why = strstr(line, "error=\"");
	int status = last_exit(line);
	char reason[2048];

	g->server_gone = 1;
	if (g->server_ref && flux_shell_remove_completion_ref(g->shell, "gopmi.server") >= 0)
		g->server_ref = 0;
	if (g->stopping)
		return; /* the shell ended it */
	if (!line[0]) {
		flux_shell_raise("exec", 0, "gopmi: node %d (%s): its PMI server ended without saying why (killed, or it crashed: its last lines are above)",
				 g->shell_rank, g->host);
		return;
	}
	if (status <= 0 || status == 5)
		return;
	if (why) {
		const char *end = why + 7;
		size_t n = 0;
		/* The value, its quotes and escapes as the console writer
		 * wrote them. */
		while (*end && !(*end == '"' && end[-1] != '\\') && n < sizeof(reason) - 1)
			reason[n++] = *end++;
		reason[n] = 0;
	} else {
		snprintf(reason, sizeof(reason), "its PMI server exited with status %d", status);
	}
	flux_shell_raise("exec", 0, "gopmi: node %d (%s): %s", g->shell_rank, g->host, reason);
}

/* shown reports whether a line of the server's log goes to the job's
 * stderr: at the default level (the server logs at info, for its last
 * line), its warnings and errors, and anything that is not a log line
 * (a Go panic's); everything when -o gopmi.log-level chose a level. */
static int shown(struct gopmi *g, const char *line)
{
	const char *lvl = strchr(line, ' ');

	if (g->log_level[0])
		return 1;
	/* "15:04:05.000 LVL message ...", the console writer's. */
	if (!lvl || lvl - line != 12 || line[2] != ':' || line[8] != '.')
		return 1;
	return !strncmp(lvl, " WRN ", 5) || !strncmp(lvl, " ERR ", 5) || !strncmp(lvl, " FTL ", 5) ||
	       !strncmp(lvl, " PNC ", 5);
}

/* on_server_log copies the node server's log, a line at a time, to the
 * shell's stderr (the job's), keeps the last line that says why it exits,
 * and acts on the server's end. */
static void on_server_log(flux_reactor_t *r, flux_watcher_t *w, int revents, void *arg)
{
	struct gopmi *g = arg;
	ssize_t n = read(g->server_err, g->log + g->nlog, sizeof(g->log) - 1 - g->nlog);
	char *line, *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		g->nlog += n;
	g->log[g->nlog] = 0;
	for (line = g->log; (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = 0;
		if (shown(g, line))
			dprintf(2, "%s\n", line);
		if (strstr(line, "gopmi-shim: ") && strstr(line, "exiting"))
			snprintf(g->last, sizeof(g->last), "%s", line);
	}
	g->nlog -= line - g->log;
	memmove(g->log, line, g->nlog);
	if (g->nlog == sizeof(g->log) - 1) {
		/* A line longer than the buffer goes in pieces. */
		dprintf(2, "%.*s\n", (int) g->nlog, g->log);
		g->nlog = 0;
	}
	if (n <= 0) {
		if (g->nlog)
			dprintf(2, "%.*s\n", (int) g->nlog, g->log);
		flux_watcher_stop(w);
		server_ended(g);
	}
}

/* wait_ready reads the PMIx server's sd_notify datagrams (from its pid
 * only: the abstract name can be guessed) until READY=1, which carries
 * the tasks' PMIx environment ("GOPMI_PMIX_VAR=NAME=value" lines), its
 * failure, its exit or the start time-out. */
static int wait_ready(struct gopmi *g, int sock)
{
	static char msg[65536];
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = { .fd = sock, .events = POLLIN };
		char control[CMSG_SPACE(sizeof(struct ucred))];
		struct iovec iov = { .iov_base = msg, .iov_len = sizeof(msg) - 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
				     .msg_controllen = sizeof(control) };
		struct cmsghdr *c;
		int status, mine = 0;
		ssize_t n;

		if (waitpid(g->server, &status, WNOHANG) == g->server) {
			g->server = 0;
			return shell_log_error("the node's PMIx server (gopmi-slurm-pmix) exited (status %d) before it served the tasks",
					       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)),
			       -1;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= START_WAIT_S)
			return shell_log_error("the node's PMIx server did not say READY=1 within %ds", START_WAIT_S), -1;
		if (poll(&p, 1, 100) <= 0 || (n = recvmsg(sock, &mh, MSG_DONTWAIT)) <= 0 || (mh.msg_flags & MSG_TRUNC))
			continue;
		for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			struct ucred cred;
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
				memcpy(&cred, CMSG_DATA(c), sizeof(cred));
				mine = cred.pid == g->server;
			}
		}
		if (!mine)
			continue;
		msg[n] = 0;
		if (strstr(msg, "ERRNO=") || strstr(msg, "STOPPING=1")) {
			char *st = strstr(msg, "STATUS=");
			if (st)
				st[strcspn(st, "\n")] = 0;
			return shell_log_error("the node's PMIx server: %s", st ? st + 7 : msg), -1;
		}
		if (!strstr(msg, "READY=1"))
			continue;
		for (char *line = msg; line && *line;) {
			static const char key[] = "GOPMI_PMIX_VAR=";
			char *end = strchr(line, '\n');
			if (end)
				*end = 0;
			/* Only PMIx's own variables. */
			if (!strncmp(line, key, sizeof(key) - 1) && !strncmp(line + sizeof(key) - 1, "PMIX_", 5)) {
				char **e = realloc(g->pmix_env, (g->npmix_env + 2) * sizeof(char *));
				if (!e || !(e[g->npmix_env] = strdup(line + sizeof(key) - 1)))
					return shell_log_error("no memory"), -1;
				g->pmix_env = e;
				e[++g->npmix_env] = NULL;
			}
			line = end ? end + 1 : NULL;
		}
		if (!g->npmix_env)
			return shell_log_error("the node's PMIx server said READY=1 without the tasks' environment"), -1;
		return 0;
	}
}

/* start_server starts the node's server with the bootstrap on its stdin:
 * for PMI-1/PMI-2 tasks with their connections as LISTEN_FDS (fds 3,
 * 4, ...), named rank<N>; for PMIx tasks, gopmi-slurm-pmix, which says
 * READY=1 with the tasks' environment once libpmix serves (in
 * FLUX_JOB_TMPDIR, its TMPDIR). */
int start_server(struct gopmi *g)
{
	char path[600], *boot = bootstrap(g), nfds[32], secret_var[100], coord_var[320], notify[128], tmp[600];
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	socklen_t alen = sizeof(addr);
	struct buf fdnames = { 0 };
	int in[2] = { -1, -1 }, errp[2] = { -1, -1 }, ns = -1, rc = -1;
	const char *dir = flux_shell_getenv(g->shell, "FLUX_JOB_TMPDIR");
	char **env = NULL;
	pid_t pid, shell = getpid();
	long open_max = sysconf(_SC_OPEN_MAX);

	if (!boot)
		return shell_log_error("no memory for the bootstrap"), -1;
	snprintf(path, sizeof(path), "%s/%s", g->bindir, g->pmix ? "gopmi-slurm-pmix" : "gopmi-slurm");
	if (access(path, X_OK) != 0) {
		shell_log_errno("%s%s", path, g->pmix ? " (this job's tasks speak PMIx, which gopmi-slurm-pmix serves: it is built where libpmix-dev is installed; -o gopmi.pmix=no runs the job without it)" : "");
		goto out;
	}
	bprintf(&fdnames, "LISTEN_FDNAMES=");
	for (int i = 0; !g->pmix && i < g->nlocal; i++)
		bprintf(&fdnames, "%srank%d", i ? ":" : "", g->ranks[i]);
	snprintf(nfds, sizeof(nfds), "LISTEN_FDS=%d", g->nlocal);
	snprintf(secret_var, sizeof(secret_var), ENV_SECRET "=%s", g->secret);
	snprintf(coord_var, sizeof(coord_var), ENV_COORD "=%s", g->coord);
	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", dir ? dir : "/tmp");
	if (g->pmix) {
		/* An abstract name the kernel picks (autobind): no other
		 * process can take it first. */
		ns = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (ns < 0 || bind(ns, (struct sockaddr *) &addr, sizeof(sa_family_t)) ||
		    getsockname(ns, (struct sockaddr *) &addr, &alen) || alen <= sizeof(sa_family_t) + 1 ||
		    setsockopt(ns, SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int))) {
			shell_log_errno("the PMIx server's notify socket");
			goto out;
		}
		snprintf(notify, sizeof(notify), "NOTIFY_SOCKET=@%.*s", (int) (alen - sizeof(sa_family_t) - 1), addr.sun_path + 1);
		env = envp_with((char *[]) { secret_var, coord_var, notify, tmp, "GOPMI_LOG_FORMAT=console", NULL },
				(const char *[]) { "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", NULL });
	} else {
		env = envp_with((char *[]) { secret_var, coord_var, nfds, fdnames.s ? fdnames.s : "", "GOPMI_LOG_FORMAT=console", NULL },
				(const char *[]) { "LISTEN_PID", "NOTIFY_SOCKET", NULL });
	}
	if (fdnames.failed || !env || pipe2(in, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
		shell_log_errno("the node server's start");
		goto out;
	}
	pid = fork();
	if (pid == 0) {
		char *argv[] = { path, "shim", "-host", "flux", NULL };
		int hi = 3 + g->nlocal;
		/* Every fd out of the way of 3..3+n first. */
		int fin = fcntl(in[0], F_DUPFD_CLOEXEC, hi);
		for (int i = 0; !g->pmix && i < g->nlocal; i++)
			g->conns[i] = fcntl(g->conns[i], F_DUPFD_CLOEXEC, hi);
		int ferr = fcntl(errp[1], F_DUPFD_CLOEXEC, hi);
		if (fin < 0 || ferr < 0 || dup2(fin, 0) < 0 || dup2(ferr, 2) < 0)
			exec_failed();
		for (int i = 0; !g->pmix && i < g->nlocal; i++)
			if (g->conns[i] < 0 || dup2(g->conns[i], 3 + i) < 0) /* clears close-on-exec */
				exec_failed();
		in_child(g->pmix ? 3 : hi, shell, open_max);
		execve(path, argv, env);
		exec_failed();
	}
	close(in[0]);
	in[0] = -1;
	if (pid < 0) {
		shell_log_errno("fork");
		goto out;
	}
	g->server = pid;
	/* The shell's reactor runs until the server has ended (its log's
	 * end), so that what it says at its end is heard. */
	if (flux_shell_add_completion_ref(g->shell, "gopmi.server") > 0)
		g->server_ref = 1;
	close(errp[1]);
	errp[1] = -1;
	g->server_err = errp[0];
	errp[0] = -1;
	if (!(g->err_watch = flux_fd_watcher_create(flux_get_reactor(flux_shell_get_flux(g->shell)), g->server_err,
						     FLUX_POLLIN, on_server_log, g))) {
		shell_log_errno("watch the node server's log");
		goto out;
	}
	flux_watcher_start(g->err_watch);
	for (int i = 0; !g->pmix && i < g->nlocal; i++) {
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
			goto out;
		}
		off += w;
	}
	close(in[1]);
	in[1] = -1;
	rc = g->pmix ? wait_ready(g, ns) : 0;
	if (rc == 0)
		shell_debug("node server pid %d serves %d %stasks", (int) pid, g->nlocal, g->pmix ? "PMIx " : "");
	else if (g->server > 0 && !g->server_gone)
		kill(-pid, SIGKILL); /* not ready: nothing is left behind */
out:
	if (in[0] >= 0)
		close(in[0]);
	if (in[1] >= 0)
		close(in[1]);
	if (ns >= 0)
		close(ns);
	for (int i = 0; i < 2; i++)
		if (errp[i] >= 0)
			close(errp[i]);
	free(env);
	free(fdnames.s);
	free(boot);
	return rc;
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
