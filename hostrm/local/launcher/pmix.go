package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/execpath"
	"github.com/gopmi/gopmi/shim/serve"
	"github.com/gopmi/gopmi/shim/sockdir"
)

// Open MPI speaks PMIx only, which gopmi run serves with -pmix (through
// gopmi-pmix, package shim/pmix). Left to itself, an Open MPI program
// started by a launcher it does not know declares itself a singleton, and
// each task runs as a job of one that exits 0: a silent wrong answer.
// Open MPI 4.1 takes a direct launch from its launcher-detection
// variables; JSM_JSRUN_PORT (IBM's jsrun) is read by nothing else, so
// every task gets it: an MPICH or non-MPI program does not notice, a PMIx
// job's tasks take the direct launch, and an Open MPI program run without
// -pmix fails in MPI_Init ("OPAL ERROR: Unreachable"), which gopmi
// explains in one line of its own.
const openMPIDirectLaunch = "JSM_JSRUN_PORT=1"

// hints explains failed tasks whose cause gopmi can tell from their
// program; it reads each program once, and only after a failure, so a
// run that goes well pays nothing for it.
type hints struct {
	mu   sync.Mutex
	seen map[string]string // program path -> hint ("" for none)
}

// pmixProgram returns the line that explains a task of program path
// that failed before it initialized PMI, if path is built with Open MPI;
// else "".
func (h *hints) pmixProgram(path string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hint, ok := h.seen[path]; ok {
		return hint
	}
	if h.seen == nil {
		h.seen = map[string]string{}
	}
	hint := ""
	if linksOpenMPI(path) {
		hint = fmt.Sprintf("gopmi: %s is built with Open MPI (it links %s), which speaks PMIx, and this run serves none (GOPMI_PMIX=0, or -pmi-port): run it without them",
			path, serve.OpenMPILib)
	}
	h.seen[path] = hint
	return hint
}

// linksOpenMPI reports whether the ELF executable at path needs Open
// MPI's library. It is asked of every program gopmi run starts, so it
// reads only the file's head, where a linker puts the dynamic string
// table (in the first loaded segment), and looks for the library's name
// as a string of it: a few microseconds, where parsing the ELF file
// (debug/elf) cost 0.7 ms of a 4 ms run of /bin/true.
func linksOpenMPI(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, elfHead)
	n, _ := io.ReadFull(f, buf)
	buf = buf[:n]
	if !bytes.HasPrefix(buf, []byte("\x7fELF")) {
		return false // a script, or not an executable: nothing to tell
	}
	return bytes.Contains(buf, []byte("\x00"+serve.OpenMPILib+"\x00"))
}

// elfHead is how much of an executable linksOpenMPI reads.
const elfHead = 256 << 10

// startPMIxTasks starts a node's tasks of a PMIx job: base, the
// environment its PMIx server gave with READY (the namespace, the
// server's address), the rank, and the app's own. No PMI variable: a task
// that sees both PMI_* and PMIX_* may pick the wrong one.
func (l *Launcher) startPMIxTasks(rj *runJob, s *nodeStart, base []string) error {
	j := rj.spec.Job
	var face []string
	if s.rn.shim != nil {
		face = s.rn.shim.notify.pmixEnv()
	}
	if len(face) == 0 {
		return fmt.Errorf("job %s node %d: %s said nothing of its tasks' environment", j.Nspace, s.rn.node.ID, PMIxBinary)
	}
	defaults := l.openMPIDefaults(rj, s)
	for _, r := range s.rn.node.Ranks {
		app := l.appOf(rj, r)
		env := append(append(append(append([]string(nil), defaults...), base...), face...), "PMIX_RANK="+strconv.Itoa(int(r)))
		env = append(env, app.Env...)
		cmd := l.taskCmd(rj, r, app, env)
		out, err := l.startTask(cmd, r)
		if err != nil {
			return fmt.Errorf("start rank %d of job %s (%s): %w", r, j.Nspace, app.Path, err)
		}
		t := l.taskStarted(rj, plugin.Proc{Nspace: j.Nspace, Rank: r}, cmd.Process.Pid)
		go l.reapTask(rj, t, cmd, out)
	}
	return nil
}

// openMPIDefaults are the Open MPI settings a node's PMIx tasks get
// (before the environment, which may say otherwise).
func (l *Launcher) openMPIDefaults(rj *runJob, s *nodeStart) []string {
	var defaults []string
	onHost := len(s.rn.node.Ranks)
	if l.cfg.PPN > 0 {
		onHost = int(rj.spec.Job.Size) // simulated nodes share this host's cores
	}
	if onHost > runtime.NumCPU() {
		// More ranks than cores: Open MPI's ranks must yield when they
		// wait, as its own mpirun tells them when it oversubscribes a
		// node; spinning, 64 ranks on 2 cores took 1.2x mpirun's time.
		defaults = append(defaults, "OMPI_MCA_mpi_yield_when_idle=1")
	}
	if l.cfg.PPN > 0 {
		// Simulated nodes share one host: Open MPI's shared-memory
		// transport between ranks it was told are on other nodes
		// crashes (vader). The environment may say otherwise.
		defaults = append(defaults, "OMPI_MCA_btl=self,tcp")
	}
	return defaults
}

// openMPIApps reports whether every program of apps, resolved as Run
// resolves it, is built with Open MPI: a run that mixes MPIs is left to
// PMI, where its Open MPI part fails saying why, rather than turning its
// MPICH part into silent singletons.
func openMPIApps(apps []local.AppSpec, wdir string) bool {
	for _, a := range apps {
		if path, err := execpath.Command(a.Path, wdir, "", os.Getenv("PATH")); err != nil || !linksOpenMPI(path) {
			return false
		}
	}
	return len(apps) > 0
}

// removePMIxDirs removes what a gopmi-pmix of node of job left in TMPDIR
// and in /dev/shm: one killed could not remove its server's directory,
// whose rendezvous files PMIx tools would go on finding, nor its data
// store, which holds memory. The shim has been reaped.
func removePMIxDirs(nspace string, node int32) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("%s%s.%d-*", sockdir.PMIxPrefix, nspace, node)))
	data, _ := filepath.Glob(filepath.Join("/dev/shm", fmt.Sprintf("%s%s.%d-*", sockdir.PMIxDataPrefix, nspace, node)))
	for _, d := range append(dirs, data...) {
		os.RemoveAll(d)
	}
}
