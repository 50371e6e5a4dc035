/* gopmi's Flux job-shell plugin: what its files share (gopmi_flux.c: the
 * shell's callbacks; launch.c: the coordinator, the tasks' socket, what a
 * child does before its exec; server.c: the node's server; bootstrap.c:
 * its bootstrap). */

#ifndef GOPMI_FLUX_H
#define GOPMI_FLUX_H

#define FLUX_SHELL_PLUGIN_NAME "gopmi"

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
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

/* How long the shell waits, once its tasks are forked, for a task's
 * connection that is not there yet: each connected before its exec,
 * which the shell's fork waits for. */
#define CONNECT_WAIT_MS 2000

/* How long a shell waits for its PMIx server's READY=1. */
#define START_WAIT_S 30

/* Open MPI's library, which a PMIx client's program links (MPICH's is
 * libmpich.so.12). */
#define OPENMPI_LIB "libmpi.so.40"

/* How long a shell that is done waits for its node's server to end by
 * itself before it is sent SIGTERM (then SIGKILL 2 s later). */
#define SERVER_GRACE_MS 10000

#define ENV_SECRET "GOPMI_SLURM_SECRET"
#define ENV_COORD "GOPMI_SLURM_COORD"
#define ENV_NSPACE "GOPMI_SLURM_NSPACE"
#define ENV_PARENT "GOPMI_SLURM_PARENT"
#define ENV_PREPUT "GOPMI_SLURM_PREPUT"
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
	char pmix_opt[16]; /* -o gopmi.pmix */
	int timeout;       /* -o gopmi.timeout: a fence's, in seconds; 0: the default */
	pid_t coordinator, server;
	int coord_in;  /* the coordinator's stdin: closing it ends it */
	int coord_end; /* where the coordinator says the job must end */
	flux_watcher_t *end_watch;
	int pmix;         /* the tasks are PMIx clients (Open MPI) */
	char **pmix_env;  /* their PMIx environment, from the server's READY=1 */
	int npmix_env;
	int server_err;           /* the node server's stderr, relayed */
	flux_watcher_t *err_watch;
	char log[65536], last[65536]; /* its partial line; its "exiting" line */
	size_t nlog;
	int coord_lfd;              /* the coordinator's socket until it starts */
	flux_watcher_t *first_node; /* starts the coordinator */
	flux_watcher_t **watch;     /* by localid: the first PMI starts the server */
	int ended;                  /* tasks whose connection ended without PMI */
	/* A job a gopmi job spawned (MPI_Comm_spawn): it joins its
	 * spawner's coordinator, named in its environment, as the job
	 * nspace its spawner was told, with the spawn's preput. */
	int server_ref, server_gone; /* a completion ref held; its log ended */
	int stopping;                /* the shell ends the server itself */
	int local_exits;             /* local tasks that exited */
	flux_watcher_t *grace;       /* ends a server that outlives its tasks */
	int grace_killed;
	int coord_ref, coord_closing;
	char host[256];              /* this shell's */
	int spawned;
	char *coord_argv[48];
	char nspace[128], parent[128];
	const char *preput; /* a JSON array of {"key","value"}, or NULL */
};

/* buf is a growing string, for the bootstrap's JSON; failed once out of
 * memory. */
struct buf {
	char *s;
	size_t len, cap;
	int failed;
};

/* bootstrap.c */
void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bstr(struct buf *b, const char *s);
int layout(struct gopmi *g);
char *bootstrap(struct gopmi *g);
int wants_pmix(struct gopmi *g);

/* launch.c */
void in_child(int keep, pid_t shell, long open_max);
void exec_failed(void);
char **envp_with(char *const *sets, const char *const *drop);
int kvs_get(flux_t *h, const char *key, char *out, size_t size);
int listen_coordinator(struct gopmi *g);
int start_coordinator(struct gopmi *g);
int listen_tasks(struct gopmi *g);
int accept_tasks(struct gopmi *g, int wait_ms);
int reap(pid_t pid, int ms, int sig);

/* server.c */
int start_server(struct gopmi *g);

#endif
