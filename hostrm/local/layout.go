package local

import (
	"strconv"

	"github.com/gopmi/gopmi/plugin"
)

// AppSpec is one executable of a job as the launcher starts it.
type AppSpec struct {
	// Path is the executable, already resolved (absolute, or relative to
	// Dir, or a name the launcher looks up on PATH).
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Env holds KEY=VALUE entries added to the tasks' environment.
	Env []string
	// Dir is the tasks' working directory; empty means the launcher's.
	Dir string
	// Procs is the number of tasks (ranks) of this app.
	Procs int32
}

// JobSpec is a job the launcher starts: its layout and how to run it.
type JobSpec struct {
	// Job is the layout every shim of the job receives.
	Job plugin.Job
	// Apps are the executables, in rank order; Apps[i] is appnum i.
	Apps []AppSpec
	// Preput entries are in the job's KVS before any task starts.
	Preput []plugin.Info
	// Spawned is set for jobs started by Spawn (tasks get PMI_SPAWNED=1).
	Spawned bool
}

// Layout places the ranks of apps on simulated nodes: block distribution,
// ppn ranks per node (ppn <= 0 puts every rank on one node). One node is
// named hostname; several are hostname-0, hostname-1, ...
func Layout(nspace string, apps []AppSpec, ppn int, hostname string, universeSize int32) plugin.Job {
	var size int32
	job := plugin.Job{Nspace: nspace}
	for _, a := range apps {
		job.Apps = append(job.Apps, plugin.App{FirstRank: size, Size: a.Procs, Cmd: a.Path})
		size += a.Procs
	}
	job.Size = size
	job.UniverseSize = max(universeSize, size)
	per := int32(ppn)
	if per <= 0 || per > size {
		per = size
	}
	nnodes := int32(1)
	if per > 0 {
		nnodes = (size + per - 1) / per
	}
	for i := range nnodes {
		n := plugin.Node{ID: i, Name: hostname}
		if nnodes > 1 {
			n.Name = hostname + "-" + strconv.Itoa(int(i))
		}
		for r := i * per; r < min(size, (i+1)*per); r++ {
			n.Ranks = append(n.Ranks, r)
		}
		job.Nodes = append(job.Nodes, n)
	}
	return job
}
