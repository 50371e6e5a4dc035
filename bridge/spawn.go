package bridge

import (
	"context"
	"fmt"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/policy"
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

// spawn hands a parsed request to the backend, each command built as the
// PMIx face builds its own (package policy): wdir becomes the app's
// working directory; every other info key goes to the backend, which
// honours it or refuses the spawn naming it.
func (s *Session) spawn(r *request, sp *wire.Spawn) {
	j := s.j
	req := &plugin.SpawnRequest{
		Requestor: j.proc(s.rank),
		Preput:    toInfo(sp.Preput),
		Timeout:   j.cfg.Timeouts.Spawn,
	}
	for _, c := range sp.Cmds {
		req.Apps = append(req.Apps, policy.SpawnApp(policy.Command{Cmd: c.Cmd, Args: c.Args, MaxProcs: c.MaxProcs, Info: toInfo(c.Info)}))
	}
	if err := policy.CheckSpawn(req.Apps); err != nil {
		r.fail(wire.RcInvalidArg, err)
		return
	}
	s.asyncCap(r, plugin.CapSpawn, "spawn", toSpawn, func(ctx context.Context) {
		resp, err := j.be.Spawn(ctx, req)
		if err != nil {
			// MPICH prints only "Error in spawn call": the reason goes
			// to the log too.
			err = inStep("spawn of "+sp.Cmds[0].Cmd, err)
			j.log.Warn().Int32("rank", s.rank).Err(err).Msg("spawn failed")
			r.fail(wire.RcFail, err)
			return
		}
		r.c.spawnOK(r, resp.Nspace)
	})
}
