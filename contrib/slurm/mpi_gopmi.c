/*
 * mpi/gopmi: Slurm's MPI plugin for gopmi (srun --mpi=gopmi).
 *
 * It holds no PMI logic. srun's side starts the step's coordinator
 * (gopmi-slurm coordinate) and hands the stepds its port and a per-step
 * secret in the step's environment. Each slurmstepd makes one socketpair
 * per local task, starts the node's shim (gopmi-slurm shim: gopmi-shim
 * with the Slurm backend in its own process) as the job's user with the
 * server ends and a bootstrap (the step's layout, protojson on stdin), and
 * waits for its READY=1. Each task gets PMI_FD, PMI_RANK, PMI_SIZE,
 * PMI_JOBID. The shim's stderr, its log, goes into the stepd's log (the
 * node's slurmd log) through a pipe the stepd reads.
 *
 * A step whose tasks speak PMIx (Open MPI: its program links
 * libmpi.so.40, or GOPMI_PMIX / GopmiPMIx says so) gets gopmi-slurm-pmix
 * instead, the same shim with libpmix's server: it registers the step's
 * job before READY, which carries the tasks' PMIx environment; each task
 * gets that and PMIX_RANK, and no PMI_* variable and no fd.
 *
 * Built against the exact Slurm release it runs in: contrib/slurm/build.sh.
 */

#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"
#include "src/common/slurm_xlator.h"

#include "src/common/env.h"
#include "src/common/hostlist.h"
#include "src/common/list.h"
#include "src/common/parse_config.h"
#include "src/common/read_config.h"
#include "src/common/slurm_mpi.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/slurmd/slurmd/slurmd.h"
#include "src/slurmd/slurmstepd/slurmstepd_job.h"

/* slurmstepd's configuration, for the path of the node's hwloc topology
 * (PMI_hwloc_xmlfile). srun, which loads this plugin too, has no such
 * symbol: weak, it is NULL there instead of failing the load. */
#pragma weak conf

#ifndef GOPMI_BINDIR
#define GOPMI_BINDIR "/usr/local/bin"
#endif

const char plugin_name[] = "gopmi: PMI-1 and PMI-2 served by gopmi";
const char plugin_type[] = "mpi/gopmi";
const uint32_t plugin_id = 190; /* 101..107 are Slurm's own */
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

/* The step's environment between srun, the stepds and gopmi-slurm. */
#define ENV_PORT "GOPMI_SLURM_COORD_PORT"
#define ENV_COORD "GOPMI_SLURM_COORD"
#define ENV_SECRET "GOPMI_SLURM_SECRET"
#define ENV_NODES "GOPMI_SLURM_NODES" /* the step's layout, JSON */
/* A spawned step's: its namespace, its spawner's, the spawn's preput (a
 * JSON array of {"key","value"}), set by the coordinator's nested srun. */
#define ENV_NSPACE "GOPMI_SLURM_NSPACE"
#define ENV_PARENT "GOPMI_SLURM_PARENT"
#define ENV_PREPUT "GOPMI_SLURM_PREPUT"

/* mpi.conf keys, read by slurmd and handed to each stepd. srun does not
 * read mpi.conf: its side takes GOPMI_BINDIR from its environment. */
static s_p_options_t gopmi_options[] = {
	{"GopmiBinDir", S_P_STRING},
	{"GopmiFenceMode", S_P_STRING},
	{"GopmiLogLevel", S_P_STRING},
	{"GopmiTimeout", S_P_UINT32},
	{"GopmiStartTimeout", S_P_UINT32},
	{"GopmiValMax", S_P_UINT32},
	{"GopmiKVSMaxMiB", S_P_UINT32},
	{"GopmiTreeWidth", S_P_UINT32},
	{"GopmiTreePorts", S_P_STRING},
	{"GopmiPMIx", S_P_STRING},
	{"GopmiOnDemand", S_P_STRING},
	{NULL}
};

static struct {
	char *bindir;
	char *fence_mode; /* collect, lazy, modex */
	char *log_level;
	uint32_t timeout;       /* seconds, fences and gets; 0: gopmi's default */
	uint32_t start_timeout; /* seconds the stepd waits for READY */
	uint32_t val_max;       /* 0: gopmi's default */
	uint32_t tree_width;    /* fence tree width; Slurm's TreeWidth default */
	uint32_t kvs_max_mib;   /* KVS bytes a shim holds per job, MiB; 0: gopmi's default */
	char *pmix;             /* auto (NULL), yes, no */
	char *on_demand;        /* yes (NULL), no: start the shim when a task first speaks PMI */
	char *tree_ports;       /* LOW-HIGH: where the nodes listen for each other */
} gconf = { NULL, NULL, NULL, 0, 30, 0, 16, 0, NULL, NULL, NULL };

static const char *bindir(void)
{
	const char *d = getenv("GOPMI_BINDIR");
	if (d && d[0])
		return d;
	if (gconf.bindir && gconf.bindir[0])
		return gconf.bindir;
	return GOPMI_BINDIR;
}

/* json_str appends s to *buf as a JSON string. */
static void json_str(char **buf, const char *s)
{
	xstrcat(*buf, "\"");
	for (; s && *s; s++) {
		unsigned char c = *s;
		if (c == '"' || c == '\\')
			xstrfmtcat(*buf, "\\%c", c);
		else if (c < 0x20 || c >= 0x80)
			/* Control bytes, and bytes beyond ASCII read as
			 * Latin-1: the bootstrap must be valid UTF-8. */
			xstrfmtcat(*buf, "\\u%04x", c);
		else
			xstrfmtcat(*buf, "%c", c);
	}
	xstrcat(*buf, "\"");
}

/* ------------------------------------------------------------------ */
/* srun's side                                                         */

/* layout_json writes the step's nodes, in Slurm's node order, with the
 * ranks each runs and its NodeAddr, as the bootstrap's job.nodes. Only
 * srun knows every node's ranks; it hands them to the stepds in the
 * step's environment. The nodes link to each other at their NodeAddr
 * (without one, at their name). */
static char *layout_json(const slurm_step_layout_t *lay)
{
	hostlist_t hl = hostlist_create(lay->node_list);
	char *b = xstrdup("["), *name, *addr;

	for (uint32_t n = 0; n < lay->node_cnt; n++) {
		name = hostlist_nth(hl, n);
		xstrfmtcat(b, "%s{\"id\":%u,\"name\":", n ? "," : "", n);
		json_str(&b, name ? name : "");
		addr = name ? slurm_conf_get_address(name) : NULL;
		if (addr && addr[0] && (!name || strcmp(addr, name))) {
			xstrcat(b, ",\"addr\":");
			json_str(&b, addr);
		}
		xfree(addr);
		free(name);
		xstrcat(b, ",\"ranks\":[");
		for (uint32_t t = 0; t < lay->tasks[n]; t++)
			xstrfmtcat(b, "%s%u", t ? "," : "", lay->tids[n][t]);
		xstrcat(b, "]}");
	}
	hostlist_destroy(hl);
	xstrcat(b, "]");
	return b;
}

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
static int on_demand(const char *v)
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
mpi_p_client_prelaunch(const mpi_plugin_client_info_t *job, char ***env)
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

/* ------------------------------------------------------------------ */
/* slurmstepd's side                                                   */

static int *task_fds;     /* the task's end of each local socketpair */
static uint32_t ntask_fds;
/* Each task says on this pipe that it was forked; once all did, the
 * stepd closes its copies of the tasks' ends, so that the shim sees a
 * task's connection close when the task ends. */
static int forked[2] = { -1, -1 };
static int spawned; /* the step was spawned by a gopmi step */
/* The step's tasks are PMIx clients (wants_pmix): gopmi-slurm-pmix serves
 * them, and each task gets pmix_env (from the shim's READY) and its
 * PMIX_RANK instead of an fd and PMI_* variables. */
static int pmix_step;
static char **pmix_env;
/* A PMI-1/PMI-2 step's PMIx rendezvous (GopmiPMIx auto, the default):
 * a listener on 127.0.0.1 made before the tasks start, whose address
 * every task gets in the PMIx environment beside its PMI variables. A
 * task that is a PMIx client however it was started (python3 with mpi4py,
 * a shell script) connects and waits for its handshake's answer; the
 * starter thread, seeing the listener readable before any task spoke PMI,
 * starts gopmi-slurm-pmix on it instead of gopmi-slurm (libpmix listens on
 * that very socket: shim/pmix/rendezvous.c). A step that speaks PMI, or
 * nothing, costs the listener. */
static int rdv_fd = -1;
static int rdv_port;
static int rdv_bootstrap; /* bootstrap writes the rendezvous's field */
static char rdv_nspace[256];
#define RDV_FD_NAME "pmix-rendezvous"
/* Why the shim could not serve this node's tasks. Slurm's srun exits 0
 * when a stepd's prefork fails ("task launch failed"), so prefork lets the
 * tasks start and each one fails at once with this message on its stderr,
 * which srun shows: the step fails, and says why. */
static char shim_error[4200];

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
static pthread_t relay_thread;
static int relay_running;
static int relay_stop; /* set by fini, read by the relay: atomically */

/* relay_shim_log copies the shim's stderr into slurmstepd's own log (the
 * node's slurmd log file), line by line, until the shim and everything
 * holding its stderr are gone, or fini asks it to stop: then it takes
 * what is buffered and ends. slurmstepd's stderr is /dev/null: without
 * the relay the node's gopmi log (a failed subtree of the fence tree, a
 * refused connection, why the shim exited) would be lost. A line longer
 * than the buffer goes in pieces. */
static void *relay_shim_log(void *arg)
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

/* fini is called by Slurm before it unloads the plugin. */
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
static char pmix_tmp[PATH_MAX];
static int pmix_tmp_lock = -1;

#define STEP_DIR_PREFIX "gopmi-step-"
/* How long sweep_steps spares an unlocked step directory: a stepd locks
 * its directory a moment after it made it. */
#define STEP_DIR_YOUNG 30

/* sweep_steps removes the step directories in base that no live stepd
 * holds locked and that were made STEP_DIR_YOUNG seconds ago or more:
 * those of stepds that were killed. */
static void sweep_steps(const char *base)
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
static int starter_stop[2] = { -1, -1 };
static pthread_t starter_thread;
static int starter_running;

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
static const char *step_setting(char **env, const char *name, const char *conf)
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

	if (mode && mode[0] && strcasecmp(mode, "collect") && strcasecmp(mode, "lazy") && strcasecmp(mode, "modex")) {
		snprintf(shim_error, sizeof(shim_error), "fence mode \"%.64s\" (GOPMI_FENCE_MODE or GopmiFenceMode): want collect, lazy or modex", mode);
		return 1;
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

/* mark_ranks gives the ranks of a --multi-prog rank specification ("*",
 * or a comma list of N and N-M; other items are ignored, as Slurm does)
 * that have no line yet the line idx. */
static void mark_ranks(char *spec, int idx, int *line_of, uint32_t n)
{
	char *save = NULL;

	if (!strcmp(spec, "*")) {
		for (uint32_t r = 0; r < n; r++)
			if (line_of[r] < 0)
				line_of[r] = idx;
		return;
	}
	for (char *item = strtok_r(spec, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *p = item, *hi = NULL;
		long lo, up;

		while (isdigit((unsigned char) *p))
			p++;
		if (p == item || (*p && *p != '-'))
			continue;
		if (*p == '-') {
			hi = ++p;
			while (isdigit((unsigned char) *p))
				p++;
			if (p == hi || *p)
				continue;
		}
		lo = atol(item);
		up = hi ? atol(hi) : lo;
		for (long r = lo; r <= up && r < (long) n; r++)
			if (r >= 0 && line_of[r] < 0)
				line_of[r] = idx;
	}
}

/* multi_prog_lines parses srun --multi-prog's configuration, which the
 * stepd holds in argv[1]: a rank runs the first line whose rank
 * specification holds it, as Slurm picks its command; blank lines and
 * whole-line comments are skipped, and so is the line after one that ends
 * with a backslash. It returns the number of lines, their commands in
 * *cmds (pointing into *data; the caller frees both) and each rank's line
 * in line_of (-1: none), or -1 without a configuration. */
static int multi_prog_lines(const stepd_step_rec_t *job, char **data, char ***cmds, int *line_of)
{
	uint32_t n = job->ntasks;
	char *save = NULL;
	bool cont = false;
	int nlines = 0;

	if (job->argc < 2 || !job->argv[1])
		return -1;
	for (uint32_t r = 0; r < n; r++)
		line_of[r] = -1;
	*data = xstrdup(job->argv[1]);
	for (char *line = strtok_r(*data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t len = strlen(line);
		bool skip = cont;
		char *p = line, *spec, *cmd;

		cont = len && line[len - 1] == '\\';
		if (skip)
			continue;
		while (isspace((unsigned char) *p))
			p++;
		if (!*p || *p == '#')
			continue;
		spec = p;
		while (*p && !isspace((unsigned char) *p))
			p++;
		if (!*p)
			continue;
		*p++ = '\0';
		while (isspace((unsigned char) *p))
			p++;
		cmd = p;
		while (*p && !isspace((unsigned char) *p))
			p++;
		*p = '\0';
		xrealloc(*cmds, (nlines + 1) * sizeof(char *));
		(*cmds)[nlines] = cmd;
		mark_ranks(spec, nlines, line_of, n);
		nlines++;
	}
	return nlines;
}

/* multi_prog_apps is the bootstrap's "apps" for srun --multi-prog: each
 * line that runs a rank is an app, in line order, so a rank's appnum is
 * its line's place among them. NULL when the configuration leaves a rank
 * without a line (Slurm fails that task). */
static char *multi_prog_apps(const stepd_step_rec_t *job)
{
	uint32_t n = job->ntasks;
	int *line_of = xcalloc(n ? n : 1, sizeof(int)), nlines, apps = 0;
	char **cmds = NULL, *data = NULL, *out = NULL;

	nlines = multi_prog_lines(job, &data, &cmds, line_of);
	for (uint32_t r = 0; r < n && nlines >= 0; r++)
		if (line_of[r] < 0)
			goto out;
	if (nlines < 0)
		goto out;
	xstrcat(out, "[");
	for (int l = 0; l < nlines; l++) {
		uint32_t size = 0, first = 0;
		for (uint32_t r = 0; r < n; r++)
			if (line_of[r] == l && !size++)
				first = r;
		if (!size)
			continue;
		xstrfmtcat(out, "%s{\"firstRank\":%u,\"size\":%u,\"cmd\":", apps++ ? "," : "", first, size);
		json_str(&out, cmds[l]);
		xstrcat(out, ",\"ranks\":[");
		for (uint32_t r = 0, k = 0; r < n; r++)
			if (line_of[r] == l)
				xstrfmtcat(out, "%s%u", k++ ? "," : "", r);
		xstrcat(out, "]}");
	}
	xstrcat(out, "]");
out:
	xfree(cmds);
	xfree(data);
	xfree(line_of);
	return out;
}

/* ELF_HEAD is how much of a program links_open_mpi reads: a linker puts
 * the dynamic string table in the first loaded segment. */
#define ELF_HEAD (256 << 10)

/* links_open_mpi reports whether the ELF program at path (relative to
 * cwd) needs Open MPI's library (libmpi.so.40; MPICH's is
 * libmpich.so.12), from the names in its head: what a PMIx client is. */
static int links_open_mpi(const char *path, const char *cwd, uid_t uid, gid_t gid)
{
	static const char lib[] = "\0libmpi.so.40";
	char *full = NULL, *buf;
	ssize_t n, got = 0;
	int fd, found = 0;
	struct stat st;
	uid_t ouid;
	gid_t ogid;

	if (path[0] != '/' && cwd)
		full = xstrdup_printf("%s/%s", cwd, path);
	/* As the job's user (this thread's file ids only), never blocking
	 * on a FIFO or opening a device: a regular file or nothing. */
	ogid = setfsgid(gid);
	ouid = setfsuid(uid);
	fd = open(full ? full : path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	setfsuid(ouid);
	setfsgid(ogid);
	xfree(full);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	buf = xmalloc(ELF_HEAD);
	while (got < ELF_HEAD && (n = read(fd, buf + got, ELF_HEAD - got)) > 0)
		got += n;
	close(fd);
	if (got > 4 && !memcmp(buf, "\x7f" "ELF", 4))
		found = memmem(buf, got, lib, sizeof(lib)) != NULL; /* with the NUL after it */
	xfree(buf);
	return found;
}

/* program_links_open_mpi resolves cmd as execvp would in the task (PATH
 * from its environment, relative to its working directory) and asks
 * links_open_mpi. */
static int program_links_open_mpi(const char *cmd, char **env, const stepd_step_rec_t *job)
{
	const char *cwd = job->cwd;
	const char *path = getenvp(env, "PATH");
	char *dirs, *save = NULL;
	int found = 0;

	if (!cmd || !cmd[0])
		return 0;
	if (strchr(cmd, '/'))
		return links_open_mpi(cmd, cwd, job->uid, job->gid);
	dirs = xstrdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char *p = d[0] == '/' || !cwd ? xstrdup_printf("%s/%s", d, cmd) :
						xstrdup_printf("%s/%s/%s", cwd, d, cmd);
		int ok = access(p, X_OK) == 0;

		if (ok)
			found = links_open_mpi(p, NULL, job->uid, job->gid);
		xfree(p);
		if (ok)
			break;
	}
	xfree(dirs);
	return found;
}

/* wants_pmix decides whether the step's tasks are PMIx clients, before
 * they start (a PMIx server must have registered the job by then):
 * GOPMI_PMIX in the step's environment, else GopmiPMIx in mpi.conf, says
 * yes or no; auto (the default) says yes when a program of the step links
 * Open MPI. A program that loads Open MPI at run time (python3 with
 * mpi4py) or a script that runs one needs GOPMI_PMIX=1. */
static int wants_pmix(const stepd_step_rec_t *job, char **env)
{
	const char *v = step_setting(env, "GOPMI_PMIX", gconf.pmix);
	int found = 0;

	if (v && (!strcasecmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on")))
		return 1;
	if (v && (!strcasecmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off")))
		return 0;
	if (job->flags & LAUNCH_MULTI_PROG) {
		uint32_t n = job->ntasks;
		int *line_of = xcalloc(n ? n : 1, sizeof(int));
		char **cmds = NULL, *data = NULL;
		int nlines = multi_prog_lines(job, &data, &cmds, line_of);

		for (int l = 0; l < nlines && !found; l++)
			found = program_links_open_mpi(cmds[l], env, job);
		xfree(cmds);
		xfree(data);
		xfree(line_of);
		return found;
	}
	return job->argv && program_links_open_mpi(job->argv[0], env, job);
}

static char *bootstrap(const stepd_step_rec_t *job, char **env, const char *coord, const char *nodes)
{
	char *b = NULL, timeout[16], *up2, *apps;
	const char *mode, *t;

	const char *ns = getenvp(env, ENV_NSPACE), *parent = getenvp(env, ENV_PARENT);
	const char *preput = getenvp(env, ENV_PREPUT);

	if (ns && ns[0]) {
		xstrcat(b, "{\"version\":1,\"job\":{\"nspace\":");
		json_str(&b, ns);
	} else {
		xstrfmtcat(b, "{\"version\":1,\"job\":{\"nspace\":\"slurm.%u.%u\"",
			   job->step_id.job_id, job->step_id.step_id);
	}
	xstrfmtcat(b, ",\"size\":%u,\"nodes\":%s", job->ntasks, nodes);
	if (parent && parent[0]) {
		xstrcat(b, ",\"parent\":");
		json_str(&b, parent);
	}
	if (preput && preput[0] == '[')
		xstrfmtcat(b, ",\"preput\":%s", preput);
	if ((job->flags & LAUNCH_MULTI_PROG) && (apps = multi_prog_apps(job))) {
		xstrfmtcat(b, ",\"apps\":%s", apps);
		xfree(apps);
	} else {
		xstrfmtcat(b, ",\"apps\":[{\"firstRank\":0,\"size\":%u,\"cmd\":", job->ntasks);
		json_str(&b, job->argv && job->argv[0] ? job->argv[0] : "");
		xstrcat(b, "}]");
	}
	/* The stepd writes the node's topology there before it forks the
	 * tasks (xcpuinfo_hwloc_topo_load) and removes it when it ends: MPICH
	 * loads it instead of probing the machine in every rank. */
	if (&conf && conf && !conf->def_config && conf->hwloc_xml && conf->hwloc_xml[0]) {
		xstrcat(b, ",\"attrs\":[{\"key\":\"PMI_hwloc_xmlfile\",\"value\":");
		json_str(&b, conf->hwloc_xml);
		xstrcat(b, "}]");
	}
	xstrfmtcat(b, "},\"nodeId\":%u,\"tasks\":[", job->nodeid);
	for (uint32_t i = 0; i < job->node_tasks; i++) {
		/* A PMIx client connects to the PMIx server: no fd. */
		if (pmix_step)
			xstrfmtcat(b, "%s{\"rank\":%u}", i ? "," : "", job->task[i]->gtid);
		else
			xstrfmtcat(b, "%s{\"rank\":%u,\"fdName\":\"rank%u\"}", i ? "," : "",
				   job->task[i]->gtid, job->task[i]->gtid);
	}
	xstrcat(b, "],\"backend\":{\"name\":\"slurm\",\"args\":[\"-coordinator\",");
	json_str(&b, coord);
	snprintf(timeout, sizeof(timeout), "%u", gconf.tree_width);
	t = step_setting(env, "GOPMI_TREE_WIDTH", timeout);
	if (strspn(t, "0123456789") != strlen(t) || atoi(t) < 1)
		t = timeout;
	xstrcat(b, ",\"-tree-width\",");
	json_str(&b, t);
	if (gconf.tree_ports) {
		xstrcat(b, ",\"-tree-ports\",");
		json_str(&b, gconf.tree_ports);
	}
	/* A spawned step's backend starts at once: the coordinator counts its
	 * nodes in to know that the spawn started; so does a PMIx face's,
	 * whose clients' calls come through libpmix, not the shim's reads. */
	xstrfmtcat(b, "]%s}", spawned || pmix_step ? ",\"startAtOnce\":true" : "");
	if (pmix_step)
		xstrcat(b, ",\"pmix\":true");
	if (pmix_step && rdv_bootstrap)
		xstrcat(b, ",\"pmixRendezvousFd\":\"" RDV_FD_NAME "\"");
	if (gconf.val_max || gconf.kvs_max_mib) {
		xstrcat(b, ",\"limits\":{");
		if (gconf.val_max)
			xstrfmtcat(b, "\"valMax\":%u%s", gconf.val_max, gconf.kvs_max_mib ? "," : "");
		if (gconf.kvs_max_mib)
			xstrfmtcat(b, "\"kvsMax\":%llu", (unsigned long long)gconf.kvs_max_mib << 20);
		xstrcat(b, "}");
	}
	snprintf(timeout, sizeof(timeout), "%u", gconf.timeout);
	t = step_setting(env, "GOPMI_TIMEOUT", gconf.timeout ? timeout : NULL);
	if (t && strspn(t, "0123456789") == strlen(t) && atoi(t) > 0)
		xstrfmtcat(b, ",\"timeouts\":{\"fence\":\"%ds\"}", atoi(t));
	mode = step_setting(env, "GOPMI_FENCE_MODE", gconf.fence_mode);
	if (mode && mode[0]) {
		char *up = xstrdup(mode);
		for (char *p = up; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p -= 'a' - 'A';
		xstrcat(b, ",\"fenceMode\":");
		up2 = xstrdup_printf("FENCE_MODE_%s", up);
		json_str(&b, up2);
		xfree(up2);
		xfree(up);
	}
	if (gconf.log_level && gconf.log_level[0]) {
		xstrcat(b, ",\"logLevel\":");
		json_str(&b, gconf.log_level);
	}
	xstrcat(b, "}");
	return b;
}

/* json_env parses the JSON array of "K=V" strings a PMIx shim's READY
 * carries (GOPMI_PMIX_ENV=[...], up to the line's end) into a NULL-ended
 * array, or returns NULL when it is not one. */
static char **json_env(const char *p)
{
	char **out = xcalloc(1, sizeof(char *)), *v = NULL;
	size_t n = 0;

	while (isspace((unsigned char) *p))
		p++;
	if (*p++ != '[')
		goto bad;
	for (;;) {
		while (isspace((unsigned char) *p) || *p == ',')
			p++;
		if (*p == ']')
			return out;
		if (*p++ != '"')
			goto bad;
		v = xstrdup("");
		for (; *p != '"'; p++) {
			unsigned c;
			if (!*p || *p == '\n')
				goto bad;
			if (*p != '\\') {
				xstrfmtcat(v, "%c", *p);
				continue;
			}
			switch (*++p) {
			case 'n': xstrcat(v, "\n"); break;
			case 't': xstrcat(v, "\t"); break;
			case 'r': xstrcat(v, "\r"); break;
			case 'b': xstrcat(v, "\b"); break;
			case 'f': xstrcat(v, "\f"); break;
			case 'u':
				for (int k = 1; k <= 4; k++)
					if (!isxdigit((unsigned char) p[k]))
						goto bad;
				if (sscanf(p + 1, "%4x", &c) != 1 || !c)
					goto bad;
				p += 4;
				if (c < 0x80)
					xstrfmtcat(v, "%c", c);
				else if (c < 0x800)
					xstrfmtcat(v, "%c%c", 0xc0 | (c >> 6), 0x80 | (c & 0x3f));
				else
					xstrfmtcat(v, "%c%c%c", 0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
				break;
			case '\0':
				goto bad;
			default: /* \" \\ \/ */
				xstrfmtcat(v, "%c", *p);
			}
		}
		p++;
		xrealloc(out, (n + 2) * sizeof(char *));
		out[n++] = v;
		out[n] = NULL;
		v = NULL;
	}
bad:
	xfree(v);
	for (size_t i = 0; i < n; i++)
		xfree(out[i]);
	xfree(out);
	return NULL;
}

/* ready_env takes the PMIx tasks' environment from a READY=1 message. */
static int ready_env(char *msg)
{
	char *e = strstr(msg, "GOPMI_PMIX_ENV=");

	if (!pmix_step)
		return SLURM_SUCCESS;
	if (e)
		pmix_env = json_env(e + strlen("GOPMI_PMIX_ENV="));
	if (!pmix_env) {
		snprintf(shim_error, sizeof(shim_error), "the shim (gopmi-slurm-pmix) said READY=1 without the tasks' PMIx environment (GOPMI_PMIX_ENV)");
		return SLURM_ERROR;
	}
	return SLURM_SUCCESS;
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

/* What starting the node's shim needs, made in prefork before any fork:
 * slurmstepd has threads, and a child may only make system calls until
 * it execs. */
static struct {
	const stepd_step_rec_t *job;
	char *path, **envp, *boot;
	int ns;          /* the notify socket its READY comes on */
	int in[2];       /* its stdin: the bootstrap */
	int logp;        /* the log relay's writer, or -1 */
	int (*pairs)[2]; /* [0]: the server ends of the tasks' socketpairs */
	pid_t stepd;
	/* With a rendezvous, the PMIx server the starter starts instead when
	 * a PMIx client comes first: its binary and its bootstrap. */
	char *pmix_path, *pmix_boot;
} shim_start = { .ns = -1, .in = { -1, -1 }, .logp = -1 };

/* launch_shim starts the shim as the job's user with the server ends as
 * fds 3.., writes its bootstrap and waits for its READY=1; it closes
 * what only the shim needed. */
static int launch_shim(void)
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
static void free_shim_start(void)
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
static void make_pmix_tmp(const stepd_step_rec_t *job)
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

static void *start_on_demand(void *arg)
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

extern int mpi_p_slurmstepd_task(const mpi_plugin_task_info_t *job, char ***env)
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

/* ------------------------------------------------------------------ */
/* mpi.conf                                                            */

extern void mpi_p_conf_options(s_p_options_t **full_options, int *full_opt_cnt)
{
	transfer_s_p_options(full_options, gopmi_options, full_opt_cnt);
}

extern void mpi_p_conf_set(s_p_hashtbl_t *tbl)
{
	if (!tbl)
		return;
	s_p_get_string(&gconf.bindir, "GopmiBinDir", tbl);
	s_p_get_string(&gconf.fence_mode, "GopmiFenceMode", tbl);
	s_p_get_string(&gconf.log_level, "GopmiLogLevel", tbl);
	s_p_get_uint32(&gconf.timeout, "GopmiTimeout", tbl);
	s_p_get_uint32(&gconf.start_timeout, "GopmiStartTimeout", tbl);
	s_p_get_uint32(&gconf.val_max, "GopmiValMax", tbl);
	s_p_get_uint32(&gconf.kvs_max_mib, "GopmiKVSMaxMiB", tbl);
	s_p_get_uint32(&gconf.tree_width, "GopmiTreeWidth", tbl);
	s_p_get_string(&gconf.pmix, "GopmiPMIx", tbl);
	s_p_get_string(&gconf.on_demand, "GopmiOnDemand", tbl);
	s_p_get_string(&gconf.tree_ports, "GopmiTreePorts", tbl);
	if (!gconf.start_timeout)
		gconf.start_timeout = 30;
	if (!gconf.tree_width)
		gconf.tree_width = 16;
}

extern s_p_hashtbl_t *mpi_p_conf_get(void)
{
	s_p_hashtbl_t *tbl = s_p_hashtbl_create(gopmi_options);
	char *v;

	if (gconf.bindir)
		s_p_parse_pair(tbl, "GopmiBinDir", gconf.bindir);
	if (gconf.fence_mode)
		s_p_parse_pair(tbl, "GopmiFenceMode", gconf.fence_mode);
	if (gconf.log_level)
		s_p_parse_pair(tbl, "GopmiLogLevel", gconf.log_level);
	if (gconf.pmix)
		s_p_parse_pair(tbl, "GopmiPMIx", gconf.pmix);
	if (gconf.on_demand)
		s_p_parse_pair(tbl, "GopmiOnDemand", gconf.on_demand);
	if (gconf.tree_ports)
		s_p_parse_pair(tbl, "GopmiTreePorts", gconf.tree_ports);
	v = xstrdup_printf("%u", gconf.timeout);
	s_p_parse_pair(tbl, "GopmiTimeout", v);
	xfree(v);
	v = xstrdup_printf("%u", gconf.start_timeout);
	s_p_parse_pair(tbl, "GopmiStartTimeout", v);
	xfree(v);
	v = xstrdup_printf("%u", gconf.val_max);
	s_p_parse_pair(tbl, "GopmiValMax", v);
	xfree(v);
	v = xstrdup_printf("%u", gconf.tree_width);
	s_p_parse_pair(tbl, "GopmiTreeWidth", v);
	xfree(v);
	v = xstrdup_printf("%u", gconf.kvs_max_mib);
	s_p_parse_pair(tbl, "GopmiKVSMaxMiB", v);
	xfree(v);
	return tbl;
}

static void add_pair(List l, const char *name, char *value)
{
	config_key_pair_t *kp = xmalloc(sizeof(*kp));
	kp->name = xstrdup(name);
	kp->value = value;
	list_append(l, kp);
}

extern List mpi_p_conf_get_printable(void)
{
	List l = list_create(destroy_config_key_pair);

	add_pair(l, "GopmiBinDir", xstrdup(gconf.bindir ? gconf.bindir : GOPMI_BINDIR));
	add_pair(l, "GopmiFenceMode", xstrdup(gconf.fence_mode ? gconf.fence_mode : "collect"));
	add_pair(l, "GopmiLogLevel", xstrdup(gconf.log_level ? gconf.log_level : "info"));
	add_pair(l, "GopmiPMIx", xstrdup(gconf.pmix ? gconf.pmix : "auto"));
	add_pair(l, "GopmiOnDemand", xstrdup(gconf.on_demand ? gconf.on_demand : "yes"));
	add_pair(l, "GopmiStartTimeout", xstrdup_printf("%u", gconf.start_timeout));
	add_pair(l, "GopmiTimeout", xstrdup_printf("%u", gconf.timeout));
	add_pair(l, "GopmiTreeWidth", xstrdup_printf("%u", gconf.tree_width));
	add_pair(l, "GopmiTreePorts", xstrdup(gconf.tree_ports ? gconf.tree_ports : "20000-32767"));
	add_pair(l, "GopmiValMax", xstrdup_printf("%u", gconf.val_max));
	add_pair(l, "GopmiKVSMaxMiB", xstrdup_printf("%u", gconf.kvs_max_mib));
	return l;
}
