package x402

import (
	"testing"

	"github.com/gowebpki/jcs"
)

// FuzzCheckStrictAgreesWithJCS: whatever the RFC 8785 canonicaliser of the
// settlement key refuses (duplicate names, bad surrogates, bad UTF-8, bad
// JSON, numbers it cannot write), the strict pass refuses too, so a body
// /verify accepts always has a settlement key.
func FuzzCheckStrictAgreesWithJCS(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,false,null,"x\u00e9"]}`, `{"a":1,"a":2}`, `{"\u0061":1,"a":2}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`,
		`{"a":9007199254740993}`, `{"a":1e400}`, `[{"x":{}}]`, `{"a":"\\"}`, "{\"a\":\"\xff\"}", `{"a" : [ 1 , 2.5 ] }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkStrict(b)
		_, jerr := jcs.Transform(b)
		if err == nil && jerr != nil {
			t.Fatalf("strict accepted what JCS refuses (%v): %q", jerr, b)
		}
	})
}
