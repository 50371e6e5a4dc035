package pmi2

import (
	"fmt"
	"strconv"

	"github.com/gopmi/gopmi/bridge/wire"
)

// ErrSpawn marks a spawn request that is incomplete or inconsistent; the
// error text names the key or count at fault. It is wire.ErrSpawn, which
// pmi1 shares.
var ErrSpawn = wire.ErrSpawn

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
	g := wire.NewSpawnFields(global, "")
	ncmds, err := g.Int("ncmds")
	if err != nil {
		return nil, err
	}
	if ncmds < 1 {
		return nil, fmt.Errorf("%w: ncmds=%d, want at least 1", ErrSpawn, ncmds)
	}
	if len(sections) != ncmds {
		return nil, fmt.Errorf("%w: ncmds=%d but %d subcmd sections", ErrSpawn, ncmds, len(sections))
	}
	g.Use("thrid")
	s := &wire.Spawn{}
	if s.Preput, err = g.Pairs("preputcount", "ppkey", "ppval"); err != nil {
		return nil, err
	}
	if k, ok := g.Unknown(); ok {
		return nil, fmt.Errorf("%w: unknown key %s before the first subcmd", ErrSpawn, k)
	}
	for i, sec := range sections {
		c, err := parseSection(sec)
		if err != nil {
			return nil, fmt.Errorf("%w in section %d", err, i+1)
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

// parseSection decodes one subcmd section; the caller says which.
func parseSection(sec *wire.Message) (wire.SpawnCmd, error) {
	var c wire.SpawnCmd
	if k, dup := sec.Duplicate(); dup {
		return c, fmt.Errorf("%w: key %s given twice", ErrSpawn, k)
	}
	c.Cmd = sec.Value("subcmd")
	if c.Cmd == "" {
		return c, fmt.Errorf("%w: empty subcmd", ErrSpawn)
	}
	f := wire.NewSpawnFields(sec, "")
	f.Use("subcmd")
	var err error
	if c.MaxProcs, err = f.Int("maxprocs"); err != nil {
		return c, err
	}
	if c.Args, err = f.List("argc", "argv", 0); err != nil {
		return c, err
	}
	if c.Info, err = f.Pairs("infokeycount", "infokey", "infoval"); err != nil {
		return c, err
	}
	if k, ok := f.Unknown(); ok {
		return c, fmt.Errorf("%w: unknown key %s", ErrSpawn, k)
	}
	return c, nil
}
