// Package pmiclient is a small PMI-1 and PMI-2 client built on the gopmi
// codecs, for integration tests and benchmarks that drive gopmi-shim the
// way MPICH and Slurm's libpmi2 do, without an MPI library.
//
// Client speaks PMI-1 and Client2 PMI-2 (opening with the PMI-1 init line
// and fullinit). Both connect from the environment a launcher sets
// (PMI_FD, or PMI_PORT and PMI_ID) with Dial/Dial2, or wrap any net.Conn
// with New/New2. Every call takes a context and sets the connection's
// deadline from it; a reply with rc != 0 is an *Error carrying rc and the
// server's msg=/errmsg=. Do, Send, SendRaw and Recv give raw access for
// protocol tests.
package pmiclient
