/* mpi/gopmi: starting the node's shim (with the step, or on demand when a
 * task first speaks), waiting for its READY, and relaying its log into
 * slurmstepd's. */

#include "mpi_gopmi.h"

/* log_shim_line puts one line of the shim's log into slurmstepd's log,
 * at the Slurm level its zerolog level maps to. */
static void log_shim_line(const char *l)
{
	if (!l[0])
		return;
	if (strstr(l, "\"level\":\"error\"") || strstr(l, "\"level\":\"fatal\"") ||
	    strstr(l, "\"level\":\"panic\""))
		error("gopmi-slurm shim: %s", l);
	else if (strstr(l, "\"level\":\"debug\"") || strstr(l, "\"level\":\"trace\""))
		debug("gopmi-slurm shim: %s", l);
	else
		info("gopmi-slurm shim: %s", l);
}

/* The relay of the shim's log. It runs plugin code, so it must be over
 * before Slurm unloads the plugin (mpi_fini, at the stepd's end): fini
 * stops and joins it. A thread left running there would execute unmapped
 * code (slurmstepd crashed so, logging the shim's last line). */
pthread_t relay_thread;
int relay_running;
int relay_stop; /* set by fini, read by the relay: atomically */

/* relay_shim_log copies the shim's stderr into slurmstepd's own log (the
 * node's slurmd log file), line by line, until the shim and everything
 * holding its stderr are gone, or fini asks it to stop: then it takes
 * what is buffered and ends. slurmstepd's stderr is /dev/null: without
 * the relay the node's gopmi log (a failed subtree of the fence tree, a
 * refused connection, why the shim exited) would be lost. A line longer
 * than the buffer goes in pieces. */
void *relay_shim_log(void *arg)
{
	int fd = (int) (intptr_t) arg;
	char buf[4096];
	size_t n = 0;
	int drain = 64; /* reads after fini's stop: a shim still writing does not hold it */

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int stopping = __atomic_load_n(&relay_stop, __ATOMIC_ACQUIRE);
		int ready = poll(&p, 1, stopping ? 0 : 100);
		ssize_t r;
		char *start = buf, *nl;

		if (ready < 0 && errno == EINTR)
			continue;
		if (stopping && (ready == 0 || drain-- == 0))
			break; /* what was buffered is taken */
		if (ready == 0)
			continue; /* look at relay_stop again */
		if (ready < 0)
			break;
		r = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			break;
		n += r;
		while ((nl = memchr(start, '\n', buf + n - start))) {
			*nl = '\0';
			log_shim_line(start);
			start = nl + 1;
		}
		n -= start - buf;
		memmove(buf, start, n);
		if (n == sizeof(buf) - 1) {
			buf[n] = '\0';
			log_shim_line(buf);
			n = 0;
		}
	}
	if (n) {
		buf[n] = '\0';
		log_shim_line(buf);
	}
	close(fd);
	return NULL;
}

/* recv_from reads one datagram sent by process from (its credentials,
 * SO_PASSCRED): the notify socket's abstract name can be guessed, and
 * a READY carries environment variables for the tasks. Another sender's
 * datagram is dropped (0). */
static ssize_t recv_from(int sock, pid_t from, char *buf, size_t size)
{
	char control[CMSG_SPACE(sizeof(struct ucred))];
	struct iovec iov = { .iov_base = buf, .iov_len = size };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			     .msg_controllen = sizeof(control) };
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	struct cmsghdr *c;

	if (n <= 0)
		return n;
	if (mh.msg_flags & MSG_TRUNC) {
		error("mpi/gopmi: a datagram on the shim's notify socket longer than %zu bytes was dropped", size);
		return 0;
	}
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		struct ucred cred;
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_CREDENTIALS)
			continue;
		memcpy(&cred, CMSG_DATA(c), sizeof(cred));
		if (cred.pid == from)
			return n;
	}
	error("mpi/gopmi: a datagram on the shim's notify socket from another process was dropped");
	return 0;
}

/* wait_ready reads the shim's sd_notify datagrams until READY=1, its
 * failure (STATUS=, ERRNO=) or its exit, within the start time-out. */
static int wait_ready(int sock, pid_t shim, const stepd_step_rec_t *job, int stop)
{
	static char msg[65536]; /* a PMIx shim's READY carries the tasks' environment */
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct pollfd p[2] = { { .fd = sock, .events = POLLIN }, { .fd = stop, .events = POLLIN } };
		int rc = poll(p, stop >= 0 ? 2 : 1, 100), status = 0;
		pid_t w;
		if (rc > 0 && stop >= 0 && p[1].revents) {
			snprintf(shim_error, sizeof(shim_error), "the step ended while its shim started");
			return SLURM_ERROR;
		}
		if (rc > 0 && p[0].revents) {
			ssize_t n = recv_from(sock, shim, msg, sizeof(msg) - 1);
			if (n > 0) {
				msg[n] = '\0';
				if (strstr(msg, "READY=1"))
					return ready_env(msg);
				if (strstr(msg, "ERRNO=") || strstr(msg, "STOPPING=1")) {
					char *s = strstr(msg, "STATUS=");
					char *e = s ? strchr(s, '\n') : NULL;
					if (e)
						*e = '\0';
					snprintf(shim_error, sizeof(shim_error), "the shim: %.4000s",
						 s ? s + 7 : msg);
					return SLURM_ERROR;
				}
			}
		}
		/* Once the tasks run, the stepd's own wait3(-1) may reap the
		 * shim first: then it is gone all the same. */
		w = waitpid(shim, &status, WNOHANG);
		if (w == shim || (w < 0 && errno == ECHILD)) {
			snprintf(shim_error, sizeof(shim_error), "the shim (gopmi-slurm shim) exited (status %d) before it served the tasks",
				 w < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
			return SLURM_ERROR;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= (time_t) gconf.start_timeout) {
			snprintf(shim_error, sizeof(shim_error), "the shim (gopmi-slurm shim) did not say READY=1 within %us (GopmiStartTimeout)",
				 gconf.start_timeout);
			kill(shim, SIGKILL);
			waitpid(shim, NULL, 0);
			return SLURM_ERROR;
		}
	}
}

/* shim_start: see mpi_gopmi.h. */
struct shim_start shim_start = { .ns = -1, .in = { -1, -1 }, .logp = -1 };

/* launch_shim starts the shim as the job's user with the server ends as
 * fds 3.., writes its bootstrap and waits for its READY=1; it closes
 * what only the shim needed. */
int launch_shim(void)
{
	const stepd_step_rec_t *job = shim_start.job;
	int (*pairs)[2] = shim_start.pairs, rc;
	pid_t pid = fork();

	if (pid < 0) {
		error("mpi/gopmi: fork: %m");
		return SLURM_ERROR;
	}
	if (pid == 0) {
		static const char setid_failed[] = "mpi/gopmi: the shim cannot become the job's user\n";
		static const char exec_failed[] = "mpi/gopmi: cannot exec gopmi-slurm\n";
		char *argv[] = { shim_start.path, "shim", NULL };
		dup2(shim_start.in[0], 0);
		if (shim_start.logp >= 0)
			dup2(shim_start.logp, 2);
		/* The server ends go to fds 3.. in order. Move them above the
		 * target range first so no dup2 overwrites one not yet moved. */
		for (uint32_t i = 0; i < ntask_fds; i++) {
			int hi = fcntl(pairs[i][0], F_DUPFD_CLOEXEC, 3 + ntask_fds + 64);
			pairs[i][0] = hi;
		}
		for (uint32_t i = 0; i < ntask_fds; i++) {
			dup2(pairs[i][0], 3 + i);
			fcntl(3 + i, F_SETFD, 0);
		}
		if (pmix_step && rdv_fd >= 0) {
			/* A PMIx server on the rendezvous: fd 3, its only one. */
			dup2(rdv_fd, 3);
			fcntl(3, F_SETFD, 0);
		}
		if (setgroups(job->ngids, job->gids) || setgid(job->gid) ||
		    setuid(job->uid)) {
			(void) write(2, setid_failed, sizeof(setid_failed) - 1);
			_exit(126);
		}
		/* The shim ends with the step: with its stepd (the thread that
		 * started it, which lives as long), and when every task's
		 * connection closed. A change of user clears the parent-death
		 * signal, so it is set after, and the stepd checked for still
		 * being there. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != shim_start.stepd)
			_exit(125);
		if (job->cwd)
			(void) chdir(job->cwd);
		execve(shim_start.path, argv, shim_start.envp);
		(void) write(2, exec_failed, sizeof(exec_failed) - 1);
		_exit(127);
	}
	close(shim_start.in[0]);
	shim_start.in[0] = -1;
	if (shim_start.logp >= 0)
		close(shim_start.logp); /* the shim holds the relay's only writer now */
	shim_start.logp = -1;
	for (uint32_t i = 0; i < ntask_fds; i++) {
		close(pairs[i][0]);
		pairs[i][0] = -1;
	}
	if (rdv_fd >= 0) {
		close(rdv_fd); /* the PMIx server's now, or nobody's */
		rdv_fd = -1;
	}
	rc = SLURM_SUCCESS;
	if (write(shim_start.in[1], shim_start.boot, strlen(shim_start.boot)) != (ssize_t) strlen(shim_start.boot)) {
		error("mpi/gopmi: write the bootstrap to the shim: %m");
		rc = SLURM_ERROR;
	}
	close(shim_start.in[1]);
	shim_start.in[1] = -1;
	if (rc == SLURM_SUCCESS)
		rc = wait_ready(shim_start.ns, pid, job, starter_stop[0]);
	if (rc == SLURM_SUCCESS)
		debug("mpi/gopmi: shim pid %d serves %u %stasks of step %u.%u",
		      (int) pid, job->node_tasks, pmix_step ? "PMIx " : "", job->step_id.job_id, job->step_id.step_id);
	else if (waitpid(pid, NULL, WNOHANG) == 0)
		kill(pid, SIGKILL); /* still ours and there: its tasks see their connections close */
	return rc;
}

/* free_shim_start closes and frees what launch_shim did not take. */
void free_shim_start(void)
{
	if (shim_start.ns >= 0)
		close(shim_start.ns);
	for (int i = 0; i < 2; i++)
		if (shim_start.in[i] >= 0)
			close(shim_start.in[i]);
	if (shim_start.logp >= 0)
		close(shim_start.logp); /* no shim: the relay sees its end */
	if (shim_start.pairs) {
		for (uint32_t i = 0; i < ntask_fds; i++)
			if (shim_start.pairs[i][0] >= 0)
				close(shim_start.pairs[i][0]);
		xfree(shim_start.pairs);
	}
	xfree(shim_start.path);
	xfree(shim_start.boot);
	xfree(shim_start.pmix_path);
	xfree(shim_start.pmix_boot);
	if (rdv_fd >= 0)
		close(rdv_fd);
	rdv_fd = -1;
	env_array_free(shim_start.envp);
	shim_start.envp = NULL;
	shim_start.ns = shim_start.in[0] = shim_start.in[1] = shim_start.logp = -1;
}

/* start_on_demand is the thread that starts the shim on demand. */

/* make_pmix_tmp makes the PMIx shim's directory (pmix_tmp), held locked,
 * and makes it the shim's TMPDIR. */
void make_pmix_tmp(const stepd_step_rec_t *job)
{
	const char *t = getenv("TMPDIR");
	const char *base = t && t[0] == '/' ? t : "/tmp";
	int n, made;

	sweep_steps(base);
	n = snprintf(pmix_tmp, sizeof(pmix_tmp), "%s/" STEP_DIR_PREFIX "%u.%u.%u-XXXXXX",
		     base, job->step_id.job_id, job->step_id.step_id, job->nodeid);
	made = n > 0 && (size_t) n < sizeof(pmix_tmp) && mkdtemp(pmix_tmp) != NULL;
	if (made) {
		pmix_tmp_lock = open(pmix_tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (pmix_tmp_lock >= 0 && flock(pmix_tmp_lock, LOCK_EX | LOCK_NB)) {
			close(pmix_tmp_lock);
			pmix_tmp_lock = -1;
		}
	}
	if (!made || chown(pmix_tmp, job->uid, job->gid)) {
		error("mpi/gopmi: the PMIx shim's directory %s: %m", pmix_tmp);
		if (made)
			rmdir(pmix_tmp);
		pmix_tmp[0] = '\0';
	} else {
		env_array_overwrite(&shim_start.envp, "TMPDIR", pmix_tmp);
	}
}

/* start_pmix_on_rendezvous starts the node's PMIx server on the
 * rendezvous, where a PMIx client came before any task spoke PMI: the
 * step is a PMIx one from now on. The tasks' PMI connections close (their
 * server ends: no PMI server will read them). */
static void start_pmix_on_rendezvous(void)
{
	const stepd_step_rec_t *job = shim_start.job;

	pmix_step = 1;
	for (uint32_t i = 0; i < ntask_fds; i++) {
		if (shim_start.pairs[i][0] >= 0)
			close(shim_start.pairs[i][0]);
		shim_start.pairs[i][0] = -1;
	}
	ntask_fds = 0;
	xfree(shim_start.path);
	xfree(shim_start.boot);
	shim_start.path = shim_start.pmix_path;
	shim_start.boot = shim_start.pmix_boot;
	shim_start.pmix_path = shim_start.pmix_boot = NULL;
	env_array_overwrite(&shim_start.envp, "LISTEN_FDS", "1");
	env_array_overwrite(&shim_start.envp, "LISTEN_FDNAMES", RDV_FD_NAME);
	make_pmix_tmp(job);
	if (launch_shim() != SLURM_SUCCESS) {
		/* The clients waiting at the rendezvous see it close. */
		error("mpi/gopmi: a task of step %u.%u is a PMIx client, and its server did not start: %s",
		      job->step_id.job_id, job->step_id.step_id, shim_error[0] ? shim_error : "no message");
		if (rdv_fd >= 0)
			close(rdv_fd);
		rdv_fd = -1;
	}
}

void *start_on_demand(void *arg)
{
	/* p[0]: fini's stop; p[1]: the rendezvous (or -1); then the tasks. */
	struct pollfd *p = xcalloc(ntask_fds + 2, sizeof(*p));
	uint32_t open = ntask_fds, started = 0;

	(void) arg;
	p[0].fd = starter_stop[0];
	p[0].events = POLLIN;
	p[1].fd = rdv_fd;
	p[1].events = POLLIN;
	for (uint32_t i = 0; i < ntask_fds; i++) {
		p[i + 2].fd = shim_start.pairs[i][0];
		p[i + 2].events = POLLIN;
	}
	p++; /* the tasks' are p[i + 1], as without a rendezvous */
	while (open > 0 && !started) {
		if (poll(p - 1, ntask_fds + 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			error("mpi/gopmi: poll the tasks' connections: %m");
			break;
		}
		if (p[-1].revents)
			break; /* fini */
		if (p[0].fd >= 0 && p[0].revents) {
			start_pmix_on_rendezvous();
			started = 1;
			break;
		}
		for (uint32_t i = 0; i < ntask_fds && !started; i++) {
			char c;
			ssize_t r;
			if (p[i + 1].fd < 0 || !p[i + 1].revents)
				continue;
			r = recv(p[i + 1].fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
			if (r > 0) {
				started = 1; /* a task's first PMI bytes wait for the shim */
			} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
				p[i + 1].fd = -1; /* this task ended without PMI */
				open--;
			}
		}
	}
	if (started && pmix_step) {
		/* Started on the rendezvous (start_pmix_on_rendezvous). */
		while (poll(p - 1, 1, -1) < 0 && errno == EINTR)
			;
	} else if (started) {
		if (rdv_fd >= 0) {
			/* A PMI step: a PMIx client that comes now is refused. */
			close(rdv_fd);
			rdv_fd = -1;
		}
		if (launch_shim() != SLURM_SUCCESS) {
			/* The tasks already run: closing the server ends fails
			 * their PMI at once (a hung task would hold the step
			 * until its time limit). Only this log says why. */
			error("mpi/gopmi: %s", shim_error[0] ? shim_error : "the shim did not start");
			free_shim_start();
		}
		/* Until fini: the shim dies with this thread. */
		while (poll(p - 1, 1, -1) < 0 && errno == EINTR)
			;
	} else if (open == 0) {
		debug("mpi/gopmi: no task of step %u.%u spoke PMI or PMIx: no shim started",
		      shim_start.job->step_id.job_id, shim_start.job->step_id.step_id);
	}
	p--;
	xfree(p);
	free_shim_start();
	return NULL;
}
