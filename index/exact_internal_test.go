package index

import (
	"slices"
	"testing"
)

// TestEachWord checks how text is cut into words as written: runs of
// letters and digits, lower-cased, at their byte offsets, stop words out.
func TestEachWord(t *testing.T) {
	type at struct {
		at   int
		word string
	}
	for _, tc := range []struct {
		text string
		stop int // stop after this many words; 0: all
		want []at
	}{
		{"Get the Tags of get_card, getTinyImage!", 0, []at{{0, "get"}, {8, "tags"}, {16, "get"}, {20, "card"}, {26, "gettinyimage"}}},
		{"Café 3.5 für Zürich", 0, []at{{0, "café"}, {6, "3"}, {8, "5"}, {10, "für"}, {15, "zürich"}}},
		{"a b c", 0, []at{{2, "b"}, {4, "c"}}}, // "a" is a stop word
		{"one two three four", 2, []at{{0, "one"}, {4, "two"}}},
		{"", 0, nil},
		{"  ,;  ", 0, nil},
	} {
		var got []at
		eachWord(tc.text, func(i int, w string) bool {
			got = append(got, at{i, w})
			return tc.stop == 0 || len(got) < tc.stop
		})
		if !slices.Equal(got, tc.want) {
			t.Errorf("eachWord(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}
