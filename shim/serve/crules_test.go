package serve

import (
	"flag"
	"os"
	"testing"
)

var updateCRules = flag.Bool("update-c-rules", false, "write contrib/slurm/gopmi_rules.h")

const cRulesPath = "../../contrib/slurm/gopmi_rules.h"

// The header of the rules Slurm's mpi/gopmi shares with Go is what CRules
// makes of them: a change to a fence mode or to Open MPI's soname reaches
// the C plugin through `make c-rules`, or this test fails.
func TestCRulesHeader(t *testing.T) {
	if *updateCRules {
		if err := os.WriteFile(cRulesPath, []byte(CRules()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(cRulesPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != CRules() {
		t.Errorf("%s is not what CRules makes: run make c-rules\nwant:\n%s", cRulesPath, CRules())
	}
}
