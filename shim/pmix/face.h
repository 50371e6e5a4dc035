/* The C half of gopmi's PMIx face: the server module libpmix calls, and
 * helpers Go cannot write itself (libpmix's macros, calls through
 * function pointers). Every line is gopmi's; libpmix is OpenPMIx 4.2. */
#ifndef GOPMI_PMIX_FACE_H
#define GOPMI_PMIX_FACE_H

#include <stdint.h>
#include <pmix.h>
#include <pmix_server.h>

/* gopmi_server_init makes the process a PMIx server in tmpdir, with its
 * shared data store in dstpath unless that is empty. */
int gopmi_server_init(const char *tmpdir, const char *dstpath, const char *server_nspace, int tools);
int gopmi_server_finalize(void);
/* gopmi_topology_xml is this node's hwloc topology, without I/O
 * devices, as XML (malloc'd), or returns NULL. */
char *gopmi_topology_xml(void);
/* gopmi_job is what gopmi_register_nspace tells libpmix of one job. */
struct gopmi_job {
    const char *nspace;
    const char *nodes;       /* the job's node names, comma-separated */
    const char *ppn;         /* each node's ranks, nodes ';'-separated */
    uint32_t size, univ_size, num_nodes, num_apps;
    const char *local_peers; /* this node's ranks, comma-separated */
    uint32_t nlocal, local_leader;
    /* One entry per rank of the job (nprocs of them). */
    uint32_t nprocs;
    const uint32_t *local_rank, *node_rank, *node_id, *appnum;
    const char *topology;    /* the node's hwloc XML, or NULL */
};
/* gopmi_register_nspace registers job j with libpmix; every libpmix
 * call's status is checked, the first failure returned. */
int gopmi_register_nspace(const struct gopmi_job *j);
int gopmi_register_client(const char *nspace, uint32_t rank, uint32_t uid, uint32_t gid);
char **gopmi_setup_fork(const char *nspace, uint32_t rank, int *rc);
void gopmi_free_env(char **env);
void gopmi_op_done(pmix_op_cbfunc_t f, int status, void *cbdata);
void gopmi_modex_done(pmix_modex_cbfunc_t f, int status, char *data, size_t n, void *cbdata);
const char *gopmi_error_string(int status);
/* gopmi_dmodex_request asks libpmix for a local client's data in the
 * direct-modex format; the answer comes to goDmodexAnswer with id. */
int gopmi_dmodex_request(const char *nspace, uint32_t rank, uintptr_t id);
void gopmi_spawn_done(pmix_spawn_cbfunc_t f, int status, const char *nspace, void *cbdata);
void gopmi_query_done(pmix_info_cbfunc_t f, int status, size_t n, char **keys, char **vals, void *cbdata);
/* gopmi_notify gives this node's clients an event raised on another
 * node, with its info as published values travel. */
int gopmi_notify(int code, const char *nspace, uint32_t rank, int range, char **keys, char **vals, size_t n);
void gopmi_lookup_done(pmix_lookup_cbfunc_t f, int status, size_t n, char **nspaces, uint32_t *ranks,
                       char **keys, char **vals, void *cbdata);

/* The rendezvous (rendezvous.c): libpmix's listener becomes fd at its
 * next bind; gopmi_adopted says whether it did; accept waits for
 * gopmi_open_gate. */
void gopmi_adopt_listener(int fd);
int gopmi_adopted(void);
void gopmi_open_gate(void);

#endif
