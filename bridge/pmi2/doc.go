// Package pmi2 is the PMI-2 wire codec: the 6-byte length prefix framing,
// parsing and encoding of cmd=<name>;key=value;... bodies (with the ";;"
// escape), the command table, and the spawn decoder for subcmd= sections.
//
// Data flow: a PMI-2 connection opens with the PMI-1 line cmd=init
// pmi_version=2 pmi_subversion=0 (package pmi1). After answering it the
// bridge cuts the connection's remaining bytes with a Splitter (one per
// connection), Parses each body into a wire.Message and Appends replies.
// Clients and tests use Decoder and Encoder.
//
// Real clients disagree with the written spec and with each other; the
// codec accepts both length alignments, MPICH 4.0's six junk bytes inside
// the declared length, and Slurm's escape. See Splitter, Parse and Append
// for each choice. The package is pure: standard library and bridge/wire
// only, no logging.
package pmi2
