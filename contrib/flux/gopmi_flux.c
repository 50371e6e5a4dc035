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

#include "gopmi_flux.h"

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
	flux_watcher_destroy(g->first_node);
	flux_watcher_destroy(g->grace);
	for (int i = 0; g->watch && i < g->nlocal; i++)
		flux_watcher_destroy(g->watch[i]);
	free(g->watch);
	if (g->coord_lfd >= 0)
		close(g->coord_lfd);
	flux_watcher_destroy(g->err_watch);
	if (g->server_err >= 0)
		close(g->server_err);
	if (g->coord_end >= 0)
		close(g->coord_end);
	for (int i = 0; i < g->npmix_env; i++)
		free(g->pmix_env[i]);
	free(g->pmix_env);
	free(g->ranks);
	free(g->pids);
	free(g->conns);
	free(g->nodes);
	free(g);
}

/* joined takes what a job a gopmi job spawned finds in its environment
 * (the spawner's coordinator, the secret, its namespace, its parent's,
 * the preput), as a step spawned under srun does. */
static void joined(struct gopmi *g)
{
	const char *coord = flux_shell_getenv(g->shell, ENV_COORD), *secret = flux_shell_getenv(g->shell, ENV_SECRET);
	const char *ns = flux_shell_getenv(g->shell, ENV_NSPACE), *parent = flux_shell_getenv(g->shell, ENV_PARENT);

	snprintf(g->nspace, sizeof(g->nspace), "%s", g->jobid);
	if (!coord || !coord[0] || !secret || !secret[0] || !ns || !ns[0])
		return;
	g->spawned = 1;
	snprintf(g->coord, sizeof(g->coord), "%s", coord);
	snprintf(g->secret, sizeof(g->secret), "%s", secret);
	snprintf(g->nspace, sizeof(g->nspace), "%s", ns);
	snprintf(g->parent, sizeof(g->parent), "%s", parent ? parent : "");
	g->preput = flux_shell_getenv(g->shell, ENV_PREPUT);
}

/* on_first_node starts the coordinator when a node first connects. */
static void on_first_node(flux_reactor_t *r, flux_watcher_t *w, int revents, void *arg)
{
	struct gopmi *g = arg;

	flux_watcher_stop(w);
	if (start_coordinator(g) < 0)
		flux_shell_raise("exec", 0, "gopmi: the job's coordinator did not start (the shell's log says why)");
}

/* on_first_pmi watches the tasks' connections until one of them speaks
 * PMI, and then starts the node's server with them all: a job whose
 * tasks never speak PMI (flux run -o pmi=gopmi hostname) starts none. A
 * connection that ends first is a task that ended without PMI. */
static void on_first_pmi(flux_reactor_t *r, flux_watcher_t *w, int revents, void *arg)
{
	struct gopmi *g = arg;
	int fd = flux_fd_watcher_get_fd(w);
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		flux_watcher_stop(w);
		if (++g->ended < g->nlocal)
			return;
		/* Every task ended without a word of PMI: no server. */
		for (int i = 0; i < g->nlocal; i++) {
			close(g->conns[i]);
			g->conns[i] = -1;
		}
		return;
	}
	for (int i = 0; i < g->nlocal; i++)
		flux_watcher_stop(g->watch[i]);
	if (start_server(g) < 0)
		flux_shell_raise("exec", 0, "gopmi: node %d: the PMI server did not start (the shell's log says why)", g->shell_rank);
}

static int on_shell_init(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;
	flux_jobid_t id;
	const char *bindir;
	char *cmd0 = NULL, *level = NULL;
	const char *pmix = NULL;
	int pmix_b = -1;

	if (flux_shell_info_unpack(g->shell, "{s:I s:i s:i s:i}", "jobid", &id, "rank", &g->shell_rank, "size",
				   &g->shells, "ntasks", &g->ntasks) < 0)
		return shell_log_errno("shell info");
	if (flux_job_id_encode(id, "f58plain", g->jobid, sizeof(g->jobid)) < 0)
		snprintf(g->jobid, sizeof(g->jobid), "%ju", (uintmax_t) id);
	joined(g);
	if (flux_shell_getopt_unpack(g->shell, "gopmi", "{s?s s?s s?i}", "bindir", &cmd0, "log-level", &level, "timeout",
				     &g->timeout) < 0 || g->timeout < 0)
		return shell_log_error("-o gopmi.bindir and gopmi.log-level must be strings, gopmi.timeout seconds"), -1;
	/* -o gopmi.pmix=yes|no|auto; flux run makes true, false, 1 and 0
	 * JSON of their own. */
	if (flux_shell_getopt_unpack(g->shell, "gopmi", "{s?s}", "pmix", &pmix) < 0 &&
	    flux_shell_getopt_unpack(g->shell, "gopmi", "{s?b}", "pmix", &pmix_b) < 0 &&
	    flux_shell_getopt_unpack(g->shell, "gopmi", "{s?i}", "pmix", &pmix_b) < 0)
		return shell_log_error("-o gopmi.pmix must be yes, no or auto"), -1;
	if (pmix_b >= 0)
		pmix = pmix_b ? "yes" : "no";
	snprintf(g->log_level, sizeof(g->log_level), "%s", level ? level : "");
	snprintf(g->pmix_opt, sizeof(g->pmix_opt), "%s", pmix ? pmix : "");
	bindir = cmd0 ? cmd0 : flux_shell_getenv(g->shell, "GOPMI_BINDIR");
	snprintf(g->bindir, sizeof(g->bindir), "%s", bindir && bindir[0] ? bindir : GOPMI_BINDIR);
	cmd0 = NULL;
	if (flux_shell_info_unpack(g->shell, "{s:{s:[{s:[s]}]}}", "jobspec", "tasks", "command", &cmd0) == 0 && cmd0)
		snprintf(g->cmd0, sizeof(g->cmd0), "%s", cmd0);
	g->pmix = wants_pmix(g);
	if (layout(g) < 0 || (!g->pmix && listen_tasks(g) < 0))
		return -1;
	if (g->spawned)
		return 0; /* its spawner's coordinator serves it */
	if (g->shell_rank == 0 && listen_coordinator(g) < 0)
		return -1;
	/* The leader's reactor runs until every task of the job is done,
	 * not only its own: the coordinator serves them all. */
	if (g->shell_rank == 0 && flux_shell_add_completion_ref(g->shell, "gopmi.coordinator") > 0)
		g->coord_ref = 1;
	if (g->shell_rank == 0) {
		/* A PMIx server connects at once; otherwise the coordinator
		 * starts when the first node connects, if one does: a job
		 * whose tasks never speak PMI starts none. */
		if (g->pmix)
			return start_coordinator(g);
		g->first_node = flux_fd_watcher_create(flux_get_reactor(flux_shell_get_flux(g->shell)), g->coord_lfd,
						       FLUX_POLLIN, on_first_node, g);
		if (!g->first_node)
			return shell_log_errno("watch the coordinator's socket");
		flux_watcher_start(g->first_node);
	}
	return 0;
}

/* on_post_init: every shell has run shell.init, so the leader's KVS
 * entries are there (a KVS read is the broker's; the leader's shell
 * answers no RPC before the tasks start). */
static int on_post_init(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;
	flux_t *h = flux_shell_get_flux(g->shell);

	if (g->shell_rank != 0 && !g->spawned && (kvs_get(h, KVS_COORD, g->coord, sizeof(g->coord)) < 0 ||
				   kvs_get(h, KVS_SECRET, g->secret, sizeof(g->secret)) < 0))
		return shell_log_errno("read the coordinator's address from the job's KVS");
	/* A PMIx server must have registered the job before its clients
	 * start; a PMI one starts with its tasks' connections. */
	if (g->pmix && start_server(g) < 0)
		return -1;
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
	/* What the job's environment carried from a gopmi around it (its
	 * spawner's): the tasks must not see the secret. */
	for (const char **k = (const char *[]) { ENV_SECRET, ENV_COORD, ENV_NSPACE, ENV_PARENT, ENV_PREPUT, NULL }; *k; k++)
		flux_cmd_unsetenv(cmd, *k);
	if (g->pmix) {
		/* The server's address and the job's namespace, from its
		 * READY=1; only the rank differs between tasks. */
		for (int i = 0; i < g->npmix_env; i++) {
			char *eq = strchr(g->pmix_env[i], '='), name[256];
			if (!eq || (size_t) (eq - g->pmix_env[i]) >= sizeof(name))
				continue;
			snprintf(name, eq - g->pmix_env[i] + 1, "%s", g->pmix_env[i]);
			if (flux_cmd_setenvf(cmd, 1, name, "%s", eq + 1) < 0)
				return shell_log_errno("task environment");
		}
		if (flux_cmd_setenvf(cmd, 1, "PMIX_RANK", "%d", rank) < 0)
			return shell_log_errno("task environment");
		return 0;
	}
	if (flux_cmd_setenvf(cmd, 1, "PMI_FD", "%d", TASK_FD) < 0 ||
	    flux_cmd_setenvf(cmd, 1, "PMI_RANK", "%d", rank) < 0 ||
	    flux_cmd_setenvf(cmd, 1, "PMI_SIZE", "%d", g->ntasks) < 0 ||
	    flux_cmd_setenvf(cmd, 1, "PMI_JOBID", "%s", g->nspace) < 0 ||
	    (g->spawned && flux_cmd_setenvf(cmd, 1, "PMI_SPAWNED", "1") < 0) ||
	    flux_cmd_setenvf(cmd, 1, "MPI_LOCALRANKID", "%d", localid) < 0 ||
	    flux_cmd_setenvf(cmd, 1, "MPI_LOCALNRANKS", "%d", g->nlocal) < 0)
		return shell_log_errno("task environment");
	return 0;
}

/* on_task_exec runs in the task's process, just before exec: the PMI
 * connection. A task without one must not run as a singleton. */
static int on_task_exec(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd;

	if (g->pmix)
		return 0; /* the task finds its PMIx server in its environment */
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
	if (!g->pmix)
		(void) accept_tasks(g, 0);
	return 0;
}

static int on_shell_start(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;

	if (g->pmix)
		return 0;
	if (accept_tasks(g, CONNECT_WAIT_MS) > 0) {
		/* A task without a connection did not reach its exec: its
		 * start failed, and Flux says why. */
		char ranks[512] = "";
		for (int i = 0, n = 0; i < g->nlocal; i++)
			if (g->conns[i] < 0)
				n += snprintf(ranks + n, n < (int) sizeof(ranks) ? sizeof(ranks) - n : 0, "%s%d", n ? "," : "", g->ranks[i]);
		flux_shell_raise("exec", 0, "gopmi: node %d (%s): rank(s) %s never connected to their PMI server: their start failed (the lines above say why)",
				 g->shell_rank, g->host, ranks);
		return 0;
	}
	close(g->lfd);
	g->lfd = -1;
	unlink(g->sock);
	g->sock[0] = 0;
	if (g->spawned)
		return start_server(g); /* its spawner waits for its nodes */
	if (!(g->watch = calloc(g->nlocal ? g->nlocal : 1, sizeof(*g->watch))))
		return -1;
	for (int i = 0; i < g->nlocal; i++) {
		g->watch[i] = flux_fd_watcher_create(flux_get_reactor(flux_shell_get_flux(g->shell)), g->conns[i],
						     FLUX_POLLIN, on_first_pmi, g);
		if (!g->watch[i])
			return shell_log_errno("watch the tasks' connections");
		flux_watcher_start(g->watch[i]);
	}
	return 0;
}

/* on_grace ends a node server that outlives its tasks by
 * SERVER_GRACE_MS: SIGTERM, then SIGKILL 2 s later. */
static void on_grace(flux_reactor_t *r, flux_watcher_t *w, int revents, void *arg)
{
	struct gopmi *g = arg;

	if (g->server_gone || g->server <= 0)
		return;
	g->stopping = 1;
	shell_warn("the PMI server outlived this shell's tasks by %ds: ended", SERVER_GRACE_MS / 1000);
	kill(-g->server, g->grace_killed ? SIGKILL : SIGTERM);
	if (!g->grace_killed) {
		g->grace_killed = 1;
		flux_timer_watcher_reset(w, 2.0, 0.);
		flux_watcher_start(w);
	}
}

/* on_task_exit: once every task of the shell has exited, its server has
 * until SERVER_GRACE_MS to end; a PMIx server, which cannot tell a task
 * that never connected from one not started yet, is told by SIGHUP. */
static int on_task_exit(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;

	if (++g->local_exits < g->nlocal || g->server <= 0 || g->server_gone)
		return 0;
	if (g->pmix)
		kill(g->server, SIGHUP);
	g->grace = flux_timer_watcher_create(flux_get_reactor(flux_shell_get_flux(g->shell)), SERVER_GRACE_MS / 1000., 0.,
					     on_grace, g);
	if (g->grace)
		flux_watcher_start(g->grace);
	return 0;
}

/* on_tasks_complete (the leader's): every task of the job is done, so is
 * the coordinator's work: it is told to end (it waits for the jobs this
 * one spawned) and the leader may end. */
static int on_tasks_complete(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;

	g->coord_closing = 1;
	if (g->end_watch)
		flux_watcher_stop(g->end_watch);
	if (g->first_node)
		flux_watcher_stop(g->first_node);
	if (g->coord_in >= 0) {
		close(g->coord_in);
		g->coord_in = -1;
	}
	if (g->coord_ref && flux_shell_remove_completion_ref(g->shell, "gopmi.coordinator") >= 0)
		g->coord_ref = 0;
	return 0;
}

static int on_shell_exit(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
	struct gopmi *g = data;

	/* The node's server ends with its tasks' connections, once it has
	 * told the coordinator what they did (an abort, a rank gone before
	 * finalize); one that lingers is ended. */
	if (g->server > 0 && !g->server_gone) {
		g->stopping = 1;
		/* A PMIx server cannot tell a task that never connected from
		 * one not started yet: SIGHUP says every task ended. */
		if (g->pmix)
			kill(g->server, SIGHUP);
		reap(g->server, SERVER_GRACE_MS, SIGTERM);
	}
	g->server = 0;
	if (g->coordinator > 0) {
		int status;
		if (g->coord_in >= 0)
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
	g->lfd = g->coord_in = g->coord_end = g->server_err = g->coord_lfd = -1;
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
	    flux_plugin_add_handler(p, "task.exit", on_task_exit, g) < 0 ||
	    flux_plugin_add_handler(p, "shell.tasks-complete", on_tasks_complete, g) < 0 ||
	    flux_plugin_add_handler(p, "shell.exit", on_shell_exit, g) < 0)
		return -1;
	return 0;
}
