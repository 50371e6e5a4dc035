package integration

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

// tcpdumpHint says how to get tcpdump, which the privacy test needs.
const tcpdumpHint = "apt-get install -y tcpdump (as root; .ci/run and make deps-test install it)"

// secretLetters is what pmi2_secret makes of a hex token: each digit
// '0'..'9', 'a'..'f' becomes a letter 'g'..'v'. The ranks' values start
// with it; the token on srun's command line does not hold it.
func secretLetters(token string) string {
	b := []byte(token)
	for i, c := range b {
		switch {
		case c >= '0' && c <= '9':
			b[i] = 'g' + (c - '0')
		case c >= 'a' && c <= 'f':
			b[i] = 'g' + 10 + (c - 'a')
		}
	}
	return string(b)
}

func newToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// capture is tcpdump writing every TCP packet on lo to a file.
type capture struct {
	cmd     *exec.Cmd
	file    string
	stderr  bytes.Buffer  // written until scanned is closed
	scanned chan struct{} // closed when tcpdump's stderr ended
	done    chan error
	stopped bool
}

// startCapture starts tcpdump and returns once it listens.
func startCapture(t *testing.T, bin, file string) *capture {
	t.Helper()
	c := &capture{file: file, done: make(chan error, 1), scanned: make(chan struct{})}
	// -Z root: stay root, so that the file can be written where the test
	// wants it; --immediate-mode: each packet handed to tcpdump as it
	// comes (else those in the kernel's last, unfilled block are lost at
	// the stop), -U: and written as it comes. A frame of lo is 64 KiB at
	// most: -s holds one whole, and -B (KiB) makes the kernel's ring
	// hold a thousand of them, so that none is dropped.
	c.cmd = exec.Command(bin, "-i", "lo", "-n", "-s", "66000", "-B", "65536", "--immediate-mode", "-U", "-Z", "root", "-w", file, "tcp")
	pr, pw := io.Pipe()
	c.cmd.Stderr = pw
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start tcpdump: %v", err)
	}
	go func() {
		err := c.cmd.Wait()
		pw.Close()
		c.done <- err
	}()
	listening := make(chan bool, 1)
	go func() {
		defer close(c.scanned)
		sc := bufio.NewScanner(pr)
		seen := false
		for sc.Scan() {
			c.stderr.WriteString(sc.Text() + "\n")
			if !seen && strings.Contains(sc.Text(), "listening on lo") {
				seen = true
				listening <- true
			}
		}
		if !seen {
			listening <- false
		}
	}()
	select {
	case ok := <-listening:
		if !ok {
			<-c.done
			<-c.scanned
			t.Fatalf("tcpdump did not start: %s", c.stderr.String())
		}
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		t.Fatal("tcpdump did not start listening in 20 s")
	}
	t.Cleanup(func() {
		if !c.stopped {
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

var droppedRE = regexp.MustCompile(`(\d+) packets dropped by kernel`)

// stop ends tcpdump once it has written what it captured, and fails t
// if the kernel dropped packets (the capture would prove nothing).
func (c *capture) stop(t *testing.T) {
	t.Helper()
	// Packets of the last writes reach tcpdump within a moment.
	time.Sleep(200 * time.Millisecond)
	c.stopped = true
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		t.Fatal("tcpdump did not stop in 20 s")
	}
	<-c.scanned
	if m := droppedRE.FindStringSubmatch(c.stderr.String()); m == nil || m[1] != "0" {
		t.Fatalf("tcpdump dropped packets, or did not say: %s", c.stderr.String())
	}
}

// streams reads a pcap file of Ethernet (lo) frames and returns each TCP
// direction's payload in sequence order ("src:port>dst:port" → bytes),
// so that a value cut across two segments is still found.
func streams(t *testing.T, file string) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 {
		t.Fatalf("%s: not a pcap file (%d bytes)", file, len(b))
	}
	var order binary.ByteOrder
	switch {
	case bytes.Equal(b[:4], []byte{0xd4, 0xc3, 0xb2, 0xa1}), bytes.Equal(b[:4], []byte{0x4d, 0x3c, 0xb2, 0xa1}):
		order = binary.LittleEndian
	case bytes.Equal(b[:4], []byte{0xa1, 0xb2, 0xc3, 0xd4}), bytes.Equal(b[:4], []byte{0xa1, 0xb2, 0x3c, 0x4d}):
		order = binary.BigEndian
	default:
		t.Fatalf("%s: not a pcap file (magic %x)", file, b[:4])
	}
	if lt := order.Uint32(b[20:24]); lt != 1 {
		t.Fatalf("%s: link type %d, want Ethernet (1) as Linux's lo has", file, lt)
	}
	out := map[string][]byte{}
	next := map[string]uint32{} // the sequence number after what is kept
	for p := b[24:]; len(p) >= 16; {
		n := int(order.Uint32(p[8:12]))
		if len(p) < 16+n {
			break
		}
		frame := p[16 : 16+n]
		p = p[16+n:]
		if len(frame) < 14 {
			continue
		}
		var src, dst net.IP
		var seg []byte
		switch binary.BigEndian.Uint16(frame[12:14]) {
		case 0x0800:
			ip := frame[14:]
			if len(ip) < 20 || ip[9] != 6 {
				continue
			}
			ihl, total := int(ip[0]&0x0f)*4, int(binary.BigEndian.Uint16(ip[2:4]))
			if total > len(ip) || ihl > total {
				continue
			}
			src, dst, seg = net.IP(ip[12:16]), net.IP(ip[16:20]), ip[ihl:total]
		case 0x86dd:
			ip := frame[14:]
			if len(ip) < 40 || ip[6] != 6 {
				continue
			}
			plen := int(binary.BigEndian.Uint16(ip[4:6]))
			if 40+plen > len(ip) {
				continue
			}
			src, dst, seg = net.IP(ip[8:24]), net.IP(ip[24:40]), ip[40:40+plen]
		default:
			continue
		}
		if len(seg) < 20 {
			continue
		}
		off := int(seg[12]>>4) * 4
		if off > len(seg) {
			continue
		}
		data := seg[off:]
		key := fmt.Sprintf("%s:%d>%s:%d", src, binary.BigEndian.Uint16(seg[0:2]), dst, binary.BigEndian.Uint16(seg[2:4]))
		seq := binary.BigEndian.Uint32(seg[4:8])
		if seg[13]&0x02 != 0 { // SYN: the data starts after it
			next[key] = seq + 1
			continue
		}
		if len(data) == 0 {
			continue
		}
		if want, ok := next[key]; ok {
			d := int32(seq - want)
			if d < 0 { // a retransmission: keep only what is new
				if -int(d) >= len(data) {
					continue
				}
				data = data[-d:]
				seq = want
			}
		}
		out[key] = append(out[key], data...)
		next[key] = seq + uint32(len(data))
	}
	return out
}

// tlsClients counts the streams that start with a TLS ClientHello.
func tlsClients(s map[string][]byte) int {
	n := 0
	for _, b := range s {
		if len(b) > 5 && b[0] == 0x16 && b[1] == 0x03 && b[5] == 0x01 {
			n++
		}
	}
	return n
}

// sendPlain writes v on a plain TCP connection over loopback: the
// capture's control, which must see it.
func sendPlain(t *testing.T, v string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- ""
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "control "+v+"\n"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if s := <-got; !strings.Contains(s, v) {
		t.Fatalf("the control connection carried %q", s)
	}
}

// holds reports whether the capture holds v, in a stream or anywhere in
// the file.
func holds(t *testing.T, file string, s map[string][]byte, v string) (where string, ok bool) {
	t.Helper()
	for k, b := range s {
		if bytes.Contains(b, []byte(v)) {
			return k, true
		}
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(v)) {
		return "the raw capture", true
	}
	return "", false
}

// What gopmi carries between a step's processes over TCP (fence data,
// direct modex reads, names) is private: during 2-node steps whose ranks
// put values only they know and read them on the other node, in every
// fence mode and with the fence tree under the coordinator (width 16)
// and as a chain (width 1: node n2's fences go through node n1), a
// capture of every TCP packet on lo never holds the values. The same
// capture holds a value sent on a plain TCP connection during it (so the
// test can fail), and shows gopmi's TLS links (a ClientHello per node's
// link up at least).
func TestSlurmLinksArePrivate(t *testing.T) {
	c := slurm(t)
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Fatalf("the privacy test captures loopback traffic with tcpdump, which is not installed: %s", tcpdumpHint)
	}
	secret := prog(t, clients.PMI2Secret)
	dir := t.TempDir()
	for _, mode := range []string{"collect", "lazy", "modex"} {
		for _, width := range []int{16, 1} {
			t.Run(fmt.Sprintf("%s/width=%d", mode, width), func(t *testing.T) {
				token, control := newToken(t), newToken(t)
				value, controlValue := secretLetters(token), "plain-"+secretLetters(control)
				file := filepath.Join(dir, fmt.Sprintf("%s-%d.pcap", mode, width))
				cp := startCapture(t, tcpdump, file)
				argv := []string{"srun", "--mpi=gopmi", "-N", "2", "-n", "4", secret, token}
				r := runOn(t, c, time.Minute, argv, "GOPMI_FENCE_MODE="+mode, "GOPMI_TREE_WIDTH="+strconv.Itoa(width))
				sendPlain(t, controlValue)
				cp.stop(t)
				if r.ExitCode != 0 || strings.Count(r.Stdout, "ok secret rank=") != 4 {
					t.Fatalf("the step failed:\n%s", slurmFailure(c, r))
				}
				if strings.Contains(r.Stdout+r.Stderr, value) {
					t.Fatalf("the step printed its value: the test proves nothing\n%s", r.Summary())
				}
				s := streams(t, file)
				if where, ok := holds(t, file, s, controlValue); !ok {
					t.Fatalf("the capture missed the plain control connection's value: it would miss the step's too (%d streams)", len(s))
				} else {
					t.Logf("the control's value is in %s", where)
				}
				if where, ok := holds(t, file, s, value); ok {
					t.Fatalf("the ranks' PMI value crossed loopback in clear, in %s", where)
				}
				// A link up per node: both to the coordinator at width
				// 16, n2's to its parent n1 at width 1.
				links := 2
				if n := tlsClients(s); n < links {
					t.Fatalf("%d TLS connections in the capture, want %d at least: were gopmi's links captured?", n, links)
				} else {
					t.Logf("%d streams, %d of them TLS links", len(s), n)
				}
			})
		}
	}
}
