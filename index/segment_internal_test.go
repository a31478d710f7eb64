package index

import (
	"slices"
	"testing"
)

func TestSentences(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"one sentence", "find flights to Tokyo", []string{"find flights to Tokyo"}},
		{"full stops", "I'm going to Japan. Give me the USD to JPY rate. Also list sights in Tokyo.",
			[]string{"I'm going to Japan.", " Give me the USD to JPY rate.", " Also list sights in Tokyo."}},
		{"question and exclamation", "Is it raining in Oslo? Book a taxi! Thanks", []string{"Is it raining in Oslo?", " Book a taxi!", " Thanks"}},
		{"semicolon", "convert 10 USD to EUR; then email the result", []string{"convert 10 USD to EUR;", " then email the result"}},
		{"line break", "weather in Paris\nflights to Rome", []string{"weather in Paris", "flights to Rome"}},
		{"closing quote", `search "cats." then dogs`, []string{`search "cats."`, " then dogs"}},
		{"no split inside a token", "version 3.5 of api.example.com costs $1.50", []string{"version 3.5 of api.example.com costs $1.50"}},
		{"repeated marks", "really?! yes", []string{"really?!", " yes"}},
		{"empty", "", nil},
		{"trailing space", "one. ", []string{"one."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sentences(tc.text); !slices.Equal(got, tc.want) {
				t.Errorf("sentences(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}
