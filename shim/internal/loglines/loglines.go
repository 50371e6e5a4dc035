// Package loglines bounds how many lines of one kind a server logs a
// second: a peer that is refused a thousand times a second costs a few
// lines, and the rest are counted, said with the next line logged or in a
// summary.
package loglines

import "time"

// Budget is a budget of lines a second; the zero value with PerSecond set
// is ready. It is not safe for concurrent use: its owner's lock guards it.
type Budget struct {
	PerSecond int

	since time.Time // when the current second began
	lines int       // lines taken in it
	quiet int       // lines refused since the last one taken
}

// Take reports whether a line may be logged at now, and how many were
// refused since the last one that was (counted again from zero). first
// says a line refused now is the first since then: a summary of them may
// be due (Quiet, a second later).
func (b *Budget) Take(now time.Time) (ok bool, quiet int, first bool) {
	if now.Sub(b.since) >= time.Second {
		b.since, b.lines = now, 0
	}
	if b.lines >= b.PerSecond {
		b.quiet++
		return false, 0, b.quiet == 1
	}
	b.lines++
	quiet, b.quiet = b.quiet, 0
	return true, quiet, false
}

// Quiet returns how many lines were refused since the last one taken,
// for a summary, and counts again from zero.
func (b *Budget) Quiet() int {
	n := b.quiet
	b.quiet = 0
	return n
}
