// Command gopmi-pmix-tools lets a PMIx tool (Debian's pps) see, through
// the node daemon, the node's running jobs of the user who runs it.
// `gopmi tools TOOL [ARGS...]` runs it.
//
// It becomes a PMIx server with tool support in a directory of its own,
// whose calls go to the node daemon, and runs the tool with
// PMIX_SYSTEM_TMPDIR set to that directory, so that the tool finds this
// server and no other; it exits as the tool does. The daemon tells its
// callers apart by their credentials on its socket, and this process runs
// as the tool's user, so the daemon's per-user rules hold: a tool's query
// (pmix.qry.ns, the whole query vocabulary) is answered with what that
// user may see (root: everything). libpmix serves on TCP, where any local
// user can connect, and takes a tool's uid on its word; so the server
// refuses a tool's calls, and cuts the connection, while another user's
// (neither its own nor root's) is open to it (shim/pmix).
//
// What a tool gets besides queries: a lookup or a log goes to the daemon
// too, which refuses it (a tool is no registered job); Debian's plookup
// crashes before it asks, and pattrs --host makes libpmix itself crash.
//
// Why a server per tool and not one the daemon shares: libpmix 4.2.2
// hands its host a tool's query with the server's own ID, not the
// tool's (pmix_query.c:310), so a server shared by users could not tell
// whose query it answers.
//
// It links libpmix (cgo) and is built with the tag pmix where
// libpmix-dev is installed (make build); without it, it says so.
package main
