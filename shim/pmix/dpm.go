//go:build pmix

package pmix

// Connect and spawn: processes of other jobs, joined or started.

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"context"
	"time"
	"unsafe"

	"github.com/gopmi/gopmi/bridge/policy"
	"github.com/gopmi/gopmi/plugin"
)

// goConnect is PMIx_Connect (connect 1) and PMIx_Disconnect (0) of procs:
// the backend records the jobs as connected or not. Every member's
// server calls it; the backend's Connect is no barrier, and need not be:
// what a member reads of the others next (their data, by direct modex)
// waits for them in the backend.
//
//export goConnect
func goConnect(procs *C.pmix_proc_t, nprocs C.size_t, timeout C.int, connect C.int, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	ps := procsOf(procs, nprocs)
	d := s.opts.FenceTimeout
	if timeout > 0 {
		d = time.Duration(timeout) * time.Second
	}
	what := "disconnect"
	if connect != 0 {
		what = "connect"
	}
	if ns := nspaces(ps); len(ns) == 1 {
		// Processes of one job among themselves (Open MPI's
		// MPI_Comm_accept/connect and MPI_Comm_join within a job): no
		// jobs to connect, their data is the job's already, and PMIx's
		// connect and disconnect are collectives of the processes
		// named: a fence of theirs, which ends once every node's
		// participants arrived.
		return s.opCall(what, s.requestor(), cbfunc, cbdata, func(ctx context.Context) error {
			req := s.fence(ps)
			req.ID = what + ":" + req.ID
			req.Timeout = d
			_, err := s.be.Fence(ctx, req)
			return err
		})
	}
	return s.opCall(what, s.requestor(), cbfunc, cbdata, func(ctx context.Context) error {
		if connect != 0 {
			if err := s.registerOthers(ctx, ps); err != nil {
				return err
			}
			if err := s.publishModex(ctx, ps, d); err != nil {
				return err
			}
			_, err := s.be.Connect(ctx, &plugin.ConnectRequest{Procs: ps, Timeout: d})
			return err
		}
		return s.be.Disconnect(ctx, &plugin.DisconnectRequest{Procs: ps, Timeout: d})
	})
}

// goSpawn starts a job (PMIx_Spawn, MPI_Comm_spawn) through the backend.
// The apps are libpmix's; their info and the job's come flattened (idx:
// the app, -1 the job). Open MPI passes the environment its children
// need in each app's env (OMPI_PARENT_PORT, its MCA settings): it goes to
// the app's tasks; a working directory (pmix.wdir) is the app's Cwd.
//
//export goSpawn
func goSpawn(ns *C.char, rank C.uint32_t, apps *C.pmix_app_t, napps C.size_t, keys, vals **C.char, idx *C.int, n C.size_t,
	cbfunc C.pmix_spawn_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := &plugin.SpawnRequest{Requestor: procOf(ns, rank), Timeout: s.opts.FenceTimeout}
	if err := s.guard("spawn"); err != nil {
		return rcOf(err)
	}
	cmds := make([]policy.Command, 0, int(napps))
	for _, a := range unsafe.Slice(apps, int(napps)) {
		c := policy.Command{Cmd: C.GoString(a.cmd), MaxProcs: int(a.maxprocs), Cwd: C.GoString(a.cwd), Env: goStrings(a.env)}
		// argv[0] is the command.
		if argv := goStrings(a.argv); len(argv) > 1 {
			c.Args = argv[1:]
		}
		cmds = append(cmds, c)
	}
	ks, vs, is := unsafe.Slice(keys, int(n)), unsafe.Slice(vals, int(n)), unsafe.Slice(idx, int(n))
	for i := range ks {
		in := plugin.Info{Key: C.GoString(ks[i]), Value: C.GoString(vs[i])}
		switch {
		case is[i] >= 0 && int(is[i]) < len(cmds):
			cmds[is[i]].Info = append(cmds[is[i]].Info, in)
		case !policy.Hint(in.Key):
			req.JobInfo = append(req.JobInfo, in)
		}
	}
	for _, c := range cmds {
		req.Apps = append(req.Apps, policy.SpawnApp(c))
	}
	if err := policy.CheckSpawn(req.Apps); err != nil {
		s.log.Warn().Err(err).Str("proc", req.Requestor.String()).Msg("pmix: spawn")
		return C.PMIX_ERR_BAD_PARAM
	}
	ok := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, req.Timeout+5*time.Second)
		defer cancel()
		resp, err := s.be.Spawn(ctx, req)
		if err == nil {
			// libpmix learns of the new job from the answer, and a
			// connect with it would wait for its registration.
			err = s.registerOthers(ctx, []plugin.Proc{{Nspace: resp.Nspace, Rank: plugin.RankWildcard}})
			if err != nil {
				// The spawn fails: its job must not live on, its
				// children waiting for parents that gave up.
				child := plugin.Proc{Nspace: resp.Nspace, Rank: plugin.RankWildcard}
				actx, cancel := s.newsContext()
				aerr := s.be.Abort(actx, &plugin.AbortRequest{Proc: req.Requestor, Status: 1,
					Message: "its spawn failed: " + err.Error(), Targets: []plugin.Proc{child}})
				cancel()
				if aerr != nil {
					s.log.Warn().Err(aerr).Str("job", resp.Nspace).Msg("pmix: end the job of a failed spawn")
				}
			}
		}
		if err != nil {
			s.log.Warn().Err(err).Str("proc", req.Requestor.String()).Msg("pmix: spawn")
			C.gopmi_spawn_done(cbfunc, rcOf(err), nil, cbdata)
			return
		}
		cns := C.CString(resp.Nspace)
		defer C.free(unsafe.Pointer(cns))
		C.gopmi_spawn_done(cbfunc, C.PMIX_SUCCESS, cns, cbdata)
	})
	if !ok {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return C.PMIX_SUCCESS
}
