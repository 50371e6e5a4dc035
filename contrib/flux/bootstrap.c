/* gopmi's Flux job-shell plugin: the node server's bootstrap (the plain
 * form, proto/README.md), from the job's layout as its shells know it. */

#include "gopmi_flux.h"

void bprintf(struct buf *b, const char *fmt, ...)
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
void bstr(struct buf *b, const char *s)
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

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* shared reports whether name appears more than once in sorted, of n. */
static int shared(const char **sorted, int n, const char *name)
{
	int lo = 0, hi = n;

	while (lo < hi) { /* the first not below name */
		int mid = (lo + hi) / 2;
		if (strcmp(sorted[mid], name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo + 1 < n && !strcmp(sorted[lo + 1], name);
}

/* layout writes the job's nodes (one per shell) with their hosts and the
 * ranks each runs, as the bootstrap's job.nodes; it also takes this
 * shell's ranks. Several shells may share a host (flux start
 * --test-size): the overlay tells them apart by port. */
int layout(struct gopmi *g)
{
	struct buf b = { 0 };
	const char **names = calloc(g->shells, sizeof(char *)), **sorted = calloc(g->shells, sizeof(char *));

	if (!names || !sorted) {
		free(names);
		free(sorted);
		return -1;
	}
	/* The hosts, once each, and sorted: a host two shells share has
	 * equal neighbours. */
	for (int s = 0; s < g->shells; s++)
		if (flux_shell_rank_info_unpack(g->shell, s, "{s:s}", "name", &names[s]) < 0 || !names[s])
			names[s] = "";
	memcpy(sorted, names, g->shells * sizeof(char *));
	qsort(sorted, g->shells, sizeof(char *), by_name);
	snprintf(g->host, sizeof(g->host), "%s", names[g->shell_rank]);
	bprintf(&b, "[");
	for (int s = 0; s < g->shells; s++) {
		const char *name = names[s], *taskids = NULL;
		struct idset *ids;

		if (flux_shell_rank_info_unpack(g->shell, s, "{s:s}", "taskids", &taskids) < 0 ||
		    !(ids = idset_decode(taskids))) {
			shell_log_error("shell rank %d: no task ids", s);
			free(b.s);
			free(names);
			free(sorted);
			return -1;
		}
		bprintf(&b, "%s{" GOPMI_BOOT_NODE_ID "%d," GOPMI_BOOT_NODE_NAME, s ? "," : "", s);
		if (shared(sorted, g->shells, name)) {
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
				free(names);
				free(sorted);
				return -1;
			}
			n = 0;
			for (unsigned int id = idset_first(ids); id != IDSET_INVALID_ID; id = idset_next(ids, id))
				g->conns[n] = -1, g->ranks[n++] = (int) id;
		}
		idset_destroy(ids);
	}
	bprintf(&b, "]");
	free(names);
	free(sorted);
	if (b.failed) {
		free(b.s);
		return -1;
	}
	g->nodes = b.s;
	return 0;
}

/* bootstrap is the node server's bootstrap (proto/README.md: the plain
 * form). */
char *bootstrap(struct gopmi *g)
{
	struct buf b = { 0 };

	bprintf(&b, "{" GOPMI_BOOT_BOOTSTRAP_VERSION "1," GOPMI_BOOT_BOOTSTRAP_JOB "{" GOPMI_BOOT_JOB_NSPACE);
	bstr(&b, g->nspace);
	if (g->parent[0]) {
		bprintf(&b, "," GOPMI_BOOT_JOB_PARENT);
		bstr(&b, g->parent);
	}
	if (g->preput && g->preput[0] == '[')
		bprintf(&b, "," GOPMI_BOOT_JOB_PREPUT "%s", g->preput);
	bprintf(&b, "," GOPMI_BOOT_JOB_SIZE "%d," GOPMI_BOOT_JOB_NODES "%s," GOPMI_BOOT_JOB_APPS "[{" GOPMI_BOOT_APP_FIRST_RANK
		"0," GOPMI_BOOT_APP_SIZE "%d," GOPMI_BOOT_APP_CMD, g->ntasks, g->nodes, g->ntasks);
	bstr(&b, g->cmd0);
	bprintf(&b, "}]}," GOPMI_BOOT_BOOTSTRAP_NODE_ID "%d," GOPMI_BOOT_BOOTSTRAP_TASKS "[", g->shell_rank);
	for (int i = 0; i < g->nlocal; i++) {
		/* A PMIx client connects to libpmix's listener: no fd. */
		bprintf(&b, "%s{" GOPMI_BOOT_TASK_RANK "%d", i ? "," : "", g->ranks[i]);
		if (!g->pmix)
			bprintf(&b, "," GOPMI_BOOT_TASK_FD_NAME "\"rank%d\"", g->ranks[i]);
		bprintf(&b, "}");
	}
	bprintf(&b, "]," GOPMI_BOOT_BOOTSTRAP_BACKEND "{" GOPMI_BOOT_BACKEND_CONFIG_NAME "\"slurm\"," GOPMI_BOOT_BACKEND_CONFIG_ARGS
		"[\"-coordinator\",");
	bstr(&b, g->coord);
	/* The server's log is the job's stderr here, as the shell's own:
	 * at info, for its last line (why it exits), of which the shell
	 * shows warnings and errors unless -o gopmi.log-level says. */
	/* A PMIx face's backend starts at once: its clients' calls come
	 * through libpmix, not the shim's reads. */
	/* So does a spawned job's: its spawner waits for its nodes. */
	bprintf(&b, "]%s}", g->pmix || g->spawned ? "," GOPMI_BOOT_BACKEND_CONFIG_START_AT_ONCE "true" : "");
	if (g->pmix)
		bprintf(&b, "," GOPMI_BOOT_BOOTSTRAP_PMIX "true");
	if (g->timeout > 0)
		bprintf(&b, "," GOPMI_BOOT_BOOTSTRAP_TIMEOUTS "{" GOPMI_BOOT_TIMEOUTS_FENCE "\"%ds\"}", g->timeout);
	bprintf(&b, "," GOPMI_BOOT_BOOTSTRAP_LOG_LEVEL);
	bstr(&b, g->log_level[0] ? g->log_level : "info");
	bprintf(&b, "}");
	if (b.failed) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

/* links_open_mpi reports whether the ELF program at path needs Open MPI's
 * library, from the names in its head (a linker puts the dynamic string
 * table in the first loaded segment): what a PMIx client is. */
static int links_open_mpi(const char *path)
{
	static const char lib[] = "\0" OPENMPI_LIB;
	enum { head = 256 << 10 };
	ssize_t n, got = 0;
	struct stat st;
	int found = 0;
	char *buf;
	/* Never blocking on a FIFO or opening a device. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !(buf = malloc(head))) {
		close(fd);
		return 0;
	}
	while (got < head && (n = read(fd, buf + got, head - got)) > 0)
		got += n;
	close(fd);
	if (got > 4 && !memcmp(buf, "\x7f" "ELF", 4))
		found = memmem(buf, got, lib, sizeof(lib)) != NULL; /* with the NUL after it */
	free(buf);
	return found;
}

/* wants_pmix decides whether the job's tasks are PMIx clients, before they
 * start (libpmix must have registered the job by then): -o gopmi.pmix or
 * GOPMI_PMIX in the job's environment says yes or no; auto (the default)
 * says yes when the job's program, found as execvp would (the job's PATH,
 * from its working directory), links Open MPI. A program that loads Open
 * MPI at run time (python3 with mpi4py) or a script that runs one needs
 * -o gopmi.pmix=yes. */
int wants_pmix(struct gopmi *g)
{
	const char *cmd = g->cmd0, *path = flux_shell_getenv(g->shell, "PATH");
	const char *v = g->pmix_opt[0] ? g->pmix_opt : flux_shell_getenv(g->shell, "GOPMI_PMIX");
	char *dirs, *save = NULL;
	int found = 0;

	if (v && (!strcasecmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on")))
		return 1;
	if (v && (!strcasecmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off")))
		return 0;
	if (!cmd[0])
		return 0;
	if (strchr(cmd, '/'))
		return links_open_mpi(cmd);
	if (!(dirs = strdup(path ? path : "/usr/local/bin:/usr/bin:/bin")))
		return 0;
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", d, cmd);
		if (access(p, X_OK) == 0) {
			found = links_open_mpi(p);
			break;
		}
	}
	free(dirs);
	return found;
}
