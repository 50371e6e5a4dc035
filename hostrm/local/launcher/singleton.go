package launcher

import (
	"net"
	"sync"
	"time"

	"github.com/gopmi/gopmi/hostrm/internal/procstat"
	"github.com/gopmi/gopmi/plugin"
)

// Singleton is a rank that is already running: an MPICH program started
// without a process manager, which ran "mpiexec -pmi_args PORT IFACE KEY
// PID" when it needed one (MPICH's singleton init). The run's first job is
// this one rank. Conn is the connection to it, on which the process
// manager's "cmd=singinit" went first; the singleton's answer is the first
// request the job's server reads. Pid is the singleton, watched for its
// end: it is not the launcher's child.
type Singleton struct {
	Conn net.Conn
	Pid  int

	once   sync.Once
	closed chan struct{}
}

// served is Conn as the job's server gets it: its Close says that the
// singleton's PMI connection ended.
func (s *Singleton) served() net.Conn {
	s.init()
	return &singletonConn{Conn: s.Conn, s: s}
}

func (s *Singleton) init() {
	s.once.Do(func() { s.closed = make(chan struct{}) })
}

type singletonConn struct {
	net.Conn
	s    *Singleton
	once sync.Once
}

func (c *singletonConn) Close() error {
	c.once.Do(func() { close(c.s.closed) })
	return c.Conn.Close()
}

// singletonPoll is how often a singleton's process is looked at.
const singletonPoll = 200 * time.Millisecond

// adoptTask makes the singleton rank p of job rj: a task the launcher did
// not start and cannot wait for. It ends when its PMI connection has
// closed and its process is gone, or when its process is gone; its exit
// status is not known, so it counts as 0 (a rank that closed its
// connection before finalize already failed the job, as any task).
func (l *Launcher) adoptTask(rj *runJob, p plugin.Proc) {
	s := rj.adopt
	s.init()
	first, _ := procstat.Read(s.Pid)
	t := l.taskStarted(rj, p, s.Pid)
	go func() {
		tick := time.NewTicker(singletonPoll)
		defer tick.Stop()
		closed := s.closed
		for gone := false; !gone; {
			select {
			case <-closed:
				// Finalized or not, the singleton has nothing more to
				// ask; its process may live on without MPI.
				closed, gone = nil, true
			case <-tick.C:
				st, ok := procstat.Read(s.Pid)
				gone = !ok || st.Exited() || st.Start != first.Start
			}
		}
		l.taskEnded(rj, t, taskExit{proc: p, how: "(the singleton) ended", ok: true}, "exited(0)")
	}()
}
