package clients

import "testing"

func TestMissingDep(t *testing.T) {
	tests := []struct {
		msg  string
		want bool
	}{
		{"pmi2_test.c:24:10: fatal error: slurm/pmi2.h: No such file or directory", true},
		{"mpi_hello.c:8:10: fatal error: mpi.h: No such file or directory", true},
		{"/usr/bin/ld: cannot find -lpmi2: No such file or directory", true},
		{"pmi2_test.c:40:5: error: expected ';' before '}' token", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			if got := missingDep(tt.msg); got != tt.want {
				t.Fatalf("missingDep = %v, want %v", got, tt.want)
			}
		})
	}
}
