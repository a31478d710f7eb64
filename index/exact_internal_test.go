package index

import (
	"slices"
	"testing"
)

func TestExactWords(t *testing.T) {
	for _, tc := range []struct {
		text string
		max  int
		want []string
	}{
		{"Get the Tags of get_card, getTinyImage!", 10, []string{"get", "tags", "card", "gettinyimage"}},
		{"Café 3.5 für Zürich", 10, []string{"café", "3", "5", "für", "zürich"}},
		{"a b c d e", 10, []string{"b", "c", "d", "e"}}, // "a" is a stop word
		{"one two three four", 2, []string{"one", "two"}},
		{"", 10, nil},
		{"  ,;  ", 10, nil},
	} {
		if got := exactWords(nil, tc.text, tc.max); !slices.Equal(got, tc.want) {
			t.Errorf("exactWords(%q, %d) = %q, want %q", tc.text, tc.max, got, tc.want)
		}
	}
}
