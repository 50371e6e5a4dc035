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


/* ADD adds one value to an info list, or leaves with its status. */
#define ADD(l, key, val, type)                                  \
    do {                                                        \
        rc = PMIx_Info_list_add((l), (key), (val), (type));     \
        if (rc != PMIX_SUCCESS) {                               \
            goto cleanup;                                       \
        }                                                       \
    } while (0)

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
    int rc = PMIX_ERR_NOMEM, called = 0;
    void *list = PMIx_Info_list_start();
    pmix_data_array_t arr = {0};
    pmix_rank_t rank = 0;
    bool yes = true;
    if (list == NULL) {
        return rc;
    }
    ADD(list, PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
    if (dstpath[0] != '\0') {
        ADD(list, PMIX_DSTPATH, dstpath, PMIX_STRING);
    }
    ADD(list, PMIX_SERVER_NSPACE, server_nspace, PMIX_STRING);
    ADD(list, PMIX_SERVER_RANK, &rank, PMIX_PROC_RANK);
    if (tools) {
        ADD(list, PMIX_SERVER_TOOL_SUPPORT, &yes, PMIX_BOOL);
    }
    load_topology();
    if (node_topo_loaded > 0) {
        /* The list and the array each hold a copy (hwloc_topology_dup);
         * libpmix keeps the array's. */
        pmix_topology_t t = {.source = "hwloc:" HWLOC_VERSION, .topology = node_topo};
        ADD(list, PMIX_TOPOLOGY2, &t, PMIX_TOPO);
    }
    rc = PMIx_Info_list_convert(list, &arr);
    if (rc != PMIX_SUCCESS) {
        goto cleanup;
    }
    rc = PMIx_server_init(&gopmi_module, (pmix_info_t *)arr.array, arr.size);
    called = 1;
cleanup:
    if (called) {
        /* libpmix points at the array's copy of the topology until it
         * finalizes: the array goes, that copy stays (once per
         * process). */
        pmix_info_t *infos = arr.array;
        for (size_t i = 0; i < arr.size; i++) {
            if (PMIX_CHECK_KEY(&infos[i], PMIX_TOPOLOGY2) && infos[i].value.type == PMIX_TOPO) {
                free(infos[i].value.data.topo->source);
                free(infos[i].value.data.topo);
                infos[i].value.type = PMIX_UNDEF;
            }
        }
    }
    if (arr.array != NULL) {
        PMIx_Data_array_destruct(&arr);
    }
    PMIx_Info_list_release(list);
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

/* proc_data is one rank's values (PMIX_PROC_DATA) of job j, added to
 * list. */
static int proc_data(void *list, const struct gopmi_job *j, uint32_t r)
{
    int rc = PMIX_ERR_NOMEM;
    pmix_data_array_t parr;
    pmix_rank_t rank = r;
    uint16_t lr = (uint16_t)j->local_rank[r], nr = (uint16_t)j->node_rank[r];
    void *pl = PMIx_Info_list_start();
    if (pl == NULL) {
        return rc;
    }
    ADD(pl, PMIX_RANK, &rank, PMIX_PROC_RANK);
    ADD(pl, PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
    ADD(pl, PMIX_NODE_RANK, &nr, PMIX_UINT16);
    ADD(pl, PMIX_NODEID, &j->node_id[r], PMIX_UINT32);
    ADD(pl, PMIX_APPNUM, &j->appnum[r], PMIX_UINT32);
    rc = PMIx_Info_list_convert(pl, &parr);
    if (rc == PMIX_SUCCESS) {
        rc = PMIx_Info_list_add(list, PMIX_PROC_DATA, &parr, PMIX_DATA_ARRAY);
        PMIx_Data_array_destruct(&parr);
    }
cleanup:
    PMIx_Info_list_release(pl);
    return rc;
}

int gopmi_register_nspace(const struct gopmi_job *j)
{
    char *node_map = NULL, *proc_map = NULL;
    void *list = NULL;
    pmix_data_array_t arr = {0};
    uint32_t univ = j->univ_size, size = j->size, num_nodes = j->num_nodes, num_apps = j->num_apps, nlocal = j->nlocal;
    int rc = PMIx_generate_regex(j->nodes, &node_map);
    if (rc != PMIX_SUCCESS) {
        goto cleanup;
    }
    rc = PMIx_generate_ppn(j->ppn, &proc_map);
    if (rc != PMIX_SUCCESS) {
        goto cleanup;
    }
    list = PMIx_Info_list_start();
    if (list == NULL) {
        rc = PMIX_ERR_NOMEM;
        goto cleanup;
    }
    ADD(list, PMIX_JOBID, j->nspace, PMIX_STRING);
    ADD(list, PMIX_NODE_MAP, node_map, PMIX_REGEX);
    ADD(list, PMIX_PROC_MAP, proc_map, PMIX_REGEX);
    ADD(list, PMIX_JOB_SIZE, &size, PMIX_UINT32);
    ADD(list, PMIX_MAX_PROCS, &univ, PMIX_UINT32);
    ADD(list, PMIX_UNIV_SIZE, &univ, PMIX_UINT32);
    ADD(list, PMIX_NUM_NODES, &num_nodes, PMIX_UINT32);
    ADD(list, PMIX_JOB_NUM_APPS, &num_apps, PMIX_UINT32);
    ADD(list, PMIX_LOCAL_SIZE, &nlocal, PMIX_UINT32);
    if (nlocal > 0) {
        pmix_rank_t leader = j->local_leader;
        ADD(list, PMIX_LOCAL_PEERS, j->local_peers, PMIX_STRING);
        ADD(list, PMIX_LOCALLDR, &leader, PMIX_PROC_RANK);
    }
    if (j->topology != NULL) {
        /* The node's hwloc topology (XML), where Open MPI 4.1 looks
         * (PMIX_LOCAL_TOPO, as Slurm's mpi/pmix hands it): it loads it
         * instead of probing the machine in every rank. */
        ADD(list, PMIX_LOCAL_TOPO, j->topology, PMIX_STRING);
    }
    for (uint32_t r = 0; r < j->nprocs; r++) {
        rc = proc_data(list, j, r);
        if (rc != PMIX_SUCCESS) {
            goto cleanup;
        }
    }
    rc = PMIx_Info_list_convert(list, &arr);
    if (rc != PMIX_SUCCESS) {
        goto cleanup;
    }
    rc = PMIx_server_register_nspace(j->nspace, (int)nlocal, (pmix_info_t *)arr.array, arr.size, NULL, NULL);
    if (rc == PMIX_OPERATION_SUCCEEDED) {
        rc = PMIX_SUCCESS;
    }
cleanup:
    if (arr.array != NULL) {
        PMIx_Data_array_destruct(&arr);
    }
    if (list != NULL) {
        PMIx_Info_list_release(list);
    }
    free(node_map);
    free(proc_map);
    return rc;
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
