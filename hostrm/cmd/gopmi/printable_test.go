package main

import "testing"

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"./app -n 4":                       "./app -n 4",
		"héllo wörld":                      "héllo wörld",
		"ok\n2026-11-29 job.r run: forged": `ok\n2026-11-29 job.r run: forged`,
		"\x1b]0;root\x07\x1b[2J":           `\x1b]0;root\x07\x1b[2J`,
		"a\tb\rc":                          `a\tb\rc`,
		"\u009b31m":                        `\u009b31m`,
		"abc\u202edcba":                    `abc\u202edcba`,
		"bad\xffbyte":                      `bad\xffbyte`,
		`already\nescaped`:                 `already\\nescaped`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
