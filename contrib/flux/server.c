/* gopmi's Flux job-shell plugin: the node's server, started by each shell
 * (gopmi-slurm shim, or gopmi-slurm-pmix for PMIx tasks), its readiness
 * and its log, which tells the shell how it ended. */

#include "gopmi_flux.h"

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
