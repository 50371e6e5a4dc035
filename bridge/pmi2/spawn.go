package pmi2

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gopmi/gopmi/bridge/wire"
)

// ErrSpawn marks a spawn request that is incomplete or inconsistent; the
// error text names the key or count at fault.
var ErrSpawn = errors.New("bad spawn request")

// ParseSpawn validates a PMI-2 spawn command and decodes it. The pairs
// before the first subcmd= are the global part (ncmds, preputcount,
// ppkeyN/ppvalN, thrid); each subcmd= opens one executable's section
// (subcmd, maxprocs, argc, argvN from 0, infokeycount, infokeyN/infovalN).
//
// Keys repeat across sections by design, so the bridge must not apply its
// generic duplicate check to spawn; duplicates inside one section or in the
// global part are refused here. Errors wrap ErrSpawn and name the key at
// fault: missing keys, non-numbers, negative counts or maxprocs, counts
// that do not match their indexed keys or the number of sections, and
// unknown keys (refused, so a new client feature fails loudly).
func ParseSpawn(m *wire.Message) (*wire.Spawn, error) {
	if m.Cmd != "spawn" {
		return nil, fmt.Errorf("%w: cmd=%s is not spawn", ErrSpawn, m.Cmd)
	}
	global := &wire.Message{Cmd: "spawn"}
	var sections []*wire.Message
	for _, a := range m.Args {
		if a.Key == "subcmd" {
			sections = append(sections, &wire.Message{Cmd: "spawn"})
		}
		if len(sections) == 0 {
			global.Args = append(global.Args, a)
		} else {
			sections[len(sections)-1].Args = append(sections[len(sections)-1].Args, a)
		}
	}
	if k, dup := global.Duplicate(); dup {
		return nil, fmt.Errorf("%w: key %s given twice before the first subcmd", ErrSpawn, k)
	}
	ncmds, err := needInt(global, "ncmds", "")
	if err != nil {
		return nil, err
	}
	if ncmds < 1 {
		return nil, fmt.Errorf("%w: ncmds=%d, want at least 1", ErrSpawn, ncmds)
	}
	if len(sections) != ncmds {
		return nil, fmt.Errorf("%w: ncmds=%d but %d subcmd sections", ErrSpawn, ncmds, len(sections))
	}
	used := map[string]bool{"ncmds": true, "thrid": true}
	s := &wire.Spawn{}
	if s.Preput, err = indexedPairs(global, used, "preputcount", "ppkey", "ppval", ""); err != nil {
		return nil, err
	}
	for _, a := range global.Args {
		if !used[a.Key] {
			return nil, fmt.Errorf("%w: unknown key %s before the first subcmd", ErrSpawn, a.Key)
		}
	}
	for i, sec := range sections {
		where := fmt.Sprintf(" in section %d", i+1)
		if k, dup := sec.Duplicate(); dup {
			return nil, fmt.Errorf("%w: key %s given twice%s", ErrSpawn, k, where)
		}
		var c wire.SpawnCmd
		c.Cmd = sec.Value("subcmd")
		if c.Cmd == "" {
			return nil, fmt.Errorf("%w: empty subcmd%s", ErrSpawn, where)
		}
		if c.MaxProcs, err = needInt(sec, "maxprocs", where); err != nil {
			return nil, err
		}
		used := map[string]bool{"subcmd": true, "maxprocs": true}
		if c.Args, err = indexed(sec, used, "argc", "argv", where); err != nil {
			return nil, err
		}
		if c.Info, err = indexedPairs(sec, used, "infokeycount", "infokey", "infoval", where); err != nil {
			return nil, err
		}
		for _, a := range sec.Args {
			if !used[a.Key] {
				return nil, fmt.Errorf("%w: unknown key %s%s", ErrSpawn, a.Key, where)
			}
		}
		s.Cmds = append(s.Cmds, c)
	}
	return s, nil
}

// SpawnMessage encodes s as the spawn command a client writes, in the
// order MPICH and Slurm's libpmi2 use.
func SpawnMessage(s *wire.Spawn) *wire.Message {
	m := wire.New("spawn")
	m.AddInt("ncmds", len(s.Cmds)).AddInt("preputcount", len(s.Preput))
	for i, p := range s.Preput {
		m.Add("ppkey"+strconv.Itoa(i), p.Key).Add("ppval"+strconv.Itoa(i), p.Value)
	}
	for _, c := range s.Cmds {
		m.Add("subcmd", c.Cmd).AddInt("maxprocs", c.MaxProcs).AddInt("argc", len(c.Args))
		for i, a := range c.Args {
			m.Add("argv"+strconv.Itoa(i), a)
		}
		m.AddInt("infokeycount", len(c.Info))
		for i, p := range c.Info {
			m.Add("infokey"+strconv.Itoa(i), p.Key).Add("infoval"+strconv.Itoa(i), p.Value)
		}
	}
	return m
}

func needInt(m *wire.Message, key, where string) (int, error) {
	v, ok := m.Get(key)
	if !ok {
		return 0, fmt.Errorf("%w: missing %s%s", ErrSpawn, key, where)
	}
	return atoiNonNeg(key, v, where)
}

func atoiNonNeg(key, v, where string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%w: %s=%q is not an integer%s", ErrSpawn, key, v, where)
	}
	if n < 0 {
		return 0, fmt.Errorf("%w: %s=%d is negative%s", ErrSpawn, key, n, where)
	}
	return n, nil
}

func countOf(m *wire.Message, used map[string]bool, countKey string, per int, where string) (int, error) {
	used[countKey] = true
	v, ok := m.Get(countKey)
	if !ok {
		return 0, nil
	}
	n, err := atoiNonNeg(countKey, v, where)
	if err != nil {
		return 0, err
	}
	if n*per > len(m.Args) {
		return 0, fmt.Errorf("%w: %s=%d but only %d pairs%s", ErrSpawn, countKey, n, len(m.Args), where)
	}
	return n, nil
}

func indexed(m *wire.Message, used map[string]bool, countKey, prefix, where string) ([]string, error) {
	n, err := countOf(m, used, countKey, 1, where)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := 0; i < n; i++ {
		k := prefix + strconv.Itoa(i)
		v, ok := m.Get(k)
		if !ok {
			return nil, fmt.Errorf("%w: %s=%d but %s is missing%s", ErrSpawn, countKey, n, k, where)
		}
		out[i] = v
		used[k] = true
	}
	return out, strayIndexed(m, used, prefix, countKey, n, where)
}

func indexedPairs(m *wire.Message, used map[string]bool, countKey, keyPrefix, valPrefix, where string) ([]wire.Arg, error) {
	n, err := countOf(m, used, countKey, 2, where)
	if err != nil {
		return nil, err
	}
	out := make([]wire.Arg, n)
	for i := 0; i < n; i++ {
		kk, vk := keyPrefix+strconv.Itoa(i), valPrefix+strconv.Itoa(i)
		k, ok := m.Get(kk)
		if !ok {
			return nil, fmt.Errorf("%w: %s=%d but %s is missing%s", ErrSpawn, countKey, n, kk, where)
		}
		v, ok := m.Get(vk)
		if !ok {
			return nil, fmt.Errorf("%w: %s=%d but %s is missing%s", ErrSpawn, countKey, n, vk, where)
		}
		out[i] = wire.Arg{Key: k, Value: v}
		used[kk], used[vk] = true, true
	}
	for _, p := range []string{keyPrefix, valPrefix} {
		if err := strayIndexed(m, used, p, countKey, n, where); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func strayIndexed(m *wire.Message, used map[string]bool, prefix, countKey string, n int, where string) error {
	for _, a := range m.Args {
		if used[a.Key] {
			continue
		}
		if _, ok := wire.MatchKey(prefix+"#", a.Key); ok {
			return fmt.Errorf("%w: %s is beyond %s=%d%s", ErrSpawn, a.Key, countKey, n, where)
		}
	}
	return nil
}
