// Command gencorpus writes the fuzz seed corpora of bridge/pmi1 and
// bridge/pmi2 from the wire captures in bridge/testdata/transcripts
// plus hand-written edge cases. Run it from the module root after the
// captures change:
//
//	go run ./bridge/pmi1/testdata/gencorpus
//
// It only adds files; fuzz finds already in testdata/fuzz stay.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

var truncRe = regexp.MustCompile(`\.\.\.\((\d+) bytes\)$`)

type line struct {
	client bool
	data   []byte
	cut    bool
}

type session []line

func decode(s string) ([]byte, bool) {
	cut := false
	if m := truncRe.FindStringSubmatch(s); m != nil {
		cut = true
		s = s[:len(s)-len(m[0])]
	}
	var b []byte
	for _, r := range s {
		switch {
		case r == '@':
			b = append(b, 0)
		case r < 0x100:
			b = append(b, byte(r))
		default:
			b = append(b, string(r)...)
		}
	}
	return bytes.ReplaceAll(b, []byte(`\n`), []byte("\n")), cut
}

func readSessions(dir string) []session {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		log.Fatalf("no captures in %s", dir)
	}
	var out []session
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "x") {
			continue // written by hand for the bridge, not a capture
		}
		fh, err := os.Open(f)
		if err != nil {
			log.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			t := sc.Text()
			switch {
			case strings.HasPrefix(t, "== "):
				out = append(out, nil)
			case strings.HasPrefix(t, "C> "), strings.HasPrefix(t, "S< "):
				d, cut := decode(t[3:])
				out[len(out)-1] = append(out[len(out)-1], line{client: t[0] == 'C', data: d, cut: cut})
			}
		}
		fh.Close()
	}
	return out
}

// split returns the PMI-1 and PMI-2 parts of a session.
func split(s session) (v1, v2 session) {
	for i, l := range s {
		if l.client && bytes.HasPrefix(l.data, []byte("cmd=init pmi_version=2")) {
			for j := i + 1; j < len(s); j++ {
				if !s[j].client {
					return s[:j+1], s[j+1:]
				}
			}
		}
	}
	return s, nil
}

type corpus struct {
	dir   string
	count map[string]int
}

// add writes one seed: each value is []byte, string, bool or byte.
func (c *corpus) add(fuzz string, vals ...any) {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
		case string:
			fmt.Fprintf(&b, "string(%s)\n", strconv.Quote(v))
		case bool:
			fmt.Fprintf(&b, "bool(%v)\n", v)
		case byte:
			fmt.Fprintf(&b, "byte(%s)\n", strconv.QuoteRune(rune(v)))
		default:
			log.Fatalf("unsupported seed type %T", v)
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	dir := filepath.Join(c.dir, "testdata", "fuzz", fuzz)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	name := filepath.Join(dir, "seed-"+hex.EncodeToString(sum[:8]))
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	c.count[fuzz]++
}

func stream(s session, client bool) ([]byte, []byte) {
	var all []byte
	var cuts []byte
	for _, l := range s {
		if l.client == client && !l.cut {
			all = append(all, l.data...)
			cuts = append(cuts, byte(len(l.data)%251))
		}
	}
	return all, cuts
}

func main() {
	root := filepath.Join("bridge", "pmi1")
	sessions := readSessions(filepath.Join(root, "..", "testdata", "transcripts"))
	p1 := &corpus{dir: root, count: map[string]int{}}
	p2 := &corpus{dir: filepath.Join("bridge", "pmi2"), count: map[string]int{}}

	for _, s := range sessions {
		v1, v2 := split(s)
		// PMI-1: every line (blocks are joined below), server lines too.
		var blk []byte
		for _, l := range v1 {
			d := l.data
			if bytes.HasPrefix(d, []byte("mcmd=")) || blk != nil {
				blk = append(blk, d...)
				if bytes.HasSuffix(d, []byte("endcmd\n")) {
					p1.add("FuzzParse", bytes.TrimSuffix(blk, []byte("\n")))
					blk = nil
				}
				continue
			}
			for _, fr := range bytes.Split(bytes.TrimSuffix(d, []byte("\n")), []byte("\n")) {
				p1.add("FuzzParse", fr)
			}
		}
		for _, client := range []bool{true, false} {
			if all, cuts := stream(v1, client); len(all) > 0 {
				p1.add("FuzzSplit", all, cuts, byte(0))
				p1.add("FuzzSplit", all, []byte{1}, byte(40))
			}
			if all, cuts := stream(v2, client); len(all) > 0 {
				p2.add("FuzzSplit", all, cuts, byte(0))
				p2.add("FuzzSplit", all, []byte{3}, byte(64))
			}
		}
		// PMI-2: client bodies with their junk; server bodies.
		var pending []byte
		for _, l := range v2 {
			if l.cut {
				pending = nil
				continue
			}
			if l.client {
				if len(l.data) > 6 {
					p2.add("FuzzParse", l.data[6:])
				}
				continue
			}
			if len(l.data) == 6 && !bytes.HasPrefix(l.data, []byte("cmd=")) {
				pending = l.data
				continue
			}
			if pending != nil {
				p2.add("FuzzParse", l.data)
				pending = nil
			}
		}
	}

	for _, e := range []string{
		"", "cmd=", "cmd=x", " cmd=x  k=v ", "cmd=x k", "cmd=x =v", "cmd=x k=v\r\r", "cmd=x msg=a b value=c d",
		"cmd=x msg=a value= value=b", "cmd=abort exitcode=7 message=some text here", "cmd=x\tk=v\tvalue=\t",
		"mcmd=spawn\nendcmd", "mcmd=spawn\r\n a=b c\r\n\r\nendcmd  \r", "mcmd=\nendcmd", "mcmd=spawn\nendcmd\nx=y",
		"mcmd=spawn\nmcmd=spawn\nendcmd=1\nendcmd", "cmd=barrier_in group=0,1,2:77", "cmd=put value=x\x00y",
	} {
		p1.add("FuzzParse", []byte(e))
	}
	for _, e := range []struct {
		data string
		max  byte
	}{
		{"cmd=a\n\n\r\n  \ncmd=b\r\n", 0},
		{strings.Repeat("x", 300) + "\ncmd=ok\n", 64},
		{"mcmd=spawn\n" + strings.Repeat("arg1=y\n", 20) + "endcmd\ncmd=ok\n", 50},
		{"mcmd=spawn\nnprocs=1\n", 0},
		{"cmd=put key=k value=v", 0},
		{"mcmd=\n0", 1},
		{"  mcmd=spawn\nendcmd" + strings.Repeat(" ", 70) + "\nendcmd\ncmd=x\n", 0},
	} {
		p1.add("FuzzSplit", []byte(e.data), []byte{1, 2, 3, 5, 8}, e.max)
	}
	for _, e := range [][]any{
		{"put", "key", "a", "value", "b c", false},
		{"get_result", "msg", "not found", "value", "v", false},
		{"abort", "exitcode", "1", "message", "with  spaces ", false},
		{"spawn", "arg1", "x y", "info_val_0", " z", true},
		{"spawn", "execname", "a=b", "preput_val_0", "tag#0$port#1$", true},
	} {
		p1.add("FuzzRoundTrip", e...)
	}

	for _, e := range []string{
		"", ";", "cmd=;", "cmd=x", "cmd=x;;;", "cmd=kvs-put;key=a;;b;value=;;;", "cmd=x;=v;k;a=b;",
		"cmd=kvs-fence;;valu\x00", "cmd=kvs-fence;a=b;cd", "cmd=kvs-fence;\x00\x00\x00\x00\x00;",
		"cmd=finalize;\x00  cmd", "cmd=kvs-get;key=k;\x00-p\xf6\xe8\xc7",
		"cmd=spawn;ncmds=2;subcmd=a;maxprocs=1;argc=1;argv0=x;subcmd=b;maxprocs=2;",
	} {
		p2.add("FuzzParse", []byte(e))
	}
	for _, e := range []struct {
		data string
		max  byte
	}{
		{"14    cmd=kvs-fence;    13cmd=finalize;", 0},
		{"0     14    cmd=kvs-fence;", 0},
		{"200   " + strings.Repeat("z", 200) + "13    cmd=finalize;", 50},
		{"cmd=init pmi_version=2\n", 0},
		{"14    cmd=kv", 0},
		{"1 4   cmd=kvs-fence;", 0},
	} {
		p2.add("FuzzSplit", []byte(e.data), []byte{1, 6, 2, 7}, e.max)
	}
	for _, e := range [][]any{
		{"kvs-put", "key", "a;b", "value", ";;"},
		{"x;", "k;", ";v", "z", ""},
		{"kvs-get-response", "found", "TRUE", "value", "a=b c\x00"},
	} {
		p2.add("FuzzRoundTrip", e...)
	}
	fmt.Printf("pmi1: %v\npmi2: %v\n", p1.count, p2.count)
}
