package launcher

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// How a task's output reaches gopmi run's own stdout and stderr: through
// a pipe per stream that the launcher reads, a whole line at a time, so
// that ranks' lines never cut into each other (a print of Python's, with
// PYTHONUNBUFFERED=1, is two writes). Bytes pass unchanged, lines are only
// kept together: a line still partial after partialDelay goes as it is
// (a prompt, a progress dot), and so does one longer than maxLine.
const (
	partialDelay = 100 * time.Millisecond
	maxLine      = 64 << 10
	// drainWait bounds how long a task's end waits for its output's end:
	// a process it left behind may hold the pipe open for ever.
	drainWait = time.Second
)

// sink is one of gopmi run's own outputs, which every task's stream of
// that kind shares with gopmi's messages: one write at a time.
type sink struct {
	mu      sync.Mutex
	w       io.Writer
	last    *[]byte // the label of the stream that wrote last; guarded by mu
	midLine bool    // the last write ended inside a line; guarded by mu
}

func (s *sink) Write(p []byte) (int, error) {
	return s.write(p, nil)
}

// write writes p for the stream labelled label (nil: no label, or not a
// task's). With a label, each line begins with it, and a line one stream
// began and another cuts into ends first ("[1] abc" and "[0] abc" stay
// apart); without, p goes unchanged.
func (s *sink) write(p []byte, label *[]byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if label == nil || len(p) == 0 {
		if len(p) > 0 {
			s.last, s.midLine = label, p[len(p)-1] != '\n'
		}
		return s.w.Write(p)
	}
	out := make([]byte, 0, len(p)+len(*label)*(bytes.Count(p, []byte{'\n'})+2))
	if s.midLine && s.last != label {
		out = append(out, '\n')
		s.midLine = false
	}
	for rest := p; len(rest) > 0; {
		if !s.midLine {
			out = append(out, *label...)
		}
		n := bytes.IndexByte(rest, '\n') + 1
		if n == 0 {
			n = len(rest)
		}
		out = append(out, rest[:n]...)
		s.midLine = rest[n-1] != '\n'
		rest = rest[n:]
	}
	s.last = label
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// output is a task's stdout and stderr as the launcher forwards them:
// start the task with the write ends (child), then forward.
type output struct {
	child [2]*os.File // the task's stdout and stderr
	read  [2]*os.File
	done  sync.WaitGroup
	stop  atomic.Bool // drain gave up: the copies end now
}

// newOutput makes the pipes of a task's stdout and stderr.
func newOutput() (*output, error) {
	o := &output{}
	for i := range o.child {
		r, w, err := os.Pipe()
		if err != nil {
			o.closeAll()
			return nil, err
		}
		o.read[i], o.child[i] = r, w
	}
	return o, nil
}

func (o *output) closeAll() {
	for _, f := range append(o.read[:], o.child[:]...) {
		if f != nil {
			f.Close()
		}
	}
}

// forward copies the task's streams to stdout and stderr, each line
// labelled "[rank] " when label is set, and closes the task's ends here
// (the task holds its own): a stream ends when every process that holds
// it has closed it.
func (o *output) forward(stdout, stderr *sink, rank int32, label bool) {
	var prefix *[]byte
	if label {
		p := []byte("[" + strconv.Itoa(int(rank)) + "] ")
		prefix = &p
	}
	for i, dst := range []*sink{stdout, stderr} {
		o.child[i].Close()
		o.child[i] = nil
		o.done.Add(1)
		go func(r *os.File) {
			defer o.done.Done()
			defer r.Close()
			copyLines(dst, r, prefix, &o.stop)
		}(o.read[i])
	}
}

// drain waits until both streams ended, for at most drainWait; then it
// closes them, so that a process the task left behind gets EPIPE rather
// than hold the run.
func (o *output) drain() {
	ended := make(chan struct{})
	go func() {
		o.done.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(drainWait):
		o.stop.Store(true)
		for _, r := range o.read {
			r.SetReadDeadline(time.Now()) // wakes the copy, which sees stop
		}
		<-ended
	}
}

// copyLines copies r to dst in whole lines, labelled with label (none if
// nil): the complete lines of each read go in one write, a partial one
// waits for its end up to partialDelay. It returns at r's end, or once
// stop is set (and r's deadline passed), with what it holds written.
func copyLines(dst *sink, r *os.File, label *[]byte, stop *atomic.Bool) {
	buf := make([]byte, 0, 4096)
	emit := func(p []byte) { dst.write(p, label) }
	waiting := false // a read deadline is set for the partial line in buf
	fresh := false   // buf's partial line began with the last read
	for {
		// The deadline first, then stop: drain sets stop before it sets
		// the deadline that wakes this read.
		switch {
		case len(buf) > 0 && (!waiting || fresh):
			r.SetReadDeadline(time.Now().Add(partialDelay))
			waiting = true
		case len(buf) == 0 && waiting:
			r.SetReadDeadline(time.Time{})
			waiting = false
		}
		if stop.Load() {
			break
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		fresh = false
		if end := bytes.LastIndexByte(buf[len(buf)-n:], '\n') + 1; end > 0 {
			end += len(buf) - n
			emit(buf[:end])
			buf = buf[:copy(buf, buf[end:])]
			fresh = true
		}
		if len(buf) >= maxLine {
			emit(buf)
			buf = buf[:0]
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// The partial line waited long enough (or drain gave up).
			if len(buf) > 0 {
				emit(buf)
				buf = buf[:0]
			}
			continue
		}
		if err != nil {
			break
		}
	}
	if len(buf) > 0 {
		emit(buf)
	}
}
