// Package pmi1 is the PMI-1 wire codec: framing, parsing and encoding of
// the line protocol MPICH's simple PMI client speaks (cmd=<name> k=v ...\n
// and mcmd=spawn ... endcmd blocks), plus the command table, the spawn
// block decoder and the PMI 1.2 group barrier syntax.
//
// Data flow: the shim reads bytes from a task's socket and hands them to
// the bridge, which cuts them with a Splitter (one per connection), Parses
// each frame into a wire.Message, decides, and Appends the reply. The same
// codec serves the first line of a PMI-2 connection (cmd=init
// pmi_version=2) before the bridge switches that connection to package
// pmi2. Clients and tests use Decoder and Encoder.
//
// The codec is pure: no I/O of its own beyond the Decoder/Encoder
// wrappers, no logging, standard library and bridge/wire only. What it
// tolerates and why is documented on Splitter and Parse; it follows what
// real clients send (MPICH 4.0/4.1, Flux's client) over the written spec.
package pmi1
