/* What the C files of gopmi's PMIx face share among themselves, and Go
 * never calls: the server module (face.c), which face_server.c gives
 * libpmix, and the value helpers (face_values.c) the callbacks use. The
 * names carry gopmi_ since the executable exports them beside libpmix's. */
#ifndef GOPMI_PMIX_FACE_PRIVATE_H
#define GOPMI_PMIX_FACE_PRIVATE_H

#include <stddef.h>
#include <pmix.h>
#include <pmix_server.h>

extern pmix_server_module_t gopmi_module;

/* The contract's published values are text. A string is published as
 * it is. A byte object (Open MPI publishes its communicator IDs so)
 * travels as BYTES_PREFIX and its bytes in hex; any other type (an
 * integer, a size, a proc, ...) as VALUE_PREFIX and, in hex, the value
 * as libpmix packs it (type and data). A lookup turns both back. */
#define BYTES_PREFIX "gopmi-bytes:"
#define VALUE_PREFIX "gopmi-pmix:"

/* gopmi_as_int reads a range, a persistence, a wait count or a time-out,
 * whatever integer type the client gave it. */
int gopmi_as_int(const pmix_value_t *v);
/* gopmi_directives reads a name-service call's directives. */
void gopmi_directives(const pmix_info_t info[], size_t ninfo, int *range, int *persist,
                      int *wait, int *timeout);
int gopmi_is_directive(const pmix_info_t *in);
/* gopmi_collective_directives reads a connect's or disconnect's time-out. */
void gopmi_collective_directives(const pmix_info_t info[], size_t ninfo, int *timeout);
/* gopmi_encode_value packs a value of any type but a string into text
 * (malloc'd), or returns NULL; gopmi_load_value unpacks it for an answer. */
char *gopmi_encode_value(const pmix_value_t *v);
void gopmi_load_value(pmix_value_t *v, const char *s);
/* gopmi_text formats a value the contract can carry as text, into buf
 * when it must. */
const char *gopmi_text(const pmix_value_t *v, char *buf, size_t n);
size_t gopmi_flatten_info(const pmix_info_t *in, size_t n, int tag, char **keys, char **vals, int *idx,
                          char (*nums)[32], size_t at);

#endif
