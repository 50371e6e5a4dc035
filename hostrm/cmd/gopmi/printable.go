package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printable is s as a terminal may show it: what a user of the node put
// in a job's command, name or log (anyone's, when root asks) is shown,
// not obeyed. Control characters (a newline that starts a forged line,
// the escape sequences that move the cursor or retitle the window, C1
// controls), bidirectional overrides that reorder what follows, and bytes
// that are no UTF-8 are written as Go escapes (\n, \x1b, \u202e).
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\\' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}
