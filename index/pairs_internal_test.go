package index

import (
	"slices"
	"testing"
)

func TestPairsOf(t *testing.T) {
	ix, err := OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"weather", nil},
		{"weather forecast", []string{"weather forecast"}},
		// Stop words are skipped, stems paired.
		{"the weather in London", []string{"weather london"}},
		{"getTinyImage", []string{"get tini", "tini imag"}},
		{"send_email now", []string{"send email", "email now"}},
		// Each pair once, in order.
		{"exchange rate, exchange rate today", []string{"exchang rate", "rate exchang", "rate todai"}},
	} {
		_, _, got := ix.analyse(tc.text)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: pairs %q, want %q", tc.text, got, tc.want)
		}
	}
}
