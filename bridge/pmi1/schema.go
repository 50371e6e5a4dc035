package pmi1

import "github.com/gopmi/gopmi/bridge/wire"

func req(key string, k wire.Kind, doc string) wire.AttrSpec {
	return wire.AttrSpec{Key: key, Kind: k, Required: true, Doc: doc}
}

func opt(key string, k wire.Kind, def, doc string) wire.AttrSpec {
	return wire.AttrSpec{Key: key, Kind: k, Default: def, Doc: doc}
}

func family(key, count string, base int, doc string) wire.AttrSpec {
	return wire.AttrSpec{Key: key, Kind: wire.KindString, Required: true, Count: count, Base: base, Doc: doc}
}

func since(a wire.AttrSpec, v string) wire.AttrSpec {
	a.Since = v
	return a
}

const (
	tStr  = wire.KindString
	tInt  = wire.KindInt
	tBool = wire.KindBool
)

// Commands is every PMI-1 request gopmi knows, after MPICH's
// src/pmi/maint/pmi-1.1.txt and pmi-1.2.txt plus the legacy commands of
// MPICH's old simple PMI client and the name service keys Slurm uses.
// Every reply may also carry rc= (missing means 0) and msg= (free text).
// The bridge serves requests from it: a command it lacks is unknown, a
// required attribute missing is refused, and an absent optional one means
// its Default (wire.CommandSpec.Arg); the transcript tests hold real
// clients to it. Do not modify it at run time.
var Commands = wire.Table{
	{
		Name: "init", Reply: "response_to_init", Since: "1.1",
		Request: []wire.AttrSpec{
			req("pmi_version", tInt, "1, or 2 for a PMI-2 client's opening line"),
			req("pmi_subversion", tInt, "MPICH asks for 1 and enables 1.2 features if the server answers 2"),
		},
		Response: []wire.AttrSpec{
			req("pmi_version", tInt, "version the server speaks on this connection"),
			req("pmi_subversion", tInt, "2 offers PMI 1.2 (threaded client, group barriers)"),
		},
		Doc: "Version handshake; the first line of every PMI-1 and PMI-2 connection.",
	},
	{
		Name: "initack", Reply: "initack", Since: "1.1",
		Request: []wire.AttrSpec{req("pmiid", tInt, "the task's PMI_ID")},
		Doc: "PMI_PORT handshake, sent before init. The reply cmd=initack rc=0 is followed by " +
			"cmd=set size=N, cmd=set rank=R and cmd=set debug=D lines in that order (AppendInitack).",
	},
	{
		Name: "get_maxes", Reply: "maxes", Since: "1.1",
		Response: []wire.AttrSpec{
			req("kvsname_max", tInt, "longest kvsname, bytes"),
			req("keylen_max", tInt, "longest key, bytes"),
			req("vallen_max", tInt, "longest value, bytes; MPICH segments longer data"),
		},
	},
	{
		Name: "get_appnum", Reply: "appnum", Since: "1.1",
		Response: []wire.AttrSpec{req("appnum", tInt, "index of the task's executable in the launch (Slurm: -1)")},
	},
	{
		Name: "get_universe_size", Reply: "universe_size", Since: "1.1",
		Response: []wire.AttrSpec{req("size", tInt, "MPI_UNIVERSE_SIZE; -1 means unknown")},
	},
	{
		Name: "get_my_kvsname", Reply: "my_kvsname", Since: "1.1",
		Response: []wire.AttrSpec{req("kvsname", tStr, "the job's KVS name")},
	},
	{
		Name: "put", Reply: "put_result", Since: "1.1",
		Request: []wire.AttrSpec{
			opt("kvsname", tStr, "", "ignored by Slurm; MPICH sends its own kvsname"),
			req("key", tStr, ""),
			req("value", tStr, "rest of the line"),
		},
	},
	{
		Name: "get", Reply: "get_result", Since: "1.1",
		Request: []wire.AttrSpec{
			opt("kvsname", tStr, "", "own job when absent"),
			req("key", tStr, ""),
		},
		Response: []wire.AttrSpec{
			opt("found", tBool, "TRUE", "MPICH omits the default; a miss is rc!=0"),
			opt("value", tStr, "", "present when found; written last"),
		},
	},
	{
		Name: "barrier_in", Reply: "barrier_out", Since: "1.1",
		Request: []wire.AttrSpec{
			since(opt("group", tStr, "", "WORLD:<tag>, NODE:<tag> or <rank>,<rank>,...:<tag> (ParseGroup); absent means WORLD:0"), "1.2"),
		},
		Response: []wire.AttrSpec{
			since(opt("tag", tInt, "", "echo of the group's tag, so a threaded MPICH client can match concurrent group barriers"), "1.2"),
			since(opt("group", tStr, "", "echo of the group string (Hydra 4.1)"), "1.2"),
		},
		Doc: "A group= barrier is only sent to servers that answered init with pmi_subversion=2.",
	},
	{
		Name: "finalize", Reply: "finalize_ack", Since: "1.1",
	},
	{
		Name: "abort", Since: "1.1",
		Request: []wire.AttrSpec{
			opt("exitcode", tInt, "1", "exit status for the job"),
			opt("exit_code", tInt, "", "Flux's spelling of exitcode"),
			opt("message", tStr, "", "MPICH >= 4.1, free text"),
			opt("error_msg", tStr, "", "Flux, free text"),
		},
		Doc: "No reply: the client exits after writing it.",
	},
	{
		Name: "publish_name", Reply: "publish_result", Since: "1.1",
		Request: []wire.AttrSpec{req("service", tStr, ""), req("port", tStr, "")},
		Response: []wire.AttrSpec{
			opt("info", tStr, "", "ok or fail; Slurm sends only this and no rc, so send both"),
		},
	},
	{
		Name: "unpublish_name", Reply: "unpublish_result", Since: "1.1",
		Request:  []wire.AttrSpec{req("service", tStr, "")},
		Response: []wire.AttrSpec{opt("info", tStr, "", "ok or fail (Slurm)")},
	},
	{
		Name: "lookup_name", Reply: "lookup_result", Since: "1.1",
		Request: []wire.AttrSpec{req("service", tStr, "")},
		Response: []wire.AttrSpec{
			opt("port", tStr, "", "the published port; present on success"),
			opt("info", tStr, "", "ok or fail (Slurm)"),
		},
	},
	{
		Name: "spawn", Reply: "spawn_result", Block: true, Since: "1.1",
		Request: []wire.AttrSpec{
			req("nprocs", tInt, "copies of this executable"),
			req("execname", tStr, "program"),
			req("totspawns", tInt, "number of blocks (executables) in the request"),
			req("spawnssofar", tInt, "1-based index of this block; the request is complete when it equals totspawns"),
			opt("argcnt", tInt, "0", "number of arg# lines"),
			family("arg#", "argcnt", 1, "arguments after the program name, 1-based"),
			opt("preput_num", tInt, "0", "number of preput pairs; MPICH 4.0 repeats them in every block, 4.1 sends them in the first only"),
			family("preput_key_#", "preput_num", 0, ""),
			family("preput_val_#", "preput_num", 0, ""),
			opt("info_num", tInt, "0", "number of info pairs"),
			family("info_key_#", "info_num", 0, ""),
			family("info_val_#", "info_num", 0, ""),
		},
		Response: []wire.AttrSpec{
			opt("errcodes", tStr, "", "comma-separated per-process codes; absent means all 0"),
			opt("jobid", tStr, "", "new job's id (Slurm)"),
		},
		Doc: "An mcmd=spawn block per executable, each ending in endcmd; one spawn_result answers the last block (see ParseSpawnBlock, CollectSpawn).",
	},
	{
		Name: "getbyidx", Reply: "getbyidx_results", Since: "legacy",
		Request: []wire.AttrSpec{req("kvsname", tStr, ""), req("idx", tInt, "")},
		Response: []wire.AttrSpec{
			opt("nextidx", tInt, "", ""),
			opt("key", tStr, "", ""),
			opt("val", tStr, "", ""),
			opt("reason", tStr, "", "no_more_keyvals at the end"),
		},
		Doc: "KVS iteration of MPICH's old simple PMI client: the idx-th key of the space in byte order, then rc=-1 reason=no_more_keyvals. Slurm never answers it, Hydra ends the job.",
	},
	{
		Name: "create_kvs", Reply: "newkvs", Since: "legacy",
		Response: []wire.AttrSpec{req("kvsname", tStr, "")},
		Doc:      "Old simple PMI client: a new key space of the job, addressed by put, get and getbyidx with kvsname=.",
	},
	{
		Name: "destroy_kvs", Reply: "kvs_destroyed", Since: "legacy",
		Request: []wire.AttrSpec{req("kvsname", tStr, "")},
		Doc:     "Old simple PMI client: removes a space made by create_kvs.",
	},
	{
		Name: "singinit", Reply: "singinit_info", Since: "1.1",
		Request: []wire.AttrSpec{
			req("pmi_version", tInt, ""),
			req("pmi_subversion", tInt, ""),
			opt("stdio", tStr, "yes", ""),
			opt("authtype", tStr, "none", ""),
		},
		Response: []wire.AttrSpec{
			req("versionok", tStr, "yes or no"),
			opt("stdio", tStr, "yes", ""),
			req("kvsname", tStr, ""),
		},
		Doc: "Singleton upgrade: the process manager connects to the singleton and sends cmd=singinit first; the client answers with this request.",
	},
}

// Lookup returns the spec of a request command.
func Lookup(cmd string) (*wire.CommandSpec, bool) { return Commands.Lookup(cmd) }

// ReplyName names the reply to cmd. For a command with no reply (abort)
// and for unknown commands it returns cmd + "_result", the pattern of most
// PMI-1 replies: MPICH's client only sends commands in its tables and
// checks the reply name against them, so an unknown command comes from
// some other client, which needs a readable line with rc!=0 rather than a
// particular name.
func ReplyName(cmd string) string {
	if c, ok := Commands.Lookup(cmd); ok && c.Reply != "" {
		return c.Reply
	}
	return cmd + "_result"
}
