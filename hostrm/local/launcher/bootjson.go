package launcher

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// bootstrapJSON writes b as protojson in its plain form (JSON names,
// enums by name, durations as "1.5s"), with encoding/json: gopmi links no
// protojson, whose package init alone cost every run 0.1 ms. A shim
// decodes the plain form on its fast path. A string that is not valid
// UTF-8 is an error, as in protojson (encoding/json would change it).
//
// Its tables are written by hand, as the shim's fast decoder's are (why:
// plugin/internal/forwardgen's doc); TestBootstrapJSONWritesEveryField
// sets every field of the message by its descriptor, so a field added to
// the proto and not here fails a test instead of vanishing on the way to
// the shim.
func bootstrapJSON(b *shimv1.Bootstrap) ([]byte, error) {
	var bad string
	str := func(v string) string {
		if bad == "" && !utf8.ValidString(v) {
			bad = v
		}
		return v
	}
	strs := func(vs []string) []string {
		for _, v := range vs {
			str(v)
		}
		return vs
	}
	type kv struct {
		Key   string `json:"key,omitempty"`
		Value string `json:"value,omitempty"`
	}
	kvs := func(in []*shimv1.KeyValue) []kv {
		var out []kv
		for _, p := range in {
			out = append(out, kv{str(p.GetKey()), str(p.GetValue())})
		}
		return out
	}
	type node struct {
		ID    int32   `json:"id,omitempty"`
		Name  string  `json:"name,omitempty"`
		Ranks []int32 `json:"ranks,omitempty"`
		Addr  string  `json:"addr,omitempty"`
	}
	type app struct {
		FirstRank int32   `json:"firstRank,omitempty"`
		Size      int32   `json:"size,omitempty"`
		Cmd       string  `json:"cmd,omitempty"`
		Ranks     []int32 `json:"ranks,omitempty"`
	}
	type job struct {
		Nspace       string `json:"nspace,omitempty"`
		Size         int32  `json:"size,omitempty"`
		UniverseSize int32  `json:"universeSize,omitempty"`
		Nodes        []node `json:"nodes,omitempty"`
		Apps         []app  `json:"apps,omitempty"`
		Parent       string `json:"parent,omitempty"`
		Preput       []kv   `json:"preput,omitempty"`
		Attrs        []kv   `json:"attrs,omitempty"`
	}
	type task struct {
		Rank   int32  `json:"rank,omitempty"`
		FdName string `json:"fdName,omitempty"`
	}
	type backend struct {
		Name        string   `json:"name,omitempty"`
		Path        string   `json:"path,omitempty"`
		Config      string   `json:"config,omitempty"`
		Args        []string `json:"args,omitempty"`
		StartAtOnce bool     `json:"startAtOnce,omitempty"`
	}
	type limits struct {
		KvsnameMax int32 `json:"kvsnameMax,omitempty"`
		KeyMax     int32 `json:"keyMax,omitempty"`
		ValMax     int32 `json:"valMax,omitempty"`
		LineMax    int32 `json:"lineMax,omitempty"`
		// A number, which protojson reads too: the shim's fast
		// decoder takes no int64 written as a string.
		KvsMax int64 `json:"kvsMax,omitempty"`
	}
	type timeouts struct {
		Fence        string `json:"fence,omitempty"`
		Get          string `json:"get,omitempty"`
		Lookup       string `json:"lookup,omitempty"`
		Nodeattr     string `json:"nodeattr,omitempty"`
		Spawn        string `json:"spawn,omitempty"`
		BackendStart string `json:"backendStart,omitempty"`
		Connect      string `json:"connect,omitempty"`
		Shutdown     string `json:"shutdown,omitempty"`
	}
	type bootstrap struct {
		Version    uint32    `json:"version,omitempty"`
		Job        *job      `json:"job,omitempty"`
		NodeID     int32     `json:"nodeId,omitempty"`
		Tasks      []task    `json:"tasks,omitempty"`
		Backend    *backend  `json:"backend,omitempty"`
		Limits     *limits   `json:"limits,omitempty"`
		Timeouts   *timeouts `json:"timeouts,omitempty"`
		FenceMode  string    `json:"fenceMode,omitempty"`
		PmiPortFd  string    `json:"pmiPortFd,omitempty"`
		Rendezvous string    `json:"pmixRendezvousFd,omitempty"`
		LogLevel   string    `json:"logLevel,omitempty"`
		PmiDebug   bool      `json:"pmiDebug,omitempty"`
		Secret     string    `json:"pmiPortSecret,omitempty"`
		PMIx       bool      `json:"pmix,omitempty"`
	}
	out := bootstrap{Version: b.GetVersion(), NodeID: b.GetNodeId(), PmiPortFd: str(b.GetPmiPortFd()),
		LogLevel: str(b.GetLogLevel()), PmiDebug: b.GetPmiDebug(), Secret: str(b.GetPmiPortSecret()), PMIx: b.GetPmix(),
		Rendezvous: str(b.GetPmixRendezvousFd())}
	if m := b.GetFenceMode(); m != shimv1.FenceMode_FENCE_MODE_UNSPECIFIED {
		out.FenceMode = m.String()
	}
	if j := b.GetJob(); j != nil {
		o := &job{Nspace: str(j.GetNspace()), Size: j.GetSize(), UniverseSize: j.GetUniverseSize(), Parent: str(j.GetParent()),
			Preput: kvs(j.GetPreput()), Attrs: kvs(j.GetAttrs())}
		for _, n := range j.GetNodes() {
			o.Nodes = append(o.Nodes, node{n.GetId(), str(n.GetName()), n.GetRanks(), str(n.GetAddr())})
		}
		for _, a := range j.GetApps() {
			o.Apps = append(o.Apps, app{a.GetFirstRank(), a.GetSize(), str(a.GetCmd()), a.GetRanks()})
		}
		out.Job = o
	}
	for _, t := range b.GetTasks() {
		out.Tasks = append(out.Tasks, task{t.GetRank(), str(t.GetFdName())})
	}
	if be := b.GetBackend(); be != nil {
		out.Backend = &backend{str(be.GetName()), str(be.GetPath()), str(be.GetConfig()), strs(be.GetArgs()), be.GetStartAtOnce()}
	}
	if l := b.GetLimits(); l != nil {
		out.Limits = &limits{l.GetKvsnameMax(), l.GetKeyMax(), l.GetValMax(), l.GetLineMax(), l.GetKvsMax()}
	}
	if t := b.GetTimeouts(); t != nil {
		out.Timeouts = &timeouts{durationJSON(t.GetFence()), durationJSON(t.GetGet()), durationJSON(t.GetLookup()),
			durationJSON(t.GetNodeattr()), durationJSON(t.GetSpawn()), durationJSON(t.GetBackendStart()),
			durationJSON(t.GetConnect()), durationJSON(t.GetShutdown())}
	}
	if bad != "" {
		return nil, fmt.Errorf("bootstrap: %q is not valid UTF-8", bad)
	}
	return json.Marshal(out)
}

// durationJSON writes a non-negative duration as protojson does: seconds,
// and nanoseconds when there are any ("1.5s"); "" when d is unset.
func durationJSON(d *durationpb.Duration) string {
	if d == nil {
		return ""
	}
	v := d.AsDuration()
	s := strconv.FormatInt(int64(v/time.Second), 10)
	if ns := int64(v % time.Second); ns != 0 {
		s += "." + strings.TrimRight(strconv.FormatInt(1e9+ns, 10)[1:], "0")
	}
	return s + "s"
}
