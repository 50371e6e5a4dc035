//go:build pmix

#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <stdio.h>

#include "face.h"
#include "face_private.h"
#include "_cgo_export.h"

/* Each callback copies what it needs into Go and returns at once: the Go
 * side answers from its own goroutines, through the cbfunc it was given
 * (gopmi_op_done, gopmi_modex_done), which libpmix moves onto its own
 * thread. Nothing here blocks libpmix's progress thread. The values
 * they read and write are face_values.c's; the server's life, which
 * gopmi_module serves, face_server.c's. */

static pmix_status_t cb_client_connected(const pmix_proc_t *proc, void *obj,
                                         pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)obj; (void)cbfunc; (void)cbdata;
    goClientConnected((char *)proc->nspace, proc->rank);
    return PMIX_OPERATION_SUCCEEDED;
}

/* The client waits in PMIx_Finalize until the backend heard of it (Go
 * calls cbfunc then): a task that ended after PMIx_Finalize returned is
 * never taken for one that left without it. */
static pmix_status_t cb_client_finalized(const pmix_proc_t *proc, void *obj,
                                         pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)obj;
    return goClientFinalized((char *)proc->nspace, proc->rank, cbfunc, cbdata);
}

static pmix_status_t cb_abort(const pmix_proc_t *proc, void *obj, int status, const char msg[],
                              pmix_proc_t procs[], size_t nprocs,
                              pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)obj;
    return goAbort((char *)proc->nspace, proc->rank, status, (char *)(msg ? msg : ""),
                   procs, nprocs, cbfunc, cbdata);
}

static pmix_status_t cb_fence_nb(const pmix_proc_t procs[], size_t nprocs,
                                 const pmix_info_t info[], size_t ninfo,
                                 char *data, size_t ndata,
                                 pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    int collect = 0, timeout = 0, local = PMIX_SUCCESS;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_COLLECT_DATA)) {
            collect = PMIX_INFO_TRUE(&info[i]);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_TIMEOUT)) {
            timeout = gopmi_as_int(&info[i].value);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_LOCAL_COLLECTIVE_STATUS) &&
                   info[i].value.type == PMIX_STATUS) {
            local = info[i].value.data.status;
        }
    }
    /* With a failed local part (local != SUCCESS) Go counts the fence,
     * so that every node names the next one alike, and returns the
     * status: the fence fails here, and cbfunc is not ours to call. */
    return goFence((pmix_proc_t *)procs, nprocs, collect, timeout, local, data, ndata, cbfunc, cbdata);
}

/* Publish: every info that is no directive is a name; a value that
 * cannot be packed is refused. */
static pmix_status_t cb_publish(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                                pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    int range, persist, wait, timeout;
    gopmi_directives(info, ninfo, &range, &persist, &wait, &timeout);
    char **keys = calloc(ninfo + 1, sizeof(char *));
    char **vals = calloc(ninfo + 1, sizeof(char *));
    if (keys == NULL || vals == NULL) {
        free(keys);
        free(vals);
        return PMIX_ERR_NOMEM;
    }
    char **owned = calloc(ninfo + 1, sizeof(char *)); /* the encoded values */
    if (owned == NULL) {
        free(keys);
        free(vals);
        return PMIX_ERR_NOMEM;
    }
    size_t n = 0, no = 0;
    pmix_status_t rc = PMIX_SUCCESS;
    for (size_t i = 0; i < ninfo && rc == PMIX_SUCCESS; i++) {
        if (gopmi_is_directive(&info[i])) {
            continue;
        }
        keys[n] = (char *)info[i].key;
        const pmix_value_t *v = &info[i].value;
        if (v->type == PMIX_STRING && v->data.string != NULL &&
            strncmp(v->data.string, BYTES_PREFIX, strlen(BYTES_PREFIX)) != 0 &&
            strncmp(v->data.string, VALUE_PREFIX, strlen(VALUE_PREFIX)) != 0) {
            vals[n++] = v->data.string;
        } else if (v->type != PMIX_POINTER && (owned[no] = gopmi_encode_value(v)) != NULL) {
            /* A string that looks encoded is encoded too, and a
             * pointer means nothing in another process. */
            vals[n++] = owned[no++];
        } else {
            rc = goRefuse((char *)proc->nspace, proc->rank, (char *)info[i].key, info[i].value.type);
        }
    }
    if (rc == PMIX_SUCCESS) {
        rc = goPublish((char *)proc->nspace, proc->rank, keys, vals, n, range, persist, cbfunc, cbdata);
    }
    for (size_t i = 0; i < no; i++) {
        free(owned[i]);
    }
    free(owned);
    free(keys);
    free(vals);
    return rc;
}

static pmix_status_t cb_lookup(const pmix_proc_t *proc, char **keys, const pmix_info_t info[], size_t ninfo,
                               pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
    int range, persist, wait, timeout;
    gopmi_directives(info, ninfo, &range, &persist, &wait, &timeout);
    return goLookup((char *)proc->nspace, proc->rank, keys, range, wait, timeout, cbfunc, cbdata);
}

static pmix_status_t cb_unpublish(const pmix_proc_t *proc, char **keys, const pmix_info_t info[], size_t ninfo,
                                  pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    int range, persist, wait, timeout;
    gopmi_directives(info, ninfo, &range, &persist, &wait, &timeout);
    return goUnpublish((char *)proc->nspace, proc->rank, keys, range, cbfunc, cbdata);
}

/* Query: the keys of every query and their qualifiers, flattened for Go
 * (which query each belongs to), values as text. The vocabulary's keys
 * are PMIx's own names, so they go to the backend as they are. */
static pmix_status_t cb_query(pmix_proc_t *proct, pmix_query_t *queries, size_t nqueries,
                              pmix_info_cbfunc_t cbfunc, void *cbdata)
{
    (void)proct; /* libpmix passes the server's own ID, not the tool's */
    size_t nk = 0, nq = 0;
    for (size_t i = 0; i < nqueries; i++) {
        for (char **k = queries[i].keys; k != NULL && *k != NULL; k++) nk++;
        nq += queries[i].nqual;
    }
    int *kq = calloc(nk + 1, sizeof(int)), *qq = calloc(nq + 1, sizeof(int));
    char **keys = calloc(nk + 1, sizeof(char *)), **qk = calloc(nq + 1, sizeof(char *)), **qv = calloc(nq + 1, sizeof(char *));
    char (*nums)[32] = calloc(nq + 1, 32);
    pmix_status_t rc = PMIX_ERR_NOMEM;
    if (kq && qq && keys && qk && qv && nums) {
        size_t a = 0, b = 0;
        for (size_t i = 0; i < nqueries; i++) {
            for (char **k = queries[i].keys; k != NULL && *k != NULL; k++) {
                kq[a] = (int)i;
                keys[a++] = *k;
            }
            for (size_t j = 0; j < queries[i].nqual; j++) {
                const char *t = gopmi_text(&queries[i].qualifiers[j].value, nums[b], sizeof nums[b]);
                if (t == NULL) {
                    /* A qualifier the vocabulary has no text for: left
                     * out, the query would be answered more widely than
                     * asked. */
                    free(kq); free(qq); free(keys); free(qk); free(qv); free(nums);
                    return PMIX_ERR_NOT_SUPPORTED;
                }
                qq[b] = (int)i;
                qk[b] = queries[i].qualifiers[j].key;
                qv[b++] = (char *)t;
            }
        }
        rc = goQuery(keys, kq, a, qk, qv, qq, b, cbfunc, cbdata);
    }
    free(kq); free(qq); free(keys); free(qk); free(qv); free(nums);
    return rc;
}

static void release_info(void *p)
{
    pmix_data_array_t *d = p;
    PMIx_Data_array_destruct(d);
    free(d);
}

void gopmi_query_done(pmix_info_cbfunc_t f, int status, size_t n, char **keys, char **vals, void *cbdata)
{
    if (status != PMIX_SUCCESS || n == 0) {
        f(status, NULL, 0, cbdata, NULL, NULL);
        return;
    }
    void *list = PMIx_Info_list_start();
    pmix_data_array_t *d = malloc(sizeof *d);
    pmix_status_t rc = (list == NULL || d == NULL) ? PMIX_ERR_NOMEM : PMIX_SUCCESS;
    for (size_t i = 0; i < n && rc == PMIX_SUCCESS; i++) {
        rc = PMIx_Info_list_add(list, keys[i], vals[i], PMIX_STRING);
    }
    if (rc == PMIX_SUCCESS) {
        rc = PMIx_Info_list_convert(list, d);
    }
    if (list != NULL) {
        PMIx_Info_list_release(list);
    }
    if (rc != PMIX_SUCCESS) {
        free(d);
        f(rc, NULL, 0, cbdata, NULL, NULL);
        return;
    }
    /* libpmix reads the answer after the thread shift: it stays ours
     * until it calls release_info. */
    f(PMIX_SUCCESS, (pmix_info_t *)d->array, d->size, cbdata, release_info, d);
}

/* A tool (pps, plookup) gets an ID of its own from the server. */
static void cb_tool_connected(pmix_info_t *info, size_t ninfo, pmix_tool_connection_cbfunc_t cbfunc, void *cbdata)
{
    (void)info; (void)ninfo;
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, "gopmi-tool", goToolConnect());
    if (cbfunc != NULL) {
        cbfunc(PMIX_SUCCESS, &proc, cbdata);
    }
}

/* Log: the data that is text goes to the backend's Log. */
static void cb_log(const pmix_proc_t *client, const pmix_info_t data[], size_t ndata,
                   const pmix_info_t directives[], size_t ndirs, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)directives; (void)ndirs;
    char **keys = calloc(ndata + 1, sizeof(char *)), **vals = calloc(ndata + 1, sizeof(char *));
    char (*nums)[32] = calloc(ndata + 1, 32);
    if (keys == NULL || vals == NULL || nums == NULL) {
        free(keys); free(vals); free(nums);
        if (cbfunc != NULL) cbfunc(PMIX_ERR_NOMEM, cbdata);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < ndata; i++) {
        const char *t = gopmi_text(&data[i].value, nums[n], sizeof nums[n]);
        if (t != NULL) {
            keys[n] = (char *)data[i].key;
            vals[n++] = (char *)t;
        }
    }
    goLog((char *)client->nspace, client->rank, keys, vals, n, cbfunc, cbdata);
    free(keys); free(vals); free(nums);
}

/* Direct modex: a client wants data of a process this server does not
 * host (of another job after a spawn or a connect, mostly). */
static pmix_status_t cb_direct_modex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                                     pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    int timeout = 0;
    char *key = NULL;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_TIMEOUT)) {
            timeout = gopmi_as_int(&info[i].value);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_REQUIRED_KEY) && info[i].value.type == PMIX_STRING) {
            key = info[i].value.data.string;
        }
    }
    return goDirectModex((char *)proc->nspace, proc->rank, timeout, key, cbfunc, cbdata);
}

static void dmodex_answer(pmix_status_t status, char *data, size_t sz, void *cbdata)
{
    /* libpmix frees data when this returns: Go copies it. */
    goDmodexAnswer((uintptr_t)cbdata, status, data, sz);
}

int gopmi_dmodex_request(const char *nspace, uint32_t rank, uintptr_t id)
{
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, nspace, rank);
    return PMIx_server_dmodex_request(&p, dmodex_answer, (void *)id);
}

/* Spawn: the apps go to Go as they are (it reads pmix_app_t), their info
 * and the job's flattened, tagged with their app's index (-1: the
 * job's). */
static pmix_status_t cb_spawn(const pmix_proc_t *proc, const pmix_info_t job_info[], size_t ninfo,
                              const pmix_app_t apps[], size_t napps, pmix_spawn_cbfunc_t cbfunc, void *cbdata)
{
    size_t n = ninfo;
    for (size_t a = 0; a < napps; a++) {
        n += apps[a].ninfo;
    }
    char **keys = calloc(n + 1, sizeof(char *)), **vals = calloc(n + 1, sizeof(char *));
    int *idx = calloc(n + 1, sizeof(int));
    char (*nums)[32] = calloc(n + 1, 32);
    pmix_status_t rc = PMIX_ERR_NOMEM;
    if (keys && vals && idx && nums) {
        size_t at = gopmi_flatten_info(job_info, ninfo, -1, keys, vals, idx, nums, 0);
        for (size_t a = 0; a < napps; a++) {
            at = gopmi_flatten_info(apps[a].info, apps[a].ninfo, (int)a, keys, vals, idx, nums, at);
        }
        rc = goSpawn((char *)proc->nspace, proc->rank, (pmix_app_t *)apps, napps, keys, vals, idx, at, cbfunc, cbdata);
    }
    free(keys); free(vals); free(idx); free(nums);
    return rc;
}

void gopmi_spawn_done(pmix_spawn_cbfunc_t f, int status, const char *nspace, void *cbdata)
{
    pmix_nspace_t ns;
    PMIX_LOAD_NSPACE(ns, nspace != NULL ? nspace : "");
    f(status, ns, cbdata);
}

static pmix_status_t cb_connect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                                pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    int timeout;
    gopmi_collective_directives(info, ninfo, &timeout);
    return goConnect((pmix_proc_t *)procs, nprocs, timeout, 1, cbfunc, cbdata);
}

static pmix_status_t cb_disconnect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                                   pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    int timeout;
    gopmi_collective_directives(info, ninfo, &timeout);
    return goConnect((pmix_proc_t *)procs, nprocs, timeout, 0, cbfunc, cbdata);
}

/* libpmix's mark on an event it relayed from a client (its private
 * src/event/pmix_event.h). */
#define GOPMI_INTERNAL_NOTIFY "pmix.srvr.internal.notify"

/* Notify event: a client raised an event for processes beyond its node
 * (libpmix gave it to this node's clients already). Its info travels as
 * published values do; libpmix's own mark of an event it relayed stays
 * here. Answered at once (PMIX_OPERATION_SUCCEEDED): the completion
 * libpmix passes for it does not move onto libpmix's thread, so no Go
 * thread may call it; the Go side tells the backend on its own. */
static pmix_status_t cb_notify_event(pmix_status_t code, const pmix_proc_t *source, pmix_data_range_t range,
                                     pmix_info_t info[], size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    char **keys = calloc(ninfo + 1, sizeof(char *)), **vals = calloc(ninfo + 1, sizeof(char *));
    if (keys == NULL || vals == NULL) {
        free(keys); free(vals);
        return PMIX_ERR_NOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], GOPMI_INTERNAL_NOTIFY) || info[i].value.type == PMIX_POINTER) {
            continue;
        }
        char *v = info[i].value.type != PMIX_STRING ? gopmi_encode_value(&info[i].value)
                  : info[i].value.data.string != NULL ? strdup(info[i].value.data.string) : NULL;
        if (v != NULL) {
            keys[n] = (char *)info[i].key;
            vals[n++] = v;
        }
    }
    (void)cbfunc; (void)cbdata;
    pmix_status_t rc = goNotifyEvent(code, (char *)source->nspace, source->rank, (int)range, keys, vals, n);
    for (size_t i = 0; i < n; i++) free(vals[i]);
    free(keys); free(vals);
    return rc;
}

struct notify_info {
    pmix_info_t *info;
    size_t n;
};

static void notify_done(pmix_status_t status, void *cbdata)
{
    (void)status;
    struct notify_info *ni = cbdata;
    if (ni->info != NULL) PMIX_INFO_FREE(ni->info, ni->n);
    free(ni);
}

int gopmi_notify(int code, const char *nspace, uint32_t rank, int range, char **keys, char **vals, size_t n)
{
    struct notify_info *ni = calloc(1, sizeof *ni);
    if (ni == NULL) return PMIX_ERR_NOMEM;
    if (n > 0) {
        PMIX_INFO_CREATE(ni->info, n);
        ni->n = n;
        for (size_t i = 0; i < n; i++) {
            PMIX_LOAD_KEY(ni->info[i].key, keys[i]);
            gopmi_load_value(&ni->info[i].value, vals[i]);
        }
    }
    pmix_proc_t source;
    PMIX_LOAD_PROCID(&source, nspace, rank);
    pmix_status_t rc = PMIx_Notify_event(code, &source, (pmix_data_range_t)range, ni->info, ni->n, notify_done, ni);
    if (rc != PMIX_SUCCESS) {
        notify_done(rc, ni); /* not called back */
    }
    return rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc;
}

pmix_server_module_t gopmi_module = {
    .client_connected = cb_client_connected,
    .client_finalized = cb_client_finalized,
    .abort = cb_abort,
    .fence_nb = cb_fence_nb,
    .direct_modex = cb_direct_modex,
    .spawn = cb_spawn,
    .connect = cb_connect,
    .disconnect = cb_disconnect,
    .publish = cb_publish,
    .lookup = cb_lookup,
    .unpublish = cb_unpublish,
    .query = cb_query,
    .tool_connected = cb_tool_connected,
    .log = cb_log,
    .notify_event = cb_notify_event,
};

void gopmi_lookup_done(pmix_lookup_cbfunc_t f, int status, size_t n, char **nspaces, uint32_t *ranks,
                       char **keys, char **vals, void *cbdata)
{
    pmix_pdata_t *pd = NULL;
    if (n > 0) {
        PMIX_PDATA_CREATE(pd, n);
        for (size_t i = 0; i < n; i++) {
            PMIX_LOAD_PROCID(&pd[i].proc, nspaces[i], ranks[i]);
            PMIX_LOAD_KEY(pd[i].key, keys[i]);
            gopmi_load_value(&pd[i].value, vals[i]);
        }
    }
    /* libpmix copies what it keeps during the call. */
    f(status, pd, n, cbdata);
    if (pd != NULL) {
        PMIX_PDATA_FREE(pd, n);
    }
}

static void release(void *p) { free(p); }

void gopmi_op_done(pmix_op_cbfunc_t f, int status, void *cbdata)
{
    if (f != NULL) {
        f(status, cbdata);
    }
}

void gopmi_modex_done(pmix_modex_cbfunc_t f, int status, char *data, size_t n, void *cbdata)
{
    if (f == NULL) {
        free(data);
        return;
    }
    /* libpmix reads data after the thread shift: it stays ours until it
     * calls release. */
    f(status, data, n, cbdata, data != NULL ? release : NULL, data);
}

const char *gopmi_error_string(int status) { return PMIx_Error_string(status); }
