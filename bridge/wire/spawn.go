package wire

// SpawnCmd is one executable of a spawn request.
type SpawnCmd struct {
	// Cmd is the program to run (PMI-1 execname=, PMI-2 subcmd=).
	Cmd string
	// Args are the arguments after the program name, in order (PMI-1
	// arg1.., PMI-2 argv0..).
	Args []string
	// MaxProcs is how many copies to start (PMI-1 nprocs=, PMI-2
	// maxprocs=).
	MaxProcs int
	// Info are the spawn info pairs in wire order (wdir, host, path, ...).
	Info []Arg
}

// Spawn is a spawn request of either protocol version, decoded and
// validated by pmi1.CollectSpawn or pmi2.ParseSpawn.
type Spawn struct {
	Cmds []SpawnCmd
	// Preput are key/value pairs to place in the new job's KVS before its
	// tasks start (PARENT_ROOT_PORT_NAME, ...).
	Preput []Arg
}

// TotalProcs sums MaxProcs over all commands.
func (s *Spawn) TotalProcs() int {
	n := 0
	for _, c := range s.Cmds {
		n += c.MaxProcs
	}
	return n
}
