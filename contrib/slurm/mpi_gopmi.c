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
 *
 * The files, by side: this one holds the plugin's identity, its
 * configuration and the helpers every side uses; srun.c is srun's side
 * (the coordinator); stepd.c is slurmstepd's (prefork, the tasks'
 * environment, fini); bootstrap.c makes the shim's bootstrap (the step's
 * apps, whether they speak PMIx, the READY's environment); launch.c
 * starts the shim, with the step or on demand, and relays its log;
 * conf.c is mpi.conf. mpi_gopmi.h is what they share.
 */

#include "mpi_gopmi.h"

const char plugin_name[] = "gopmi: PMI-1 and PMI-2 served by gopmi";
const char plugin_type[] = "mpi/gopmi";
const uint32_t plugin_id = 190; /* 101..107 are Slurm's own */
const uint32_t plugin_version = SLURM_VERSION_NUMBER;
/* What gopmi-slurm check reads of an installed plugin: the gopmi release
 * it was built with and where it finds gopmi's binaries by default. */
const char gopmi_version[] = GOPMI_VERSION;
const char gopmi_bindir[] = GOPMI_BINDIR;

struct gopmi_conf gconf = { NULL, NULL, NULL, 0, 30, 0, 16, 0, NULL, NULL, NULL };

const char *bindir(void)
{
	const char *d = getenv("GOPMI_BINDIR");
	if (d && d[0])
		return d;
	if (gconf.bindir && gconf.bindir[0])
		return gconf.bindir;
	return GOPMI_BINDIR;
}

/* json_str appends s to *buf as a JSON string. */
void json_str(char **buf, const char *s)
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
char *layout_json(const slurm_step_layout_t *lay)
{
	gopmi_hostlist_t hl = hostlist_create(lay->node_list);
	char *b = xstrdup("["), *name, *addr;

	for (uint32_t n = 0; n < lay->node_cnt; n++) {
		name = hostlist_nth(hl, n);
		xstrfmtcat(b, "%s{" GOPMI_BOOT_NODE_ID "%u," GOPMI_BOOT_NODE_NAME, n ? "," : "", n);
		json_str(&b, name ? name : "");
		addr = name ? slurm_conf_get_address(name) : NULL;
		if (addr && addr[0] && (!name || strcmp(addr, name))) {
			xstrcat(b, "," GOPMI_BOOT_NODE_ADDR);
			json_str(&b, addr);
		}
		xfree(addr);
		free(name);
		xstrcat(b, "," GOPMI_BOOT_NODE_RANKS "[");
		for (uint32_t t = 0; t < lay->tasks[n]; t++)
			xstrfmtcat(b, "%s%u", t ? "," : "", lay->tids[n][t]);
		xstrcat(b, "]}");
	}
	hostlist_destroy(hl);
	xstrcat(b, "]");
	return b;
}
