package bridge

import (
	"context"
	"fmt"
	"strings"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

// spawnBlock collects PMI-1 "mcmd=spawn" blocks: one per command; only
// the last (spawnssofar == totspawns) is answered. A bad block poisons the
// request: the blocks after it are swallowed and the last one carries the
// error, so the client reads exactly one spawn_result.
func (s *Session) spawnBlock(r *request, m *wire.Message) {
	r.cmd = "spawn"
	b, err := pmi1.ParseSpawnBlock(m)
	if err != nil {
		// Without counters we cannot tell whether more blocks follow:
		// answer now and start afresh.
		if m.Has("totspawns") && m.Value("totspawns") != m.Value("spawnssofar") {
			s.spawnErr = firstErr(s.spawnErr, err)
			r.answered.Store(true)
			return
		}
		s.spawn1, s.spawnErr = nil, nil
		r.fail(wire.RcInvalidArg, fmt.Errorf("spawn: %w", err))
		return
	}
	s.spawn1 = append(s.spawn1, b)
	if !b.Last() {
		r.answered.Store(true)
		return
	}
	blocks, perr := s.spawn1, s.spawnErr
	s.spawn1, s.spawnErr = nil, nil
	if perr != nil {
		r.fail(wire.RcInvalidArg, fmt.Errorf("spawn: %w", perr))
		return
	}
	sp, err := pmi1.CollectSpawn(blocks)
	if err != nil {
		r.fail(wire.RcInvalidArg, fmt.Errorf("spawn: %w", err))
		return
	}
	s.spawn(r, sp)
}

// spawn2 serves a PMI-2 spawn (one command, subcmd= sections).
func (s *Session) spawn2(r *request, m *wire.Message) {
	sp, err := pmi2.ParseSpawn(m)
	if err != nil {
		r.fail(wire.RcInvalidArg, fmt.Errorf("spawn: %w", err))
		return
	}
	s.spawn(r, sp)
}

// spawn hands a parsed request to the backend. wdir becomes the app's
// working directory; every other info key goes to the backend, which
// honours it or refuses the spawn naming it.
func (s *Session) spawn(r *request, sp *wire.Spawn) {
	for i, c := range sp.Cmds {
		if c.MaxProcs < 1 {
			r.fail(wire.RcInvalidArg, fmt.Errorf("spawn: command %d (%s) asks for %d processes; at least 1 is needed", i+1, c.Cmd, c.MaxProcs))
			return
		}
	}
	j := s.j
	req := &plugin.SpawnRequest{
		Requestor: j.proc(s.rank),
		Preput:    toInfo(sp.Preput),
		Timeout:   j.cfg.Timeouts.Spawn,
	}
	for _, c := range sp.Cmds {
		app := plugin.SpawnApp{Cmd: c.Cmd, Argv: c.Args, MaxProcs: int32(c.MaxProcs)}
		for _, kv := range c.Info {
			if strings.EqualFold(kv.Key, "wdir") {
				app.Cwd = kv.Value
				continue
			}
			app.Info = append(app.Info, plugin.Info{Key: kv.Key, Value: kv.Value})
		}
		req.Apps = append(req.Apps, app)
	}
	s.asyncCap(r, plugin.CapSpawn, "spawn", toSpawn, func(ctx context.Context) {
		resp, err := j.be.Spawn(ctx, req)
		if err != nil {
			r.fail(wire.RcFail, inStep("spawn of "+sp.Cmds[0].Cmd, err))
			return
		}
		if r.v == 2 {
			r.ok("jobid", resp.Nspace, "nerrs", "0")
			return
		}
		r.ok("jobid", resp.Nspace)
	})
}
