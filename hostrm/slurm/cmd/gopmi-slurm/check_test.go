package main

import "testing"

func TestCheckReadsReleasesAndConfig(t *testing.T) {
	for n, want := range map[uint32]string{0x160508: "22.05.8", 0x190b07: "25.11.7", 0x180b07: "24.11.7"} {
		if got := slurmRelease(n); got != want {
			t.Errorf("slurmRelease(%#x) = %s, want %s", n, got, want)
		}
	}
	out := "Configuration data as of 2026-11-29T10:00:00\nPluginDir               = /usr/lib/x86_64-linux-gnu/slurm-wlm:/lab/plugins\n" +
		"\nMPI Plugins Configuration:\nGopmiBinDir = /opt/gopmi/bin\nGopmiTimeout = 0\n"
	if got := configValue(out, "PluginDir"); got != "/usr/lib/x86_64-linux-gnu/slurm-wlm:/lab/plugins" {
		t.Errorf("PluginDir = %q", got)
	}
	if got := configValue(out, "GopmiBinDir"); got != "/opt/gopmi/bin" {
		t.Errorf("GopmiBinDir = %q", got)
	}
	if got := configValue(out, "Gopmi"); got != "" {
		t.Errorf("a key not shown read %q", got)
	}
}
