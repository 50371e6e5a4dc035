package wire

import "testing"

func TestMatchKey(t *testing.T) {
	tests := []struct {
		pattern, key string
		idx          int
		ok           bool
	}{
		{"key", "key", -1, true},
		{"key", "keys", -1, false},
		{"arg#", "arg1", 1, true},
		{"arg#", "arg10", 10, true},
		{"arg#", "arg", -1, false},
		{"arg#", "argx", -1, false},
		{"arg#", "arg1x", -1, false},
		{"preput_key_#", "preput_key_0", 0, true},
		{"a#b", "a12b", 12, true},
		{"a#b", "ab", -1, false},
		{"arg#", "arg12345678901", -1, false},
	}
	for _, tt := range tests {
		idx, ok := MatchKey(tt.pattern, tt.key)
		if idx != tt.idx || ok != tt.ok {
			t.Errorf("MatchKey(%q, %q) = %d, %v; want %d, %v", tt.pattern, tt.key, idx, ok, tt.idx, tt.ok)
		}
	}
}

func TestCommandSpec(t *testing.T) {
	c := &CommandSpec{
		Name:         "spawn",
		Request:      []AttrSpec{{Key: "ncmds", Required: true}, {Key: "ppkey#", Required: true, Count: "preputcount"}, {Key: "opt"}},
		Section:      "subcmd",
		SectionAttrs: []AttrSpec{{Key: "subcmd", Required: true}},
		Response:     []AttrSpec{{Key: "jobid"}},
	}
	if miss := c.MissingRequired(New("spawn", "opt", "1")); len(miss) != 1 || miss[0] != "ncmds" {
		t.Errorf("MissingRequired = %v", miss)
	}
	if miss := c.MissingRequired(New("spawn", "ncmds", "1")); len(miss) != 0 {
		t.Errorf("MissingRequired = %v", miss)
	}
	for _, k := range []string{"ncmds", "ppkey3", "subcmd"} {
		if _, ok := c.RequestAttr(k); !ok {
			t.Errorf("RequestAttr(%q) not found", k)
		}
	}
	if _, ok := c.RequestAttr("jobid"); ok {
		t.Errorf("RequestAttr(jobid) found")
	}
	if _, ok := c.ResponseAttr("jobid"); !ok {
		t.Errorf("ResponseAttr(jobid) not found")
	}
	if KindBool.String() != "bool" || KindInt.String() != "int" || KindString.String() != "string" {
		t.Errorf("Kind names wrong")
	}
}

func TestRcName(t *testing.T) {
	for rc, want := range map[int]string{RcSuccess: "PMI_SUCCESS", RcFail: "PMI_FAIL", RcInvalidKey: "PMI_ERR_INVALID_KEY", RcErrOther: "PMI2_ERR_OTHER", 99: "rc 99"} {
		if got := RcName(rc); got != want {
			t.Errorf("RcName(%d) = %q, want %q", rc, got, want)
		}
	}
}

func TestSpawnTotalProcs(t *testing.T) {
	s := &Spawn{Cmds: []SpawnCmd{{MaxProcs: 2}, {MaxProcs: 3}}}
	if s.TotalProcs() != 5 {
		t.Errorf("TotalProcs = %d", s.TotalProcs())
	}
}

// TestCommandSpecArgs: a request's attributes read through its spec: the
// value when present, the Default when not; a key the spec lacks, a bad
// value, or an absent attribute without a Default is an error.
func TestCommandSpecArgs(t *testing.T) {
	c := &CommandSpec{Name: "kvs-get", Request: []AttrSpec{
		{Key: "srcid", Kind: KindInt, Default: "-1"},
		{Key: "wait", Kind: KindBool, Default: "FALSE"},
		{Key: "count", Kind: KindInt},
		{Key: "key", Kind: KindString, Required: true},
	}}
	m := New("kvs-get", "key", "k", "wait", "TRUE")
	if n, err := c.Int(m, "srcid"); n != -1 || err != nil {
		t.Errorf("srcid default: %d, %v", n, err)
	}
	if b, err := c.Bool(m, "wait"); !b || err != nil {
		t.Errorf("wait: %v, %v", b, err)
	}
	if v, err := c.Arg(m, "key"); v != "k" || err != nil {
		t.Errorf("key: %q, %v", v, err)
	}
	if _, err := c.Int(m, "count"); err == nil || err.Error() != `field count="": not an integer` {
		t.Errorf("absent count without a default: %v", err)
	}
	if _, err := c.Int(New("kvs-get", "srcid", "x"), "srcid"); err == nil || err.Error() != `field srcid="x": not an integer` {
		t.Errorf("bad srcid: %v", err)
	}
	if _, err := c.Bool(New("kvs-get", "wait", "maybe"), "wait"); err == nil {
		t.Error("wait=maybe read")
	}
	if _, err := c.Arg(m, "jobid"); err == nil || err.Error() != "kvs-get: attribute jobid is not in gopmi's command table" {
		t.Errorf("unlisted key: %v", err)
	}
}
