package pmi2

import "github.com/gopmi/gopmi/bridge/wire"

func req(key string, k wire.Kind, doc string) wire.AttrSpec {
	return wire.AttrSpec{Key: key, Kind: k, Required: true, Doc: doc}
}

func opt(key string, k wire.Kind, def, doc string) wire.AttrSpec {
	return wire.AttrSpec{Key: key, Kind: k, Default: def, Doc: doc}
}

func family(key, count string, doc string) wire.AttrSpec {
	return wire.AttrSpec{Key: key, Kind: wire.KindString, Required: true, Count: count, Base: 0, Doc: doc}
}

const (
	tStr  = wire.KindString
	tInt  = wire.KindInt
	tBool = wire.KindBool
)

// infoFamily is the infokeycount/infokeyN/infovalN triple of the name
// service and spawn commands.
func infoFamily() []wire.AttrSpec {
	return []wire.AttrSpec{
		opt("infokeycount", tInt, "0", "number of info pairs; Slurm's libpmi2 omits it when it has no info"),
		family("infokey#", "infokeycount", ""),
		family("infoval#", "infokeycount", ""),
	}
}

// Commands is every PMI-2 request gopmi knows, after MPICH's
// src/pmi/maint/pmi-2.0.txt, Slurm's libpmi2 (contribs/pmi2/pmi2_api.c)
// and Slurm's server (ring). Every request may carry thrid=, which the
// reply echoes; every reply carries rc= and, on failure, errmsg=. A
// missing optional attribute means its Default: MPICH's generated client
// omits attributes equal to their default (found=TRUE, wait=FALSE,
// srcid=-1). The bridge serves requests from it: a command it lacks is
// unknown, a required attribute missing is refused, and an absent optional
// one means its Default (wire.CommandSpec.Arg); the transcript tests hold
// real clients to it. Do not modify it at run time.
var Commands = wire.Table{
	{
		Name: "fullinit", Reply: "fullinit-response", Since: "2.0",
		Request: []wire.AttrSpec{
			opt("pmijobid", tStr, "", "PMI_JOBID; Slurm's server requires it, MPICH >= 4.1 never sends it"),
			opt("pmirank", tInt, "", "PMI_RANK (or PMI_ID for MPICH); absent: the connection's bound rank"),
			opt("srcid", tInt, "", "Slurm's libpmi2 sends PMI_ID here instead of pmirank"),
			opt("threaded", tBool, "FALSE", ""),
			opt("authtype", tStr, "", "challenge-sha256 (PMI_PORT clients that are not the job's user): the server answers cmd=auth-response;authinfo=<n>; first"),
			opt("authinfo", tStr, "", "unused by challenge-sha256"),
		},
		Response: []wire.AttrSpec{
			req("pmi-version", tInt, "Slurm's libpmi2 fails without it"),
			req("pmi-subversion", tInt, "Slurm's libpmi2 fails without it"),
			req("rank", tInt, ""),
			req("size", tInt, ""),
			req("appnum", tInt, ""),
			opt("spawner-jobid", tStr, "", "present only in spawned jobs; its presence makes the client report a parent"),
			opt("debugged", tBool, "FALSE", ""),
			opt("pmiverbose", tBool, "FALSE", "both clients accept TRUE/FALSE (MPICH >= 4.1 reads it with atoi)"),
		},
	},
	{
		Name: "auth-response-complete", Reply: "fullinit-response", Since: "2.0",
		Request: []wire.AttrSpec{req("authinfo", tStr, "hex sha256 of the job's secret (PMI_AUTH_SECRET) followed by the server's authinfo")},
		Doc:     "The second half of fullinit's challenge-sha256 handshake, after the server's cmd=auth-response;authinfo=<n>; (the PMI-2 wire protocol draft; no other server implements it).",
	},
	{
		Name: "job-getid", Reply: "job-getid-response", Since: "2.0",
		Response: []wire.AttrSpec{req("jobid", tStr, "")},
	},
	{
		Name: "job-connect", Reply: "job-connect-response", Since: "2.0",
		Request:  []wire.AttrSpec{req("jobid", tStr, "job to connect to")},
		Response: []wire.AttrSpec{req("kvscopy", tBool, "Slurm's libpmi2 requires TRUE/FALSE and fails on TRUE (not implemented)")},
		Doc:      "Slurm never answers it and Hydra aborts the job; gopmi answers.",
	},
	{
		Name: "job-disconnect", Reply: "job-disconnect-response", Since: "2.0",
		Request: []wire.AttrSpec{req("jobid", tStr, "")},
	},
	{
		Name: "kvs-put", Reply: "kvs-put-response", Since: "2.0",
		Request: []wire.AttrSpec{req("key", tStr, ""), req("value", tStr, "")},
	},
	{
		Name: "kvs-get", Reply: "kvs-get-response", Since: "2.0",
		Request: []wire.AttrSpec{
			opt("jobid", tStr, "", "own job when absent"),
			opt("srcid", tInt, "-1", "rank that put the key; -1 for any"),
			req("key", tStr, ""),
		},
		Response: []wire.AttrSpec{
			req("found", tBool, "Slurm's libpmi2 requires it"),
			opt("value", tStr, "", "present when found"),
		},
	},
	{
		Name: "kvs-fence", Reply: "kvs-fence-response", Since: "2.0",
	},
	{
		Name: "info-putnodeattr", Reply: "info-putnodeattr-response", Since: "2.0",
		Request: []wire.AttrSpec{req("key", tStr, ""), req("value", tStr, "")},
	},
	{
		Name: "info-getnodeattr", Reply: "info-getnodeattr-response", Since: "2.0",
		Request: []wire.AttrSpec{
			req("key", tStr, ""),
			opt("wait", tBool, "FALSE", "TRUE: answer when some task of the node puts the key"),
		},
		Response: []wire.AttrSpec{req("found", tBool, ""), opt("value", tStr, "", "present when found")},
	},
	{
		Name: "info-getjobattr", Reply: "info-getjobattr-response", Since: "2.0",
		Request: []wire.AttrSpec{
			req("key", tStr, "PMI_process_mapping, universeSize, PMI_hwloc_xmlfile, ..."),
			opt("kvsname", tStr, "", "listed by MPICH's table, sent by no client"),
		},
		Response: []wire.AttrSpec{req("found", tBool, ""), opt("value", tStr, "", "present when found")},
	},
	{
		Name: "name-publish", Reply: "name-publish-response", Since: "2.0",
		Request: append([]wire.AttrSpec{req("name", tStr, "service"), req("port", tStr, "")}, infoFamily()...),
	},
	{
		Name: "name-unpublish", Reply: "name-unpublish-response", Since: "2.0",
		Request: append([]wire.AttrSpec{req("name", tStr, "")}, infoFamily()...),
	},
	{
		Name: "name-lookup", Reply: "name-lookup-response", Since: "2.0",
		Request: append([]wire.AttrSpec{req("name", tStr, "")}, infoFamily()...),
		Response: []wire.AttrSpec{
			opt("port", tStr, "", "MPICH reads port="),
			opt("value", tStr, "", "Slurm's libpmi2 reads value=; send both"),
			opt("found", tBool, "", "Hydra adds found=TRUE"),
		},
	},
	{
		Name: "spawn", Reply: "spawn-response", Since: "2.0",
		Request: []wire.AttrSpec{
			req("ncmds", tInt, "number of subcmd sections"),
			opt("preputcount", tInt, "0", ""),
			family("ppkey#", "preputcount", ""),
			family("ppval#", "preputcount", ""),
		},
		Section: "subcmd",
		SectionAttrs: append([]wire.AttrSpec{
			req("subcmd", tStr, "program; opens the section"),
			req("maxprocs", tInt, ""),
			opt("argc", tInt, "0", ""),
			family("argv#", "argc", "arguments after the program name, 0-based"),
		}, infoFamily()...),
		Response: []wire.AttrSpec{
			opt("jobid", tStr, "", "the new job; Slurm's libpmi2 requires it"),
			opt("errcodes", tStr, "", "comma-separated per-process codes; absent means all 0"),
			opt("nerrs", tInt, "", "Hydra"),
		},
		Doc: "One command; each executable's attributes follow its subcmd= (see ParseSpawn).",
	},
	{
		Name: "abort", Since: "2.0",
		Request: []wire.AttrSpec{
			opt("isworld", tBool, "TRUE", "Slurm's libpmi2; MPICH >= 4.1 omits it, which gopmi reads as a world abort"),
			opt("msg", tStr, "", "Slurm's libpmi2"),
			opt("exitcode", tInt, "1", "MPICH >= 4.1"),
			opt("message", tStr, "", "MPICH >= 4.1"),
		},
		Doc: "No reply: the client exits after writing it.",
	},
	{
		Name: "finalize", Reply: "finalize-response", Since: "2.0",
	},
	{
		Name: "ring", Reply: "ring-response", Since: "2.0",
		Request: []wire.AttrSpec{
			req("ring-count", tInt, "the caller's contribution to the scan (usually 1)"),
			req("ring-left", tStr, "value passed to the left neighbour"),
			req("ring-right", tStr, "value passed to the right neighbour"),
		},
		Response: []wire.AttrSpec{
			req("ring-count", tInt, "exclusive prefix sum of ring-count over lower ranks (the caller's ring rank)"),
			req("ring-left", tStr, "ring-right of the left neighbour (rank-1, wrapping)"),
			req("ring-right", tStr, "ring-left of the right neighbour (rank+1, wrapping)"),
		},
		Doc: "Slurm/MVAPICH PMIX_Ring extension.",
	},
}

// Lookup returns the spec of a request command.
func Lookup(cmd string) (*wire.CommandSpec, bool) { return Commands.Lookup(cmd) }

// ReplyName names the reply to cmd: cmd + "-response", for every command
// including unknown ones (both client libraries compare the reply name
// with the request's plus "-response").
func ReplyName(cmd string) string { return cmd + "-response" }
