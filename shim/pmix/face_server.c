//go:build pmix

/* The server's life: libpmix made a server with this node's topology, the
 * jobs and clients registered with it, the environment of each client's
 * fork, and a lost client's event. */

#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include <hwloc.h>

#include "face.h"
#include "face_private.h"
#include "_cgo_export.h"


/* convert turns an info list into an array libpmix takes, and releases
 * the list. */
static void convert(void *list, pmix_data_array_t *out)
{
    PMIx_Info_list_convert(list, out);
    PMIx_Info_list_release(list);
}

static void client_lost(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                        size_t ninfo, pmix_info_t *results, size_t nresults,
                        pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    if (source != NULL) {
        goClientLost((char *)source->nspace, source->rank, status);
    }
    if (cbfunc != NULL) {
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
    }
}

/* node_topo is this node's hwloc topology, probed once per process
 * (load_topology) and kept while libpmix runs: libpmix adopts it at
 * server init instead of probing the machine itself, PCI bus included
 * (12 ms of CPU per server start on this VM, 20 ms per node of a Slurm
 * step, half of it in the kernel's reads of each device's config
 * space), and each job's registration hands it to the clients as XML. */
static hwloc_topology_t node_topo;

static int node_topo_loaded;

static void load_topology(void)
{
    if (node_topo_loaded) {
        return;
    }
    node_topo_loaded = -1;
    if (hwloc_topology_init(&node_topo) != 0) {
        return;
    }
    /* CPUs, caches and memory: what an MPI library maps ranks with. The
     * PCI bus is what costs (tens of ms per probe). */
    hwloc_topology_set_io_types_filter(node_topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(node_topo) != 0) {
        hwloc_topology_destroy(node_topo);
        return;
    }
    node_topo_loaded = 1;
}

int gopmi_server_init(const char *tmpdir, const char *dstpath, const char *server_nspace, int tools)
{
    void *list = PMIx_Info_list_start();
    pmix_rank_t rank = 0;
    bool yes = true;
    PMIx_Info_list_add(list, PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
    if (dstpath[0] != '\0') {
        PMIx_Info_list_add(list, PMIX_DSTPATH, dstpath, PMIX_STRING);
    }
    PMIx_Info_list_add(list, PMIX_SERVER_NSPACE, server_nspace, PMIX_STRING);
    PMIx_Info_list_add(list, PMIX_SERVER_RANK, &rank, PMIX_PROC_RANK);
    if (tools) {
        PMIx_Info_list_add(list, PMIX_SERVER_TOOL_SUPPORT, &yes, PMIX_BOOL);
    }
    load_topology();
    if (node_topo_loaded > 0) {
        /* The list and the array each hold a copy (hwloc_topology_dup);
         * libpmix keeps the array's. */
        pmix_topology_t t = {.source = "hwloc:" HWLOC_VERSION, .topology = node_topo};
        PMIx_Info_list_add(list, PMIX_TOPOLOGY2, &t, PMIX_TOPO);
    }
    pmix_data_array_t arr;
    convert(list, &arr);
    int rc = PMIx_server_init(&gopmi_module, (pmix_info_t *)arr.array, arr.size);
    /* libpmix points at the array's copy of the topology until it
     * finalizes: the array goes, that copy stays (once per process). */
    pmix_info_t *infos = arr.array;
    for (size_t i = 0; i < arr.size; i++) {
        if (PMIX_CHECK_KEY(&infos[i], PMIX_TOPOLOGY2) && infos[i].value.type == PMIX_TOPO) {
            free(infos[i].value.data.topo->source);
            free(infos[i].value.data.topo);
            infos[i].value.type = PMIX_UNDEF;
        }
    }
    PMIx_Data_array_destruct(&arr);
    if (rc != PMIX_SUCCESS) {
        return rc;
    }
    /* libpmix reports a client whose connection closed before
     * PMIx_Finalize as an event (and as a finalize to client_finalized,
     * which cannot tell the two apart). */
    pmix_status_t lost[] = {PMIX_ERR_LOST_CONNECTION, PMIX_ERR_UNREACH, PMIX_ERR_LOST_CONNECTION_TO_CLIENT,
                            PMIX_ERR_PROC_TERM_WO_SYNC};
    rc = PMIx_Register_event_handler(lost, sizeof(lost) / sizeof(lost[0]), NULL, 0, client_lost, NULL, NULL);
    if (rc < 0) {
        PMIx_server_finalize();
        return rc;
    }
    return PMIX_SUCCESS; /* a blocking registration returns its id */
}

int gopmi_server_finalize(void) { return PMIx_server_finalize(); }

char *gopmi_topology_xml(void)
{
    char *xml = NULL, *out = NULL;
    int len = 0;

    load_topology();
    if (node_topo_loaded > 0 && hwloc_topology_export_xmlbuffer(node_topo, &xml, &len, 0) == 0) {
        out = strdup(xml);
        hwloc_free_xmlbuffer(node_topo, xml);
    }
    return out;
}

int gopmi_register_nspace(const char *nspace, const char *nodes, const char *ppn,
                          uint32_t size, uint32_t univ_size, uint32_t num_nodes, uint32_t num_apps,
                          const char *local_peers, uint32_t nlocal, uint32_t local_leader,
                          uint32_t nprocs, const uint32_t *local_rank, const uint32_t *node_rank,
                          const uint32_t *node_id, const uint32_t *appnum, const char *topology)
{
    char *node_map = NULL, *proc_map = NULL;
    int rc = PMIx_generate_regex(nodes, &node_map);
    if (rc != PMIX_SUCCESS) {
        return rc;
    }
    rc = PMIx_generate_ppn(ppn, &proc_map);
    if (rc != PMIX_SUCCESS) {
        free(node_map);
        return rc;
    }
    void *list = PMIx_Info_list_start();
    PMIx_Info_list_add(list, PMIX_JOBID, nspace, PMIX_STRING);
    PMIx_Info_list_add(list, PMIX_NODE_MAP, node_map, PMIX_REGEX);
    PMIx_Info_list_add(list, PMIX_PROC_MAP, proc_map, PMIX_REGEX);
    PMIx_Info_list_add(list, PMIX_JOB_SIZE, &size, PMIX_UINT32);
    PMIx_Info_list_add(list, PMIX_MAX_PROCS, &univ_size, PMIX_UINT32);
    PMIx_Info_list_add(list, PMIX_UNIV_SIZE, &univ_size, PMIX_UINT32);
    PMIx_Info_list_add(list, PMIX_NUM_NODES, &num_nodes, PMIX_UINT32);
    PMIx_Info_list_add(list, PMIX_JOB_NUM_APPS, &num_apps, PMIX_UINT32);
    PMIx_Info_list_add(list, PMIX_LOCAL_SIZE, &nlocal, PMIX_UINT32);
    if (nlocal > 0) {
        pmix_rank_t leader = local_leader;
        PMIx_Info_list_add(list, PMIX_LOCAL_PEERS, local_peers, PMIX_STRING);
        PMIx_Info_list_add(list, PMIX_LOCALLDR, &leader, PMIX_PROC_RANK);
    }
    if (topology != NULL) {
        /* The node's hwloc topology (XML), where Open MPI 4.1 looks
         * (PMIX_LOCAL_TOPO, as Slurm's mpi/pmix hands it): it loads it
         * instead of probing the machine in every rank. */
        PMIx_Info_list_add(list, PMIX_LOCAL_TOPO, topology, PMIX_STRING);
    }
    free(node_map);
    free(proc_map);
    for (uint32_t r = 0; r < nprocs; r++) {
        void *pl = PMIx_Info_list_start();
        pmix_rank_t rank = r;
        uint16_t lr = (uint16_t)local_rank[r], nr = (uint16_t)node_rank[r];
        PMIx_Info_list_add(pl, PMIX_RANK, &rank, PMIX_PROC_RANK);
        PMIx_Info_list_add(pl, PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
        PMIx_Info_list_add(pl, PMIX_NODE_RANK, &nr, PMIX_UINT16);
        PMIx_Info_list_add(pl, PMIX_NODEID, &node_id[r], PMIX_UINT32);
        PMIx_Info_list_add(pl, PMIX_APPNUM, &appnum[r], PMIX_UINT32);
        pmix_data_array_t parr;
        convert(pl, &parr);
        PMIx_Info_list_add(list, PMIX_PROC_DATA, &parr, PMIX_DATA_ARRAY);
        PMIx_Data_array_destruct(&parr);
    }
    pmix_data_array_t arr;
    convert(list, &arr);
    rc = PMIx_server_register_nspace(nspace, (int)nlocal, (pmix_info_t *)arr.array, arr.size, NULL, NULL);
    PMIx_Data_array_destruct(&arr);
    return rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc;
}

int gopmi_register_client(const char *nspace, uint32_t rank, uint32_t uid, uint32_t gid)
{
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, nspace, rank);
    int rc = PMIx_server_register_client(&proc, uid, gid, NULL, NULL, NULL);
    return rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc;
}

char **gopmi_setup_fork(const char *nspace, uint32_t rank, int *rc)
{
    pmix_proc_t proc;
    char **env = NULL;
    PMIX_LOAD_PROCID(&proc, nspace, rank);
    *rc = PMIx_server_setup_fork(&proc, &env);
    return env;
}

void gopmi_free_env(char **env)
{
    if (env == NULL) {
        return;
    }
    for (char **e = env; *e != NULL; e++) {
        free(*e);
    }
    free(env);
}
