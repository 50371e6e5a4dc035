package launcher

import (
	"debug/elf"
	"fmt"
	"slices"
	"sync"
)

// Open MPI speaks PMIx only, and gopmi serves PMI-1 and PMI-2. Left to
// itself, an Open MPI program started by gopmi run finds no launcher it
// knows, declares itself a singleton, and each task runs as a job of one
// that exits 0: a silent wrong answer. Open MPI 4.1 takes a direct launch
// from its launcher-detection variables; JSM_JSRUN_PORT (IBM's jsrun) is
// read by nothing else, so every task gets it: an MPICH or non-MPI
// program does not notice, and an Open MPI program's MPI_Init then looks
// for its PMIx server, finds none, and fails ("OPAL ERROR: Unreachable"),
// which gopmi explains in one line of its own.
const openMPIDirectLaunch = "JSM_JSRUN_PORT=1"

// openMPILib is Open MPI's library soname (4.x); MPICH's is libmpich.so.12.
const openMPILib = "libmpi.so.40"

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
		hint = fmt.Sprintf("gopmi: %s is built with Open MPI (it links %s), which speaks PMIx only: gopmi serves PMI-1 and PMI-2 (MPICH, Intel MPI, MVAPICH, Slurm's libpmi2). Run it with mpirun.openmpi, or build it with mpicc.mpich",
			path, openMPILib)
	}
	h.seen[path] = hint
	return hint
}

// linksOpenMPI reports whether the ELF executable at path needs Open
// MPI's library.
func linksOpenMPI(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false // a script, or not readable: nothing to tell
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return false
	}
	// Only Open MPI's soname: Intel MPI's and some MPICH builds' library
	// is libmpi.so.12.
	return slices.Contains(libs, openMPILib)
}
