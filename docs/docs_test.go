// Package docs holds gopmi's documentation by reader; its test keeps the
// documents true to the code: every relative link and anchor resolves,
// and the flag and mpi.conf key lists name what the binaries and the
// Slurm plugin take.
package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// documents are the README and every document under docs/.
func documents(t *testing.T) []string {
	t.Helper()
	docs := []string{"../README.md"}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	fenceRE   = regexp.MustCompile("(?ms)^```.*?^```")
)

// slug is the anchor GitHub gives a heading.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(string(b), ""), -1) {
		out = append(out, slug(m[1]))
	}
	return out
}

// Every relative link of every document names a file that is there, and
// an anchor in a document names one of its headings.
func TestLinksResolve(t *testing.T) {
	for _, doc := range documents(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: %v", doc, target, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !slices.Contains(anchors(t, path), anchor) {
				t.Errorf("%s: link %s: no heading of %s has that anchor (%v)", doc, target, path, anchors(t, path))
			}
		}
	}
}

// gopmiHelp builds gopmi and returns what `gopmi ARGS -h` prints.
func gopmiHelp(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gopmi")
	if out, err := exec.Command("go", "build", "-o", bin, "../hostrm/cmd/gopmi").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, _ := exec.Command(bin, append(args, "-h")...).CombinedOutput()
	return string(out)
}

var flagRE = regexp.MustCompile(`(?m)^  (-[a-z][a-z-]*)`)

// The flags each document lists are the flags the command takes, every
// one of them.
func TestFlagListsHeldToTheCode(t *testing.T) {
	for _, c := range []struct {
		doc  string
		args []string
	}{
		{"user/run.md", []string{"run"}},
		{"admin/daemon.md", []string{"daemon"}},
	} {
		b, err := os.ReadFile(c.doc)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(b)
		for _, m := range flagRE.FindAllStringSubmatch(gopmiHelp(t, c.args...), -1) {
			if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(m[1]) + `[ ,\n]|, ` + regexp.QuoteMeta(m[1]) + ` `).MatchString(doc) {
				t.Errorf("%s does not list gopmi %s's flag %s", c.doc, strings.Join(c.args, " "), m[1])
			}
		}
	}
}

// Every mpi.conf key the Slurm plugin reads is in the administrator's
// document.
func TestMPIConfKeysDocumented(t *testing.T) {
	src, err := os.ReadFile("../contrib/slurm/conf.c")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("admin/slurm.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := regexp.MustCompile(`\{"(Gopmi[A-Za-z]+)", S_P_`).FindAllStringSubmatch(string(src), -1)
	if len(keys) == 0 {
		t.Fatal("no mpi.conf keys found in contrib/slurm/conf.c")
	}
	for _, k := range keys {
		if !strings.Contains(string(doc), "`"+k[1]+"`") {
			t.Errorf("admin/slurm.md does not document mpi.conf's %s", k[1])
		}
	}
}

// The man pages name what the code takes: every command of gopmi(1),
// every flag of gopmi-run(1) and gopmi-daemon(8), every mpi.conf key of
// gopmi-mpi.conf(5); and groff reads each without a warning.
func TestManPages(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("man", name))
		if err != nil {
			t.Fatal(err)
		}
		// roff escapes a dash as \-.
		return strings.ReplaceAll(string(b), `\-`, "-")
	}
	commandRE := regexp.MustCompile(`(?m)^  ([a-z]+)\b`)
	page := read("gopmi.1")
	for _, m := range commandRE.FindAllStringSubmatch(gopmiHelp(t), -1) {
		if !regexp.MustCompile(`(?m)^\.BR? ` + m[1] + `\b`).MatchString(page) {
			t.Errorf("gopmi.1 does not describe the command %s", m[1])
		}
	}
	for _, c := range []struct {
		page string
		args []string
	}{
		{"gopmi-run.1", []string{"run"}},
		{"gopmi-daemon.8", []string{"daemon"}},
	} {
		page := read(c.page)
		for _, m := range flagRE.FindAllStringSubmatch(gopmiHelp(t, c.args...), -1) {
			if !regexp.MustCompile(`(?m)^\.BI? ` + regexp.QuoteMeta(m[1]) + `(\s|$)`).MatchString(page) {
				t.Errorf("%s does not describe gopmi %s's flag %s", c.page, strings.Join(c.args, " "), m[1])
			}
		}
	}
	src, err := os.ReadFile("../contrib/slurm/conf.c")
	if err != nil {
		t.Fatal(err)
	}
	page = read("gopmi-mpi.conf.5")
	for _, k := range regexp.MustCompile(`\{"(Gopmi[A-Za-z]+)", S_P_`).FindAllStringSubmatch(string(src), -1) {
		if !strings.Contains(page, ".BI "+k[1]+"=") {
			t.Errorf("gopmi-mpi.conf.5 does not describe the key %s", k[1])
		}
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Logf("groff is not installed: the pages' roff is not checked")
		return
	}
	pages, _ := filepath.Glob("man/*.[158]")
	for _, p := range pages {
		out, err := exec.Command(groff, "-man", "-ww", "-z", p).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff -man -ww %s: %v\n%s", p, err, out)
		}
	}
}
