package report

import (
	"bytes"
	"testing"
)

// FuzzParseFigure: whatever a third-party source answers, a figure is a
// count of at least zero or errUnexpected, never a panic.
func FuzzParseFigure(f *testing.F) {
	for _, s := range []string{`{"stargazers_count":42}`, `{"stargazers_count":"42"}`, `{"downloads":-1}`, `{"data":{"last_month":1e3}}`,
		`{"pull_count":18446744073709551616}`, `[]`, `null`, `{"downloads":1.5}`, `{"pull_count":0}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, m := range []string{MetricStars, MetricNPM, MetricPyPI, MetricDocker} {
			n, err := parseFigure(m, []byte(body))
			if err != nil && err != errUnexpected || err == nil && n < 0 {
				t.Fatalf("%s %q: %d %v", m, body, n, err)
			}
		}
	})
}

// FuzzParsePosition: a provider's answer gives a position within the
// depth read, none, or errUnexpected.
func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{`{"web":{"results":[{"url":"https://a.test/"},{"url":"https://x.example.test/p"}]}}`,
		`{"web":{"results":[{"url":42}]}}`, `{"web":{"results":{}}}`, `{"web":null}`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := parsePosition([]byte(body), "example.test")
		if err != nil && err != errUnexpected || p != nil && (*p < 1 || *p > WebDepth) {
			t.Fatalf("%q: %v %v", body, p, err)
		}
	})
}

// FuzzRollupValues: a corrupt rollup value (a torn disk, a bug) decodes to
// an error, never a panic, and a decoded value encodes back to the same
// numbers.
func FuzzRollupValues(f *testing.F) {
	ev := entryVal{}
	ev.Searches.addRank(3)
	ev.Probe.addRank(12)
	f.Add(encodeEntryVal(nil, &ev))
	f.Add(encodeQueryVal(nil, &queryVal{Shown: "weather", Searches: QueryStats{1, 2, 2}, Above: map[string]int64{"a.test": 1}}))
	f.Add(encodeZeroVal(nil, &zeroVal{Shown: "x", Searches: 3, Tags: []string{"weather"}}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e entryVal
		if decodeEntryVal(raw, &e) == nil {
			var e2 entryVal
			if err := decodeEntryVal(encodeEntryVal(nil, &e), &e2); err != nil || e2 != e {
				t.Fatalf("entry value %x does not round-trip: %+v %+v", raw, e, e2)
			}
		}
		var q queryVal
		if decodeQueryVal(raw, &q) == nil {
			if enc := encodeQueryVal(nil, &q); !bytes.Equal(encodeQueryVal(nil, &q), enc) {
				t.Fatal("query value encoding unstable")
			}
		}
		var z zeroVal
		_ = decodeZeroVal(raw, &z)
		var d domainVal
		_ = decodeDomainVal(raw, &d)
	})
}
