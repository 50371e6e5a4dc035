package main

// gopmi-slurm check: on a node, whether the installed mpi/gopmi plugin
// matches the slurmd that runs and the gopmi installed beside it.

import (
	"bytes"
	"cmp"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// version is gopmi's release (make sets it).
var version = "dev"

// pluginInfo is what an mpi_gopmi.so says of itself.
type pluginInfo struct {
	slurm  uint32 // plugin_version: the Slurm release it was built for
	gopmi  string // gopmi_version
	bindir string // gopmi_bindir: where it finds gopmi's binaries by default
}

// readPlugin reads a plugin's identity from its exported constants.
func readPlugin(path string) (pluginInfo, error) {
	f, err := elf.Open(path)
	if err != nil {
		return pluginInfo{}, err
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return pluginInfo{}, fmt.Errorf("%s: %w", path, err)
	}
	read := func(name string) ([]byte, error) {
		for _, s := range syms {
			if s.Name != name || s.Section == elf.SHN_UNDEF || int(s.Section) >= len(f.Sections) {
				continue
			}
			sec := f.Sections[s.Section]
			b := make([]byte, s.Size)
			if _, err := sec.ReadAt(b, int64(s.Value-sec.Addr)); err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%s: %s: %w", path, name, err)
			}
			return b, nil
		}
		return nil, fmt.Errorf("%s has no %s: not an mpi/gopmi plugin, or one older than gopmi-slurm check", path, name)
	}
	var p pluginInfo
	b, err := read("plugin_version")
	if err != nil {
		return p, err
	}
	if len(b) != 4 {
		return p, fmt.Errorf("%s: plugin_version is %d bytes, not 4", path, len(b))
	}
	p.slurm = f.ByteOrder.Uint32(b)
	for _, c := range []struct {
		name string
		dst  *string
	}{{"gopmi_version", &p.gopmi}, {"gopmi_bindir", &p.bindir}} {
		b, err := read(c.name)
		if err != nil {
			return p, err
		}
		s, _, _ := bytes.Cut(b, []byte{0})
		*c.dst = string(s)
	}
	return p, nil
}

// slurmRelease is "22.05.8" for SLURM_VERSION_NUMBER n.
func slurmRelease(n uint32) string {
	return fmt.Sprintf("%02d.%02d.%d", n>>16&0xff, n>>8&0xff, n&0xff)
}

// configValue is key's value in scontrol show config's output (the MPI
// plugins' keys included), or "".
func configValue(out, key string) string {
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// check is gopmi-slurm check; it reports each finding and returns 0 when
// the plugin, the slurmd and gopmi go together, 1 when they do not.
func check(args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	plugin := fs.String("plugin", "", "the installed mpi_gopmi.so (default: found in scontrol show config's PluginDir)")
	slurmd := fs.String("slurmd", "slurmd", "the node's slurmd")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	bad := 0
	say := func(ok bool, format string, a ...any) {
		mark := "ok  "
		if !ok {
			mark, bad = "BAD ", bad+1
		}
		fmt.Fprintf(stdout, mark+format+"\n", a...)
	}
	out, err := exec.Command(*slurmd, "-V").Output()
	running := ""
	if f := strings.Fields(string(out)); err == nil && len(f) == 2 {
		running = f[1]
	}
	if running != "" {
		say(true, "slurmd (%s) is Slurm %s", *slurmd, running)
	} else {
		say(false, "slurmd (%s) says no release (%q, %v): is it a working slurmd?", *slurmd, strings.TrimSpace(string(out)), err)
	}
	conf, err := exec.Command("scontrol", "show", "config").Output()
	if err != nil {
		fmt.Fprintf(stdout, "note scontrol show config failed (%v): the plugin is looked for in Slurm's usual directories, and runs gopmi from its own directory\n", err)
	}
	path := *plugin
	if path == "" {
		dirs := configValue(string(conf), "PluginDir")
		for _, d := range append(strings.Split(dirs, ":"), "/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib64/slurm", "/usr/lib/slurm") {
			if d == "" {
				continue
			}
			if _, err := os.Stat(filepath.Join(d, "mpi_gopmi.so")); err == nil {
				path = filepath.Join(d, "mpi_gopmi.so")
				break
			}
		}
	}
	if path == "" {
		say(false, "no mpi_gopmi.so in Slurm's PluginDir (scontrol show config): make install-slurm-plugin")
		return 1
	}
	p, err := readPlugin(path)
	if err != nil {
		say(false, "%v", err)
		return 1
	}
	built := slurmRelease(p.slurm)
	if running == "" || built == running {
		say(true, "%s was built for Slurm %s", path, built)
	} else {
		say(false, "%s was built for Slurm %s but slurmd is %s: Slurm will not load it; rebuild it against this release (make install-slurm-plugin SLURM_PREFIX=... or SLURM_SRC=...)", path, built, running)
	}
	bindir := cmp.Or(configValue(string(conf), "GopmiBinDir"), p.bindir)
	got, err := exec.Command(filepath.Join(bindir, "gopmi-slurm"), "version").Output()
	have := strings.TrimSpace(string(got))
	switch {
	case err != nil:
		say(false, "the plugin runs gopmi from %s, which has no working gopmi-slurm (%v): make install PREFIX=...", bindir, err)
	case have != p.gopmi:
		say(false, "the plugin (gopmi %s) runs gopmi %s from %s: install the plugin and the binaries of one release together", p.gopmi, have, bindir)
	default:
		say(true, "the plugin runs gopmi %s from %s, its own release", have, bindir)
	}
	if bad > 0 {
		return 1
	}
	return 0
}
