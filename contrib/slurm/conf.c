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
