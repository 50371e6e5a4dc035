package wire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

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

// ErrSpawn marks a spawn request that is incomplete or inconsistent; the
// error text names the key or count at fault. pmi1.ErrSpawn and
// pmi2.ErrSpawn are this error.
var ErrSpawn = errors.New("bad spawn request")

// SpawnFields reads the numbers and the counted, indexed families of one
// part of a spawn request (a PMI-1 mcmd=spawn block, or the global part or
// one subcmd section of a PMI-2 spawn) and notes each key it reads, so
// that Unknown finds the keys no reader asked for. Errors wrap ErrSpawn and
// name the key at fault.
type SpawnFields struct {
	m    *Message
	part string
	used map[string]bool
}

// NewSpawnFields reads m. part names m in the error about a count larger
// than m could hold ("the block"); empty leaves it unnamed.
func NewSpawnFields(m *Message, part string) *SpawnFields {
	return &SpawnFields{m: m, part: part, used: make(map[string]bool)}
}

// Use marks keys read by the caller, so Unknown passes them over.
func (f *SpawnFields) Use(keys ...string) {
	for _, k := range keys {
		f.used[k] = true
	}
}

// Unknown returns the first key no reader asked for, if any.
func (f *SpawnFields) Unknown() (string, bool) {
	for _, a := range f.m.Args {
		if !f.used[a.Key] {
			return a.Key, true
		}
	}
	return "", false
}

// Int reads a required non-negative integer.
func (f *SpawnFields) Int(key string) (int, error) {
	f.used[key] = true
	v, ok := f.m.Get(key)
	if !ok {
		return 0, fmt.Errorf("%w: missing %s", ErrSpawn, key)
	}
	return atoiNonNeg(key, v)
}

func atoiNonNeg(key, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%w: %s=%q is not an integer", ErrSpawn, key, v)
	}
	if n < 0 {
		return 0, fmt.Errorf("%w: %s=%d is negative", ErrSpawn, key, n)
	}
	return n, nil
}

// count reads an optional count (0 when absent) and checks it against the
// number of pairs, so a huge count cannot make us allocate.
func (f *SpawnFields) count(countKey string, per int) (int, error) {
	f.used[countKey] = true
	v, ok := f.m.Get(countKey)
	if !ok {
		return 0, nil
	}
	n, err := atoiNonNeg(countKey, v)
	if err != nil {
		return 0, err
	}
	if n*per > len(f.m.Args) {
		if f.part == "" {
			return 0, fmt.Errorf("%w: %s=%d but only %d pairs", ErrSpawn, countKey, n, len(f.m.Args))
		}
		return 0, fmt.Errorf("%w: %s=%d but %s has only %d pairs", ErrSpawn, countKey, n, f.part, len(f.m.Args))
	}
	return n, nil
}

// List reads prefix<base> .. prefix<base+n-1>, n being the value of
// countKey, and refuses any other prefix<digits> key.
func (f *SpawnFields) List(countKey, prefix string, base int) ([]string, error) {
	n, err := f.count(countKey, 1)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range n {
		k := prefix + strconv.Itoa(base+i)
		v, ok := f.m.Get(k)
		if !ok {
			return nil, fmt.Errorf("%w: %s=%d but %s is missing", ErrSpawn, countKey, n, k)
		}
		out[i] = v
		f.used[k] = true
	}
	return out, f.stray(prefix, countKey, n)
}

// Pairs reads keyPrefix<i>/valPrefix<i> for i from 0 to n-1, n being the
// value of countKey, and refuses any other key or value of the family.
func (f *SpawnFields) Pairs(countKey, keyPrefix, valPrefix string) ([]Arg, error) {
	n, err := f.count(countKey, 2)
	if err != nil {
		return nil, err
	}
	out := make([]Arg, n)
	for i := range n {
		kk, vk := keyPrefix+strconv.Itoa(i), valPrefix+strconv.Itoa(i)
		k, ok := f.m.Get(kk)
		if !ok {
			return nil, fmt.Errorf("%w: %s=%d but %s is missing", ErrSpawn, countKey, n, kk)
		}
		v, ok := f.m.Get(vk)
		if !ok {
			return nil, fmt.Errorf("%w: %s=%d but %s is missing", ErrSpawn, countKey, n, vk)
		}
		out[i] = Arg{Key: k, Value: v}
		f.used[kk], f.used[vk] = true, true
	}
	for _, p := range []string{keyPrefix, valPrefix} {
		if err := f.stray(p, countKey, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// stray refuses a prefix<digits> key beyond what countKey announced.
func (f *SpawnFields) stray(prefix, countKey string, n int) error {
	for _, a := range f.m.Args {
		if f.used[a.Key] {
			continue
		}
		if _, ok := MatchKey(prefix+"#", a.Key); ok {
			return fmt.Errorf("%w: %s is beyond %s=%d", ErrSpawn, a.Key, countKey, n)
		}
	}
	return nil
}
