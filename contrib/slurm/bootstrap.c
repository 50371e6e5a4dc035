/* mpi/gopmi: the shim's bootstrap (the step's layout and apps, its
 * --multi-prog lines, whether its program speaks PMIx), and the tasks'
 * environment the shim's READY carries. */

#include "mpi_gopmi.h"

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
		xstrfmtcat(out, "%s{" GOPMI_BOOT_APP_FIRST_RANK "%u," GOPMI_BOOT_APP_SIZE "%u," GOPMI_BOOT_APP_CMD,
			   apps++ ? "," : "", first, size);
		json_str(&out, cmds[l]);
		xstrcat(out, "," GOPMI_BOOT_APP_RANKS "[");
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
 * cwd) needs Open MPI's library (GOPMI_OPENMPI_LIB, libmpi.so.40;
 * MPICH's is libmpich.so.12), from the names in its head: what a PMIx
 * client is. */
static int links_open_mpi(const char *path, const char *cwd, uid_t uid, gid_t gid)
{
	static const char lib[] = "\0" GOPMI_OPENMPI_LIB;
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
int wants_pmix(const stepd_step_rec_t *job, char **env)
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

char *bootstrap(const stepd_step_rec_t *job, char **env, const char *coord, const char *nodes)
{
	char *b = NULL, timeout[16], *up2, *apps;
	const char *mode, *t, *topo;

	const char *ns = getenvp(env, ENV_NSPACE), *parent = getenvp(env, ENV_PARENT);
	const char *preput = getenvp(env, ENV_PREPUT);

	if (ns && ns[0]) {
		xstrcat(b, "{" GOPMI_BOOT_BOOTSTRAP_VERSION "1," GOPMI_BOOT_BOOTSTRAP_JOB "{" GOPMI_BOOT_JOB_NSPACE);
		json_str(&b, ns);
	} else {
		xstrfmtcat(b, "{" GOPMI_BOOT_BOOTSTRAP_VERSION "1," GOPMI_BOOT_BOOTSTRAP_JOB "{" GOPMI_BOOT_JOB_NSPACE "\"slurm.%u.%u\"",
			   job->step_id.job_id, job->step_id.step_id);
	}
	xstrfmtcat(b, "," GOPMI_BOOT_JOB_SIZE "%u," GOPMI_BOOT_JOB_NODES "%s", job->ntasks, nodes);
	if (parent && parent[0]) {
		xstrcat(b, "," GOPMI_BOOT_JOB_PARENT);
		json_str(&b, parent);
	}
	if (preput && preput[0] == '[')
		xstrfmtcat(b, "," GOPMI_BOOT_JOB_PREPUT "%s", preput);
	if ((job->flags & LAUNCH_MULTI_PROG) && (apps = multi_prog_apps(job))) {
		xstrfmtcat(b, "," GOPMI_BOOT_JOB_APPS "%s", apps);
		xfree(apps);
	} else {
		xstrfmtcat(b, "," GOPMI_BOOT_JOB_APPS "[{" GOPMI_BOOT_APP_FIRST_RANK "0," GOPMI_BOOT_APP_SIZE "%u," GOPMI_BOOT_APP_CMD,
			   job->ntasks);
		json_str(&b, job->argv && job->argv[0] ? job->argv[0] : "");
		xstrcat(b, "}]");
	}
	/* The stepd writes the node's topology there before it forks the
	 * tasks (xcpuinfo_hwloc_topo_load) and removes it when it ends: MPICH
	 * loads it instead of probing the machine in every rank. */
	if ((topo = GOPMI_HWLOC_XML())) {
		xstrcat(b, "," GOPMI_BOOT_JOB_ATTRS "[{" GOPMI_BOOT_KEY_VALUE_KEY "\"PMI_hwloc_xmlfile\"," GOPMI_BOOT_KEY_VALUE_VALUE);
		json_str(&b, topo);
		xstrcat(b, "}]");
	}
	xstrfmtcat(b, "}," GOPMI_BOOT_BOOTSTRAP_NODE_ID "%u," GOPMI_BOOT_BOOTSTRAP_TASKS "[", job->nodeid);
	for (uint32_t i = 0; i < job->node_tasks; i++) {
		/* A PMIx client connects to the PMIx server: no fd. */
		if (pmix_step)
			xstrfmtcat(b, "%s{" GOPMI_BOOT_TASK_RANK "%u}", i ? "," : "", job->task[i]->gtid);
		else
			xstrfmtcat(b, "%s{" GOPMI_BOOT_TASK_RANK "%u," GOPMI_BOOT_TASK_FD_NAME "\"rank%u\"}", i ? "," : "",
				   job->task[i]->gtid, job->task[i]->gtid);
	}
	xstrcat(b, "]," GOPMI_BOOT_BOOTSTRAP_BACKEND "{" GOPMI_BOOT_BACKEND_CONFIG_NAME "\"slurm\","
		GOPMI_BOOT_BACKEND_CONFIG_ARGS "[\"-coordinator\",");
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
	xstrfmtcat(b, "]%s}", spawned || pmix_step ? "," GOPMI_BOOT_BACKEND_CONFIG_START_AT_ONCE "true" : "");
	if (pmix_step)
		xstrcat(b, "," GOPMI_BOOT_BOOTSTRAP_PMIX "true");
	if (pmix_step && rdv_bootstrap)
		xstrcat(b, "," GOPMI_BOOT_BOOTSTRAP_PMIX_RENDEZVOUS_FD "\"" RDV_FD_NAME "\"");
	if (gconf.val_max || gconf.kvs_max_mib) {
		xstrcat(b, "," GOPMI_BOOT_BOOTSTRAP_LIMITS "{");
		if (gconf.val_max)
			xstrfmtcat(b, GOPMI_BOOT_LIMITS_VAL_MAX "%u%s", gconf.val_max, gconf.kvs_max_mib ? "," : "");
		if (gconf.kvs_max_mib)
			xstrfmtcat(b, GOPMI_BOOT_LIMITS_KVS_MAX "%llu", (unsigned long long)gconf.kvs_max_mib << 20);
		xstrcat(b, "}");
	}
	snprintf(timeout, sizeof(timeout), "%u", gconf.timeout);
	t = step_setting(env, "GOPMI_TIMEOUT", gconf.timeout ? timeout : NULL);
	if (t && strspn(t, "0123456789") == strlen(t) && atoi(t) > 0)
		xstrfmtcat(b, "," GOPMI_BOOT_BOOTSTRAP_TIMEOUTS "{" GOPMI_BOOT_TIMEOUTS_FENCE "\"%ds\"}", atoi(t));
	mode = step_setting(env, "GOPMI_FENCE_MODE", gconf.fence_mode);
	if (mode && mode[0]) {
		char *up = xstrdup(mode);
		for (char *p = up; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p -= 'a' - 'A';
		xstrcat(b, "," GOPMI_BOOT_BOOTSTRAP_FENCE_MODE);
		up2 = xstrdup_printf(GOPMI_BOOT_FENCE_MODE_PREFIX "%s", up);
		json_str(&b, up2);
		xfree(up2);
		xfree(up);
	}
	if (gconf.log_level && gconf.log_level[0]) {
		xstrcat(b, "," GOPMI_BOOT_BOOTSTRAP_LOG_LEVEL);
		json_str(&b, gconf.log_level);
	}
	xstrcat(b, "}");
	return b;
}

/* ready_env takes the PMIx tasks' environment from a READY=1 message:
 * one "GOPMI_PMIX_VAR=KEY=VALUE" line per variable, as the shim sends it
 * (no value holds a newline), into a NULL-ended array. */
int ready_env(char *msg)
{
	static const char key[] = "GOPMI_PMIX_VAR=";
	size_t n = 0;

	if (!pmix_step)
		return SLURM_SUCCESS;
	pmix_env = xcalloc(1, sizeof(char *));
	for (char *line = msg; line && *line; ) {
		char *end = strchr(line, '\n');
		size_t len = end ? (size_t) (end - line) : strlen(line);
		if (len > sizeof(key) - 1 && !strncmp(line, key, sizeof(key) - 1)) {
			xrealloc(pmix_env, (n + 2) * sizeof(char *));
			pmix_env[n++] = xstrndup(line + sizeof(key) - 1, len - (sizeof(key) - 1));
			pmix_env[n] = NULL;
		}
		line = end ? end + 1 : NULL;
	}
	if (!n) {
		xfree(pmix_env);
		pmix_env = NULL;
		snprintf(shim_error, sizeof(shim_error), "the shim (gopmi-slurm-pmix) said READY=1 without the tasks' PMIx environment (GOPMI_PMIX_VAR): is it older than this plugin?");
		return SLURM_ERROR;
	}
	return SLURM_SUCCESS;
}
