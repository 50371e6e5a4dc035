package pmix

import "strings"

// ForeignVar reports whether an environment variable (its key, or the
// whole "KEY=value") that a process inherited would point a PMIx process
// at another server, or make it take itself for another server's client:
// PMIX_*, but not libpmix's own tuning (PMIX_MCA_*), which is the user's.
// A launcher (gopmi run) and gopmi tools drop these from what they pass on.
func ForeignVar(kv string) bool {
	return strings.HasPrefix(kv, "PMIX_") && !strings.HasPrefix(kv, "PMIX_MCA_")
}
