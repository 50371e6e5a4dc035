package launcher

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// bootstrapJSON writes b as protojson in its plain form (JSON names,
// enums by name, durations as "1.5s"), with encoding/json: gopmi links no
// protojson, whose package init alone cost every run 0.1 ms. A shim
// decodes the plain form on its fast path. A string that is not valid
// UTF-8 is an error, as in protojson (encoding/json would change it).
//
// The plain structs and their conversions (plain_gen.go) are generated
// from the message's descriptor (plugin/internal/forwardgen);
// TestBootstrapJSONWritesEveryField sets every field of the message by
// its descriptor and reads the result back with protojson.
func bootstrapJSON(b *shimv1.Bootstrap) ([]byte, error) {
	var s utf8Check
	out := toPlainBootstrap(b, &s)
	if s.bad != "" {
		return nil, fmt.Errorf("bootstrap: %q is not valid UTF-8", s.bad)
	}
	return json.Marshal(out)
}

// utf8Check passes strings through, keeping the first that is not valid
// UTF-8.
type utf8Check struct{ bad string }

func (c *utf8Check) str(v string) string {
	if c.bad == "" && !utf8.ValidString(v) {
		c.bad = v
	}
	return v
}

func (c *utf8Check) strs(vs []string) []string {
	for _, v := range vs {
		c.str(v)
	}
	return vs
}

// enumName is an enum's value by name, as protojson writes it; "" (left
// out) for the zero value, as protojson leaves it out.
func enumName[E interface {
	~int32
	String() string
}](e E) string {
	if e == 0 {
		return ""
	}
	return e.String()
}

// durationJSON writes a non-negative duration as protojson does: seconds,
// and nanoseconds when there are any ("1.5s"); "" when d is unset.
func durationJSON(d *durationpb.Duration) string {
	if d == nil {
		return ""
	}
	v := d.AsDuration()
	s := strconv.FormatInt(int64(v/time.Second), 10)
	if ns := int64(v % time.Second); ns != 0 {
		s += "." + strings.TrimRight(strconv.FormatInt(1e9+ns, 10)[1:], "0")
	}
	return s + "s"
}
