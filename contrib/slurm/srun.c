/* mpi/gopmi, srun's side: it starts the step's coordinator (gopmi-slurm
 * coordinate), hands the stepds its address and the step's secret, and
 * makes srun's exit status the step's. */

#include "mpi_gopmi.h"

typedef struct {
	pid_t pid;
	int in;     /* the coordinator's stdin: closing it ends the coordinator */
	int failed; /* no coordinator: the step fails, srun exits 1 */
	/* On demand (GOPMI_ON_DEMAND, default yes), the coordinator starts
	 * when its first node connects: a thread waits on the listening
	 * socket (lfd) and stop (written by fini), then starts it. pid is
	 * the thread's to set, under mu, until it is joined. */
	int lfd, stop[2], waiting;
	pthread_t waiter;
	pthread_mutex_t mu;
	/* What the coordinator's start needs, made before any fork. */
	char *path, **cenv, step[64];
	int cin; /* the coordinator's end of in */
} client_state_t;

/* no_coordinator lets the step start without a coordinator after srun's
 * side failed (its error() said why): each stepd then finds none and
 * fails its tasks at once with a message, and srun exits 1. Returning
 * NULL instead makes srun wait half a minute for a step it aborted. */
static mpi_plugin_client_state_t *no_coordinator(void)
{
	client_state_t *st = xmalloc(sizeof(*st));
	st->pid = -1;
	st->in = -1;
	st->lfd = -1;
	st->failed = 1;
	return st;
}

/* on_demand reports whether a setting ("yes", "no" or unset: yes) asks
 * for gopmi's processes to start only when the step's tasks speak PMI. */
int on_demand(const char *v)
{
	return !v || !v[0] || strcasecmp(v, "no") != 0;
}

/* start_coordinator forks and execs gopmi-slurm coordinate with the
 * listening socket as fd 3 and the in pipe as stdin; it returns its pid,
 * or -1. srun has threads: the child only makes system calls. */
static pid_t start_coordinator(client_state_t *st)
{
	pid_t pid = fork();
	if (pid == 0) {
		static const char exec_failed[] = "mpi/gopmi: cannot exec gopmi-slurm\n";
		char *argv[] = { st->path, "coordinate", "-step", st->step, NULL };
		/* stdout stays srun's: a spawned step's tasks write there. */
		dup2(st->cin, 0);
		if (st->lfd == 3)
			fcntl(3, F_SETFD, 0);
		else
			dup2(st->lfd, 3); /* clears close-on-exec */
		setpgid(0, 0); /* srun's signals to its group are not ours */
		execve(st->path, argv, st->cenv);
		(void) write(2, exec_failed, sizeof(exec_failed) - 1);
		_exit(127);
	}
	if (pid < 0)
		error("mpi/gopmi: fork: %m");
	return pid;
}

/* await_first_node starts the coordinator once a node connects (the
 * connection waits in the listening socket's queue for it), unless fini
 * says stop first: a step whose tasks never speak PMI starts none. */
static void *await_first_node(void *arg)
{
	client_state_t *st = arg;
	struct pollfd p[2] = { { .fd = st->lfd, .events = POLLIN }, { .fd = st->stop[0], .events = POLLIN } };

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			error("mpi/gopmi: poll for the first node: %m");
			pthread_mutex_lock(&st->mu);
			st->failed = 1;
			close(st->lfd);
			st->lfd = -1;
			pthread_mutex_unlock(&st->mu);
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		if (p[0].revents) {
			pid_t pid = start_coordinator(st);
			pthread_mutex_lock(&st->mu);
			st->pid = pid;
			if (pid < 0)
				st->failed = 1;
			/* The coordinator's now (or nobody's): a node that
			 * connects to a coordinator that died is refused at
			 * once, not left in srun's queue. */
			close(st->lfd);
			close(st->cin);
			st->lfd = st->cin = -1;
			pthread_mutex_unlock(&st->mu);
			debug("mpi/gopmi: step %s: a node connected; coordinator pid %d", st->step, (int) pid);
			return NULL;
		}
	}
}

extern mpi_plugin_client_state_t *
mpi_p_client_prelaunch(const gopmi_step_info_t *job, char ***env)
{
	char secret[65], step[64], *path = NULL, *nodes, **cenv;
	unsigned char raw[32];
	int in[2], port, fd, lfd;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t slen = sizeof(sin);
	pid_t pid;
	client_state_t *st;
	/* srun's own environment: *env is the step's, which may not hold
	 * srun's variables yet. */
	const char *coord = getenv(ENV_COORD), *joined = getenv(ENV_SECRET);

	if (coord && coord[0] && joined && joined[0]) {
		/* A step spawned from a gopmi step: its coordinator serves
		 * this one too (one name service for the step and everything
		 * it spawned). */
		debug("mpi/gopmi: step %u.%u joins coordinator %s",
		      job->step_id.job_id, job->step_id.step_id, coord);
		env_array_overwrite(env, ENV_COORD, coord);
		env_array_overwrite(env, ENV_SECRET, joined);
		for (const char **k = (const char *[]) { ENV_NSPACE, ENV_PARENT, ENV_PREPUT, NULL }; *k; k++) {
			const char *v = getenv(*k);
			if (v)
				env_array_overwrite(env, *k, v);
		}
		nodes = layout_json(job->step_layout);
		env_array_overwrite(env, ENV_NODES, nodes);
		xfree(nodes);
		st = xmalloc(sizeof(*st));
		st->pid = -1;
		st->in = -1;
		st->lfd = -1;
		return st;
	}

	/* A fresh coordinator: nothing left in srun's environment from an
	 * enclosing step may steer this one. Slurm lays the plugin's values
	 * over srun's environment, so empty values (read as unset) win. */
	for (const char **k = (const char *[]) { ENV_COORD, ENV_NSPACE, ENV_PARENT, ENV_PREPUT, NULL }; *k; k++)
		env_array_overwrite(env, *k, "");

	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, raw, sizeof(raw)) != sizeof(raw)) {
		error("mpi/gopmi: no step secret: /dev/urandom: %m");
		if (fd >= 0)
			close(fd);
		return no_coordinator();
	}
	close(fd);
	for (int i = 0; i < 32; i++)
		snprintf(secret + 2 * i, 3, "%02x", raw[i]);
	snprintf(step, sizeof(step), "%u.%u", job->step_id.job_id,
		 job->step_id.step_id);

	path = xstrdup_printf("%s/gopmi-slurm", bindir());
	if (access(path, X_OK) != 0) {
		error("mpi/gopmi: %s: %m (set GOPMI_BINDIR, or install gopmi there)", path);
		xfree(path);
		return no_coordinator();
	}
	/* srun listens for the coordinator, which inherits the socket
	 * (LISTEN_FDS, fd 3): the port is known at once and the coordinator
	 * starts while the step launches. */
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *) &sin, sizeof(sin)) ||
	    listen(lfd, SOMAXCONN) || getsockname(lfd, (struct sockaddr *) &sin, &slen)) {
		error("mpi/gopmi: coordinator socket: %m");
		if (lfd >= 0)
			close(lfd);
		xfree(path);
		return no_coordinator();
	}
	port = ntohs(sin.sin_port);
	if (pipe2(in, O_CLOEXEC)) {
		error("mpi/gopmi: pipe: %m");
		close(lfd);
		xfree(path);
		return no_coordinator();
	}
	/* Made before fork: srun has threads; the child only makes system
	 * calls until it execs. */
	cenv = env_array_copy((const char **) environ);
	env_array_overwrite(&cenv, "LISTEN_FDS", "1");
	unsetenvp(cenv, "LISTEN_PID");
	unsetenvp(cenv, "LISTEN_FDNAMES");
	env_array_overwrite(&cenv, ENV_SECRET, secret);
	st = xmalloc(sizeof(*st));
	st->pid = -1;
	st->in = in[1];
	st->cin = in[0];
	st->lfd = lfd;
	st->path = path;
	st->cenv = cenv;
	st->stop[0] = st->stop[1] = -1;
	snprintf(st->step, sizeof(st->step), "%s", step);
	pthread_mutex_init(&st->mu, NULL);
	if (on_demand(getenv("GOPMI_ON_DEMAND")) && pipe2(st->stop, O_CLOEXEC) == 0) {
		/* Started when the first node connects, if one does. */
		if (pthread_create(&st->waiter, NULL, await_first_node, st) == 0) {
			st->waiting = 1;
		} else {
			error("mpi/gopmi: thread for the coordinator: %m");
			close(st->stop[0]);
			close(st->stop[1]);
			st->stop[0] = st->stop[1] = -1;
		}
	}
	if (!st->waiting) {
		st->pid = start_coordinator(st);
		if (st->pid > 0) {
			close(lfd);
			close(in[0]);
			st->lfd = st->cin = -1;
		}
		if (st->pid < 0) {
			close(lfd);
			close(in[0]);
			close(in[1]);
			xfree(path);
			env_array_free(cenv);
			xfree(st);
			return no_coordinator();
		}
	}
	pid = st->pid;
	nodes = layout_json(job->step_layout);
	env_array_overwrite(env, ENV_NODES, nodes);
	xfree(nodes);
	env_array_overwrite_fmt(env, ENV_PORT, "%d", port);
	env_array_overwrite(env, ENV_SECRET, secret);
	if (st->waiting)
		debug("mpi/gopmi: step %s coordinator on port %d, started when a node connects", step, port);
	else
		debug("mpi/gopmi: step %s coordinator pid %d port %d", step, (int) pid, port);
	return st;
}

extern int mpi_p_client_fini(mpi_plugin_client_state_t *state)
{
	client_state_t *st = state;
	int status = 0, rc = 0;

	if (!st)
		return SLURM_SUCCESS;
	if (st->waiting) {
		(void) write(st->stop[1], "", 1);
		pthread_join(st->waiter, NULL);
		close(st->stop[0]);
		close(st->stop[1]);
	}
	if (st->lfd >= 0)
		close(st->lfd);
	if (st->in >= 0 && st->pid <= 0)
		close(st->in); /* no coordinator started: nobody reads it */
	if (st->cin >= 0 && st->path)
		close(st->cin);
	if (st->path)
		pthread_mutex_destroy(&st->mu);
	xfree(st->path);
	env_array_free(st->cenv);
	if (st->pid > 0) {
		/* The coordinator ends when its stdin closes, once the steps
		 * the job spawned have ended (they end with the allocation at
		 * the latest), and says how. Look often at first. */
		close(st->in);
		for (long waited = 0, step = 200;; waited += step, step = step < 20000 ? step * 2 : step) {
			pid_t w = waitpid(st->pid, &status, WNOHANG);
			if (w == st->pid)
				break;
			if (w < 0) {
				error("mpi/gopmi: wait for the coordinator: %m");
				break;
			}
			if (waited >= 10000000 && waited < 10000000 + step)
				info("mpi/gopmi: waiting for the steps this step spawned to end");
			usleep(step);
		}
		if (WIFEXITED(status))
			rc = WEXITSTATUS(status);
		else if (WIFSIGNALED(status))
			rc = 128 + WTERMSIG(status);
	}
	if (st->failed)
		rc = 1;
	xfree(st);
	/* Non-zero becomes srun's exit status: an MPI_Abort's errorcode. */
	return rc;
}
