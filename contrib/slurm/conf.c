/* mpi/gopmi: mpi.conf's keys, read by slurmd and handed to each stepd. */

#include "mpi_gopmi.h"

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

/* put_str and put_uint add one key to a table mpi_p_conf_get returns. */
static void put_str(s_p_hashtbl_t *tbl, const char *key, const char *v)
{
	if (v)
		s_p_parse_pair(tbl, key, v);
}

static void put_uint(s_p_hashtbl_t *tbl, const char *key, uint32_t n)
{
	char *v = xstrdup_printf("%u", n);
	s_p_parse_pair(tbl, key, v);
	xfree(v);
}

extern s_p_hashtbl_t *mpi_p_conf_get(void)
{
	s_p_hashtbl_t *tbl = s_p_hashtbl_create(gopmi_options);

	put_str(tbl, "GopmiBinDir", gconf.bindir);
	put_str(tbl, "GopmiFenceMode", gconf.fence_mode);
	put_str(tbl, "GopmiLogLevel", gconf.log_level);
	put_str(tbl, "GopmiPMIx", gconf.pmix);
	put_str(tbl, "GopmiOnDemand", gconf.on_demand);
	put_str(tbl, "GopmiTreePorts", gconf.tree_ports);
	put_uint(tbl, "GopmiTimeout", gconf.timeout);
	put_uint(tbl, "GopmiStartTimeout", gconf.start_timeout);
	put_uint(tbl, "GopmiValMax", gconf.val_max);
	put_uint(tbl, "GopmiTreeWidth", gconf.tree_width);
	put_uint(tbl, "GopmiKVSMaxMiB", gconf.kvs_max_mib);
	return tbl;
}

static void add_pair(gopmi_list_t l, const char *name, char *value)
{
	config_key_pair_t *kp = xmalloc(sizeof(*kp));
	kp->name = xstrdup(name);
	kp->value = value;
	list_append(l, kp);
}

extern gopmi_list_t mpi_p_conf_get_printable(void)
{
	gopmi_list_t l = list_create(destroy_config_key_pair);

	add_pair(l, "GopmiBinDir", xstrdup(gconf.bindir ? gconf.bindir : GOPMI_BINDIR));
	add_pair(l, "GopmiFenceMode", xstrdup(gconf.fence_mode ? gconf.fence_mode : GOPMI_DEFAULT_FENCE_MODE));
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
