//go:build !pmix

package main

import (
	"fmt"
	"os"
)

// Built without the tag pmix (no libpmix), gopmi-pmix only says so: a
// step daemon that starts it learns why its PMIx job cannot run.
func main() {
	fmt.Fprintln(os.Stderr, "gopmi-pmix: built without libpmix: rebuild with `make build` where libpmix-dev is installed (go build -tags pmix)")
	os.Exit(2)
}
