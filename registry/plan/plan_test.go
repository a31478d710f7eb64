package plan_test

import (
	"slices"
	"testing"

	"github.com/ardx-dev/ardx/registry/plan"
)

// TestDecompose: clause splitting, order and dependencies, verbs and
// objects, and the capabilities and tags a step names.
func TestDecompose(t *testing.T) {
	v := plan.NewVocabulary([]plan.Capability{
		{Name: "get_forecast", Words: []string{"get", "forecast"}},
		{Name: "get_alerts", Words: []string{"get", "alerts"}},
		{Name: "weather_now", Words: []string{"weather", "now"}},
		{Name: "weather_radar", Words: []string{"weather", "radar"}},
		{Name: "quote", Words: []string{"quote"}},
	}, []string{"weather", "email", "invoice"})
	type step struct {
		text, verb string
		after      []int
	}
	tests := []struct {
		task string
		want []step
	}{
		{"weather forecast for Lisbon", []step{{"weather forecast for Lisbon", "", nil}}},
		{"Please get the forecast.", []step{{"Please get the forecast", "get", nil}}},
		{"get the forecast and email it to Ana", []step{{"get the forecast", "get", nil}, {"email it to Ana", "email", nil}}},
		{"get the forecast, then email it", []step{{"get the forecast", "get", nil}, {"email it", "email", []int{1}}}},
		{"send the invoice after translating it", []step{{"translating it", "translate", nil}, {"send the invoice", "send", []int{1}}}},
		{"After you scan the repo, open a ticket", []step{{"you scan the repo", "scan", nil}, {"open a ticket", "open", []int{1}}}},
		{"find hotels and flights in Porto", []step{{"find hotels and flights in Porto", "find", nil}}},
		{"scan the code. Then fix it, and finally deploy", []step{{"scan the code", "scan", nil}, {"fix it", "fix", []int{1}}, {"deploy", "deploy", []int{2}}}},
		{"get the forecast, get the alerts and email both", []step{{"get the forecast", "get", nil}, {"get the alerts", "get", nil}, {"email both", "email", nil}}},
		{"check weather now and weather radar", []step{{"check weather now and weather radar", "check", nil}}}, // weather is a tag, not a verb
		{"please", []step{{"please", "", nil}}},
	}
	for _, tc := range tests {
		t.Run(tc.task, func(t *testing.T) {
			got := plan.Decompose(tc.task, v)
			if len(got) != len(tc.want) {
				t.Fatalf("%d steps %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if w.after == nil {
					w.after = []int{}
				}
				if g.Text != w.text || g.Verb != w.verb || !slices.Equal(g.After, w.after) {
					t.Errorf("step %d: %q verb %q after %v, want %q %q %v", i+1, g.Text, g.Verb, g.After, w.text, w.verb, w.after)
				}
			}
		})
	}
	st := plan.Decompose("get the weather forecast and alerts", v)[0]
	if !slices.Equal(st.Capabilities, []string{"get_alerts", "get_forecast"}) || !slices.Equal(st.Tags, []string{"weather"}) || st.Query != "get weather forecast alerts" {
		t.Fatalf("step %+v", st)
	}
}
