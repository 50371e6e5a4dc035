package wire

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSpawnFields(t *testing.T) {
	m := New("spawn", "n", "2", "argc", "2", "argv1", "a", "argv2", "b", "kc", "1", "k0", "x", "v0", "y", "extra", "z")
	f := NewSpawnFields(m, "")
	n, err := f.Int("n")
	if err != nil || n != 2 {
		t.Fatalf("Int(n) = %d, %v", n, err)
	}
	args, err := f.List("argc", "argv", 1)
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := f.Pairs("kc", "k", "v")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, args); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Arg{{"x", "y"}}, pairs); diff != "" {
		t.Errorf("Pairs (-want +got):\n%s", diff)
	}
	if k, ok := f.Unknown(); !ok || k != "extra" {
		t.Errorf("Unknown = %q, %v; want extra", k, ok)
	}
	f.Use("extra")
	if k, ok := f.Unknown(); ok {
		t.Errorf("Unknown = %q after Use", k)
	}
}

func TestSpawnFieldsErrors(t *testing.T) {
	tests := []struct {
		name, part string
		m          *Message
		read       func(*SpawnFields) error
		want       string
	}{
		{"missing int", "", New("spawn"), func(f *SpawnFields) error { _, err := f.Int("n"); return err }, "missing n"},
		{"negative int", "", New("spawn", "n", "-1"), func(f *SpawnFields) error { _, err := f.Int("n"); return err }, "n=-1 is negative"},
		{"count too large", "", New("spawn", "c", "9"), func(f *SpawnFields) error { _, err := f.List("c", "a", 0); return err }, "c=9 but only 1 pairs"},
		{"count too large, part named", "the block", New("spawn", "c", "9"), func(f *SpawnFields) error { _, err := f.List("c", "a", 0); return err }, "c=9 but the block has only 1 pairs"},
		{"missing member", "", New("spawn", "c", "1", "x", "y"), func(f *SpawnFields) error { _, err := f.List("c", "a", 0); return err }, "c=1 but a0 is missing"},
		{"stray member", "", New("spawn", "a0", "y"), func(f *SpawnFields) error { _, err := f.List("c", "a", 0); return err }, "a0 is beyond c=0"},
		{"missing value", "", New("spawn", "c", "1", "k0", "x"), func(f *SpawnFields) error { _, err := f.Pairs("c", "k", "v"); return err }, "c=1 but v0 is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.read(NewSpawnFields(tt.m, tt.part))
			if !errors.Is(err, ErrSpawn) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrSpawn containing %q", err, tt.want)
			}
		})
	}
}
