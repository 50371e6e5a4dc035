// Command gopmi-pmix is gopmi-shim with the PMIx face (see main.go,
// which builds only with the tag pmix and libpmix's headers).
package main
