/* gopmi's Flux job-shell plugin: `flux run -o pmi=gopmi` (or -o mpi=gopmi)
 * serves a job's tasks PMI-1 and PMI-2 through gopmi's node servers
 * instead of Flux's builtin pmi-simple.
 *
 *   leader shell ──starts── gopmi-slurm coordinate (the job's coordinator)
 *       │ job KVS: gopmi.coord (host:port), gopmi.secret
 *   every shell ──starts── gopmi-slurm shim (the node's server), which
 *       serves its tasks and reaches the coordinator and the other nodes
 *       over gopmi's authenticated overlay, as under srun --mpi=gopmi.
 *
 * A task gets its PMI descriptor from this plugin in task.exec (in the
 * forked child, just before exec): it connects to its shell's listening
 * socket in FLUX_JOB_TMPDIR and dup2s the connection onto the fd that
 * task.init promised in PMI_FD. The shell accepts one connection per
 * local task, knows each by its pid (SO_PEERCRED against task.fork's
 * pid: another process cannot pass for a task), and hands them to the
 * node server as LISTEN_FDS named rank<N>, the shim's contract
 * (shim/doc.go). The shell stays out of the data path.
 *
 * Inert unless asked for: a plugin in Flux's default path that failed
 * would break every job. */

#define FLUX_SHELL_PLUGIN_NAME "gopmi"

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <flux/core.h>
#include <flux/idset.h>
#include <flux/shell.h>

#include "gopmi_bootstrap.h"

#ifndef GOPMI_BINDIR
#define GOPMI_BINDIR "/usr/local/bin"
#endif

/* The fd a task's PMI connection is put on (PMI_FD): libsubprocess keeps
 * only stdio, its channels and its sync socket open in the child, all
 * made long after fd 3 in the shell; task.exec checks that it is free. */
#define TASK_FD 3

/* How long the shell waits, once its tasks are forked, for each to
 * connect from task.exec. */
#define CONNECT_WAIT_MS 30000

/* How long a shell that is done waits for its node's server to end by
 * itself before it is sent SIGTERM (then SIGKILL 2 s later). */
#define SERVER_GRACE_MS 10000

#define ENV_SECRET "GOPMI_SLURM_SECRET"
#define ENV_COORD "GOPMI_SLURM_COORD"
#define KVS_COORD "gopmi.coord"
#define KVS_SECRET "gopmi.secret"

struct gopmi {
	flux_shell_t *shell;
	char jobid[64];
	int shell_rank, shells, ntasks; /* ntasks: the job's */
	int nlocal, *ranks;             /* the local tasks' ranks, by localid */
	pid_t *pids;                    /* by localid, from task.fork */
	int *conns;                     /* by localid, accepted in shell.start */
	int lfd;                        /* the tasks' listening socket */
	char sock[sizeof(((struct sockaddr_un *) 0)->sun_path)];
	char bindir[512];
	char coord[300], secret[65];
	char *nodes; /* the job's layout as the bootstrap's job.nodes */
	char cmd0[1024];
	char log_level[16];
	pid_t coordinator, server;
	int coord_in;  /* the coordinator's stdin: closing it ends it */
	int coord_end; /* where the coordinator says the job must end */
	flux_watcher_t *end_watch;
};

/* ------------------------------------------------------------------ */
/* A growing string for the bootstrap's JSON.                          */

struct buf {
	char *s;
	size_t len, cap;
	int failed;
};

static void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->failed)
		return;
	for (;;) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = 1;
			return;
		}
		if ((size_t) n < room) {
			b->len += n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 1024;
		while (cap - b->len <= (size_t) n)
			cap *= 2;
		char *s = realloc(b->s, cap);
		if (!s) {
			b->failed = 1;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
}

/* bstr appends s as a JSON string: control bytes escaped, the rest as it
 * is (the shim refuses a bootstrap that is not UTF-8, naming the field). */
static void bstr(struct buf *b, const char *s)
{
	bprintf(b, "\"");
	for (; s && *s; s++) {
		unsigned char c = *s;
		if (c == '"' || c == '\\')
			bprintf(b, "\\%c", c);
		else if (c < 0x20)
			bprintf(b, "\\u%04x", c);
		else
			bprintf(b, "%c", c);
	}
	bprintf(b, "\"");
}

/* ------------------------------------------------------------------ */

/* selected reports whether comma list holds name. */
static int selected(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t) (end - p) : strlen(p);
		if (len == n && !strncmp(p, name, n))
			return 1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

static void gopmi_destroy(void *arg)
{
	struct gopmi *g = arg;

	if (!g)
		return;
	if (g->lfd >= 0)
		close(g->lfd);
	if (g->sock[0])
		unlink(g->sock);
	for (int i = 0; g->conns && i < g->nlocal; i++)
		if (g->conns[i] >= 0)
			close(g->conns[i]);
	if (g->coord_in >= 0)
		close(g->coord_in);
	flux_watcher_destroy(g->end_watch);
	if (g->coord_end >= 0)
		close(g->coord_end);
	free(g->ranks);
	free(g->pids);
	free(g->conns);
	free(g->nodes);
	free(g);
}

/* shared_host reports whether another shell of the job runs on name, the
 * host of shell rank s. */
static int shared_host(struct gopmi *g, int s, const char *name)
{
	for (int o = 0; o < g->shells; o++) {
		const char *other = NULL;
		if (o != s && flux_shell_rank_info_unpack(g->shell, o, "{s:s}", "name", &other) == 0 && other &&
		    !strcmp(other, name))
			return 1;
	}
	return 0;
}

/* layout writes the job's nodes (one per shell) with their hosts and the
 * ranks each runs, as the bootstrap's job.nodes; it also takes this
 * shell's ranks. Several shells may share a host (flux start
 * --test-size): the overlay tells them apart by port. */
static int layout(struct gopmi *g)
{
	struct buf b = { 0 };

	bprintf(&b, "[");
	for (int s = 0; s < g->shells; s++) {
		const char *name = NULL, *taskids = NULL;
		struct idset *ids;

		if (flux_shell_rank_info_unpack(g->shell, s, "{s:s s:s}", "name", &name, "taskids", &taskids) < 0 ||
		    !(ids = idset_decode(taskids))) {
			shell_log_error("shell rank %d: no host or task ids", s);
			free(b.s);
			return -1;
		}
		bprintf(&b, "%s{" GOPMI_BOOT_NODE_ID "%d," GOPMI_BOOT_NODE_NAME, s ? "," : "", s);
		if (shared_host(g, s, name)) {
			/* A node's name is its identity in the overlay: shells
			 * on one host (flux start --test-size) are told apart
			 * by their rank, and reached at the host. */
			char n[300];
			snprintf(n, sizeof(n), "%s-%d", name, s);
			bstr(&b, n);
			bprintf(&b, "," GOPMI_BOOT_NODE_ADDR);
		}
		bstr(&b, name);
		bprintf(&b, "," GOPMI_BOOT_NODE_RANKS "[");
		int n = 0;
		for (unsigned int id = idset_first(ids); id != IDSET_INVALID_ID; id = idset_next(ids, id), n++)
			bprintf(&b, "%s%u", n ? "," : "", id);
		bprintf(&b, "]}");
		if (s == g->shell_rank) {
			g->nlocal = n;
			g->ranks = calloc(n ? n : 1, sizeof(int));
			g->pids = calloc(n ? n : 1, sizeof(pid_t));
			g->conns = calloc(n ? n : 1, sizeof(int));
			if (!g->ranks || !g->pids || !g->conns) {
				idset_destroy(ids);
				free(b.s);
				return -1;
			}
			n = 0;
			for (unsigned int id = idset_first(ids); id != IDSET_INVALID_ID; id = idset_next(ids, id))
				g->conns[n] = -1, g->ranks[n++] = (int) id;
		}
		idset_destroy(ids);
	}
	bprintf(&b, "]");
	if (b.failed) {
		free(b.s);
		return -1;
	}
	g->nodes = b.s;
	return 0;
}

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
static int kvs_get(flux_t *h, const char *key, char *out, size_t size)
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
static int start_coordinator(struct gopmi *g)
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
static int listen_tasks(struct gopmi *g)
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

static int on_shell_init(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;
	flux_jobid_t id;
	const char *bindir;
	char *cmd0 = NULL, *level = NULL;

	if (flux_shell_info_unpack(g->shell, "{s:I s:i s:i s:i}", "jobid", &id, "rank", &g->shell_rank, "size",
				   &g->shells, "ntasks", &g->ntasks) < 0)
		return shell_log_errno("shell info");
	if (flux_job_id_encode(id, "f58plain", g->jobid, sizeof(g->jobid)) < 0)
		snprintf(g->jobid, sizeof(g->jobid), "%ju", (uintmax_t) id);
	if (flux_shell_getopt_unpack(g->shell, "gopmi", "{s?s s?s}", "bindir", &cmd0, "log-level", &level) < 0)
		return shell_log_error("-o gopmi.bindir and -o gopmi.log-level must be strings"), -1;
	snprintf(g->log_level, sizeof(g->log_level), "%s", level ? level : "");
	bindir = cmd0 ? cmd0 : flux_shell_getenv(g->shell, "GOPMI_BINDIR");
	snprintf(g->bindir, sizeof(g->bindir), "%s", bindir && bindir[0] ? bindir : GOPMI_BINDIR);
	cmd0 = NULL;
	if (flux_shell_info_unpack(g->shell, "{s:{s:[{s:[s]}]}}", "jobspec", "tasks", "command", &cmd0) == 0 && cmd0)
		snprintf(g->cmd0, sizeof(g->cmd0), "%s", cmd0);
	if (layout(g) < 0 || listen_tasks(g) < 0)
		return -1;
	if (g->shell_rank == 0 && start_coordinator(g) < 0)
		return -1;
	return 0;
}

/* on_post_init: every shell has run shell.init, so the leader's KVS
 * entries are there (a KVS read is the broker's; the leader's shell
 * answers no RPC before the tasks start). */
static int on_post_init(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;
	flux_t *h = flux_shell_get_flux(g->shell);

	if (g->shell_rank == 0)
		return 0;
	if (kvs_get(h, KVS_COORD, g->coord, sizeof(g->coord)) < 0 ||
	    kvs_get(h, KVS_SECRET, g->secret, sizeof(g->secret)) < 0)
		return shell_log_errno("read the coordinator's address from the job's KVS");
	return 0;
}

static int on_task_init(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;
	flux_shell_task_t *task = flux_shell_current_task(g->shell);
	flux_cmd_t *cmd = task ? flux_shell_task_cmd(task) : NULL;
	int rank, localid;

	if (!cmd || flux_shell_task_info_unpack(task, "{s:i s:i}", "rank", &rank, "localid", &localid) < 0)
		return shell_log_errno("task info");
	if (flux_cmd_setenvf(cmd, 1, "PMI_FD", "%d", TASK_FD) < 0 ||
	    flux_cmd_setenvf(cmd, 1, "PMI_RANK", "%d", rank) < 0 ||
	    flux_cmd_setenvf(cmd, 1, "PMI_SIZE", "%d", g->ntasks) < 0 ||
	    flux_cmd_setenvf(cmd, 1, "PMI_JOBID", "%s", g->jobid) < 0 ||
	    flux_cmd_setenvf(cmd, 1, "MPI_LOCALRANKID", "%d", localid) < 0 ||
	    flux_cmd_setenvf(cmd, 1, "MPI_LOCALNRANKS", "%d", g->nlocal) < 0)
		return shell_log_errno("task environment");
	/* What the job's environment carried from a gopmi around it. */
	flux_cmd_unsetenv(cmd, ENV_SECRET);
	flux_cmd_unsetenv(cmd, ENV_COORD);
	return 0;
}

/* on_task_exec runs in the task's process, just before exec: the PMI
 * connection. A task without one must not run as a singleton. */
static int on_task_exec(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd;

	if (fcntl(TASK_FD, F_GETFD) >= 0) {
		dprintf(2, "gopmi: fd %d is in use in the task: no room for its PMI connection\n", TASK_FD);
		_exit(127);
	}
	memcpy(addr.sun_path, g->sock, sizeof(g->sock));
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *) &addr, sizeof(addr)) < 0) {
		dprintf(2, "gopmi: cannot reach this node's PMI server at %s: %s\n", g->sock, strerror(errno));
		_exit(127);
	}
	if (fd != TASK_FD && (dup2(fd, TASK_FD) < 0 || close(fd) < 0)) {
		dprintf(2, "gopmi: dup2: %s\n", strerror(errno));
		_exit(127);
	}
	return 0;
}

static int on_task_fork(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;
	flux_shell_task_t *task = flux_shell_current_task(g->shell);
	long long pid; /* jansson's "I" */
	int localid;

	if (!task || flux_shell_task_info_unpack(task, "{s:i s:I}", "localid", &localid, "pid", &pid) < 0 ||
	    localid < 0 || localid >= g->nlocal)
		return shell_log_errno("task info");
	g->pids[localid] = (pid_t) pid;
	return 0;
}

/* accept_tasks takes each local task's connection, known by its pid. */
static int accept_tasks(struct gopmi *g)
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

/* bootstrap is the node server's bootstrap (proto/README.md: the plain
 * form). */
static char *bootstrap(struct gopmi *g)
{
	struct buf b = { 0 };

	bprintf(&b, "{" GOPMI_BOOT_BOOTSTRAP_VERSION "1," GOPMI_BOOT_BOOTSTRAP_JOB "{" GOPMI_BOOT_JOB_NSPACE);
	bstr(&b, g->jobid);
	bprintf(&b, "," GOPMI_BOOT_JOB_SIZE "%d," GOPMI_BOOT_JOB_NODES "%s," GOPMI_BOOT_JOB_APPS "[{" GOPMI_BOOT_APP_FIRST_RANK
		"0," GOPMI_BOOT_APP_SIZE "%d," GOPMI_BOOT_APP_CMD, g->ntasks, g->nodes, g->ntasks);
	bstr(&b, g->cmd0);
	bprintf(&b, "}]}," GOPMI_BOOT_BOOTSTRAP_NODE_ID "%d," GOPMI_BOOT_BOOTSTRAP_TASKS "[", g->shell_rank);
	for (int i = 0; i < g->nlocal; i++)
		bprintf(&b, "%s{" GOPMI_BOOT_TASK_RANK "%d," GOPMI_BOOT_TASK_FD_NAME "\"rank%d\"}", i ? "," : "", g->ranks[i],
			g->ranks[i]);
	bprintf(&b, "]," GOPMI_BOOT_BOOTSTRAP_BACKEND "{" GOPMI_BOOT_BACKEND_CONFIG_NAME "\"slurm\"," GOPMI_BOOT_BACKEND_CONFIG_ARGS
		"[\"-coordinator\",");
	bstr(&b, g->coord);
	/* The server's log is the job's stderr here, as the shell's own:
	 * warnings and errors only, unless -o gopmi.log-level says. */
	bprintf(&b, "]}," GOPMI_BOOT_BOOTSTRAP_LOG_LEVEL);
	bstr(&b, g->log_level[0] ? g->log_level : "warn");
	bprintf(&b, "}");
	if (b.failed) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

/* start_server starts the node's server with the tasks' connections as
 * LISTEN_FDS (fds 3, 4, ...) and the bootstrap on its stdin. */
static int start_server(struct gopmi *g)
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

static int on_shell_start(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;

	if (accept_tasks(g) < 0 || start_server(g) < 0)
		return -1;
	close(g->lfd);
	g->lfd = -1;
	unlink(g->sock);
	g->sock[0] = 0;
	return 0;
}

/* reap waits up to ms for pid, then kills it; it returns its wait status
 * or -1. */
static int reap(pid_t pid, int ms, int sig)
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

static int on_shell_exit(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;

	/* The node's server ends with its tasks' connections, once it has
	 * told the coordinator what they did (an abort, a rank gone before
	 * finalize); one that lingers is ended. */
	if (g->server > 0)
		reap(g->server, SERVER_GRACE_MS, SIGTERM);
	g->server = 0;
	if (g->coordinator > 0) {
		int status;
		close(g->coord_in);
		g->coord_in = -1;
		status = reap(g->coordinator, 5000, SIGTERM);
		g->coordinator = 0;
		if (status > 0 && WIFEXITED(status) && WEXITSTATUS(status))
			shell_debug("coordinator exited with status %d", WEXITSTATUS(status));
	}
	return 0;
}

int flux_plugin_init(flux_plugin_t *p)
{
	flux_shell_t *shell = flux_plugin_get_shell(p);
	const char *pmi = NULL, *mpi = NULL;
	struct gopmi *g;

	if (flux_plugin_set_name(p, FLUX_SHELL_PLUGIN_NAME) < 0)
		return -1;
	if (!shell || flux_shell_getopt_unpack(shell, "pmi", "s", &pmi) < 0 ||
	    flux_shell_getopt_unpack(shell, "mpi", "s", &mpi) < 0)
		return 0; /* an option of the wrong type: not ours to judge */
	if (!(pmi && selected(pmi, "gopmi")) && !(mpi && !strcmp(mpi, "gopmi") && !pmi))
		return 0; /* inert */
	if (!pmi && flux_shell_setopt_pack(shell, "pmi", "s", "gopmi") < 0)
		return -1; /* -o mpi=gopmi: the builtin pmi-simple stands down */
	if (!(g = calloc(1, sizeof(*g))))
		return -1;
	g->shell = shell;
	g->lfd = g->coord_in = g->coord_end = -1;
	if (flux_plugin_aux_set(p, "gopmi", g, gopmi_destroy) < 0) {
		gopmi_destroy(g);
		return -1;
	}
	if (flux_plugin_add_handler(p, "shell.init", on_shell_init, g) < 0 ||
	    flux_plugin_add_handler(p, "shell.post-init", on_post_init, g) < 0 ||
	    flux_plugin_add_handler(p, "task.init", on_task_init, g) < 0 ||
	    flux_plugin_add_handler(p, "task.exec", on_task_exec, g) < 0 ||
	    flux_plugin_add_handler(p, "task.fork", on_task_fork, g) < 0 ||
	    flux_plugin_add_handler(p, "shell.start", on_shell_start, g) < 0 ||
	    flux_plugin_add_handler(p, "shell.exit", on_shell_exit, g) < 0)
		return -1;
	return 0;
}
