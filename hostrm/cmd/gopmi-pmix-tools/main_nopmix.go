//go:build !pmix

package main

import (
	"fmt"
	"os"
)

// Built without the tag pmix (no libpmix), gopmi-pmix-tools only says so.
func main() {
	fmt.Fprintln(os.Stderr, "gopmi tools: built without libpmix: rebuild with `make build` where libpmix-dev is installed (go build -tags pmix)")
	os.Exit(2)
}
