/* What the files of mpi/gopmi share: the headers they use, the step's
 * environment and the names every side agrees on, the configuration
 * (gconf), and the state and functions one file keeps and another
 * uses. Every symbol declared here is hidden: slurmstepd and srun, which
 * load the plugin, export names of their own, and the plugin's must bind
 * to its own. The plugin's entry points (mpi_p_*, fini, plugin_*) are the
 * only ones Slurm looks up; they stay visible. */
#ifndef GOPMI_MPI_GOPMI_H
#define GOPMI_MPI_GOPMI_H

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
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/slurmd/slurmd/slurmd.h"
#include "src/slurmd/slurmstepd/slurmstepd_job.h"

#include "slurm_compat.h" /* what moved between Slurm releases */
#include "gopmi_rules.h" /* generated: the rules shared with Go */
#include "gopmi_bootstrap.h" /* generated: the bootstrap's JSON names */

#ifndef GOPMI_BINDIR
#define GOPMI_BINDIR "/usr/local/bin"
#endif
#ifndef GOPMI_VERSION
#define GOPMI_VERSION "dev"
#endif

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

/* The name of the rendezvous's fd among the shim's LISTEN_FDS. */
#define RDV_FD_NAME "pmix-rendezvous"
/* The step directories of PMIx steps (stepd.c's sweep_steps). */
#define STEP_DIR_PREFIX "gopmi-step-"
/* How long sweep_steps spares an unlocked step directory: a stepd locks
 * its directory a moment after it made it. */
#define STEP_DIR_YOUNG 30

#pragma GCC visibility push(hidden)

/* The plugin's configuration: mpi.conf's keys (conf.c), with defaults. */
struct gopmi_conf {
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
};
extern struct gopmi_conf gconf;

/* What starting the node's shim needs, made in prefork before any fork:
 * slurmstepd has threads, and a child may only make system calls until
 * it execs. */
struct shim_start {
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
};
extern struct shim_start shim_start;

/* mpi_gopmi.c: the helpers of both sides. */
const char *bindir(void);
void json_str(char **buf, const char *s);
char *layout_json(const slurm_step_layout_t *lay);

/* srun.c */
int on_demand(const char *v);

/* stepd.c: slurmstepd's state (see each definition), and its settings. */
extern uint32_t ntask_fds;
extern int spawned;
extern int pmix_step;
extern char **pmix_env;
extern int rdv_fd;
extern int rdv_bootstrap;
extern char shim_error[4200];
extern char pmix_tmp[PATH_MAX];
extern int pmix_tmp_lock;
extern int starter_stop[2];
const char *step_setting(char **env, const char *name, const char *conf);
void sweep_steps(const char *base);

/* bootstrap.c */
int wants_pmix(const stepd_step_rec_t *job, char **env);
char *bootstrap(const stepd_step_rec_t *job, char **env, const char *coord, const char *nodes);
int ready_env(char *msg);

/* launch.c */
extern pthread_t relay_thread;
extern int relay_running;
extern int relay_stop;
void *relay_shim_log(void *arg);
int launch_shim(void);
void free_shim_start(void);
void make_pmix_tmp(const stepd_step_rec_t *job);
void *start_on_demand(void *arg);

#pragma GCC visibility pop

#endif
