//go:build pmix

#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <stdio.h>

#include <hwloc.h>

#include "face.h"
#include "_cgo_export.h"

/* Each callback copies what it needs into Go and returns at once: the Go
 * side answers from its own goroutines, through the cbfunc it was given
 * (gopmi_op_done, gopmi_modex_done), which libpmix moves onto its own
 * thread. Nothing here blocks libpmix's progress thread. */

static int as_int(const pmix_value_t *v);

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
            timeout = as_int(&info[i].value);
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

/* as_int reads a range, a persistence, a wait count or a time-out,
 * which clients send typed (PMIX_DATA_RANGE, PMIX_PERSIST) or as plain
 * integers (Open MPI's MPI_Publish_name sends PMIX_INT); -2 for a type
 * that is none of these. */
static int as_int(const pmix_value_t *v)
{
    switch (v->type) {
    case PMIX_DATA_RANGE: return v->data.range;
    case PMIX_PERSIST:    return v->data.persist;
    case PMIX_INT:        return v->data.integer;
    case PMIX_UINT32:     return (int)v->data.uint32;
    case PMIX_UINT8:      return v->data.uint8;
    case PMIX_INT8:       return v->data.int8;
    case PMIX_BOOL:       return v->data.flag ? 1 : 0;
    default:              return -2;
    }
}

/* directives reads the directives of a name-service call: the range,
 * the persistence, whether and how long to wait; -1 where absent. The
 * caller's identity (PMIX_USERID, PMIX_GRPID, added by libpmix) is the
 * server's own business: the backend knows whose job it serves. */
static void directives(const pmix_info_t info[], size_t ninfo, int *range, int *persist,
                       int *wait, int *timeout)
{
    *range = *persist = *wait = *timeout = -1;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_RANGE)) {
            *range = as_int(&info[i].value);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_PERSISTENCE)) {
            *persist = as_int(&info[i].value);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_WAIT)) {
            /* A bool, or how many values to wait for (0: all). */
            if (info[i].value.type == PMIX_BOOL) {
                *wait = info[i].value.data.flag ? 0 : -1;
            } else {
                *wait = as_int(&info[i].value);
            }
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_TIMEOUT)) {
            *timeout = as_int(&info[i].value);
        }
    }
}

static int is_directive(const pmix_info_t *in)
{
    return PMIX_CHECK_KEY(in, PMIX_RANGE) || PMIX_CHECK_KEY(in, PMIX_PERSISTENCE) ||
           PMIX_CHECK_KEY(in, PMIX_WAIT) || PMIX_CHECK_KEY(in, PMIX_TIMEOUT) ||
           PMIX_CHECK_KEY(in, PMIX_USERID) || PMIX_CHECK_KEY(in, PMIX_GRPID);
}

/* The contract's published values are text. A string is published as
 * it is. A byte object (Open MPI publishes its communicator IDs so)
 * travels as BYTES_PREFIX and its bytes in hex; any other type (an
 * integer, a size, a proc, ...) as VALUE_PREFIX and, in hex, the value
 * as libpmix packs it (type and data). A lookup turns both back. */
#define BYTES_PREFIX "gopmi-bytes:"
#define VALUE_PREFIX "gopmi-pmix:"

static char *encode_hex(const char *prefix, const char *bytes, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    size_t p = strlen(prefix);
    char *out = malloc(p + 2 * size + 1);
    if (out == NULL) {
        return NULL;
    }
    memcpy(out, prefix, p);
    for (size_t i = 0; i < size; i++) {
        unsigned char c = (unsigned char)bytes[i];
        out[p + 2 * i] = hex[c >> 4];
        out[p + 2 * i + 1] = hex[c & 15];
    }
    out[p + 2 * size] = '\0';
    return out;
}

/* encode_value packs a value of any type but a string into text; NULL if
 * libpmix cannot pack it. */
static char *encode_value(const pmix_value_t *v)
{
    if (v->type == PMIX_BYTE_OBJECT) {
        return encode_hex(BYTES_PREFIX, v->data.bo.bytes, v->data.bo.size);
    }
    pmix_data_buffer_t buf;
    PMIX_DATA_BUFFER_CONSTRUCT(&buf);
    char *out = NULL;
    if (PMIx_Data_pack(NULL, &buf, (void *)v, 1, PMIX_VALUE) == PMIX_SUCCESS) {
        pmix_byte_object_t bo = PMIX_BYTE_OBJECT_STATIC_INIT;
        PMIx_Data_unload(&buf, &bo);
        out = encode_hex(VALUE_PREFIX, bo.bytes, bo.size);
        PMIX_BYTE_OBJECT_DESTRUCT(&bo);
    }
    PMIX_DATA_BUFFER_DESTRUCT(&buf);
    return out;
}

static int unhex(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* decode_hex reads the hex after prefix in s into bo; 0 if s is not so. */
static int decode_hex(const char *s, const char *prefix, pmix_byte_object_t *bo)
{
    size_t p = strlen(prefix), n = strlen(s);
    if (n < p || strncmp(s, prefix, p) != 0 || (n - p) % 2 != 0) {
        return 0;
    }
    bo->size = (n - p) / 2;
    if ((bo->bytes = malloc(bo->size + 1)) == NULL) {
        return 0;
    }
    for (size_t i = 0; i < bo->size; i++) {
        int hi = unhex(s[p + 2 * i]), lo = unhex(s[p + 2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(bo->bytes);
            bo->bytes = NULL;
            return 0;
        }
        bo->bytes[i] = (char)(hi << 4 | lo);
    }
    return 1;
}

/* load_value loads a published value for a lookup's answer: the byte
 * object or packed value it encodes, or else the string itself. */
static void load_value(pmix_value_t *v, const char *s)
{
    pmix_byte_object_t bo = PMIX_BYTE_OBJECT_STATIC_INIT;
    if (decode_hex(s, BYTES_PREFIX, &bo)) {
        PMIx_Value_load(v, &bo, PMIX_BYTE_OBJECT);
        free(bo.bytes);
        return;
    }
    if (decode_hex(s, VALUE_PREFIX, &bo)) {
        pmix_data_buffer_t buf;
        PMIX_DATA_BUFFER_CONSTRUCT(&buf);
        PMIx_Data_load(&buf, &bo); /* the buffer owns bo's bytes now */
        pmix_value_t got;
        PMIX_VALUE_CONSTRUCT(&got);
        int32_t cnt = 1;
        pmix_status_t rc = PMIx_Data_unpack(NULL, &buf, &got, &cnt, PMIX_VALUE);
        PMIX_DATA_BUFFER_DESTRUCT(&buf);
        if (rc == PMIX_SUCCESS && cnt == 1 && PMIx_Value_xfer(v, &got) == PMIX_SUCCESS) {
            PMIX_VALUE_DESTRUCT(&got);
            return;
        }
        PMIX_VALUE_DESTRUCT(&got);
    }
    PMIx_Value_load(v, s, PMIX_STRING);
}

/* Publish: every info that is no directive is a name; a value that
 * cannot be packed is refused. */
static pmix_status_t cb_publish(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                                pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    int range, persist, wait, timeout;
    directives(info, ninfo, &range, &persist, &wait, &timeout);
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
        if (is_directive(&info[i])) {
            continue;
        }
        keys[n] = (char *)info[i].key;
        const pmix_value_t *v = &info[i].value;
        if (v->type == PMIX_STRING && v->data.string != NULL &&
            strncmp(v->data.string, BYTES_PREFIX, strlen(BYTES_PREFIX)) != 0 &&
            strncmp(v->data.string, VALUE_PREFIX, strlen(VALUE_PREFIX)) != 0) {
            vals[n++] = v->data.string;
        } else if (v->type != PMIX_POINTER && (owned[no] = encode_value(v)) != NULL) {
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
    directives(info, ninfo, &range, &persist, &wait, &timeout);
    return goLookup((char *)proc->nspace, proc->rank, keys, range, wait, timeout, cbfunc, cbdata);
}

static pmix_status_t cb_unpublish(const pmix_proc_t *proc, char **keys, const pmix_info_t info[], size_t ninfo,
                                  pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    int range, persist, wait, timeout;
    directives(info, ninfo, &range, &persist, &wait, &timeout);
    return goUnpublish((char *)proc->nspace, proc->rank, keys, range, cbfunc, cbdata);
}

/* text formats a value the contract can carry as text into buf: a
 * string, or a number; NULL for other types. */
static const char *text(const pmix_value_t *v, char *buf, size_t n)
{
    switch (v->type) {
    case PMIX_STRING:    return v->data.string;
    case PMIX_UINT32:    snprintf(buf, n, "%u", v->data.uint32); return buf;
    case PMIX_PROC_RANK: snprintf(buf, n, "%u", v->data.rank); return buf;
    case PMIX_INT:       snprintf(buf, n, "%d", v->data.integer); return buf;
    case PMIX_UINT16:    snprintf(buf, n, "%u", v->data.uint16); return buf;
    case PMIX_BOOL:      return v->data.flag ? "true" : "false";
    default:             return NULL;
    }
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
                const char *t = text(&queries[i].qualifiers[j].value, nums[b], sizeof nums[b]);
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
        const char *t = text(&data[i].value, nums[n], sizeof nums[n]);
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
            timeout = as_int(&info[i].value);
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

/* flatten_info turns infos into key and text arrays (a value with no text
 * form is "?"), tagging each with tag in idx. */
static size_t flatten_info(const pmix_info_t *in, size_t n, int tag, char **keys, char **vals, int *idx,
                           char (*nums)[32], size_t at)
{
    for (size_t i = 0; i < n; i++, at++) {
        const char *t = text(&in[i].value, nums[at], sizeof nums[at]);
        keys[at] = (char *)in[i].key;
        vals[at] = (char *)(t != NULL ? t : "?");
        idx[at] = tag;
    }
    return at;
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
        size_t at = flatten_info(job_info, ninfo, -1, keys, vals, idx, nums, 0);
        for (size_t a = 0; a < napps; a++) {
            at = flatten_info(apps[a].info, apps[a].ninfo, (int)a, keys, vals, idx, nums, at);
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

static void collective_directives(const pmix_info_t info[], size_t ninfo, int *timeout)
{
    *timeout = 0;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_TIMEOUT)) {
            *timeout = as_int(&info[i].value);
        }
    }
}

static pmix_status_t cb_connect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                                pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    int timeout;
    collective_directives(info, ninfo, &timeout);
    return goConnect((pmix_proc_t *)procs, nprocs, timeout, 1, cbfunc, cbdata);
}

static pmix_status_t cb_disconnect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                                   pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    int timeout;
    collective_directives(info, ninfo, &timeout);
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
        char *v = info[i].value.type != PMIX_STRING ? encode_value(&info[i].value)
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
            load_value(&ni->info[i].value, vals[i]);
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

static pmix_server_module_t gopmi_module = {
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
            load_value(&pd[i].value, vals[i]);
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
