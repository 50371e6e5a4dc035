/* mpi/gopmi, slurmstepd's side: its state, prefork (the tasks' sockets,
 * the shim's start, or the rendezvous and the starter), each task's
 * environment, the step directories, and fini. */

#include "mpi_gopmi.h"

static int *task_fds;     /* the task's end of each local socketpair */
uint32_t ntask_fds;
/* Each task says on this pipe that it was forked; once all did, the
 * stepd closes its copies of the tasks' ends, so that the shim sees a
 * task's connection close when the task ends. */
static int forked[2] = { -1, -1 };
int spawned; /* the step was spawned by a gopmi step */
/* The step's tasks are PMIx clients (wants_pmix): gopmi-slurm-pmix serves
 * them, and each task gets pmix_env (from the shim's READY) and its
 * PMIX_RANK instead of an fd and PMI_* variables. */
int pmix_step;
char **pmix_env;
/* A PMI-1/PMI-2 step's PMIx rendezvous (GopmiPMIx auto, the default):
 * a listener on 127.0.0.1 made before the tasks start, whose address
 * every task gets in the PMIx environment beside its PMI variables. A
 * task that is a PMIx client however it was started (python3 with mpi4py,
 * a shell script) connects and waits for its handshake's answer; the
 * starter thread, seeing the listener readable before any task spoke PMI,
 * starts gopmi-slurm-pmix on it instead of gopmi-slurm (libpmix listens on
 * that very socket: shim/pmix/rendezvous.c). A step that speaks PMI, or
 * nothing, costs the listener. */
int rdv_fd = -1;
static int rdv_port;
int rdv_bootstrap; /* bootstrap writes the rendezvous's field */
static char rdv_nspace[256];
/* Why the shim could not serve this node's tasks. Slurm's srun exits 0
 * when a stepd's prefork fails ("task launch failed"), so prefork lets the
 * tasks start and each one fails at once with this message on its stderr,
 * which srun shows: the step fails, and says why. */
char shim_error[4200];

static void *close_task_ends(void *arg)
{
	/* Each task writes its local id moments after its fork; one that
	 * dies before never does. Past the start time-out the stepd stops
	 * waiting, so that it never holds the forked tasks' ends (and the
	 * shim's view of a closed connection) for the step's life; the ends
	 * of tasks not forked yet stay open, for them to inherit. */
	struct timespec start, now;
	uint32_t n = 0, id;
	char *done = xcalloc(ntask_fds ? ntask_fds : 1, 1);
	size_t got = 0;

	clock_gettime(CLOCK_MONOTONIC, &start);
	while (n < ntask_fds) {
		struct pollfd p = { .fd = forked[0], .events = POLLIN };
		long left;
		ssize_t r;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (long) gconf.start_timeout * 1000 -
		       ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
		if (left <= 0) {
			error("mpi/gopmi: %u of %u local tasks never reached their PMI set-up within %us; closing the others' connections",
			      ntask_fds - n, ntask_fds, gconf.start_timeout);
			break;
		}
		if (poll(&p, 1, (int) left) <= 0)
			continue; /* EINTR or the deadline, checked above */
		r = read(forked[0], (char *) &id + got, sizeof(id) - got);
		if (r == 0)
			break; /* cannot happen while the stepd holds the write end */
		if (r < 0)
			continue;
		got += r;
		if (got < sizeof(id))
			continue;
		got = 0;
		if (id < ntask_fds && !done[id]) {
			done[id] = 1;
			n++;
		}
	}
	for (uint32_t i = 0; i < ntask_fds; i++)
		if (done[i])
			close(task_fds[i]);
	close(forked[0]);
	xfree(done);
	return NULL;
}

/* remove_tree removes name in dir and everything below it, never
 * following a symbolic link: the tree is the job's user's, and the stepd
 * is root. */
static void remove_tree(int dir, const char *name, int depth)
{
	int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *e;

	if (fd >= 0 && depth < 16 && (d = fdopendir(fd))) {
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				remove_tree(dirfd(d), e->d_name, depth + 1);
		closedir(d); /* closes fd */
	} else if (fd >= 0) {
		close(fd);
	}
	if (unlinkat(dir, name, AT_REMOVEDIR) && errno == ENOTDIR)
		(void) unlinkat(dir, name, 0);
}

/* A PMIx step's shim works in a directory of its own (its TMPDIR), which
 * the stepd makes for it and removes at its end: the stepd kills a shim
 * that outlives its tasks before it can clean up after libpmix. The stepd
 * holds it locked (flock) until then; a stepd that never reaches its end
 * (killed, its slurmd stopped under it) leaves it unlocked, and the next
 * PMIx step's stepd on the host removes it (sweep_steps). */
char pmix_tmp[PATH_MAX];
int pmix_tmp_lock = -1;

/* sweep_steps removes the step directories in base that no live stepd
 * holds locked and that were made STEP_DIR_YOUNG seconds ago or more:
 * those of stepds that were killed. */
void sweep_steps(const char *base)
{
	DIR *d = opendir(base);
	struct dirent *e;
	time_t now = time(NULL);

	if (!d)
		return;
	while ((e = readdir(d))) {
		struct stat st;
		int fd;

		if (strncmp(e->d_name, STEP_DIR_PREFIX, strlen(STEP_DIR_PREFIX)))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode) ||
		    now - st.st_mtime < STEP_DIR_YOUNG)
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			debug("mpi/gopmi: removing %s/%s, left by a stepd that is gone", base, e->d_name);
			remove_tree(dirfd(d), e->d_name, 0);
		}
		close(fd);
	}
	closedir(d);
}

/* On demand, a thread holds the server ends and starts the shim when a
 * task first writes to one; a step whose tasks all end without a word of
 * PMI starts none. The thread then stays until fini (stop): the shim's
 * parent-death signal follows the thread that forked it. */
int starter_stop[2] = { -1, -1 };
static pthread_t starter_thread;
static int starter_running;

/* fini is called by Slurm before it unloads the plugin: it stops and
 * joins the starter and the log relay, whose code is the plugin's. */
extern void fini(void)
{
	if (starter_running) {
		(void) write(starter_stop[1], "", 1);
		pthread_join(starter_thread, NULL);
		close(starter_stop[0]);
		close(starter_stop[1]);
		starter_running = 0;
	}
	if (relay_running) {
		__atomic_store_n(&relay_stop, 1, __ATOMIC_RELEASE);
		pthread_join(relay_thread, NULL);
		relay_running = 0;
	}
	if (pmix_tmp[0]) {
		char *slash = strrchr(pmix_tmp, '/');
		int dir;
		*slash = '\0';
		dir = open(pmix_tmp[0] ? pmix_tmp : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dir >= 0) {
			remove_tree(dir, slash + 1, 0);
			close(dir);
		}
		pmix_tmp[0] = '\0';
	}
	if (pmix_tmp_lock >= 0) {
		close(pmix_tmp_lock);
		pmix_tmp_lock = -1;
	}
}

/* step_setting is a user's per-step choice from the job's environment
 * (srun --export), else mpi.conf's. */
const char *step_setting(char **env, const char *name, const char *conf)
{
	const char *v = getenvp(env, name);
	return v && v[0] ? v : conf;
}

/* check_settings refuses a per-step or mpi.conf setting gopmi cannot use,
 * naming it and what it wants (in shim_error); it returns non-zero then. */
static int check_settings(char **env)
{
	const char *mode = step_setting(env, "GOPMI_FENCE_MODE", gconf.fence_mode);
	const char *t = getenvp(env, "GOPMI_TIMEOUT"), *w = getenvp(env, "GOPMI_TREE_WIDTH");

	if (mode && mode[0]) {
		static const char *const modes[] = GOPMI_FENCE_MODES;
		int known = 0;
		for (int i = 0; modes[i]; i++)
			known = known || !strcasecmp(mode, modes[i]);
		if (!known) {
			snprintf(shim_error, sizeof(shim_error), "fence mode \"%.64s\" (GOPMI_FENCE_MODE or GopmiFenceMode): want %s",
				 mode, GOPMI_FENCE_MODE_NAMES);
			return 1;
		}
	}
	if (t && t[0] && (strspn(t, "0123456789") != strlen(t) || atoi(t) < 1)) {
		snprintf(shim_error, sizeof(shim_error), "GOPMI_TIMEOUT=%.64s: want a number of seconds, at least 1", t);
		return 1;
	}
	if (w && w[0] && (strspn(w, "0123456789") != strlen(w) || atoi(w) < 1)) {
		snprintf(shim_error, sizeof(shim_error), "GOPMI_TREE_WIDTH=%.64s: want a number, at least 1", w);
		return 1;
	}
	return 0;
}

/* pmix_off reports whether the step turned PMIx off (GOPMI_PMIX, or
 * GopmiPMIx in mpi.conf, says no). */
static int pmix_off(char **env)
{
	const char *v = step_setting(env, "GOPMI_PMIX", gconf.pmix);

	return v && (!strcasecmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off"));
}

/* listen_rendezvous makes the step's PMIx rendezvous on 127.0.0.1 (rdv_fd,
 * rdv_port); -1 when it cannot. */
static int listen_rendezvous(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof(a)) || listen(fd, SOMAXCONN) ||
	    getsockname(fd, (struct sockaddr *) &a, &alen)) {
		error("mpi/gopmi: the PMIx rendezvous: %m");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rdv_port = ntohs(a.sin_port);
	return fd;
}

extern int mpi_p_slurmstepd_prefork(const stepd_step_rec_t *job, char ***env)
{
	const char *port = getenvp(*env, ENV_PORT);
	const char *host = getenvp(*env, "SLURM_SRUN_COMM_HOST");
	const char *secret = getenvp(*env, ENV_SECRET);
	const char *given = getenvp(*env, ENV_COORD);
	const char *nodes = getenvp(*env, ENV_NODES);
	char *coord = NULL, *names = NULL;
	int logp[2] = { -1, -1 }, rc = SLURM_ERROR, lazy = 0;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	socklen_t alen;

	if (given && given[0]) {
		coord = xstrdup(given); /* a spawned step: its parent's */
		spawned = 1;
	}
	else if (port && host)
		coord = xstrdup_printf("%s:%s", host, port);
	if (!coord || !secret || !nodes) {
		snprintf(shim_error, sizeof(shim_error),
			 "the step has no coordinator (%s, SLURM_SRUN_COMM_HOST, %s or %s missing): was srun's mpi/gopmi plugin loaded?",
			 ENV_PORT, ENV_SECRET, ENV_NODES);
		goto out;
	}
	if (check_settings(*env))
		goto out;
	pmix_step = wants_pmix(job, *env);
	shim_start.job = job;
	shim_start.path = xstrdup_printf("%s/%s", bindir(), pmix_step ? "gopmi-slurm-pmix" : "gopmi-slurm");
	if (access(shim_start.path, X_OK) != 0) {
		if (pmix_step)
			snprintf(shim_error, sizeof(shim_error),
				 "%s: %s: this step's tasks speak PMIx (Open MPI), which gopmi-slurm-pmix serves; it is built where libpmix-dev is installed (GOPMI_PMIX=0 runs the step without it)",
				 shim_start.path, strerror(errno));
		else
			snprintf(shim_error, sizeof(shim_error),
				 "%s: %s (GopmiBinDir in mpi.conf says where gopmi is installed)", shim_start.path, strerror(errno));
		goto out;
	}
	shim_start.boot = bootstrap(job, *env, coord, nodes);

	/* The shim's readiness comes back on an abstract datagram socket. */
	shim_start.ns = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "gopmi-%u.%u-%u-%d",
		 job->step_id.job_id, job->step_id.step_id, job->nodeid, (int) getpid());
	alen = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(addr.sun_path + 1);
	if (shim_start.ns < 0 || bind(shim_start.ns, (struct sockaddr *) &addr, alen) ||
	    setsockopt(shim_start.ns, SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int))) {
		error("mpi/gopmi: notify socket: %m");
		goto out;
	}

	/* A PMIx step's tasks connect to libpmix's listener instead. */
	ntask_fds = pmix_step ? 0 : job->node_tasks;
	task_fds = xcalloc(ntask_fds, sizeof(int));
	shim_start.pairs = xcalloc(ntask_fds, sizeof(*shim_start.pairs));
	for (uint32_t i = 0; i < ntask_fds; i++)
		shim_start.pairs[i][0] = shim_start.pairs[i][1] = -1;
	for (uint32_t i = 0; i < ntask_fds; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, shim_start.pairs[i])) {
			error("mpi/gopmi: socketpair: %m");
			goto out;
		}
		task_fds[i] = shim_start.pairs[i][1];
		fcntl(shim_start.pairs[i][0], F_SETFD, FD_CLOEXEC);
		fcntl(shim_start.pairs[i][1], F_SETFD, FD_CLOEXEC);
		xstrfmtcat(names, "%srank%u", i ? ":" : "", job->task[i]->gtid);
	}
	if (pipe2(shim_start.in, O_CLOEXEC) || (ntask_fds && pipe2(forked, O_CLOEXEC))) {
		error("mpi/gopmi: pipe: %m");
		goto out;
	}

	/* Everything the child needs is made before fork. */
	{
		char nbuf[16], notify[128];
		snprintf(nbuf, sizeof(nbuf), "%u", ntask_fds);
		snprintf(notify, sizeof(notify), "@%s", addr.sun_path + 1);
		shim_start.envp = env_array_copy((const char **) environ);
		unsetenvp(shim_start.envp, "LISTEN_PID");
		if (ntask_fds) {
			env_array_overwrite(&shim_start.envp, "LISTEN_FDS", nbuf);
			env_array_overwrite(&shim_start.envp, "LISTEN_FDNAMES", names);
		} else {
			unsetenvp(shim_start.envp, "LISTEN_FDS");
			unsetenvp(shim_start.envp, "LISTEN_FDNAMES");
		}
		env_array_overwrite(&shim_start.envp, "NOTIFY_SOCKET", notify);
		env_array_overwrite(&shim_start.envp, ENV_SECRET, secret);
		env_array_overwrite(&shim_start.envp, ENV_COORD, coord);
		if (pmix_step)
			make_pmix_tmp(job);
	}
	/* The shim's stderr goes to this stepd's log through a thread of
	 * its own, started before the fork: a shim whose relay could not
	 * start keeps the stepd's /dev/null rather than a pipe nobody
	 * reads, which would block its logging. */
	if (relay_running) {
		/* prefork runs once per stepd; a relay is there already. */
	} else if (pipe2(logp, O_CLOEXEC) == 0) {
		if (pthread_create(&relay_thread, NULL, relay_shim_log, (void *) (intptr_t) logp[0])) {
			error("mpi/gopmi: thread for the shim's log: %m");
			close(logp[0]);
			close(logp[1]);
			logp[1] = -1;
		} else {
			relay_running = 1;
		}
		logp[0] = -1; /* the relay's now */
	} else {
		error("mpi/gopmi: pipe for the shim's log: %m");
	}
	shim_start.logp = logp[1];
	shim_start.stepd = getpid();

	/* A PMI-1/PMI-2 step's shim starts when a task first speaks PMI
	 * (GopmiOnDemand, default yes): a step that never does (srun
	 * hostname under MpiDefault=gopmi) starts none, and the tasks do not
	 * wait for it to start. A PMIx step's starts now: libpmix must
	 * register the job before the tasks start; so does a spawned
	 * step's, whose spawner waits for its nodes. */
	lazy = !pmix_step && !spawned && ntask_fds &&
	       on_demand(step_setting(*env, "GOPMI_ON_DEMAND", gconf.on_demand));
	if (lazy && !pmix_off(*env)) {
		/* Its tasks may be PMIx clients nothing showed: a rendezvous,
		 * where gopmi-slurm-pmix starts if one comes first. */
		char *pp = xstrdup_printf("%s/gopmi-slurm-pmix", bindir());
		const char *ns = getenvp(*env, ENV_NSPACE);

		if (access(pp, X_OK) == 0 && (rdv_fd = listen_rendezvous()) >= 0) {
			if (ns && ns[0])
				snprintf(rdv_nspace, sizeof(rdv_nspace), "%s", ns);
			else
				snprintf(rdv_nspace, sizeof(rdv_nspace), "slurm.%u.%u", job->step_id.job_id,
					 job->step_id.step_id);
			shim_start.pmix_path = pp;
			pp = NULL;
			pmix_step = rdv_bootstrap = 1;
			shim_start.pmix_boot = bootstrap(job, *env, coord, nodes);
			pmix_step = rdv_bootstrap = 0;
		}
		xfree(pp);
	}
	if (lazy && pipe2(starter_stop, O_CLOEXEC) == 0) {
		if (pthread_create(&starter_thread, NULL, start_on_demand, NULL) == 0) {
			starter_running = 1;
			rc = SLURM_SUCCESS;
		} else {
			error("mpi/gopmi: thread to start the shim on demand: %m");
			close(starter_stop[0]);
			close(starter_stop[1]);
			starter_stop[0] = starter_stop[1] = -1;
		}
	}
	if (!starter_running)
		rc = launch_shim();
	if (rc == SLURM_SUCCESS && ntask_fds) {
		pthread_t th;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &attr, close_task_ends, NULL)) {
			error("mpi/gopmi: thread: %m");
			rc = SLURM_ERROR;
		}
		pthread_attr_destroy(&attr);
	}
out:
	if (!starter_running) {
		if (rc != SLURM_SUCCESS && shim_start.pairs) {
			for (uint32_t i = 0; i < ntask_fds; i++)
				if (shim_start.pairs[i][1] >= 0)
					close(shim_start.pairs[i][1]);
		}
		free_shim_start();
	}
	/* The tasks must not see the coordinator's address or the secret. */
	unsetenvp(*env, ENV_PORT);
	unsetenvp(*env, ENV_SECRET);
	unsetenvp(*env, ENV_NODES);
	unsetenvp(*env, ENV_COORD);
	unsetenvp(*env, ENV_NSPACE);
	unsetenvp(*env, ENV_PARENT);
	unsetenvp(*env, ENV_PREPUT);
	xfree(coord);
	xfree(names);
	if (rc != SLURM_SUCCESS) {
		if (!shim_error[0])
			snprintf(shim_error, sizeof(shim_error), "could not start the shim (gopmi-slurm shim): %s",
				 strerror(errno));
		error("mpi/gopmi: %s", shim_error);
	}
	/* The tasks start either way; each fails at once when the shim did
	 * not come up (see shim_error). */
	return SLURM_SUCCESS;
}

extern int mpi_p_slurmstepd_task(const gopmi_task_info_t *job, char ***env)
{
	int fd = -1;

	if (shim_error[0]) {
		/* stderr is the task's, which srun prints: once per node. */
		if (job->ltaskid == 0)
			dprintf(2, "gopmi: node %u: %s\n", job->nodeid, shim_error);
		_exit(1);
	}

	if (pmix_step) {
		/* The PMIx server's address and the job's namespace, from
		 * setup_fork; only the rank differs between tasks. */
		for (char **e = pmix_env; e && *e; e++) {
			char *eq = strchr(*e, '='), *name;
			/* Only PMIx's own variables: what setup_fork gives. */
			if (!eq || strncmp(*e, "PMIX_", 5))
				continue;
			name = xstrndup(*e, eq - *e);
			env_array_overwrite(env, name, eq + 1);
			xfree(name);
		}
		env_array_overwrite_fmt(env, "PMIX_RANK", "%u", job->gtaskid);
		return SLURM_SUCCESS;
	}
	for (uint32_t i = 0; i < ntask_fds; i++) {
		if ((int) i == job->ltaskid)
			fd = task_fds[i];
		else
			close(task_fds[i]);
	}
	if (fd < 0) {
		error("mpi/gopmi: task %u has no PMI connection", job->gtaskid);
		return SLURM_ERROR;
	}
	fcntl(fd, F_SETFD, 0); /* the task's own end survives its exec */
	if (forked[1] >= 0) {
		uint32_t id = job->ltaskid; /* 4 bytes: one atomic pipe write */
		(void) write(forked[1], &id, sizeof(id));
		close(forked[1]);
	}
	if (rdv_port) {
		/* The PMIx environment of the rendezvous (pmix.RendezvousEnv):
		 * the server's URI as namespace <job>.<node> rank 0, the hash
		 * store (the shared-memory store's directory is named by the
		 * server's pid). */
		static const char *uri_vars[] = { "PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
						  "PMIX_SERVER_URI21", "PMIX_SERVER_URI2" };
		char host[256] = "";

		(void) gethostname(host, sizeof(host) - 1);
		env_array_overwrite(env, "PMIX_NAMESPACE", rdv_nspace);
		env_array_overwrite_fmt(env, "PMIX_RANK", "%u", job->gtaskid);
		for (size_t i = 0; i < sizeof(uri_vars) / sizeof(uri_vars[0]); i++)
			env_array_overwrite_fmt(env, uri_vars[i], "%s.%u.0;tcp4://127.0.0.1:%d", rdv_nspace,
						job->nodeid, rdv_port);
		env_array_overwrite(env, "PMIX_SECURITY_MODE", "native");
		env_array_overwrite(env, "PMIX_GDS_MODULE", "hash");
		env_array_overwrite(env, "PMIX_BFROP_BUFFER_TYPE", "PMIX_BFROP_BUFFER_NON_DESC");
		env_array_overwrite(env, "PMIX_HOSTNAME", host);
	}
	env_array_overwrite_fmt(env, "PMI_FD", "%d", fd);
	env_array_overwrite_fmt(env, "PMI_RANK", "%u", job->gtaskid);
	env_array_overwrite_fmt(env, "PMI_SIZE", "%u", job->ntasks);
	env_array_overwrite_fmt(env, "PMI_JOBID", "%u.%u", job->step_id.job_id,
				job->step_id.step_id);
	/* As hydra and gopmi run set them: the task's place on its node. */
	env_array_overwrite_fmt(env, "MPI_LOCALRANKID", "%d", job->ltaskid);
	env_array_overwrite_fmt(env, "MPI_LOCALNRANKS", "%u", job->ltasks);
	if (spawned)
		env_array_overwrite(env, "PMI_SPAWNED", "1");
	return SLURM_SUCCESS;
}
